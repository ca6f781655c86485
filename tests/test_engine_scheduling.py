"""TR-Scheduling (Algorithm 1) as hints, the safety belt, duplication and splitting advice."""

from __future__ import annotations

import numpy as np
import pytest
from engine_world import MB, add_executors, feed, map_stage, run_task
from scipy.integrate import quad

from cost_model.lifetimes import Exponential
from trspark.engine import placement
from trspark.engine.commands import (
    Advice,
    Backup,
    DuplicateTask,
    KillDuplicate,
    ReleaseExecutor,
    SafetyBelt,
    SchedulingHints,
)
from trspark.engine.events import (
    REMOTE,
    BlockBackedUp,
    BlockLost,
    Event,
    ExecutorAdded,
    ExecutorLost,
    ExecutorNotice,
    JobEnded,
    JobSubmitted,
    ShuffleConsumed,
    StageCompleted,
    StageSubmitted,
    TaskEnded,
    TaskStarted,
    Tick,
)
from trspark.engine.placement import allowed, order_stages, plan
from trspark.engine.registry import make_policy
from trspark.engine.settings import TRConfig
from trspark.engine.state import JobState
from trspark.engine.tr.knowledge import LifetimeKnowledge
from trspark.engine.tr.scheduling import build_limits, gamma_hints, reduce_rate, stage_order, task_limits


def _two_parents_state() -> JobState:
    """Stages 0 and 1 are runnable; 0 reduces 10 MB -> 1 MB per 1 s task, 1 grows 1 MB -> 5 MB per 2 s task."""
    state = JobState()
    events = add_executors(["a"], cores=2) + [map_stage(0, 4, 0), map_stage(1, 4, 1)]
    events += run_task(0, 0, "a", start=0.0, seconds=1.0, read=10 * MB, write=1 * MB, shuffle_id=0)
    events += run_task(1, 0, "a", start=0.0, seconds=2.0, read=1 * MB, write=5 * MB, shuffle_id=1)
    for event in events:
        state.apply(event)
    return state


def test_reduce_rate_is_bytes_saved_per_second() -> None:
    state = _two_parents_state()
    assert reduce_rate(state, state.stages[0]) == pytest.approx(9 * MB / 1.0)
    assert reduce_rate(state, state.stages[1]) == pytest.approx(-4 * MB / 2.0)


def test_largest_reduction_rate_first() -> None:
    state = _two_parents_state()
    state.apply(map_stage(2, 3, 2))  # no statistics yet: rate 0, between the two
    assert stage_order(state) == (0, 2, 1)


def test_gamma_rule_limits_only_executors_that_die_before_the_task_ends() -> None:
    executors = JobState()
    for event in add_executors(["a", "b", "c"]):
        executors.apply(event)
    views = executors.alive_executors()
    # Residual lives 5 s, 100 s, 100 s; tasks take 10 s; gamma 1: a may only take tasks <= 5 s.
    assert task_limits(views, np.array([5.0, 100.0, 100.0]), 1.0, 10.0) == {"a": 5.0}
    # Tasks of 3 s fit everywhere: no restriction at all.
    assert task_limits(views, np.array([5.0, 100.0, 100.0]), 1.0, 3.0) == {}
    # Memoryless belief: every executor has the same residual life, nothing to prefer.
    assert task_limits(views, np.array([50.0, 50.0, 50.0]), 1.0, 80.0) == {}


def test_policy_sends_hints_with_deterministic_lifetimes() -> None:
    config = TRConfig(lifetime="exponential:mean=1000", knowledge="deterministic", duplication=False,
                      warm_first=False)  # the γ rule alone (b, c have not run a task)
    policy = make_policy("tr", config)
    events = add_executors(["a", "b"], cores=1)
    events += [ExecutorNotice(time=0.0, executor_id="a", deadline=12.0, kind="lifetime"), ExecutorNotice(time=0.0, executor_id="b", deadline=1e6, kind="lifetime")]
    events += [map_stage(0, 4, 0)]
    events += run_task(0, 0, "b", start=0.0, seconds=8.0, write=MB, shuffle_id=0)
    events += [Tick(time=9.0)]
    hints = [c for c in feed(policy, events) if isinstance(c, SchedulingHints)]
    assert hints, "expected scheduling hints"
    last = hints[-1]
    assert last.stage_order == (0,)
    assert policy.limits.expected_task_seconds == {0: pytest.approx(8.0)}
    assert policy.limits.max_task_seconds == {"a": pytest.approx(3.0)}  # a dies at 12 s; now is 9 s
    assert last.forbidden == {0: ("a",)} and last.fallback == {}  # 8 s tasks do not fit in a's 3 s


def test_scheduling_off_sends_no_hints() -> None:
    config = TRConfig(lifetime="exponential:mean=1000", knowledge="deterministic", scheduling=False, duplication=False)
    policy = make_policy("tr", config)
    events = add_executors(["a"]) + [map_stage(0, 4, 0), Tick(time=5.0)]
    assert not [c for c in feed(policy, events) if isinstance(c, SchedulingHints)]


def test_safety_belt_fires_once_and_switches_to_always_checkpoint() -> None:
    # The engine believes executors never die; a lost block is re-run for longer than beta x t1.
    config = TRConfig(lifetime="exponential:mean=1e9", beta=0.5, duplication=False, scheduling=False)
    policy = make_policy("tr", config)
    events = add_executors(["a"], cores=1) + [map_stage(0, 3, 0)]
    events += run_task(0, 0, "a", start=0.0, seconds=10.0, write=MB, shuffle_id=0)  # t1 = 10 s
    events += [BlockLost(time=10.0, shuffle_id=0, map_index=0)]
    events += run_task(0, 0, "a", start=10.0, seconds=4.0, write=MB, shuffle_id=0)  # 4 s <= 0.5 x 10 s
    commands = feed(policy, events)
    assert not [c for c in commands if isinstance(c, (SafetyBelt, Backup))]
    events = [BlockLost(time=14.0, shuffle_id=0, map_index=0)]
    events += run_task(0, 0, "a", start=14.0, seconds=4.0, write=MB, shuffle_id=0)  # 8 s > 5 s
    commands = feed(policy, events)
    belts = [c for c in commands if isinstance(c, SafetyBelt)]
    assert len(belts) == 1 and belts[0].on and "beta=0.5" in belts[0].reason
    assert [(b.map_index, b.target) for b in commands if isinstance(b, Backup)] == [(0, REMOTE)]
    # From now on every new output goes to remote, however stable the belief.
    later = feed(policy, run_task(0, 1, "a", start=18.0, seconds=1.0, write=MB, shuffle_id=0))
    assert [(b.map_index, b.target) for b in later if isinstance(b, Backup)] == [(1, REMOTE)]
    assert not [c for c in later if isinstance(c, SafetyBelt)]


