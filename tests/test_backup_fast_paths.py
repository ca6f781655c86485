"""The backup terms' shortcuts give bit for bit what the plain computations give, and their caches follow the clock."""

from __future__ import annotations

import numpy as np
import pytest
from engine_world import MB, add_executors, feed, map_stage, run_task

from cost_model.backup import BackupCosts
from cost_model.lifetimes import Exponential, LifetimeModel, Weibull
from cost_model.lineage import Lineage
from cost_model.recompute import Recompute
from cost_model.timegrid import TimeGrid
from cost_model.windows import Windows
from trspark.engine.events import Event, ExecutorAdded, StageCompleted
from trspark.engine.registry import make_policy
from trspark.engine.settings import TRConfig
from trspark.engine.tr.costs import CostEstimator

GRID = TimeGrid.geometric(400.0, 48, first=0.05)


def _lineage(model: LifetimeModel) -> Lineage:
    """Six executors of ``model`` (one stable-ish Weibull among them), a two-stage lineage on three of them."""
    lineage = Lineage()
    for n in range(6):
        lineage.add_executor(f"e{n}", Weibull(shape=1.4, scale=900.0) if n == 5 else model, started=-7.0 * n)
    lineage.add_output("a", 0, "e1", 4.0, 1e8)
    lineage.add_output("a", 1, "e2", 6.0, 3e8)
    lineage.add_output("k", 0, "e0", 3.0, 2e9, parents=["a"])
    lineage.add_output("k", 1, "e3", 2.0, 5e7, parents=["a"])
    return lineage


def _plain_window(table, grid: TimeGrid, slots, lo: float, hi: float, ends):  # type: ignore[no-untyped-def]
    """The window as np.where picks it (the definition the fast path must reproduce)."""
    edges = np.maximum(grid.edges_to(hi), lo)
    if ends is None:
        ends = table.cdf_at(np.array([lo, hi]), slots)
    rows = table.cdf if slots is None else table.cdf[list(slots)]
    return edges, np.where(grid.edges <= lo, ends[:, 0:1], np.where(grid.edges >= hi, ends[:, 1:2], rows))


@pytest.mark.parametrize("model", [Exponential(mean=60.0), Weibull(shape=0.7, scale=80.0)])
def test_windows_equal_their_definition_bit_for_bit(model: LifetimeModel) -> None:
    table = Recompute(_lineage(model), GRID).table
    windows = Windows(GRID)
    rng = np.random.default_rng(3)
    cuts = [0.0, *GRID.edges[[1, 7, 30, -1]].tolist(), *rng.uniform(0.0, 400.0, 20).tolist()]
    for lo in cuts:
        for hi in cuts:
            if hi < lo:
                continue
            for slots in ([2], [0, 4, 5], None):
                want = _plain_window(table, GRID, slots, lo, hi, None)
                got = windows.get(table, slots, lo, hi, None)
                np.testing.assert_array_equal(got[0], want[0])
                np.testing.assert_array_equal(got[1], want[1])
            ends = np.array([[0.25, 0.5]])
            want = _plain_window(table, GRID, [3], lo, hi, ends)
            edges, row = windows.row(table, 3, lo, hi, 0.25, 0.5)
            np.testing.assert_array_equal(edges, want[0])
            np.testing.assert_array_equal(row, want[1][0])
    peers = np.arange(6)
    for t in cuts:
        np.testing.assert_array_equal(windows.column(table, t)[peers], table.cdf_interpolated(np.array([t]), peers)[:, 0])


def test_columns_and_windows_follow_a_new_table() -> None:
    lineage = _lineage(Weibull(shape=0.7, scale=80.0))
    recompute = Recompute(lineage, GRID, max_staleness=1.0)
    windows = Windows(GRID)
    before = windows.column(recompute.table, 33.0).copy()
    kept = windows.get(recompute.table, [1], 0.0, 33.0, None)[1].copy()
    recompute.advance(50.0)  # older executors: other grid values
    assert not np.array_equal(windows.column(recompute.table, 33.0), before)
    np.testing.assert_array_equal(windows.column(recompute.table, 33.0), Windows(GRID).column(recompute.table, 33.0))
    assert not np.array_equal(windows.get(recompute.table, [1], 0.0, 33.0, None)[1], kept)


