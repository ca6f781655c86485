"""Noticed executors that share the copies of one output: what goes, what stays, and what copies it."""

from __future__ import annotations

from engine_world import MB, add_executors, feed, map_stage, run_task

from trspark.engine.commands import Backup, ReleaseExecutor
from trspark.engine.events import (
    BlockBackedUp,
    ExecutorLost,
    ExecutorNotice,
    StageSubmitted,
    TaskEnded,
    TaskStarted,
    Tick,
)
from trspark.engine.registry import make_policy
from trspark.engine.settings import TRConfig
from trspark.engine.views import BlockId


def _released(commands: list) -> list[str]:  # type: ignore[type-arg]
    return [c.executor_id for c in commands if isinstance(c, ReleaseExecutor)]


def _output_on_a_and_b(seconds: float = 2.0):  # type: ignore[no-untyped-def]
    """a wrote an output of stage 0 in ``seconds`` and b holds a peer copy; stage 1 reads it after five more such tasks."""
    config = TRConfig(lifetime="exponential:mean=1e7", knowledge="deterministic", duplication=False)
    policy = make_policy("tr", config)
    events = add_executors(["a", "b", "c"], cores=1) + [map_stage(0, 6, 0)]
    events += run_task(0, 0, "a", start=0.0, seconds=seconds, write=8 * MB, shuffle_id=0)
    events += [BlockBackedUp(time=seconds, shuffle_id=0, map_index=0, target="b", bytes=8 * MB)]
    events += [StageSubmitted(time=seconds, stage_id=1, num_tasks=2, parent_stage_ids=(0,), parent_shuffle_ids=(0,))]
    feed(policy, events)
    return policy


def test_a_copy_on_a_released_executor_does_not_let_the_other_holder_go() -> None:
    # 70 s tasks. a gets a notice with no room for a task: b's copy keeps the output, so a may go.
    # Then b gets a 60 s notice, no room for a 70 s task either: its copy waits for its last
    # responsible moment (60 s - margin 3 - period 5 - the copy). a is on its way out, so b holds
    # the only copy that stays: it must keep it until then, not go with a (gone at 72 s).
    policy = _output_on_a_and_b(seconds=70.0)
    assert _released(feed(policy, [ExecutorNotice(time=71.0, executor_id="a", deadline=72.5)])) == ["a"]
    out = feed(policy, [ExecutorNotice(time=71.0, executor_id="b", deadline=131.0)])
    assert not [c for c in out if isinstance(c, Backup)] and policy.decisions["deferred"] == 1
    gone = ExecutorLost(time=72.0, executor_id="a", reason="released")
    assert _released(out + feed(policy, [gone, Tick(time=75.0)])) == [], "b holds the only copy that stays"
    (backup,) = [c for c in feed(policy, [Tick(time=123.0)]) if isinstance(c, Backup)]
    assert (backup.source, backup.target) == ("b", "c")
    done = BlockBackedUp(time=123.5, shuffle_id=0, map_index=0, target="c", bytes=8 * MB)
    assert _released(feed(policy, [done])) == ["b"], "saved on c: b has nothing left to keep"


def test_a_backup_is_read_from_a_holder_that_stays() -> None:
    # a (the writer) is released; when b's notice asks for a copy, it is read from b: a's JVM is
    # being killed, and a copy from it would fail and be asked for again once a is gone.
    policy = _output_on_a_and_b()
    feed(policy, [ExecutorNotice(time=3.0, executor_id="a", deadline=4.5)])
    out = feed(policy, [ExecutorNotice(time=3.0, executor_id="b", deadline=4.5)])
    assert [(c.source, c.target) for c in out if isinstance(c, Backup)] == [("b", "c")]


def _two_outputs_after_a_notice(gap: float) -> list[BlockId]:
    """a (2 cores) gets a 60 s notice at 3 s while two map tasks run there; they end ``gap`` s apart
    at 10 s with 500 MB each (5.05 s per copy at 100 MB/s): the blocks copied once the moment comes."""
    config = TRConfig(lifetime="exponential:mean=1e7", knowledge="deterministic", duplication=False,
                      notice_margin=10.0)
    policy = make_policy("tr", config)
    events = add_executors(["a"], cores=2) + add_executors(["b", "c"]) + [map_stage(0, 60, 0)]
    events += [StageSubmitted(time=0.0, stage_id=1, num_tasks=2, parent_stage_ids=(0,), parent_shuffle_ids=(0,))]
    events += [TaskStarted(time=0.0, stage_id=0, partition=p, executor_id="a") for p in (0, 1)]
    events += [ExecutorNotice(time=3.0, executor_id="a", deadline=63.0)]
    events += [TaskEnded(time=10.0 + p * gap, stage_id=0, partition=p, executor_id="a", duration=10.0,
                         shuffle_write_bytes=500 * MB, shuffle_id=0) for p in (0, 1)]
    assert not [c for c in feed(policy, events) if isinstance(c, Backup)]
    # No tick in between: the deferred plans alone bring the copies (a tick would re-plan one block per event).
    started = TaskStarted(time=38.0, stage_id=0, partition=2, executor_id="b")
    return [(c.shuffle_id, c.map_index) for c in feed(policy, [started]) if isinstance(c, Backup)]


def test_outputs_written_at_the_same_instant_count_in_each_others_copy_time() -> None:
    # Last responsible moment of the second output: 63 - margin 10 - period 5 - two copies of 5.05 s = 37.9 s.
    # Its copy time must count the first output whether the two ended at one instant or not.
    apart = _two_outputs_after_a_notice(gap=1e-6)
    together = _two_outputs_after_a_notice(gap=0.0)
    assert apart == [(0, 1)]
    assert together == apart


def test_a_repeated_notice_does_not_release_an_executor_twice() -> None:
    # ReleaseExecutor is sent once: a notice repeated for an executor already let go (a second
    # source of notices, a driver that reports the fact again) changes nothing.
    policy = _output_on_a_and_b()
    assert _released(feed(policy, [ExecutorNotice(time=3.0, executor_id="a", deadline=4.5)])) == ["a"]
    assert _released(feed(policy, [ExecutorNotice(time=3.2, executor_id="a", deadline=4.5)])) == []