def _job(job_id: int, stage_id: int, time: float) -> list[Event]:
    return [JobSubmitted(time=time, job_id=job_id, stage_ids=(stage_id,), num_tasks=(3,), shuffle_ids=(stage_id,),
                         parents=((),)), map_stage(stage_id, 3, stage_id, time=time)]


def _lost_and_rerun(stage_id: int, start: float, seconds: float) -> list[Event]:
    return [BlockLost(time=start, shuffle_id=stage_id, map_index=0),
            *run_task(stage_id, 0, "a", start=start, seconds=seconds, write=MB, shuffle_id=stage_id)]


def test_safety_belt_resets_when_a_job_starts_alone_and_measures_it_afresh() -> None:
    config = TRConfig(lifetime="exponential:mean=1e9", beta=0.5, duplication=False, scheduling=False)
    policy = make_policy("tr", config)
    # Job 0: t1 = 10 s, then 8 s of re-runs > 0.5 x 10 s: fires.
    events = add_executors(["a"], cores=1) + _job(0, 0, 0.0)
    events += run_task(0, 0, "a", start=0.0, seconds=10.0, write=MB, shuffle_id=0)
    events += _lost_and_rerun(0, 10.0, 8.0)
    assert [c.on for c in feed(policy, events) if isinstance(c, SafetyBelt)] == [True]
    # Job 1 starts while job 0 still runs: measured with it, nothing is released.
    assert not [c for c in feed(policy, _job(1, 1, 18.0)) if isinstance(c, SafetyBelt)]
    # Job 2 starts alone after both ended: the belt is released, and back to the engine's decisions.
    ended = [JobEnded(time=19.0, job_id=0), JobEnded(time=19.0, job_id=1)]
    released = [c for c in feed(policy, ended + _job(2, 2, 20.0)) if isinstance(c, SafetyBelt)]
    assert len(released) == 1 and not released[0].on and "new job at t=20.0" in released[0].reason
    later = feed(policy, run_task(2, 0, "a", start=20.0, seconds=10.0, write=MB, shuffle_id=2))  # t1 = 10 s
    assert not [b for b in later if isinstance(b, Backup)]  # a never-dying belief backs nothing up
    # Job 2's own re-computation: 4 s <= 0.5 x 10 s holds the belt (job 0's 8 s no longer count),
    # 4 s more exceed it: fires again, once.
    assert not [c for c in feed(policy, _lost_and_rerun(2, 30.0, 4.0)) if isinstance(c, SafetyBelt)]
    again = [c for c in feed(policy, _lost_and_rerun(2, 34.0, 4.0)) if isinstance(c, SafetyBelt)]
    assert len(again) == 1 and again[0].on and "8.0 s (cluster time)" in again[0].reason and "x 10.0 s" in again[0].reason


def test_safety_belt_can_be_switched_off() -> None:
    config = TRConfig(lifetime="exponential:mean=1e9", safety_belt=False, duplication=False, scheduling=False)
    policy = make_policy("tr", config)
    events = add_executors(["a"], cores=1) + [map_stage(0, 1, 0)]
    events += run_task(0, 0, "a", start=0.0, seconds=1.0, write=MB, shuffle_id=0)
    events += [BlockLost(time=1.0, shuffle_id=0, map_index=0)]
    events += run_task(0, 0, "a", start=1.0, seconds=50.0, write=MB, shuffle_id=0)
    assert not [c for c in feed(policy, events) if isinstance(c, SafetyBelt)]


def _dup_setup() -> tuple[object, list]:  # type: ignore[type-arg]
    config = TRConfig(lifetime="exponential:mean=1000", knowledge="deterministic", scheduling=False, period=5.0)
    policy = make_policy("tr", config)
    events = add_executors(["a", "b"], cores=1)
    events += [ExecutorNotice(time=0.0, executor_id="a", deadline=30.0, kind="lifetime"), ExecutorNotice(time=0.0, executor_id="b", deadline=1e6, kind="lifetime")]
    # Stage 0 has 2 tasks of ~20 s: partition 0 done on b, partition 1 running on a (dies at 30 s).
    events += [map_stage(0, 2, 0)]
    events += run_task(0, 0, "b", start=0.0, seconds=20.0, write=MB, shuffle_id=0)
    events += [TaskStarted(time=20.0, stage_id=0, partition=1, executor_id="a")]
    return policy, events


def test_duplicates_a_task_at_risk_onto_an_idle_safe_executor() -> None:
    policy, events = _dup_setup()
    # Partition 1 was waiting when b's task ended; from its start on b is idle with nothing waiting.
    assert not [c for c in feed(policy, events) if isinstance(c, DuplicateTask)]  # type: ignore[arg-type]
    dups = [c for c in feed(policy, [Tick(time=21.0)]) if isinstance(c, DuplicateTask)]  # type: ignore[arg-type]
    assert dups == [DuplicateTask(stage_id=0, partition=1, executor_id="b")]
    # The copy on b finishes first: the original on a is killed.
    done = feed(policy, run_task(0, 1, "b", start=21.0, seconds=1.0, write=MB, shuffle_id=0)[1:])  # type: ignore[arg-type]
    assert KillDuplicate(stage_id=0, partition=1, executor_id="a") in done