@pytest.mark.parametrize("model", [Exponential(mean=60.0), Weibull(shape=0.7, scale=80.0)])
def test_backup_costs_after_a_refresh_equal_a_fresh_estimate(model: LifetimeModel) -> None:
    lineage = _lineage(model)
    costs = BackupCosts(Recompute(lineage, GRID, max_staleness=1.0), 4e8, 1e8, 1e12, latency=0.05)
    for t_max in (0.01, 30.0, 120.0):
        costs.every_peer("k", 0, t_max)
        costs.remote("k", 1, 1e8)
    costs.recompute.advance(25.0)
    lineage.add_location("k", 0, "e4")
    fresh_recompute = Recompute(lineage, GRID, now=25.0, max_staleness=1.0)
    fresh = BackupCosts(fresh_recompute, 4e8, 1e8, 1e12, latency=0.05)
    for t_max in (0.01, 30.0, 120.0, 1000.0):
        got, want = costs.every_peer("k", 0, t_max), fresh.every_peer("k", 0, t_max)
        assert got is not None and want is not None
        assert got.base == want.base
        np.testing.assert_array_equal(got.peer_loss, want.peer_loss)
        assert [ex.executor_id for ex in got.peers.executors] == ["e1", "e2", "e3", "e5"]
        assert costs.remote("k", 1, t_max, concurrent=2) == fresh.remote("k", 1, t_max, concurrent=2)
        assert costs.remote_floor("k", 1, t_max) == fresh.remote_floor("k", 1, t_max)


def test_peer_positions_skip_the_holders() -> None:
    lineage = _lineage(Exponential(mean=60.0))
    lineage.add_location("k", 0, "e4")
    lineage.add_location("k", 0, "e2")
    priced = BackupCosts(Recompute(lineage, GRID), 4e8, 1e8, 1e12).every_peer("k", 0, 30.0)
    assert priced is not None
    names = [ex.executor_id for ex in priced.peers.executors]
    assert names == ["e1", "e3", "e5"]
    assert [priced.peers.position(f"e{n}") for n in range(6)] == [None, 0, None, 1, None, 2]
    assert priced.peers.slots.tolist() == [lineage.executor(name).slot for name in names]


def test_exponential_shortcuts_equal_the_generic_formulas() -> None:
    model = Exponential(mean=37.0)
    rng = np.random.default_rng(11)
    ages = rng.uniform(0.0, 500.0, (5, 1))
    times = np.concatenate(([0.0, -1.0, 1e8], rng.exponential(40.0, 40)))
    np.testing.assert_array_equal(model.cond_sf(ages, times), LifetimeModel.cond_sf(model, ages, times))
    np.testing.assert_array_equal(model.cond_sf(3.0, times), LifetimeModel.cond_sf(model, 3.0, times))
    for a, b in ((0.5, 1e8), (3.0, 2.0), (0.0, 0.0), (12.5, 40.0), (1e-9, 1e-3)):
        assert model.prob_fail(8.0, a, b) == LifetimeModel.prob_fail(model, 8.0, a, b)
        assert model.cond_sf(8.0, a) == LifetimeModel.cond_sf(model, 8.0, a)
    np.testing.assert_array_equal(model.prob_fail(8.0, times, 1e8), LifetimeModel.prob_fail(model, 8.0, times, 1e8))


def test_the_kept_life_copy_terms_equal_fresh_ones() -> None:
    estimator = CostEstimator.__new__(CostEstimator)
    estimator._life_b2_kept = {}
    aged, memoryless = Weibull(shape=0.7, scale=80.0), Exponential(mean=50.0)
    for model in (aged, memoryless):
        for age in (0.0, 20.0, 300.0):
            for seconds in (0.5, 4.0, 0.5):
                want = seconds * float(model.prob_fail(age, seconds, 1e8))
                assert estimator._life_b2((model, age), seconds) == want
    assert estimator._life_b2(None, 4.0) == 4.0


@pytest.mark.parametrize("lifetime", ["exponential:mean=5.0", "exponential:mean=300.0", "weibull:shape=0.6,scale=20"])
@pytest.mark.parametrize("t_max", [0.5, 8.0, 90.0])
def test_loaded_peer_groups_left_out_by_their_bounds_never_were_the_cheapest(
        lifetime: str, t_max: float, monkeypatch: pytest.MonkeyPatch) -> None:
    # A group of peers already receiving copies is priced only when its bounds (without C_P,
    # then with its lowest C_P) let it win: the answer is that of pricing every group in full.
    policy = make_policy("tr", TRConfig(lifetime=lifetime, duplication=False, scheduling=False))
    names = ["a", "b", "c", "d", "e", "f"]
    events = [*add_executors(names, cores=2), map_stage(0, 4, 0)]
    for partition, executor in enumerate(["a", "b", "a", "c"]):
        events += run_task(0, partition, executor, start=0.0, seconds=2.0 + partition, write=(1 + partition) * 200 * MB,
                           shuffle_id=0)
    events += [StageCompleted(time=6.0, stage_id=0), map_stage(1, 4, None, time=6.0, parents=[0], parent_shuffles=[0])]
    feed(policy, events)
    estimator, state = policy.costs, policy.state
    blocks = [state.outputs[(0, partition)] for partition in range(4)]
    loads_cases = [{}, {"d": 1}, {"d": 1, "e": 2}, {"b": 1, "c": 1, "d": 3, "e": 1, "f": 2},
                   {name: 1 + n % 3 for n, name in enumerate(names)}]
    quick = [estimator.best_local(b, state, t_max, 2.0, loads, ("f",)) for b in blocks for loads in loads_cases]
    monkeypatch.setattr(type(estimator), "_cannot_win", lambda *args: False)
    full = [estimator.best_local(b, state, t_max, 2.0, loads, ("f",)) for b in blocks for loads in loads_cases]
    assert quick == full


