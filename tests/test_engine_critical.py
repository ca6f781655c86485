"""Lineage-critical map tasks on stable executors, and the rebalance rule (engine only, hand-made events)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from engine_world import MB, feed, map_stage, run_task

from cost_model.lifetimes import Exponential, Raised, Stable, Weibull
from trspark.engine import placement
from trspark.engine.commands import Backup
from trspark.engine.events import ExecutorAdded, ExecutorRebalance, TaskStarted, Tick
from trspark.engine.registry import make_policy
from trspark.engine.settings import TRConfig
from trspark.engine.state import JobState
from trspark.engine.tr.checkpointing import Costs
from trspark.engine.tr.critical import StablePlacement, last_wait
from trspark.engine.tr.scheduling import GammaLimits
from trspark.keys import BY_FULL, ConfigError, parse_value

POOLS = (("ondemand", "stable"), ("spot", "exponential:mean=60"))


def _executor(executor_id: str, pool: str, cores: int = 2) -> ExecutorAdded:
    return ExecutorAdded(time=0.0, executor_id=executor_id, cores=cores, pool=pool)


def _mixed_state(od_busy_until: float | None = None) -> JobState:
    """Stable ``od`` and spot ``s1``, ``s2`` (2 cores each); map stage 0 (4 tasks of 1 s) has one output, on s1.

    With ``od_busy_until``, both of od's cores run a task of stage 1 (ET 100 s) started at 1 s.
    """
    state = JobState()
    events = [_executor("od", "ondemand"), _executor("s1", "spot"), _executor("s2", "spot"),
              map_stage(0, 4, 0), map_stage(1, 2, 1)]
    events += run_task(0, 0, "s1", start=0.0, seconds=1.0, write=MB, shuffle_id=0)
    if od_busy_until is not None:
        events += [TaskStarted(time=1.0, stage_id=1, partition=p, executor_id="od") for p in (0, 1)]
    for event in events:
        state.apply(event)
    return state


def _limits() -> GammaLimits:
    return GammaLimits(expected_task_seconds={0: 1.0, 1: 100.0})


def _priced(rule: StablePlacement, state: JobState, c_redo: float, c_bl: float = math.inf) -> None:
    rule.observe(state.outputs[(0, 0)], state, Costs(c_redo=c_redo, c_bl=c_bl, c_br=math.inf, peer=None))


def test_last_wait_serves_pending_tasks_in_turn_on_the_earliest_cores() -> None:
    wait, after = last_wait(np.array([0.0, 2.0]), pending=3, seconds=1.0)
    assert wait == pytest.approx(1.0)  # tasks at 0 s (core 0), 2 s (core 1), 1 s (core 0 again)
    assert list(after) == [2.0, 3.0]


def test_a_costly_task_waits_for_a_free_stable_core() -> None:
    state = _mixed_state()
    rule = StablePlacement(["ondemand"])
    _priced(rule, state, c_redo=5.0)  # 3 pending 1 s tasks on 2 free stable cores: the last starts in 1 s
    limits = rule.restrict(state, _limits())
    assert limits.spot_forbidden == {0: ("s1", "s2")} and limits.spot_fallback == {}
    hints = limits.hints()
    assert hints.forbidden == {0: ("s1", "s2")}
    # Free spot cores take nothing of stage 0 while it has a task running; the stable core does.
    assert placement.plan(["s1", "s2", "od"], {0: 3}, {0: 1}, hints) == [("od", 0)]


def test_a_task_that_would_wait_longer_than_it_saves_goes_to_spot_after_the_free_stable_cores() -> None:
    state = _mixed_state()
    rule = StablePlacement(["ondemand"])
    _priced(rule, state, c_redo=5.0, c_bl=0.2)  # a 0.2 s copy is what the engine would pay: below the 1 s wait
    limits = rule.restrict(state, _limits())
    assert limits.spot_forbidden == {} and limits.spot_fallback == {0: ("s1", "s2")}
    assert placement.plan(["s1", "s2", "od"], {0: 3}, {0: 1}, limits.hints()) == [("od", 0), ("s1", 0), ("s2", 0)]


def test_a_cheap_task_stays_on_spot() -> None:
    state = _mixed_state(od_busy_until=101.0)
    rule = StablePlacement(["ondemand"])
    _priced(rule, state, c_redo=5.0)  # the next stable core frees in ~100 s
    limits = rule.restrict(state, _limits())
    assert limits.spot_forbidden == {} and limits.spot_fallback == {}
    assert limits.hints() == _limits().hints()


def test_a_leaf_stage_with_no_priced_output_is_not_restricted() -> None:
    state = _mixed_state()
    rule = StablePlacement(["ondemand"])
    assert rule.spot_cost(state.stages[0]) == 0.0
    assert rule.restrict(state, _limits()).spot_forbidden == {}


def test_a_wait_is_priced_by_the_cores_that_read_the_stage() -> None:
    state = _mixed_state()  # stage 0's loss would hold up its 4 tasks' cores: Omega = 4
    # C_s = 3 core-seconds is 0.75 s of the readers' time: less than the 1 s the last task would wait.
    weighted, unweighted = StablePlacement(["ondemand"]), StablePlacement(["ondemand"], stall_weight=False)
    for rule in (weighted, unweighted):
        _priced(rule, state, c_redo=3.0)
    limits = weighted.restrict(state, _limits())
    assert limits.spot_forbidden == {} and limits.spot_fallback == {0: ("s1", "s2")}
    assert unweighted.restrict(state, _limits()).spot_forbidden == {0: ("s1", "s2")}


def test_a_full_stable_pool_lets_spot_take_the_task_after_the_wait() -> None:
    state = _mixed_state(od_busy_until=101.0)
    rule = StablePlacement(["ondemand"], stall_weight=False)  # costs and waits in the same seconds
    _priced(rule, state, c_redo=50.0)
    assert rule.restrict(state, _limits()).spot_forbidden == {}  # od's cores free in ~100 s: not worth 50 s
    _priced(rule, state, c_redo=1000.0)  # smoothed: C_s = 0.7 * 50 + 0.3 * 1000 = 335 s > the wait
    cost = rule.spot_cost(state.stages[0])
    assert cost == pytest.approx(335.0)
    limits = rule.restrict(state, _limits())
    assert limits.spot_forbidden == {0: ("s1", "s2")}
    state.apply(Tick(time=state.now + cost - 1.0))
    assert rule.restrict(state, _limits()).spot_forbidden == {0: ("s1", "s2")}
    state.apply(Tick(time=state.now + 2.0))  # waited longer than the loss it avoids: spot is a fallback
    limits = rule.restrict(state, _limits())
    assert limits.spot_forbidden == {} and limits.spot_fallback == {0: ("s1", "s2")}
    assert placement.plan(["s1", "s2"], {0: 3}, {0: 0}, limits.hints()) == [("s1", 0), ("s2", 0)]


def test_without_stable_executors_the_hints_are_the_gamma_rule_s() -> None:
    state = _mixed_state()
    for pools in ([], ["nothing-alive-here"]):
        rule = StablePlacement(pools)
        _priced(rule, state, c_redo=5.0)
        assert rule.cost == ({} if not pools else {0: 5.0})
        assert rule.restrict(state, _limits()) == _limits()


def _critical_policy(pool_lifetimes: tuple[tuple[str, str], ...]):  # type: ignore[no-untyped-def]
    """A tr policy on stable ``od`` (4 cores) and spot ``s1``, ``s2``; stage 0 ran on spot, stage 1 reads it.

    Outputs of 800 MB: a copy costs seconds, so an output on spot costs more than waiting for a free stable core.
    """
    config = TRConfig(lifetime="exponential:mean=20", duplication=False, pool_lifetimes=pool_lifetimes)
    policy = make_policy("tr", config)
    events = [_executor("od", "ondemand", cores=4), _executor("s1", "spot"), _executor("s2", "spot"),
              map_stage(0, 2, 0)]
    events += run_task(0, 0, "s1", start=0.0, seconds=10.0, write=800 * MB, shuffle_id=0)
    events += run_task(0, 1, "s2", start=0.0, seconds=10.0, write=800 * MB, shuffle_id=0)
    events += [map_stage(1, 4, 1, time=10.0, parents=[0], parent_shuffles=[0])]
    events += run_task(1, 0, "s1", start=10.0, seconds=2.0, write=800 * MB, shuffle_id=1)
    events += [Tick(time=12.5)]
    feed(policy, events)
    return policy


def test_the_policy_sends_a_lineage_critical_stage_to_stable_capacity() -> None:
    # Spot VMs living 20 s on average: stage 1's outputs cost more of its readers' time than any wait.
    policy = _critical_policy((("ondemand", "stable"), ("spot", "exponential:mean=20")))
    assert policy.critical.spot_cost(policy.state.stages[1]) > 0.0
    assert policy.hints is not None and policy.hints.forbidden.get(1) == ("s1", "s2")
    assert placement.plan(["s2", "od"], {1: 3}, {1: 1}, policy.hints) == [("od", 1)]


def test_the_policy_s_hints_are_unchanged_without_stable_pools() -> None:
    policy = _critical_policy(())
    assert policy.critical.cost == {}
    assert policy.limits is not None and policy.limits.spot_forbidden == {} == policy.limits.spot_fallback
    assert policy.hints == policy.limits.hints() == GammaLimits(
        stage_order=policy.limits.stage_order, max_task_seconds=policy.limits.max_task_seconds,
        expected_task_seconds=policy.limits.expected_task_seconds, drain=policy.limits.drain,
        cold=policy.limits.cold).hints()


# ---- the rebalance rule -------------------------------------------------------------------------
def test_raised_hazard_is_the_base_hazard_times_the_factor_after_the_onset() -> None:
    base = Weibull(shape=0.6, scale=33.0)
    raised = Raised(base, onset=5.0, factor=3.0)
    assert raised.cond_sf(10.0, 4.0) == pytest.approx(float(base.cond_sf(10.0, 4.0)) ** 3)
    assert raised.cond_sf(1.0, 3.0) == pytest.approx(float(base.cond_sf(1.0, 3.0)))  # before the onset
    assert raised.hazard(8.0) == pytest.approx(3.0 * float(base.hazard(8.0)))
    assert Raised(Exponential(mean=100.0), onset=0.0, factor=4.0).mean_residual_life(30.0) == pytest.approx(25.0)
    assert float(Raised(Stable(), onset=0.0, factor=10.0).cond_sf(0.0, 1e12)) == 1.0
    probs = raised.cell_fail_probs(10.0, np.array([0.0, 1.0, 1e12]))
    assert probs.sum() == pytest.approx(1.0) and (probs >= 0).all()
    with pytest.raises(ValueError, match="factor"):
        Raised(base, onset=0.0, factor=0.0)


def _rebalanced_policy(factor: float):  # type: ignore[no-untyped-def]
    config = TRConfig(lifetime="exponential:mean=100", duplication=False, rebalance_hazard_factor=factor)
    policy = make_policy("tr", config)
    events = [_executor("a", "spot", cores=1), _executor("b", "spot", cores=1), map_stage(0, 4, 0)]
    events += run_task(0, 0, "a", start=0.0, seconds=30.0, write=MB, shuffle_id=0)
    events += [Tick(time=31.0)]
    before = policy.hints
    feed(policy, events)
    before = policy.hints
    feed(policy, [ExecutorRebalance(time=32.0, executor_id="b", since=31.5), Tick(time=33.0)])
    return policy, before


def test_a_rebalance_recommendation_raises_the_hazard_and_keeps_long_tasks_off() -> None:
    policy, before = _rebalanced_policy(10.0)
    assert before is None or before.forbidden == {}  # a memoryless belief restricts no one
    b = policy.state.executors["b"]
    assert b.rebalance_at == 31.5
    residual = policy.knowledge.mean_residual_life([policy.state.executors["a"], b], policy.state.now)
    assert residual == pytest.approx([100.0, 10.0])
    assert policy.hints.forbidden == {0: ("b",)}  # 30 s tasks do not fit b's 10 s
    lineage_model = policy.state.lineage.executor("b").model
    assert isinstance(lineage_model, Raised) and lineage_model.factor_ == 10.0


@pytest.mark.parametrize(("factor", "backed_up"), [(1.0, False), (1000.0, True)])
def test_a_rebalance_recommendation_gets_the_executor_s_output_backed_up(factor: float, backed_up: bool) -> None:
    """A 60 s output that a 10 s copy would save: not worth it on a 1e5 s executor, worth it at 1000x the hazard."""
    config = TRConfig(lifetime="exponential:mean=100000", duplication=False, rebalance_hazard_factor=factor)
    policy = make_policy("tr", config)
    events = [_executor("a", "spot", cores=1), _executor("b", "spot", cores=1)]
    events += [map_stage(0, 2, 0), map_stage(1, 2, 1, parents=[0], parent_shuffles=[0])]
    events += run_task(0, 0, "b", start=0.0, seconds=60.0, write=4000 * MB, shuffle_id=0)
    assert not [c for c in feed(policy, events) if isinstance(c, Backup)]
    after = feed(policy, [ExecutorRebalance(time=61.0, executor_id="b"), Tick(time=62.0), Tick(time=67.0)])
    assert [(c.source, c.target) for c in after if isinstance(c, Backup)] == ([("b", "a")] if backed_up else [])


def test_a_rebalanced_spot_executor_weighs_more_in_the_stable_placement() -> None:
    state = _mixed_state()
    state.apply(ExecutorRebalance(time=2.0, executor_id="s2"))
    rule = StablePlacement(["ondemand"], rebalance_factor=10.0, stall_weight=False)
    _priced(rule, state, c_redo=0.15)  # 0.15 s < the last task's 1 s wait; 10 x 0.15 s is not
    limits = rule.restrict(state, _limits())
    assert limits.spot_forbidden == {0: ("s2",)} and limits.spot_fallback == {0: ("s1",)}


def test_factor_one_ignores_recommendations_and_a_bad_factor_names_the_key() -> None:
    policy, _ = _rebalanced_policy(1.0)
    assert not isinstance(policy.state.lineage.executor("b").model, Raised)
    key = BY_FULL["spark.trspark.rebalance.hazardFactor"]
    assert parse_value(key, "4") == 4.0
    with pytest.raises(ConfigError, match="spark.trspark.rebalance.hazardFactor"):
        parse_value(key, "0")