def test_duplicate_killed_when_cores_are_needed() -> None:
    policy, events = _dup_setup()
    feed(policy, events + [Tick(time=21.0)])  # type: ignore[arg-type, operator]
    feed(policy, [TaskStarted(time=21.0, stage_id=0, partition=1, executor_id="b")])  # type: ignore[arg-type]
    # A new stage arrives with waiting tasks and no core is free: the copy goes.
    out = feed(policy, [StageSubmitted(time=27.0, stage_id=1, num_tasks=3, shuffle_id=1)])  # type: ignore[arg-type]
    assert KillDuplicate(stage_id=0, partition=1, executor_id="b") in out


def test_no_duplication_when_switched_off() -> None:
    config = TRConfig(lifetime="exponential:mean=1000", knowledge="deterministic", duplication=False)
    policy = make_policy("tr", config)
    _, events = _dup_setup()
    assert not [c for c in feed(policy, events + [Tick(time=21.0), Tick(time=26.0)]) if isinstance(c, DuplicateTask)]  # type: ignore[operator]


def test_split_advice_for_tasks_longer_than_any_executor_lives() -> None:
    config = TRConfig(lifetime="exponential:mean=5", duplication=False, scheduling=True)
    policy = make_policy("tr", config)
    events = add_executors(["a", "b"]) + [map_stage(0, 4, 0)]
    events += run_task(0, 0, "a", start=0.0, seconds=30.0, write=MB, shuffle_id=0)
    events += [Tick(time=31.0), Tick(time=36.0)]
    advice = [c for c in feed(policy, events) if isinstance(c, Advice)]
    assert len(advice) == 1 and advice[0].kind == "split" and advice[0].stage_id == 0


def test_fitted_knowledge_refits_after_enough_evictions() -> None:
    knowledge = LifetimeKnowledge(Exponential(mean=1000.0), "fitted", min_evictions=3)
    state = JobState()
    for event in add_executors([str(i) for i in range(6)]):
        state.apply(event)
    for i, t in enumerate([10.0, 12.0, 14.0]):
        state.apply(ExecutorLost(time=t, executor_id=str(i)))
        knowledge.observe(state)
    assert knowledge.refits == 1
    # Three evictions by 14 s out of six executors: far less stable than the 1000 s prior.
    assert knowledge.shared.mean() < 100.0


# ---- Algorithm 1 on hand-made situations with a known answer ---------------------------------


def test_policy_orders_runnable_stages_by_reduction_rate_and_placement_follows() -> None:
    # Stage 0 reduces 10 MB -> 1 MB per 1 s task (9 MB/s), stage 1 grows 1 MB -> 5 MB per 2 s
    # task (-2 MB/s), stage 2 has no statistics yet (0): order 0, 2, 1 -- and the driver's
    # placement takes stage 0's tasks first, then 2, then 1, whatever the ids.
    config = TRConfig(lifetime="exponential:mean=1000", duplication=False)
    policy = make_policy("tr", config)
    events = add_executors(["a"], cores=2) + [map_stage(1, 4, 1), map_stage(0, 4, 0), map_stage(2, 3, 2)]
    events += run_task(0, 0, "a", start=0.0, seconds=1.0, read=10 * MB, write=1 * MB, shuffle_id=0)
    events += run_task(1, 0, "a", start=0.0, seconds=2.0, read=1 * MB, write=5 * MB, shuffle_id=1)
    events += [Tick(time=5.0)]
    hints = [c for c in feed(policy, events) if isinstance(c, SchedulingHints)]
    assert hints[-1].stage_order == (0, 2, 1)
    assert order_stages([1, 2, 0, 7], hints[-1]) == [0, 2, 1, 7]  # 7: unknown to the engine, last


def test_fifo_order_leaves_the_drivers_own_order() -> None:
    # ``scheduling.order = fifo`` sends no stage order: the driver (Spark's FIFO pool, the
    # simulator) keeps the lower stage id first, whatever the reduction rates.
    policy = make_policy("tr", TRConfig(lifetime="exponential:mean=1000", duplication=False, scheduling_order="fifo"))
    events = add_executors(["a"], cores=2) + [map_stage(1, 4, 1), map_stage(0, 4, 0), map_stage(2, 3, 2)]
    events += run_task(1, 0, "a", start=0.0, seconds=1.0, read=10 * MB, write=1 * MB, shuffle_id=1)
    events += [Tick(time=5.0)]
    assert all(c.stage_order == () for c in feed(policy, events) if isinstance(c, SchedulingHints))
    assert order_stages([2, 1, 0], None) == [0, 1, 2]


def test_gamma_scales_the_limit_and_placement_applies_it() -> None:
    # ET / m_v < gamma  <=>  ET < gamma * m_v: residual lives 10 s (a) and 100 s (b), tasks of 8 s.
    executors = JobState()
    for event in add_executors(["a", "b"]):
        executors.apply(event)
    views = executors.alive_executors()
    residual = np.array([10.0, 100.0])
    assert task_limits(views, residual, 1.0, 8.0) == {}  # 8 < 10: fits on a
    assert task_limits(views, residual, 0.5, 8.0) == {"a": pytest.approx(5.0)}  # 8 > 5: a restricted
    hints = gamma_hints((0, 1), {"a": 5.0}, {0: 8.0, 1: 4.0})
    assert hints.forbidden == {0: ("a",)}
    assert not allowed("a", 0, hints) and allowed("b", 0, hints)
    assert allowed("a", 1, hints)  # 4 s tasks still fit on a
    assert allowed("a", 9, hints)  # a stage without an estimate is never held back


def _weibull_mean_residual_life(shape: float, scale: float, age: float) -> float:
    """m(age) = ∫_0^∞ S(age + u) / S(age) du by adaptive quadrature (independent of the model code)."""
    h0 = (age / scale) ** shape
    value, _err = quad(lambda u: np.exp(h0 - ((age + u) / scale) ** shape), 0.0, np.inf, epsabs=1e-10)
    return float(value)


