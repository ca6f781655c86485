"""Task duplication (paper §5) on hand-made situations whose right answer is known.

Lifetimes are exact (``knowledge=deterministic`` with a notice per executor), so the expected
time an executor is *not* alive in a task's remaining window is plain arithmetic.
"""

from __future__ import annotations

from engine_world import MB, add_executors, feed, map_stage, run_task

from trspark.engine.commands import DuplicateTask, KillDuplicate, SchedulingHints
from trspark.engine.events import Event, ExecutorLost, ExecutorNotice, StageSubmitted, TaskStarted, Tick
from trspark.engine.interface import Policy
from trspark.engine.registry import make_policy
from trspark.engine.settings import TRConfig
from trspark.engine.state import JobState
from trspark.engine.tr.duplication import idle_executors

FOREVER = 1e6


def _policy(knowledge: str = "deterministic", **options: object) -> Policy:
    config = TRConfig(lifetime="exponential:mean=1000", knowledge=knowledge, scheduling=False, **options)
    return make_policy("tr", config)


def _two_stages_on_a_dying_executor() -> list[Event]:
    """At t = 10 executor a (dies at 15 s) runs one task of each of two stages, each with ~10 s to go.

    Stage 0 reduces (10 MB in, 1 MB out per 10 s task: 0.9 MB/s), stage 1 grows (1 MB -> 5 MB).
    Executor c lives for ever, b dies at 12 s. Remaining window of both tasks from t = 11: 9 s;
    time not alive in it: a 15 -> 4 s alive, 5 s lost; b 1 s alive, 8 s lost; c 0 s lost.
    """
    events = add_executors(["a"], cores=2) + add_executors(["b", "c"], cores=1)
    events += [ExecutorNotice(time=0.0, executor_id=e, deadline=d, kind="lifetime") for e, d in (("a", 15.0), ("b", 12.0), ("c", FOREVER))]
    events += [map_stage(0, 2, 0), map_stage(1, 2, 1)]
    events += run_task(0, 0, "c", start=0.0, seconds=10.0, read=10 * MB, write=1 * MB, shuffle_id=0)
    events += run_task(1, 0, "b", start=0.0, seconds=10.0, read=1 * MB, write=5 * MB, shuffle_id=1)
    events += [TaskStarted(time=10.0, stage_id=s, partition=1, executor_id="a") for s in (0, 1)]
    return events


def _duplicates(policy: Policy, events: list[Event]) -> list[DuplicateTask]:
    return [c for c in feed(policy, events) if isinstance(c, DuplicateTask)]


def test_copies_the_reducing_task_onto_the_only_safer_idle_executor() -> None:
    # Both tasks on a lose 5 s; c (0 s lost) is safer, b (8 s lost) is not. c has one core: the
    # task with the larger reduction rate (stage 0) wins.
    policy = _policy()
    assert _duplicates(policy, _two_stages_on_a_dying_executor()) == []  # tasks were waiting until t = 10
    assert _duplicates(policy, [Tick(time=11.0)]) == [DuplicateTask(stage_id=0, partition=1, executor_id="c")]
    # The copy is remembered: the next tick does not copy the same task again, and c is busy
    # once the copy has started.
    feed(policy, [TaskStarted(time=11.0, stage_id=0, partition=1, executor_id="c")])
    assert _duplicates(policy, [Tick(time=12.0)]) == []


def test_riskier_source_wins_at_equal_rates() -> None:
    # Two tasks of one stage: on a (dies at 15: 5 s lost of 9) and on d (dies at 18: 2 s lost).
    policy = _policy()
    events = add_executors(["a", "d", "c"], cores=1)
    events += [ExecutorNotice(time=0.0, executor_id=e, deadline=t, kind="lifetime") for e, t in (("a", 15.0), ("d", 18.0), ("c", FOREVER))]
    events += [map_stage(0, 3, 0)]
    events += run_task(0, 0, "c", start=0.0, seconds=10.0, read=2 * MB, write=1 * MB, shuffle_id=0)
    events += [TaskStarted(time=10.0, stage_id=0, partition=p, executor_id=e) for p, e in ((1, "a"), (2, "d"))]
    feed(policy, events)
    assert _duplicates(policy, [Tick(time=11.0)]) == [DuplicateTask(stage_id=0, partition=1, executor_id="c")]


