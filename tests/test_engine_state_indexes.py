"""Indexes kept in step with the state answer as a scan of every output would, after any sequence of events."""

from __future__ import annotations

import random

import pytest
from engine_world import MB, map_stage

from trspark.engine import events
from trspark.engine.registry import make_policy
from trspark.engine.settings import TRConfig
from trspark.engine.state import JobState
from trspark.engine.tr.horizon import count_covered
from trspark.engine.tr.policy import TRPolicy
from trspark.engine.views import MapOutput

EXECUTORS = ("a", "b", "c", "d")


def _pool(executor_id: str) -> str:
    return "ondemand" if executor_id == "d" else "spot"


def _start() -> list[events.Event]:
    return [*(events.ExecutorAdded(time=0.0, executor_id=e, cores=2, pool=_pool(e)) for e in EXECUTORS),
            *(map_stage(s, 4, s, time=0.0, parents=[s - 1] if s else [], parent_shuffles=[s - 1] if s else [])
              for s in range(3))]


def _scan_naming(state: JobState, executor_id: str) -> list[MapOutput]:
    return [b for b in state.outputs.values() if not b.consumed and executor_id in (b.executor_id, b.last_peer)]


def _scan_on(state: JobState, executor_id: str) -> list[MapOutput]:
    held = state._held.get(executor_id, set())
    return [b for key, b in state.outputs.items() if key in held and not b.consumed]


def _random_event(rng: random.Random, state: JobState, time: float) -> events.Event:
    executor = rng.choice(EXECUTORS)
    shuffle, partition = rng.randrange(3), rng.randrange(4)
    kind = rng.random()
    if kind < 0.35:  # a map output, new or replacing one (a re-run, a late duplicate)
        return events.TaskEnded(time=time, stage_id=shuffle, partition=partition, executor_id=executor, duration=1.0,
                         shuffle_write_bytes=MB, shuffle_id=shuffle)
    if kind < 0.6:
        return events.BlockBackedUp(time=time, shuffle_id=shuffle, map_index=partition,
                                    target=events.REMOTE if rng.random() < 0.2 else executor, bytes=MB)
    if kind < 0.75:  # the same id may come back later: another executor under an old name
        return events.ExecutorLost(time=time, executor_id=executor) if executor in state.executors else \
            events.ExecutorAdded(time=time, executor_id=executor, cores=2, pool=_pool(executor))
    if kind < 0.8:
        return events.BlockLost(time=time, shuffle_id=shuffle, map_index=partition)
    if kind < 0.83:
        return events.ShuffleConsumed(time=time, shuffle_id=shuffle)
    return events.Tick(time=time)


@pytest.mark.parametrize("seed", range(6))
def test_the_output_indexes_equal_a_scan_of_every_output(seed: int) -> None:
    rng = random.Random(seed)
    state = JobState()
    for event in _start():
        state.apply(event)
    for step in range(400):
        state.apply(_random_event(rng, state, 1.0 + step))
        drops = [b for b in state.outputs.values() if rng.random() < 0.05]
        for block in drops:  # a failed backup: the source no longer holds its copy (often a backup's)
            backups = sorted(block.backups)
            state.drop_copy(block.block_id, rng.choice(backups) if backups and rng.random() < 0.7 else block.executor_id)
        for executor in EXECUTORS:
            assert state.outputs_naming(executor) == _scan_naming(state, executor)
            assert state.outputs_on(executor) == _scan_on(state, executor)
        for shuffle in range(3):
            scan = {key: b for key, b in state.shuffle_items(shuffle) if not b.backups}
            assert state.unbacked_outputs(shuffle) == scan
            assert state.output_count(shuffle) == len(state.shuffle_items(shuffle))
        exposed = [b for b in reversed(state.outputs.values()) if not b.consumed and not b.on_remote]
        assert list(state.outputs_off_remote()) == exposed


@pytest.mark.parametrize("seed", range(4))
def test_the_policys_count_of_covered_outputs_equals_the_per_output_test(seed: int) -> None:
    """Covered: backed up, or a backup planned or running; or safe (here also: a copy on the stable pool)."""
    rng = random.Random(seed)
    config = TRConfig(lifetime="exponential:mean=20", pool_lifetimes=(("ondemand", "stable"),), duplication=False)
    policy = make_policy("tr", config)
    assert isinstance(policy, TRPolicy)
    state = policy.state
    def covered(block: MapOutput) -> bool:
        return bool(block.backups) or policy.stack.is_busy(block.block_id)
    counts = []
    for event in _start():
        policy.handle(event)
    for step in range(300):
        policy.handle(_random_event(rng, state, 1.0 + step))
        for shuffle in range(3):
            assert policy._covered_count(state, shuffle) == count_covered(covered)(state, shuffle)
            counts.append(policy._covered_count(state, shuffle))
    assert max(counts) > 0