def test_wear_out_belief_restricts_only_the_old_executor() -> None:
    # Weibull shape 2 (wear-out), believed by everyone: at t = 20 s executor "old" is 170 s old,
    # expected to live m(170) ~ 26 s more; "young" is 20 s old, m(20) ~ 71 s. Tasks take 20 s.
    # gamma = 0.5: old may take tasks up to 0.5 m(170) ~ 13 s < 20 s (restricted); young's limit
    # 0.5 m(20) ~ 35 s is above every task, so it is not listed.
    config = TRConfig(lifetime="weibull:shape=2,scale=100", gamma=0.5, duplication=False, warm_first=False)
    policy = make_policy("tr", config)
    events = add_executors(["old"], vm_started=-150.0) + add_executors(["young"])
    events += [map_stage(0, 4, 0)]
    events += run_task(0, 0, "young", start=0.0, seconds=20.0, write=MB, shuffle_id=0)
    events += [Tick(time=20.0)]
    hints = [c for c in feed(policy, events) if isinstance(c, SchedulingHints)][-1]
    assert policy.limits.expected_task_seconds == {0: pytest.approx(20.0)}
    expected = 0.5 * _weibull_mean_residual_life(2.0, 100.0, 170.0)
    assert policy.limits.max_task_seconds == {"old": pytest.approx(expected, rel=1e-6)}
    assert hints.forbidden == {0: ("old",)}
    assert 0.5 * _weibull_mean_residual_life(2.0, 100.0, 20.0) > 20.0
    assert not allowed("old", 0, hints) and allowed("young", 0, hints)


def _noticed_policy(kind: str, deadline: float = 6.0):  # type: ignore[no-untyped-def]
    """Executors a, b, c (1 core); a holds a fresh map output of stage 0 that stage 1 will read
    (stage 0's five other 2 s tasks first: needed for ~7 s more); at 3 s a goes at ``deadline``."""
    config = TRConfig(lifetime="exponential:mean=1e7", knowledge="deterministic", duplication=True, warm_first=False)
    policy = make_policy("tr", config)
    events = add_executors(["a", "b", "c"], cores=1) + [map_stage(0, 6, 0)]
    events += run_task(0, 0, "a", start=0.0, seconds=2.0, write=8 * MB, shuffle_id=0)
    events += [StageSubmitted(time=2.0, stage_id=1, num_tasks=2, parent_stage_ids=(0,), parent_shuffle_ids=(0,))]
    before = feed(policy, events)
    assert not [c for c in before if isinstance(c, Backup)], "stable executors: nothing to save before the notice"
    out = feed(policy, [ExecutorNotice(time=3.0, executor_id="a", deadline=deadline, kind=kind)])
    return policy, out


def test_termination_notice_with_no_room_for_a_task_drains_the_executor_and_saves_its_output_at_once() -> None:
    """1.5 s left, 2 s tasks: no new task goes to a (not even when no other core is free), its output is copied now."""
    policy, out = _noticed_policy("notice", deadline=4.5)
    hints = [c for c in out if isinstance(c, SchedulingHints)]
    assert hints and hints[-1].drain == ("a",)
    assert not allowed("a", 0, hints[-1])
    assert allowed("b", 0, hints[-1])
    assert plan(["a"], {0: 5}, {}, hints[-1]) == [], "a draining executor takes nothing, even alone"
    # Stage 0 still has 5 tasks to run, then stage 1 reads: the block must outlive a's deadline.
    backups = [c for c in out if isinstance(c, Backup)]
    assert [(b.shuffle_id, b.map_index, b.source) for b in backups] == [(0, 0, "a")]
    assert backups[0].target != "a"


def test_notice_copies_nothing_that_is_read_before_the_deadline() -> None:
    """Only what matters: with 30 s left, the block is read long before a goes (copying it is waste)."""
    policy, out = _noticed_policy("notice", deadline=33.0)
    assert not [c for c in out if isinstance(c, Backup)]
    (hints,) = [c for c in out if isinstance(c, SchedulingHints)]
    # 30 s left, less the copy of an 8 MB output (0.13 s) and its reported end (1 s): a takes tasks that fit.
    assert hints.drain == () and policy.limits.max_task_seconds == {"a": pytest.approx(30.0 - 0.13 - 1.0)}
    assert allowed("a", 0, hints)


def test_a_noticed_executor_takes_the_tasks_that_fit_before_its_deadline_then_drains() -> None:
    policy, out = _noticed_policy("notice", deadline=9.0)  # 6 s left at the notice, 2 s tasks
    hints = [c for c in out if isinstance(c, SchedulingHints)][-1]
    # Room: 6 s less the output's copy (0.13 s) and the copy's reported end (1 s), not notice.margin
    # (3 s, kept by the copies of outputs already there).
    assert hints.drain == () and policy.limits.max_task_seconds["a"] == pytest.approx(6.0 - 0.13 - 1.0)
    assert allowed("a", 0, hints)
    later = [c for c in feed(policy, [Tick(time=5.0)]) if isinstance(c, SchedulingHints)]
    assert later and later[-1].drain == () and allowed("a", 0, later[-1]), "4 s left: a 2 s task still fits"
    later = [c for c in feed(policy, [Tick(time=6.0)]) if isinstance(c, SchedulingHints)]
    assert later and later[-1].drain == ("a",), "with 3 s left a 2 s task and its copy would not end in time"
    assert not allowed("a", 0, later[-1])