def test_no_copy_from_a_source_that_outlives_the_task() -> None:
    # Same as above but every executor outlives the running tasks: nothing is at risk.
    policy = _policy()
    events = add_executors(["a", "c"], cores=1)
    events += [ExecutorNotice(time=0.0, executor_id=e, deadline=FOREVER, kind="lifetime") for e in "ac"]
    events += [map_stage(0, 2, 0)]
    events += run_task(0, 0, "c", start=0.0, seconds=10.0, write=MB, shuffle_id=0)
    events += [TaskStarted(time=10.0, stage_id=0, partition=1, executor_id="a"), Tick(time=11.0)]
    assert _duplicates(policy, events) == []


def test_memoryless_belief_never_copies() -> None:
    # Indeterministic exponential belief: every executor is as likely to die in any window, so
    # a copy is never safer than its original (and the notices are ignored).
    policy = _policy(knowledge="indeterministic")
    assert _duplicates(policy, _two_stages_on_a_dying_executor() + [Tick(time=11.0), Tick(time=16.0)]) == []


def test_waiting_tasks_block_copies() -> None:
    policy = _policy()
    events = _two_stages_on_a_dying_executor() + [map_stage(2, 3, 2, time=10.5), Tick(time=11.0)]
    assert _duplicates(policy, events) == []


def test_copy_starts_when_a_core_frees_in_the_tail_without_a_tick() -> None:
    # c finishes its task at 12 s while nothing waits: the copy is asked for on that TaskEnded.
    policy = _policy()
    events = add_executors(["a", "c"], cores=1)
    events += [ExecutorNotice(time=0.0, executor_id=e, deadline=t, kind="lifetime") for e, t in (("a", 15.0), ("c", FOREVER))]
    events += [map_stage(0, 2, 0)]
    events += [TaskStarted(time=0.0, stage_id=0, partition=0, executor_id="c"),
               TaskStarted(time=6.0, stage_id=0, partition=1, executor_id="a")]  # ~6 s to go at 12 s; a has 3
    feed(policy, events)
    ended = run_task(0, 0, "c", start=0.0, seconds=12.0, write=MB, shuffle_id=0)[1:]
    assert _duplicates(policy, ended) == [DuplicateTask(stage_id=0, partition=1, executor_id="c")]


def test_copy_killed_when_the_original_wins_and_when_cores_are_needed() -> None:
    policy = _policy()
    feed(policy, _two_stages_on_a_dying_executor() + [Tick(time=11.0)])
    feed(policy, [TaskStarted(time=11.0, stage_id=0, partition=1, executor_id="c")])
    # Two new tasks wait and only b's core is free: the copy goes.
    out = feed(policy, [StageSubmitted(time=11.5, stage_id=2, num_tasks=2, shuffle_id=2)])
    assert KillDuplicate(stage_id=0, partition=1, executor_id="c") in out
    # The original of stage 1's task wins on a: no copy of it exists, nothing to kill.
    done = feed(policy, run_task(1, 1, "a", start=10.0, seconds=4.0, write=MB, shuffle_id=1)[1:])
    assert not [c for c in done if isinstance(c, KillDuplicate)]


def test_a_copy_whose_original_died_is_the_task_now_and_is_not_killed_for_cores() -> None:
    policy = _policy()
    feed(policy, _two_stages_on_a_dying_executor() + [Tick(time=11.0)])
    feed(policy, [TaskStarted(time=11.0, stage_id=0, partition=1, executor_id="c")])
    # a dies: the original attempt goes with it and the copy on c runs alone.
    feed(policy, [ExecutorLost(time=11.2, executor_id="a", reason="evicted")])
    out = feed(policy, [StageSubmitted(time=11.5, stage_id=2, num_tasks=2, shuffle_id=2)])
    assert not [c for c in out if isinstance(c, KillDuplicate)]


