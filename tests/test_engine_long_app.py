"""A long application (many jobs through one engine) keeps only the work in flight.

Live Spark runs one engine per application: a notebook or a SQL server sends it thousands of
jobs. Each job here is a map stage (6 tasks on 3 executors, 1 s each) and a reducer; executors
live 5 s on average, so the engine backs outputs up. After every job its backups must be
dropped, and after all jobs the engine must hold no stage, output, graph or lineage entry of
the finished jobs, with the application's mean task time still exact.
"""

from __future__ import annotations

import pytest

from trspark.engine.commands import Backup, Command, DropBackup
from trspark.engine.events import (
    BackupFailed,
    BlockBackedUp,
    Event,
    ExecutorAdded,
    JobEnded,
    JobSubmitted,
    ShuffleConsumed,
    StageCompleted,
    StageSubmitted,
    TaskEnded,
    TaskStarted,
    Tick,
)
from trspark.engine.settings import TRConfig
from trspark.engine.tr.policy import TRPolicy
from trspark.engine.views import BlockId

JOBS = 40
MB = 1_000_000


def _job(j: int, t: float) -> list[Event]:
    """Job ``j`` at time ``t``: stage 2j writes shuffle j (6 maps), stage 2j+1 reads it (3 tasks)."""
    m, r = 2 * j, 2 * j + 1
    events: list[Event] = [
        JobSubmitted(t, j, (m, r), (6, 3), (j, None), ((), (m,))),
        StageSubmitted(t, m, 6, shuffle_id=j),
    ]
    for p in range(6):
        events += [TaskStarted(t, m, p, str(p % 3)),
                   TaskEnded(t + 1.0, m, p, str(p % 3), 1.0, shuffle_write_bytes=50 * MB, shuffle_id=j, map_id=p)]
        t += 1.0 if p % 3 == 2 else 0.0
    events += [StageCompleted(t + 1.0, m), StageSubmitted(t + 1.0, r, 3, parent_stage_ids=(m,), parent_shuffle_ids=(j,))]
    t += 1.0
    for p in range(3):
        events += [TaskStarted(t, r, p, str(p)), TaskEnded(t + 1.0, r, p, str(p), 1.0, shuffle_read_bytes=100 * MB)]
    t += 1.0
    return [*events, StageCompleted(t, r), ShuffleConsumed(t, j), JobEnded(t, True, job_id=j), Tick(t + 0.5)]


def _policy() -> TRPolicy:
    """TR on 3 one-core executors living 5 s on average: it backs outputs up."""
    policy = TRPolicy(TRConfig(lifetime="exponential:mean=5", remote_bandwidth=1e9, local_bandwidth=1e9))
    for i in range(3):
        policy.handle(ExecutorAdded(0.0, str(i), host=f"h{i}", cores=1))
    return policy


def _drive(policy: TRPolicy, events: list[Event], backed_up: set[BlockId], dropped: set[BlockId]) -> None:
    """Feed ``events``; every copy finishes at once. Records the blocks backed up and dropped."""
    for event in events:
        commands: list[Command] = list(policy.handle(event))
        while commands:
            c = commands.pop(0)
            if isinstance(c, Backup):
                backed_up.add((c.shuffle_id, c.map_index))
                commands += policy.handle(BlockBackedUp(event.time, c.shuffle_id, c.map_index, c.target, c.bytes))
            elif isinstance(c, DropBackup):
                dropped.add((c.shuffle_id, c.map_index))


def test_many_jobs_leave_nothing_behind_but_their_statistics() -> None:
    policy = _policy()
    t, backed_up, dropped = 0.0, set[BlockId](), set[BlockId]()
    for j in range(JOBS):
        events = _job(j, t)
        _drive(policy, events, backed_up, dropped)
        t = events[-1].time
    assert len(backed_up) > JOBS  # the engine did protect outputs ...
    assert dropped == backed_up  # ... and dropped every copy once its shuffle was consumed
    state, lineage = policy.state, policy.costs.lineage
    assert (state.stages, state.outputs, state.planned, state.planned_readers, state.job_stages) == ({}, {}, {}, {}, {})
    assert (state.shuffle_stage, state.shuffle_readers) == ({}, {})
    assert lineage.shuffle_ids() == [] and len(lineage) == 0
    assert state.mean_task_seconds() == pytest.approx(1.0)