def test_an_executor_that_outlives_its_notice_takes_tasks_again_and_is_no_eviction() -> None:
    """Noticed at 3 s for 4.5 s: past 4.5 + max(1.5, 10) s, still alive, the notice was not carried out."""
    from trspark.engine.views import NOTICE_EXPIRY_MIN_SECONDS, observed_lifetime

    policy, out = _noticed_policy("notice", deadline=4.5)
    assert [c for c in out if isinstance(c, SchedulingHints)][-1].drain == ("a",)
    expiry = 4.5 + NOTICE_EXPIRY_MIN_SECONDS
    before = [c for c in feed(policy, [Tick(time=expiry - 0.5)]) if isinstance(c, SchedulingHints)]
    assert all(h.drain == ("a",) for h in before) and policy.state.executors["a"].draining
    hints = [c for c in feed(policy, [Tick(time=expiry)]) if isinstance(c, SchedulingHints)]
    assert hints and hints[-1].drain == () and allowed("a", 0, hints[-1])
    a = policy.state.executors["a"]
    assert (a.draining, a.notice_deadline, policy.state.with_deadline) == (False, None, set())
    assert policy.knowledge.model(a).spec() == "exponential:mean=10000000.0"  # its pool's law again
    # Let go later for another reason, it is a censored lifetime, not an eviction at the deadline.
    assert observed_lifetime(a, ExecutorLost(time=30.0, executor_id="a", reason="removed")) == (30.0, False)


def test_known_lifetime_is_not_a_drain() -> None:
    """The same deadline known from the start (spot block): the γ rule may bind, no drain."""
    policy, out = _noticed_policy("lifetime")
    assert all(not c.drain for c in out if isinstance(c, SchedulingHints))
    assert policy.state.executors["a"].draining is False


def test_no_drain_when_every_executor_has_a_notice() -> None:
    from trspark.engine.tr.scheduling import notice_rules

    state = JobState()
    for event in add_executors(["a", "b"]):
        state.apply(event)
    state.apply(ExecutorNotice(time=1.0, executor_id="a", deadline=31.0))
    assert notice_rules(state.alive_executors(), 1.0, 0.1, {}) == ({}, ("a",))  # no runnable stage: nothing fits
    assert notice_rules(state.alive_executors(), 1.0, 0.1, {0: 2.0}) == ({"a": pytest.approx(29.9)}, ())
    state.apply(ExecutorNotice(time=2.0, executor_id="b", deadline=32.0))
    assert notice_rules(state.alive_executors(), 2.0, 0.1, {0: 2.0}) == ({}, ())  # someone must run the tasks


def test_draining_executor_gets_no_duplicate() -> None:
    from trspark.engine.tr.duplication import idle_executors

    state = JobState()
    for event in add_executors(["a", "b"]) + [map_stage(0, 1, 0), TaskStarted(time=0.0, stage_id=0, partition=0, executor_id="b")]:
        state.apply(event)
    assert [e.executor_id for e in idle_executors(state, None)] == ["a"]
    state.apply(ExecutorNotice(time=1.0, executor_id="a", deadline=31.0))
    assert idle_executors(state, None) == []


def _long_notice(b_deadline: float | None = None, consumed_at: float | None = None):  # type: ignore[no-untyped-def]
    """a holds an output that stage 1 reads after 59 more tasks of stage 0; a gets a 60 s notice at 3 s."""
    config = TRConfig(lifetime="exponential:mean=1e7", knowledge="deterministic", duplication=False,
                      notice_margin=10.0)
    policy = make_policy("tr", config)
    events = add_executors(["a", "b", "c"], cores=1) + [map_stage(0, 60, 0)]
    events += run_task(0, 0, "a", start=0.0, seconds=2.0, write=8 * MB, shuffle_id=0)
    events += [StageSubmitted(time=2.0, stage_id=1, num_tasks=2, parent_stage_ids=(0,), parent_shuffle_ids=(0,))]
    out = feed(policy, events + [ExecutorNotice(time=3.0, executor_id="a", deadline=63.0, kind="notice")])
    later: list[object] = [Tick(time=20.0)]
    if b_deadline is not None:
        later.append(ExecutorNotice(time=30.0, executor_id="b", deadline=b_deadline, kind="notice"))
    if consumed_at is not None:
        later.append(ShuffleConsumed(time=consumed_at, shuffle_id=0))
    out += feed(policy, later + [Tick(time=45.0)])
    # Last responsible moment: 63 - margin 10 - period 5 - 8 MB at 100 MB/s + 50 ms = 47.87 s.
    assert not [c for c in out if isinstance(c, Backup)], "nothing is copied before the last responsible moment"
    return policy, [c for c in feed(policy, [Tick(time=48.0)]) if isinstance(c, Backup)]


def test_notice_backups_wait_for_the_last_responsible_moment() -> None:
    policy, backups = _long_notice()
    assert [(b.shuffle_id, b.map_index, b.source) for b in backups] == [(0, 0, "a")]
    assert policy.decisions["deferred"] == 1


def test_a_peer_noticed_meanwhile_is_not_the_target() -> None:
    # At the notice b looked as good as c; by the time the copy starts, b goes 2 s after a.
    _, backups = _long_notice(b_deadline=65.0)
    assert [(b.source, b.target) for b in backups] == [("a", "c")]


def test_an_output_consumed_within_the_window_is_never_copied() -> None:
    _, backups = _long_notice(consumed_at=40.0)
    assert backups == []


def test_notice_margin_as_long_as_the_window_copies_at_once() -> None:
    config = TRConfig(lifetime="exponential:mean=1e7", knowledge="deterministic", duplication=False,
                      notice_margin=60.0)
    policy = make_policy("tr", config)
    events = add_executors(["a", "b", "c"], cores=1) + [map_stage(0, 60, 0)]
    events += run_task(0, 0, "a", start=0.0, seconds=2.0, write=8 * MB, shuffle_id=0)
    events += [StageSubmitted(time=2.0, stage_id=1, num_tasks=2, parent_stage_ids=(0,), parent_shuffle_ids=(0,))]
    out = feed(policy, events + [ExecutorNotice(time=3.0, executor_id="a", deadline=63.0, kind="notice")])
    assert [(b.shuffle_id, b.map_index, b.source) for b in out if isinstance(b, Backup)] == [(0, 0, "a")]