@pytest.mark.parametrize("model", [Exponential(mean=60.0), Weibull(shape=0.7, scale=80.0)])
def test_one_slot_of_the_failure_cdf_equals_its_row_among_many(model: LifetimeModel) -> None:
    table = Recompute(_lineage(model), GRID, now=13.0).table
    times = np.array([0.0, 0.3, 7.5, 150.0, 400.0, 2e4])
    for slot in range(6):
        many = table.cdf_at(times, [slot, (slot + 1) % 6, (slot + 3) % 6])[0]
        np.testing.assert_array_equal(table.cdf_at(times, [slot]), many[None, :])
        np.testing.assert_array_equal(table.cdf_at_slot(times, slot), many)


@pytest.mark.parametrize("model", [Exponential(mean=60.0), Weibull(shape=0.7, scale=80.0), Weibull(shape=2.5, scale=150.0)])
def test_the_floor_of_a_slower_copys_peer_loss_is_below_its_price(model: LifetimeModel) -> None:
    # The floor from the full-bandwidth prices never exceeds C_P priced in full at the slower copy.
    rng = np.random.default_rng(17)
    lineage = _lineage(model)
    costs = BackupCosts(Recompute(lineage, GRID, now=float(rng.uniform(0.0, 50.0))), 4e8, 1e8, 1e12, latency=0.05)
    pruning = 0
    for _ in range(300):
        block = ("k", int(rng.integers(2))) if rng.random() < 0.7 else ("a", int(rng.integers(2)))
        t_max = float(rng.choice([rng.uniform(0.0, 2.0), rng.uniform(0.0, 60.0), rng.uniform(0.0, 400.0)]))
        priced = costs.every_peer(*block, t_max)
        assert priced is not None
        positions = np.sort(rng.choice(len(priced.peers.executors), int(rng.integers(1, 4)), replace=False))
        bandwidth = 4e8 / float(rng.choice([1.5, 2.0, 5.0, 40.0, 1e3]))
        option = costs.peer_option(*block, t_max, priced.peers.slots[positions], bandwidth)
        floor = costs.slower_peer_loss_floor(priced, positions, option.seconds)
        assert floor <= float(option.peer_loss.min())
        pruning += floor > 0.0
    assert pruning > 30


@pytest.mark.parametrize("seed", range(4))
def test_pruned_loaded_peer_groups_give_the_choice_of_pricing_every_group(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Random loads on peers of several laws: best_local with its bounds equals pricing every group in full.
    rng = np.random.default_rng(seed)
    pools = (("ondemand", "stable"), ("spot", "exponential:mean=40"), ("old", "weibull:shape=0.7,scale=60"))
    config = TRConfig(lifetime="exponential:mean=40", pool_lifetimes=pools, knowledge="notices", duplication=False,
                      scheduling=False)
    policy = make_policy("tr", config)
    names = [f"x{n}" for n in range(9)]
    events: list[Event] = [ExecutorAdded(time=0.0, executor_id=name, cores=2, pool=pools[n % 3][0])
                           for n, name in enumerate(names)]
    events.append(map_stage(0, 6, 0))
    for partition in range(6):
        events += run_task(0, partition, names[int(rng.integers(1, 9))], start=0.0, seconds=float(rng.uniform(1.0, 9.0)),
                           write=int(rng.uniform(1.0, 900.0) * MB), shuffle_id=0)
    events += [StageCompleted(time=10.0, stage_id=0), map_stage(1, 6, None, time=10.0, parents=[0], parent_shuffles=[0])]
    feed(policy, events)
    estimator, state = policy.costs, policy.state
    cases = []
    for _ in range(40):
        loads = {name: int(rng.integers(0, 6)) for name in names if rng.random() < 0.6}
        cases.append((state.outputs[(0, int(rng.integers(6)))], float(rng.uniform(0.1, 300.0)),
                      float(rng.uniform(0.5, 4.0)), loads, tuple(rng.choice(names, int(rng.integers(0, 2))).tolist())))
    quick = [estimator.best_local(b, state, t_max, weight, loads, gone) for b, t_max, weight, loads, gone in cases]
    monkeypatch.setattr(type(estimator), "_cannot_win", lambda *args: False)
    full = [estimator.best_local(b, state, t_max, weight, loads, gone) for b, t_max, weight, loads, gone in cases]
    assert quick == full