def test_a_store_that_keeps_failing_leaves_no_trace_of_old_failures() -> None:
    # Every copy fails (a store that rejects writes): the engine asks again later, and what it
    # keeps about the failures is only those of the present instant, not one entry per failure.
    policy, t, failures = _policy(), 0.0, 0
    for j in range(JOBS):
        events = _job(j, t)
        for event in events:
            commands: list[Command] = list(policy.handle(event))
            while commands:
                c = commands.pop(0)
                if isinstance(c, Backup):
                    failures += 1
                    commands += policy.handle(BackupFailed(event.time, c.shuffle_id, c.map_index, c.target,
                                                           reason="store unwritable", source=c.source))
        t = events[-1].time
    assert failures > JOBS
    assert len(policy._failed_at) <= 6  # at most the outputs of one stage, all at the last instant


def test_a_query_stages_inputs_keep_their_backups_until_its_own_output_is_read() -> None:
    # Adaptive execution runs each query stage as its own job: stage 0 writes shuffle 0; job 1's
    # stage 1 reads it and writes shuffle 1; job 2's stage 2 reads shuffle 1. The shim reports
    # shuffle 0 consumed when job 1 ends, but shuffle 1 may still be lost and re-made from it.
    policy = _policy()
    backed_up: set[BlockId] = set()

    def run(events: list[Event]) -> set[BlockId]:
        dropped: set[BlockId] = set()
        _drive(policy, events, backed_up, dropped)
        return dropped

    def stage(t: float, job: int, stage_id: int, shuffle: int | None, parent: int | None) -> list[Event]:
        parents = () if parent is None else (parent,)
        out: list[Event] = [JobSubmitted(t, job, (stage_id,), (3,), (shuffle,), (parents,)),
                            StageSubmitted(t, stage_id, 3, parent_stage_ids=parents, parent_shuffle_ids=parents,
                                           shuffle_id=shuffle)]
        for p in range(3):
            out += [TaskStarted(t, stage_id, p, str(p)),
                    TaskEnded(t + 2.0, stage_id, p, str(p), 2.0, shuffle_write_bytes=50 * MB if shuffle is not None else 0,
                              shuffle_read_bytes=50 * MB if parent is not None else 0, shuffle_id=shuffle, map_id=p)]
        return [*out, StageCompleted(t + 2.0, stage_id)]

    assert run(stage(0.0, 0, 0, 0, None) + [JobEnded(2.0, True, job_id=0)]) == set()
    assert {s for s, _ in backed_up} == {0}, "the engine protects shuffle 0"
    dropped = run(stage(2.0, 1, 1, 1, 0) + [ShuffleConsumed(4.0, 0), JobEnded(4.0, True, job_id=1), Tick(4.5)])
    assert dropped == set(), "shuffle 1 is unread: shuffle 0 may be needed to re-make it"
    dropped = run(stage(4.5, 2, 2, None, 1) + [ShuffleConsumed(6.5, 1), JobEnded(6.5, True, job_id=2)])
    assert dropped == backed_up and {s for s, _ in dropped} == {0, 1}


@pytest.mark.parametrize("name", ["stage", "interval"])
def test_the_checkpointing_baselines_keep_nothing_of_consumed_shuffles(name: str) -> None:
    from trspark.engine.registry import make_policy

    policy = make_policy(name, TRConfig(lifetime="exponential:mean=5", remote_bandwidth=1e9, local_bandwidth=1e9))
    for i in range(3):
        policy.handle(ExecutorAdded(0.0, str(i), host=f"h{i}"))
    t = 0.0
    for j in range(60):
        for event in _job(j, t):
            policy.handle(event)
        t += 6.0
    assert policy.summary()["backups_planned"] > 0  # the short lifetimes flag every stage
    assert not policy.released  # type: ignore[attr-defined]
    assert not getattr(policy, "holders", {}) and not getattr(policy, "flagged", set())