def _expected_notices(expected: bool, outputs: int = 1, size: int = 8 * MB, window: float = 30.0):  # type: ignore[no-untyped-def]
    """a holds ``outputs`` fresh map outputs of stage 0 that stage 1 reads after 59 more tasks; the
    belief (mean lifetime 20 s) asks for copies; notices are ``window`` s ahead, and maybe expected."""
    config = TRConfig(lifetime="exponential:mean=20", knowledge="deterministic", duplication=False,
                      notice_window=window, notice_expected=expected)
    policy = make_policy("tr", config)
    events = add_executors(["a", "b", "c"], cores=1) + [map_stage(0, 60, 0)]
    for p in range(outputs):
        events += run_task(0, p, "a", start=2.0 * p, seconds=2.0, write=size, shuffle_id=0)
    events += [StageSubmitted(time=2.0 * outputs, stage_id=1, num_tasks=2, parent_stage_ids=(0,), parent_shuffle_ids=(0,))]
    return policy, [c for c in feed(policy, events + [Tick(time=2.0 * outputs + 1)]) if isinstance(c, Backup)]


def test_an_expected_notice_leaves_a_block_to_the_notice_then_saves_it() -> None:
    _, control = _expected_notices(expected=False)
    assert [(b.shuffle_id, b.map_index) for b in control] == [(0, 0)], "without notices, the belief asks for a copy"
    policy, before = _expected_notices(expected=True)
    assert before == [] and policy.summary()["decisions_left_to_notice"] >= 1
    # A notice with 4 s left: past the last responsible moment, so the copy goes at once.
    out = feed(policy, [ExecutorNotice(time=4.0, executor_id="a", deadline=8.0, kind="notice")])
    assert [(b.shuffle_id, b.map_index, b.source) for b in out if isinstance(b, Backup)] == [(0, 0, "a")]


def test_an_expected_notice_does_not_wait_when_the_window_cannot_save_everything() -> None:
    # 12 outputs of 100 MB: 12 s at the slower target's 100 MB/s, more than a 10 s window less the
    # 3 s margin -- so they are planned as without notices; a 30 s window could save them all.
    _, control = _expected_notices(expected=False, outputs=12, size=100 * MB, window=10.0)
    _, backups = _expected_notices(expected=True, outputs=12, size=100 * MB, window=10.0)
    assert control, "the belief asks for copies"
    # From the 7th output on (7 copies of 1 s + 50 ms latency > 10 - 3 s), a holds more than its
    # window could save; the first six were left to the notice.
    assert backups and min(b.map_index for b in backups) == 6, backups
    assert _expected_notices(expected=True, outputs=12, size=100 * MB, window=30.0)[1] == []


def test_notice_expected_needs_a_knowledge_that_uses_notices() -> None:
    from trspark.keys import ConfigError, validate
    from trspark.live.config import from_spark_conf

    with pytest.raises(ConfigError, match="notice.expected=true needs spark.trspark.lifetime.knowledge"):
        validate(TRConfig(notice_expected=True, knowledge="indeterministic"))
    with pytest.raises(ConfigError, match="notice.expected=true needs spark.trspark.lifetime.knowledge"):
        from_spark_conf({"spark.trspark.notice.expected": "true", "spark.trspark.lifetime.knowledge": "indeterministic"})
    assert validate(TRConfig(notice_expected=True, knowledge="fitted")).notice_expected
    # the default knowledge prices notices
    assert from_spark_conf({"spark.trspark.notice.expected": "true"}).notice_expected


def test_gamma_rule_keeps_the_stage_s_longest_task_off_an_executor_that_dies_first() -> None:
    # Exact lifetimes: "short" dies at t = 15 s. Stage 0's finished tasks took 2, 2, 2 and 10 s
    # (mean 4 s). At t = 10 s short has 5 s left: enough for the mean task, not for the longest,
    # and any pending task may be the long kind -- so no task of stage 0 may start there.
    config = TRConfig(lifetime="exponential:mean=1e7", knowledge="deterministic", duplication=False)
    policy = make_policy("tr", config)
    events = add_executors(["short", "long"], cores=1)
    events += [ExecutorNotice(time=0.0, executor_id="short", deadline=15.0, kind="lifetime"),
               ExecutorNotice(time=0.0, executor_id="long", deadline=1e6, kind="lifetime")]
    events += [map_stage(0, 10, 0)]
    events += run_task(0, 0, "long", start=0.0, seconds=10.0, write=MB, shuffle_id=0)
    for p, start in ((1, 0.0), (2, 2.0), (3, 4.0)):
        events += run_task(0, p, "short", start=start, seconds=2.0, write=MB, shuffle_id=0)
    hints = [c for c in feed(policy, events + [Tick(time=10.0)]) if isinstance(c, SchedulingHints)][-1]
    assert policy.limits.expected_task_seconds == {0: pytest.approx(10.0)}
    assert policy.limits.max_task_seconds == {"short": pytest.approx(5.0)}
    assert not allowed("short", 0, hints) and allowed("long", 0, hints)


def _released(commands: list) -> list[str]:  # type: ignore[type-arg]
    return [c.executor_id for c in commands if isinstance(c, ReleaseExecutor)]


def test_noticed_executor_is_released_once_it_has_no_room_and_its_needed_output_is_saved() -> None:
    policy, out = _noticed_policy("notice", deadline=4.5)  # 1.5 s left, 2 s tasks: no room
    (backup,) = [c for c in out if isinstance(c, Backup)]
    assert _released(out) == [], "the output it holds is still needed and not yet copied"
    assert _released(feed(policy, [Tick(time=3.5)])) == []
    done = BlockBackedUp(time=3.6, shuffle_id=0, map_index=0, target=backup.target, bytes=8 * MB)
    assert _released(feed(policy, [done])) == ["a"]
    assert _released(feed(policy, [Tick(time=4.0), Tick(time=4.4)])) == [], "released once"
    assert policy.summary()["executors_released"] == 1


