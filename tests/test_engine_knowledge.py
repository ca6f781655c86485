"""Per-executor knowledge: each pool's lifetime model in the costs, stable peers, re-sent pools, notices."""

from __future__ import annotations

import pytest
from engine_world import MB, feed, map_stage, run_task

from trspark.engine.commands import Backup
from trspark.engine.events import REMOTE, Event, ExecutorAdded, ExecutorLost, ExecutorNotice, Tick
from trspark.engine.registry import make_policy
from trspark.engine.settings import TRConfig
from trspark.engine.tr.checkpointing import decide
from trspark.engine.tr.costs import NOTICE_STALENESS
from trspark.engine.tr.policy import TRPolicy

SPOT = "exponential:mean=10"


def _policy(*, pools: tuple[tuple[str, str], ...] = (("ondemand", "stable"), ("spot", SPOT)),
            knowledge: str = "notices", **options: object) -> TRPolicy:
    config = TRConfig(lifetime=SPOT, pool_lifetimes=pools, knowledge=knowledge, duplication=False,
                      scheduling=False, **options)  # type: ignore[arg-type]
    policy = make_policy("tr", config)
    assert isinstance(policy, TRPolicy)
    return policy


def _executors(pools: dict[str, str]) -> list[Event]:
    return [ExecutorAdded(time=0.0, executor_id=e, cores=1, pool=p) for e, p in pools.items()]


def _job(writer: str, *, seconds: float = 20.0) -> list[Event]:
    """Stage 0 (2 tasks, the second still to run) writes shuffle 0 read by stage 1; task 0 ran on ``writer``."""
    return [map_stage(0, 2, 0), map_stage(1, 2, None, parents=[0], parent_shuffles=[0]),
            *run_task(0, 0, writer, start=0.0, seconds=seconds, write=10 * MB, shuffle_id=0)]


def _backups(policy: TRPolicy, events: list[Event]) -> list[tuple[str, str]]:
    return [(c.source, c.target) for c in feed(policy, events) if isinstance(c, Backup)]


def test_a_stable_peer_is_chosen_by_cost_over_remote_and_over_a_spot_peer() -> None:
    policy = _policy()
    assert _backups(policy, [*_executors({"a": "spot", "b": "spot", "od": "ondemand"}), *_job("a")]) == [("a", "od")]
    costs = policy._costs(policy.state.outputs[(0, 0)])
    assert costs.peer == "od" and costs.c_bl < costs.c_br < costs.c_redo
    # the same cluster believed alike (one shared model): the peer looks as risky as the source, remote wins
    alike = _policy(pools=())
    assert _backups(alike, [*_executors({"a": "spot", "b": "spot", "od": "ondemand"}), *_job("a")]) == [("a", REMOTE)]


def test_the_steadier_of_two_spot_peers_is_chosen() -> None:
    pools = (("short", "exponential:mean=5"), ("long", "exponential:mean=10000"))
    policy = _policy(pools=pools, targets="local")
    backups = _backups(policy, [*_executors({"a": "short", "s": "short", "l": "long"}), *_job("a")])
    assert backups == [("a", "l")]


def test_outputs_on_a_stable_executor_are_not_backed_up() -> None:
    policy = _policy()
    assert _backups(policy, [*_executors({"a": "spot", "od": "ondemand"}), *_job("od")]) == []
    block = policy.state.outputs[(0, 0)]
    assert policy.state.is_safe(block) and policy._costs(block).c_redo == 0.0
    # even once the safety belt has the engine copy every unsafe output
    policy.belt.on = True
    policy._plan(block)
    assert not policy.stack.is_busy(block.block_id)


def test_a_resent_executor_added_changes_the_model_in_the_costs() -> None:
    policy = _policy()
    feed(policy, [*_executors({"a": "spot", "b": "spot"}), *_job("a")])
    before = policy._costs(policy.state.outputs[(0, 0)])
    assert before.c_redo > 0.0
    # the driver learns later that a is on-demand capacity
    feed(policy, [ExecutorAdded(time=20.5, executor_id="a", cores=1, pool="ondemand", vm_started=0.0)])
    assert policy.state.executors["a"].pool == "ondemand"
    assert policy.state.lineage is not None
    assert policy.state.lineage.executor("a").model is policy.knowledge.pools["ondemand"]
    after = policy._costs(policy.state.outputs[(0, 0)])
    assert after.c_redo == 0.0 and policy.state.is_safe(policy.state.outputs[(0, 0)])


