"""TR-Checkpointing: Algorithm 2's rule on hand-worked costs, and the TR policy on hand-made jobs."""

from __future__ import annotations

import math

import pytest
from engine_world import MB, add_executors, feed, map_stage, run_task

from trspark.config import TRConfig
from trspark.engine.protocol import REMOTE, Backup, ExecutorNotice
from trspark.engine.registry import make_policy
from trspark.engine.tr.checkpointing import Costs, decide

INF = math.inf


@pytest.mark.parametrize(
    ("c_redo", "c_bl", "c_br", "peer", "expected"),
    [
        (10.0, 1.0, 2.0, "p", "p"),  # C_BL <= C_Redo and C_BL <= C_BR: local
        (10.0, 3.0, 2.0, "p", REMOTE),  # C_BL <= C_Redo but remote cheaper: remote
        (5.0, 8.0, 2.0, "p", REMOTE),  # C_BL > C_Redo >= C_BR: remote
        (1.0, 8.0, 2.0, "p", None),  # C_Redo below both: no backup
        (5.0, INF, 2.0, None, REMOTE),  # no peer: remote if worth it
        (1.0, INF, 2.0, None, None),  # no peer, remote too dear: none
        (5.0, 1.0, INF, "p", "p"),  # local-only variant
        (0.5, 1.0, INF, "p", None),  # local-only, not worth it
        (0.0, 0.0, 0.0, "p", None),  # nothing to lose: never back up
        (2.0, 2.0, 2.0, "p", "p"),  # ties go to the cheaper-to-run local copy (Algorithm 2 uses <=)
    ],
)
def test_algorithm2_rule(c_redo: float, c_bl: float, c_br: float, peer: str | None, expected: str | None) -> None:
    assert decide(Costs(c_redo=c_redo, c_bl=c_bl, c_br=c_br, peer=peer)) == expected


def _one_block_job(mean_lifetime: float, *, targets: str = "both", knowledge: str = "indeterministic",
                   notices: dict[str, float] | None = None) -> list:  # type: ignore[type-arg]
    """Executors a, b, c; stage 0 (2 tasks: the second still to run) writes shuffle 0 read by stage 1."""
    config = TRConfig(lifetime=f"exponential:mean={mean_lifetime}", targets=targets, knowledge=knowledge,
                      duplication=False, scheduling=False)
    policy = make_policy("tr", config)
    events = add_executors(["a", "b", "c"], cores=1)
    events += [ExecutorNotice(time=0.0, executor_id=e, deadline=d) for e, d in (notices or {}).items()]
    events += [map_stage(0, 2, 0), map_stage(1, 2, None, parents=[0], parent_shuffles=[0])]
    events += run_task(0, 0, "a", start=0.0, seconds=20.0, write=10 * MB, shuffle_id=0)
    return [c for c in feed(policy, events) if isinstance(c, Backup)]


def test_no_backup_on_stable_executors() -> None:
    assert _one_block_job(1e9) == []


def test_risky_executor_backs_its_block_up() -> None:
    backups = _one_block_job(10.0)
    assert [(b.shuffle_id, b.map_index, b.source) for b in backups] == [(0, 0, "a")]


def test_remote_only_variant_goes_remote() -> None:
    backups = _one_block_job(10.0, targets="remote")
    assert [b.target for b in backups] == [REMOTE]


def test_local_only_variant_picks_the_peer_that_outlives_consumption() -> None:
    # a dies at 25 s; c dies at 21 s (right after the block exists), b lives long: b is the place.
    backups = _one_block_job(1e6, targets="local", knowledge="deterministic",
                             notices={"a": 25.0, "b": 1e6, "c": 21.0})
    assert [(b.source, b.target) for b in backups] == [("a", "b")]


def test_deterministic_knows_which_block_is_safe() -> None:
    # Same belief (very stable), but the notice says a dies 5 s after writing the block.
    assert _one_block_job(1e9, knowledge="deterministic", notices={"a": 1e7}) == []
    backups = _one_block_job(1e9, knowledge="deterministic", notices={"a": 25.0, "b": 1e7, "c": 1e7})
    assert len(backups) == 1 and backups[0].source == "a"


def test_live_style_events_without_shuffle_id_on_task_end() -> None:
    """The live shim may omit TaskEnded.shuffle_id: the stage's shuffle is used (ids "0", "1", ...)."""
    from trspark.engine.protocol import TaskEnded, TaskStarted

    config = TRConfig(lifetime="exponential:mean=10", duplication=False, scheduling=False)
    policy = make_policy("tr", config)
    events = add_executors(["0", "1", "2"], cores=1) + [map_stage(3, 2, 7), map_stage(4, 2, None, parents=[3], parent_shuffles=[7])]
    events += [TaskStarted(time=0.0, stage_id=3, partition=0, executor_id="0"),
               TaskEnded(time=20.0, stage_id=3, partition=0, executor_id="0", duration=20.0,
                         shuffle_write_bytes=10 * MB, map_id=12345)]
    backups = [c for c in feed(policy, events) if isinstance(c, Backup)]
    assert [(b.shuffle_id, b.map_index, b.source, b.map_id) for b in backups] == [(7, 0, "0", 12345)]


def test_failed_backup_is_not_retried_at_the_same_instant_and_forgets_a_stale_copy() -> None:
    from trspark.engine.protocol import BackupFailed, BlockBackedUp, ExecutorLost, Tick

    config = TRConfig(lifetime="exponential:mean=10", targets="remote", duplication=False, scheduling=False)
    policy = make_policy("tr", config)
    events = add_executors(["a", "b", "c"], cores=1) + [map_stage(0, 2, 0), map_stage(1, 2, None, parents=[0], parent_shuffles=[0])]
    events += run_task(0, 0, "a", start=0.0, seconds=20.0, write=10 * MB, shuffle_id=0)
    first = [c for c in feed(policy, events) if isinstance(c, Backup)]
    assert [(b.source, b.target) for b in first] == [("a", REMOTE)]
    # Meanwhile peer copies on b then c landed, and a died: the driver keeps only the newest (c).
    feed(policy, [BlockBackedUp(time=20.1, shuffle_id=0, map_index=0, target="b", bytes=10 * MB),
                  BlockBackedUp(time=20.2, shuffle_id=0, map_index=0, target="c", bytes=10 * MB),
                  ExecutorLost(time=20.3, executor_id="a")])
    failed = BackupFailed(time=20.3, shuffle_id=0, map_index=0, target=REMOTE, reason="source does not hold the block")
    assert [c for c in feed(policy, [failed]) if isinstance(c, Backup)] == []
    retry = [c for c in feed(policy, [Tick(time=21.0)]) if isinstance(c, Backup)]
    assert [(b.source, b.target) for b in retry] == [("c", REMOTE)]