def test_a_noticed_executor_is_not_released_while_a_stage_reads_its_output() -> None:
    # The executors of a stage keep the output's location their first task fetched (a), and
    # its later tasks carry the stage's epoch, which does not clear it: a may go only once the
    # reading stage completed, even after the output has a copy and between two of its tasks.
    config = TRConfig(lifetime="exponential:mean=1e7", knowledge="deterministic", duplication=False)
    policy = make_policy("tr", config)
    events = add_executors(["a", "b"], cores=1) + [map_stage(0, 1, 0)]
    events += run_task(0, 0, "a", start=0.0, seconds=2.0, write=8 * MB, shuffle_id=0)
    events += [StageSubmitted(time=2.0, stage_id=1, num_tasks=2, parent_stage_ids=(0,), parent_shuffle_ids=(0,)),
               TaskStarted(time=2.1, stage_id=1, partition=0, executor_id="b")]
    out = feed(policy, events + [ExecutorNotice(time=3.0, executor_id="a", deadline=4.5, kind="notice")])
    (backup,) = [c for c in out if isinstance(c, Backup)]
    done = BlockBackedUp(time=3.6, shuffle_id=0, map_index=0, target=backup.target, bytes=8 * MB)
    assert _released(out + feed(policy, [done, Tick(time=3.7)])) == [], "b's task still reads from a"
    ended = TaskEnded(time=3.8, stage_id=1, partition=0, executor_id="b", duration=1.7,
                      shuffle_read_bytes=8 * MB)
    assert _released(feed(policy, [ended, Tick(time=3.9)])) == [], "stage 1's next task would read from a"
    events = [TaskStarted(time=3.9, stage_id=1, partition=1, executor_id="b"),
              TaskEnded(time=4.0, stage_id=1, partition=1, executor_id="b", duration=0.1, shuffle_read_bytes=8 * MB),
              StageCompleted(time=4.0, stage_id=1)]
    assert _released(feed(policy, events)) == ["a"]


def test_a_noticed_executor_with_room_for_a_task_is_not_released_while_idle() -> None:
    # 30 s left: idle now (no job runs), but the next job's tasks fit there -- it stays. No task
    # event comes between jobs, only ticks (every 5 s): once the room (time left less the copy's
    # reported end, 1 s) is less than a task (the job's mean, 1 s, when nothing is runnable) plus
    # a tick, it goes, before its deadline rather than after it.
    for release, expected in ((True, ["a"]), (False, [])):
        config = TRConfig(lifetime="exponential:mean=1e7", knowledge="deterministic", notice_release=release)
        policy = make_policy("tr", config)
        out = feed(policy, add_executors(["a", "b"]) + [ExecutorNotice(time=1.0, executor_id="a", deadline=31.0)])
        assert _released(out + feed(policy, [Tick(time=5.0), Tick(time=23.5)])) == []
        assert _released(feed(policy, [Tick(time=24.5)])) == expected


def test_an_idle_noticed_executor_is_judged_by_warm_tasks_not_by_cold_first_ones() -> None:
    # Fresh JVMs took 6 s for their first tasks, 1 s after. Noticed, and 3.5 s left between two
    # stages: a warm 1 s task fits before the copy's reported end (1 s), so a is kept (the
    # all-task mean, 3.5 s, would not fit and would let a go).
    config = TRConfig(lifetime="exponential:mean=1e7", knowledge="deterministic", duplication=False)
    policy = make_policy("tr", config)
    job = JobSubmitted(time=0.0, job_id=0, stage_ids=(0, 1), num_tasks=(4, 4), shuffle_ids=(0, None), parents=((), (0,)))
    events = add_executors(["a", "b"]) + [job, map_stage(0, 4, 0)]
    for p, (ex, start, seconds) in enumerate([("a", 0.0, 6.0), ("b", 0.0, 6.0), ("a", 6.0, 1.0), ("b", 6.0, 1.0)]):
        events += run_task(0, p, ex, start=start, seconds=seconds, write=MB, shuffle_id=0)
    events += [StageCompleted(time=7.0, stage_id=0), ShuffleConsumed(time=7.0, shuffle_id=0)]
    out = feed(policy, events + [ExecutorNotice(time=8.0, executor_id="a", deadline=13.0), Tick(time=9.5)])
    assert policy.state.mean_task_seconds() == pytest.approx(3.5)
    assert _released(out) == []
    assert _released(feed(policy, [Tick(time=11.5)])) == ["a"], "1.5 s left: a 1 s task no longer fits"


def test_the_last_executors_are_not_released_when_every_one_has_a_notice() -> None:
    # a and b both noticed; at t = 8.5 s, 1.5 s left each (no room for a 1 s task and the 1 s
    # of its copy's end): both take tasks anyway (nobody else can), so neither is let go. Once a fresh
    # executor c has come, they go.
    config = TRConfig(lifetime="exponential:mean=1e7", knowledge="deterministic")
    policy = make_policy("tr", config)
    events = add_executors(["a", "b"]) + [ExecutorNotice(time=1.0, executor_id="a", deadline=10.0),
                                           ExecutorNotice(time=1.0, executor_id="b", deadline=10.0)]
    assert _released(feed(policy, events + [Tick(time=8.5)])) == []
    assert sorted(_released(feed(policy, add_executors(["c"], time=8.6) + [Tick(time=8.7)]))) == ["a", "b"]


def test_an_output_left_for_readers_before_the_deadline_keeps_the_executor() -> None:
    # 30 s left: the block is read well before a goes, so it is not copied; with no room left,
    # a still stays while the block is unread, and goes once it has been read.
    policy, out = _noticed_policy("notice", deadline=33.0)
    assert _released(out + feed(policy, [Tick(time=10.0)])) == []
    assert _released(feed(policy, [ShuffleConsumed(time=12.0, shuffle_id=0)])) == [], "room for more tasks"
    assert _released(feed(policy, [Tick(time=32.0)])) == ["a"]