def test_idle_executors_follow_the_gamma_rule() -> None:
    # A waiting task of 5 s blocks executor a (no limit) but not b, which may only take tasks
    # of <= 1 s: b counts as idle.
    state = JobState()
    for event in add_executors(["a", "b"]) + [map_stage(0, 1, 0)]:
        state.apply(event)
    assert idle_executors(state, None) == []
    hints = SchedulingHints(stage_order=(0,), forbidden={0: ("b",)})
    assert [e.executor_id for e in idle_executors(state, hints)] == ["b"]
    relaxed = SchedulingHints(stage_order=(0,), forbidden={1: ("b",)})  # another stage's tasks do not fit on b
    assert idle_executors(state, relaxed) == []


def test_with_warm_first_a_fresh_executor_is_no_duplicate_target() -> None:
    # a has finished a task, b is fresh: warm first makes b a fallback. That makes b "not
    # allowed" any waiting stage, which must not make it idle (a copy there runs slow).
    state = JobState()
    for event in add_executors(["a", "b"]) + [map_stage(0, 3, 0)] + run_task(0, 0, "a", start=0.0, seconds=1.0):
        state.apply(event)
    hints = SchedulingHints(stage_order=(0,), fallback={0: ("b",)})
    assert [e.executor_id for e in idle_executors(state, hints)] == ["b"]  # warm first off: the hints alone
    assert idle_executors(state, hints, warm_first=True) == []


def test_a_straggler_past_its_stage_mean_is_copied() -> None:
    # Task 1 started at 0 on a (dies at 15 s); task 0 took 10 s on c (lives for ever), so the
    # stage's mean is 10 s. When c frees at 12 s, task 1 has run 12 s, past the mean: a copy on c
    # needs ~10 s, a dies 3 s into that window, so the copy is safer and c gets it.
    policy = _policy()
    events = add_executors(["a", "c"], cores=1)
    events += [ExecutorNotice(time=0.0, executor_id=e, deadline=t, kind="lifetime") for e, t in (("a", 15.0), ("c", FOREVER))]
    events += [map_stage(0, 2, 0), TaskStarted(time=0.0, stage_id=0, partition=1, executor_id="a")]
    feed(policy, events)
    ended = run_task(0, 0, "c", start=2.0, seconds=10.0, write=MB, shuffle_id=0)
    assert _duplicates(policy, ended) == [DuplicateTask(stage_id=0, partition=1, executor_id="c")]


def test_a_success_reported_after_its_executor_was_lost_kills_no_surviving_copy() -> None:
    # The output went with a; the copy still running on b is the partition's only run now.
    policy = _policy()
    events = add_executors(["a", "b"]) + [map_stage(0, 1, 0),
                                          TaskStarted(time=0.0, stage_id=0, partition=0, executor_id="a"),
                                          TaskStarted(time=0.0, stage_id=0, partition=0, executor_id="b", speculative=True)]
    feed(policy, events + [ExecutorLost(time=4.0, executor_id="a", reason="evicted")])
    late = run_task(0, 0, "a", start=0.0, seconds=4.0, write=MB, shuffle_id=0)[1:]
    assert not [c for c in feed(policy, late) if isinstance(c, KillDuplicate)]


def test_a_copy_that_failed_is_forgotten_so_the_task_can_be_copied_again() -> None:
    from trspark.engine.events import TaskEnded

    # The copy of stage 0's task on c fails by itself (an exception): the original still runs on
    # a, which dies at 15 s. The copy no longer runs, so the task is a candidate again -- the one
    # with the larger reduction rate -- and no later kill is spent on the copy that is gone.
    policy = _policy()
    feed(policy, _two_stages_on_a_dying_executor() + [Tick(time=11.0)])
    feed(policy, [TaskStarted(time=11.0, stage_id=0, partition=1, executor_id="c"),
                  TaskEnded(time=11.5, stage_id=0, partition=1, executor_id="c", duration=0.5, successful=False,
                            reason="exception")])
    assert _duplicates(policy, [Tick(time=12.0)]) == [DuplicateTask(stage_id=0, partition=1, executor_id="c")]