def test_a_peer_busy_receiving_copies_is_priced_at_its_shared_bandwidth() -> None:
    policy = _policy()
    feed(policy, [*_executors({"a": "spot", "b": "spot", "od": "ondemand"}), *_job("a")])
    block = policy.state.outputs[(0, 0)]
    t_max = policy.horizon(policy.state, block)
    free = policy.costs.costs(block, policy.state, t_max, weight=1.0, remote_in_flight=0)
    busy = policy.costs.costs(block, policy.state, t_max, weight=1.0, remote_in_flight=0, peer_loads={"od": 40})
    assert decide(free) == "od" and free.c_bl < free.c_br
    # 40 copies into od: each moves at 1/41 of the link, so the store is the cheaper target now
    assert busy.peer == "od" and busy.c_bl > 10 * free.c_bl and decide(busy) == REMOTE
    # still, a spot peer that would die before the block is read costs more than a stable one 100 copies deep
    assert policy.costs.best_local(block, policy.state, t_max, 1.0, {"od": 100})[1] == "od"


@pytest.mark.parametrize(("knowledge", "priced"), [("notices", True), ("indeterministic", False)])
def test_a_notice_changes_the_costs_by_default_and_not_when_ignored(knowledge: str, priced: bool) -> None:
    policy = _policy(pools=(), knowledge=knowledge)
    feed(policy, [*_executors({"a": "spot", "b": "spot"}), *_job("a", seconds=1.0)])
    block = policy.state.outputs[(0, 0)]
    before = policy._costs(block).c_redo
    feed(policy, [ExecutorNotice(time=1.5, executor_id="a", deadline=2.0, kind="notice")])
    after = policy._costs(block).c_redo
    assert (after != before) is priced
    if priced:  # a certain loss half a second from now: the whole re-computation
        assert after > before


@pytest.mark.parametrize("knowledge", ["notices", "deterministic"])
def test_the_costs_follow_the_clock_only_while_a_deadline_is_pending(knowledge: str) -> None:
    # One memoryless law for all: the failure table may lag a period, until a notice names a
    # death time; once that executor is gone, the laws are the same again.
    policy = _policy(pools=(), knowledge=knowledge)
    period_staleness = policy.config.period * 0.999
    feed(policy, [*_executors({"a": "spot", "b": "spot", "c": "spot"}), *_job("a", seconds=1.0)])
    recompute = policy.costs.recompute
    assert recompute.max_staleness == pytest.approx(period_staleness)
    assert policy.knowledge.one_memoryless_law(bool(policy.state.with_deadline))

    feed(policy, [ExecutorNotice(time=1.5, executor_id="c", deadline=3.0, kind="notice")])
    assert policy.state.with_deadline == {"c"}
    assert recompute.max_staleness == NOTICE_STALENESS
    assert not policy.knowledge.one_memoryless_law(bool(policy.state.with_deadline))

    feed(policy, [ExecutorLost(time=3.0, executor_id="c"), Tick(time=3.5)])
    assert policy.state.with_deadline == set()
    assert recompute.max_staleness == pytest.approx(period_staleness)
    assert policy.knowledge.one_memoryless_law(False)


def test_a_bad_pool_spec_names_the_pool() -> None:
    with pytest.raises(ValueError, match="pool 'spot'.*known:.*stable"):
        _policy(pools=(("spot", "sometimes"),))


def test_fitted_refits_each_pool_on_its_own_evictions_and_never_a_stable_pool() -> None:
    from cost_model.lifetimes import Empirical

    policy = _policy(knowledge="fitted", pools=(("ondemand", "stable"), ("spot", "exponential:mean=1000")))
    events: list[Event] = [ExecutorAdded(time=0.0, executor_id="od", cores=1, pool="ondemand")]
    for i in range(5):  # five spot executors evicted after 2, 4, ... 10 s
        events += [ExecutorAdded(time=0.0, executor_id=f"s{i}", cores=1, pool="spot"),
                   ExecutorLost(time=2.0 * (i + 1), executor_id=f"s{i}")]
    feed(policy, events)
    knowledge = policy.knowledge
    assert isinstance(knowledge.pools["spot"], Empirical) and knowledge.pools["spot"].mean() < 20.0
    assert knowledge.pools["ondemand"].spec() == "stable" and knowledge.shared is knowledge.prior
    assert "od" in policy.state.safe_holders