def test_a_noticed_executor_running_a_task_is_released_after_it_ends_and_its_output_is_saved() -> None:
    config = TRConfig(lifetime="exponential:mean=1e7", knowledge="deterministic", duplication=False)
    policy = make_policy("tr", config)
    events = add_executors(["a", "b"], cores=1) + [map_stage(0, 4, 0)]
    events += [TaskStarted(time=0.0, stage_id=0, partition=0, executor_id="a")]
    events += [StageSubmitted(time=0.0, stage_id=1, num_tasks=2, parent_stage_ids=(0,), parent_shuffle_ids=(0,))]
    out = feed(policy, events + [ExecutorNotice(time=1.0, executor_id="a", deadline=4.0, kind="notice")])
    assert _released(out) == [], "a task still runs there"
    out = feed(policy, run_task(0, 0, "a", start=0.0, seconds=2.0, write=8 * MB, shuffle_id=0)[1:])
    (backup,) = [c for c in out if isinstance(c, Backup)]
    assert _released(out) == [], "its new output must be saved first"
    done = BlockBackedUp(time=2.2, shuffle_id=0, map_index=0, target=backup.target, bytes=8 * MB)
    assert _released(feed(policy, [done])) == ["a"]


def test_an_executor_added_under_a_released_ones_id_takes_tasks() -> None:
    policy = make_policy("tr", TRConfig(lifetime="exponential:mean=3600"))
    events = add_executors(["0", "1"]) + [ExecutorNotice(time=10.0, executor_id="1", deadline=10.5), Tick(time=10.1)]
    assert _released(feed(policy, events)) == ["1"]
    feed(policy, [ExecutorLost(time=11.0, executor_id="1", reason="released")] + add_executors(["1"], time=60.0))
    out = feed(policy, [map_stage(0, 8, 0, time=61.0), Tick(time=62.0)])
    hints = [c for c in out if isinstance(c, SchedulingHints)]
    assert hints and hints[-1].drain == ()
    assert policy.summary()["executors_released"] == 1


def test_a_released_executor_takes_no_task_until_it_is_gone() -> None:
    state = JobState()
    for event in add_executors(["a", "b"]) + [map_stage(0, 4, 0), ExecutorNotice(time=1.0, executor_id="a", deadline=31.0)]:
        state.apply(event)
    executors = state.alive_executors()
    residual = np.full(len(executors), 1e6)
    assert build_limits(state, residual, executors, 1.0).drain == ()  # 30 s of room: it takes tasks
    limits = build_limits(state, residual, executors, 1.0, released={"a"})
    assert limits.drain == ("a",) and "a" not in limits.max_task_seconds
    assert placement.tier("a", 0, limits.hints()) == placement.NEVER


def test_a_released_executor_lived_until_its_deadline() -> None:
    from trspark.engine.views import observed_lifetime
    from trspark.live.recorder import HistoryObserver

    state = JobState()
    for event in add_executors(["a", "b", "c"], time=2.0):
        state.apply(event)
    state.apply(ExecutorNotice(time=10.0, executor_id="a", deadline=40.0))
    lost = ExecutorLost(time=12.0, executor_id="a", reason="released")
    assert observed_lifetime(state.executors["a"], lost) == (38.0, True)
    assert observed_lifetime(state.executors["b"], ExecutorLost(time=12.0, executor_id="b", reason="killed")) == (10.0, False)
    assert observed_lifetime(state.executors["c"], ExecutorLost(time=12.0, executor_id="c")) == (10.0, True)

    class Recorder:
        def __init__(self) -> None:
            self.lost: list[tuple[str, float, bool]] = []

        def executor_added(self, executor_id: str, start: float, pool: str | None = None) -> None:
            pass

        def executor_lost(self, executor_id: str, time: float, *, evicted: bool) -> None:
            self.lost.append((executor_id, time, evicted))

    recorder = Recorder()
    observer = HistoryObserver(recorder)  # type: ignore[arg-type]
    for event in add_executors(["a", "b"], time=2.0) + [ExecutorNotice(time=10.0, executor_id="a", deadline=40.0), lost,
                                                     ExecutorLost(time=13.0, executor_id="b", reason="killed")]:
        observer(event)
    assert recorder.lost == [("a", 40.0, True), ("b", 13.0, False)]


def test_fresh_executors_take_tasks_after_warm_ones() -> None:
    """A replacement that has not finished a task yet is a fallback: tasks go to warm executors first."""
    config = TRConfig(lifetime="exponential:mean=1e7", duplication=False, warm_first=True)
    policy = make_policy("tr", config)
    events = add_executors(["a", "b"], cores=1) + [map_stage(0, 6, 0)]
    events += run_task(0, 0, "a", start=0.0, seconds=1.0, write=MB, shuffle_id=0)
    events += run_task(0, 1, "b", start=0.0, seconds=1.0, write=MB, shuffle_id=0)
    feed(policy, events)
    out = feed(policy, [ExecutorAdded(time=1.5, executor_id="c", host="h", cores=1)])
    hints = [c for c in out if isinstance(c, SchedulingHints)][-1]
    assert hints.fallback == {0: ("c",)} and hints.forbidden == {}
    assert plan(["c", "a"], {0: 1}, {}, hints) == [("a", 0)], "a warm executor has a free slot: a takes the task"
    assert plan(["c", "a"], {0: 3}, {}, hints) == [("a", 0), ("c", 0)], "the warm ones are busy: c adds its capacity"
    out = feed(policy, run_task(0, 2, "c", start=2.0, seconds=3.0, write=MB, shuffle_id=0))
    assert [c for c in out if isinstance(c, SchedulingHints)][-1].fallback == {}, "c is warm once a task ended"
    off = make_policy("tr", TRConfig(lifetime="exponential:mean=1e7", duplication=False, warm_first=False))
    out = feed(off, events + [ExecutorAdded(time=1.5, executor_id="c", host="h", cores=1)])
    assert all(not (c.fallback or c.forbidden) for c in out if isinstance(c, SchedulingHints))


def test_no_fresh_executor_is_held_back_when_all_are_fresh() -> None:
    from trspark.engine.tr.scheduling import cold_limits

    state = JobState()
    for event in add_executors(["a", "b"]):
        state.apply(event)
    assert cold_limits(state.alive_executors()) == {}, "the application's start: every executor is fresh"
