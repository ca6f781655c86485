"""The backup terms' shortcuts give bit for bit what the plain computations give, and their caches follow the clock."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
from engine_world import MB, add_executors, feed, map_stage, run_task

from cost_model import failure
from cost_model.backup import BackupCosts
from cost_model.lifetimes import Deterministic, Empirical, Exponential, LifetimeModel, Notice, Stable, Weibull
from cost_model.lifetimes.lognormal import LogNormal
from cost_model.lineage import REMOTE, Lineage
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
        assert costs.remote_option("k", 1, t_max).floor == fresh.remote_option("k", 1, t_max).floor


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


@pytest.mark.parametrize("model", [Exponential(mean=60.0), Weibull(shape=0.7, scale=80.0)])
def test_points_of_one_slot_are_kept_and_the_missing_ones_evaluated_in_one_call(model: LifetimeModel,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    table = Recompute(_lineage(model), GRID, now=13.0).table
    calls: list[int] = []
    evaluate = model.cond_cdf_values
    monkeypatch.setattr(model, "cond_cdf_values", lambda age, times: calls.append(len(times)) or evaluate(age, times))
    expected = table.cdf_at_slot(np.array([0.3, 7.5, 150.0, 2e4]), 2)
    first = table.cdf_points(2, (7.5, 0.3, 150.0))
    np.testing.assert_allclose(first, expected[[1, 0, 2]], rtol=1e-14, atol=0.0)
    assert table.cdf_points(2, (150.0, 2e4, 7.5)) == [first[2], *table.cdf_points(2, (2e4,)), first[0]]
    assert calls == [3, 1]  # only 2e4 was missing the second time
    np.testing.assert_allclose(table.cdf_points(3, (7.5,)), table.cdf_at_slot(np.array([7.5]), 3), rtol=1e-14, atol=0.0)
    assert calls == [3, 1, 1]
    # Full: the values kept are dropped, those asked for evaluated again together.
    monkeypatch.setattr(failure, "POINTS_KEPT", 5)
    again = table.cdf_points(2, (0.3, 2e4, 99.0))
    assert again[:2] == [first[1], table.cdf_points(2, (2e4,))[0]] and calls == [3, 1, 1, 3]


@pytest.mark.parametrize("model", [Exponential(mean=60.0), Exponential(rate=3e-3), Stable(),
                                   Weibull(shape=0.7, scale=80.0), LogNormal(median=40.0, sigma=1.2)])
def test_the_few_ends_of_one_decision_are_the_laws_values(model: LifetimeModel) -> None:
    # A closed form (exponential, stable) gives what the arrays give, up to the exp's rounding.
    times = [0.0, -1.0, 1e-6, 0.3, 7.5, 150.0, 2e4, math.inf]
    for age in (0.0, 13.0, 400.0):
        arrays = (1.0 - model.cond_sf(np.array([[age]]), np.array(times)))[0]
        np.testing.assert_allclose(model.cond_cdf_values(age, times), arrays, rtol=1e-15, atol=0.0)
        assert all(0.0 <= value <= 1.0 for value in model.cond_cdf_values(age, times))


@pytest.mark.parametrize("model", [Exponential(mean=60.0), Weibull(shape=0.7, scale=80.0)])
def test_the_lowest_interpolated_cdf_bounds_every_rows_from_below(model: LifetimeModel) -> None:
    # Weibull rows differ with the executors' ages: the bound may be lower than the least row.
    # Exponential rows (but the sixth executor's) are one row: the bound is the least row exactly.
    table = Recompute(_lineage(model), GRID, now=13.0).table
    windows = Windows(GRID)
    for slots in (np.arange(6), np.arange(5)):
        for time in np.linspace(GRID.edges[1], GRID.horizon, 97):
            least = float(windows.column(table, float(time))[slots].min())
            bound = windows.lowest_at(table, slots, float(time))
            assert bound <= least
            if isinstance(model, Exponential) and slots.size == 5:
                assert bound == least


FLOOR_MODELS = [Exponential(mean=60.0), Weibull(shape=0.7, scale=80.0), Weibull(shape=2.5, scale=150.0)]


def _random_blocks(model: LifetimeModel, seed: int, more_ends: tuple[float, ...] = ()
                   ) -> Iterator[tuple[BackupCosts, np.random.Generator, tuple[str, int], float]]:
    """300 random (block, T) of :func:`_lineage`'s outputs, with the costs over them and the generator that drew them."""
    rng = np.random.default_rng(seed)
    costs = BackupCosts(Recompute(_lineage(model), GRID, now=float(rng.uniform(0.0, 50.0))), 4e8, 1e8, 1e12, latency=0.05)
    for _ in range(300):
        block = ("k", int(rng.integers(2))) if rng.random() < 0.7 else ("a", int(rng.integers(2)))
        t_max = float(rng.choice([rng.uniform(0.0, 2.0), rng.uniform(0.0, 60.0), rng.uniform(0.0, 400.0), *more_ends]))
        yield costs, rng, block, t_max


@pytest.mark.parametrize("model", FLOOR_MODELS)
def test_the_floor_of_a_slower_copys_peer_loss_is_below_its_price(model: LifetimeModel) -> None:
    # The floor from the full-bandwidth prices never exceeds C_P priced in full at the slower copy.
    pruning = 0
    for costs, rng, block, t_max in _random_blocks(model, 17):
        priced = costs.every_peer(*block, t_max)
        assert priced is not None
        positions = np.sort(rng.choice(len(priced.peers.executors), int(rng.integers(1, 4)), replace=False))
        bandwidth = 4e8 / float(rng.choice([1.5, 2.0, 5.0, 40.0, 1e3]))
        option = costs.peer_option(*block, t_max, priced.peers.slots[positions], bandwidth)
        floor = costs.slower_peer_loss_floor(priced, positions, option.seconds)
        assert floor <= float(option.peer_loss.min())
        pruning += floor > 0.0
    assert pruning > 30


@pytest.mark.parametrize("model", FLOOR_MODELS)
def test_the_floor_of_every_peers_loss_is_below_each_price(model: LifetimeModel) -> None:
    # The floor, read before any peer is priced, never exceeds the C_P of a peer priced in full.
    pruning = 0
    for costs, _rng, block, t_max in _random_blocks(model, 23, more_ends=(900.0,)):
        priced = costs.every_peer(*block, t_max)
        found = costs.peer_loss_floor(*block, t_max)
        assert priced is not None and found is not None
        seconds, floor = found
        assert seconds == priced.block.seconds
        assert 0.0 <= floor <= float(priced.peer_loss.min())
        pruning += floor > 0.0
    assert pruning > 100


@pytest.mark.parametrize("model", FLOOR_MODELS)
def test_the_ceiling_of_a_copy_to_the_store_is_above_its_price(model: LifetimeModel) -> None:
    # The bound read without the windows never falls below C_BR priced in full, at any weight.
    near = 0
    for costs, rng, block, t_max in _random_blocks(model, 29, more_ends=(1e8,)):
        option = costs.remote_option(*block, t_max, concurrent=int(rng.integers(4)))
        priced = option.cost()
        weight = float(rng.choice([1.0, 3.0, 40.0]))
        exact = priced.b1 + weight * priced.redo + priced.b2
        ceiling = option.ceiling(weight)
        assert exact <= ceiling
        near += ceiling <= 1.5 * exact
    assert near > 150  # a bound close enough to decide with


def test_no_floor_when_every_live_executor_holds_the_block() -> None:
    lineage = Lineage()
    lineage.add_executor("a", Exponential(mean=60.0), started=0.0)
    lineage.add_output("s", 0, "a", 2.0, 1e8)
    costs = BackupCosts(Recompute(lineage, GRID), 4e8, 1e8, 1e12)
    assert costs.peer_loss_floor("s", 0, 30.0) is None and costs.every_peer("s", 0, 30.0) is None


LONG_LIVED = (("ondemand", "stable"), ("spot", "exponential:mean=40"), ("old", "weibull:shape=0.7,scale=60"))
# Means of a few seconds: a grid horizon of 35 s, which copies of 34 s latency and more cross.
SHORT_LIVED = (("ondemand", "stable"), ("spot", "exponential:mean=3"), ("steps", "empirical:durations=1;2;2;9;30"))


@pytest.mark.parametrize(("pools", "latency"), [(LONG_LIVED, 0.05), (SHORT_LIVED, 0.05), (SHORT_LIVED, 34.0)])
@pytest.mark.parametrize("seed", range(4))
def test_pruned_loaded_peer_groups_give_the_choice_of_pricing_every_group(
        seed: int, pools: tuple[tuple[str, str], ...], latency: float, monkeypatch: pytest.MonkeyPatch) -> None:
    # Random loads on peers of several laws: best_local with its bounds equals pricing every group in full.
    rng = np.random.default_rng(seed)
    config = TRConfig(lifetime=pools[1][1], pool_lifetimes=pools, knowledge="notices", duplication=False,
                      scheduling=False, backup_latency=latency)
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


def _random_lineage(rng: np.random.Generator) -> Lineage:
    """Up to eight executors of assorted laws, up to four shuffles reading earlier ones, some copies, backups, losses."""
    laws: list[LifetimeModel] = [
        Exponential(mean=float(rng.uniform(5.0, 500.0))), Weibull(shape=float(rng.uniform(0.4, 3.0)), scale=float(rng.uniform(10.0, 400.0))),
        Stable(), Deterministic(float(rng.uniform(1.0, 300.0))), Notice(Exponential(mean=100.0), float(rng.uniform(5.0, 200.0))),
        Empirical([1.0, 2.0, 2.0, float(rng.uniform(5.0, 90.0))]),
    ]
    lineage = Lineage()
    names = [f"e{n}" for n in range(int(rng.integers(2, 9)))]
    for name in names:
        lineage.add_executor(name, laws[int(rng.integers(len(laws)))], started=-float(rng.uniform(0.0, 100.0)))
    for shuffle in range(int(rng.integers(1, 5))):
        parents = [p for p in range(shuffle) if rng.random() < 0.6]
        for index in range(int(rng.integers(1, 6))):
            lineage.add_output(shuffle, index, names[int(rng.integers(len(names)))], float(rng.uniform(0.1, 20.0)),
                               float(rng.uniform(1e6, 2e9)), parents=parents)
            draw = rng.random()
            if draw < 0.3:
                for _ in range(int(rng.integers(1, 3))):
                    lineage.add_location(shuffle, index, names[int(rng.integers(len(names)))])
            elif draw < 0.35:
                lineage.add_location(shuffle, index, REMOTE)
            elif draw < 0.4:
                lineage.mark_consumed(shuffle, index)
    if rng.random() < 0.3 and len(names) > 2:
        lineage.remove_executor(names[-1])  # its outputs are lost or left on their copies
    return lineage


def test_er_is_non_decreasing_in_time() -> None:
    # Every term of Er is a sum of products of non-negative, non-decreasing functions of the F_e:
    # in floating point it may drop by about an ulp, never more.
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(300):
        lineage = _random_lineage(rng)
        grid = TimeGrid.geometric(float(rng.uniform(50.0, 2000.0)), int(rng.integers(8, 80)), first=0.05)
        recompute = Recompute(lineage, grid, depth=int(rng.integers(0, 6)), now=float(rng.uniform(0.0, 50.0)))
        for shuffle in lineage.shuffle_ids():
            for index in lineage.shuffle(shuffle).outputs:
                er = recompute.er(shuffle, index)
                assert np.all(np.diff(er) >= -1e-14 * er[1:])
                checked += 1
    assert checked > 1500


def test_a_slower_copy_costs_at_least_the_floor_of_its_copy_terms() -> None:
    # C_B1 and C_R of a copy at a lower bandwidth are at least slower_copy_floor's: the full-bandwidth
    # copy's own within the horizon; past it, C_B1's floor (the cells past it depend on BT).
    rng = np.random.default_rng(23)
    past_horizon = lower_b1 = 0
    for _ in range(300):
        lineage = _random_lineage(rng)
        grid = TimeGrid.geometric(float(rng.uniform(20.0, 400.0)), int(rng.integers(8, 80)), first=0.05)
        costs = BackupCosts(Recompute(lineage, grid, depth=3, now=float(rng.uniform(0.0, 50.0))), 4e8, 1e8, 1e12,
                            latency=float(rng.choice([0.0, 0.05, 30.0, 300.0])))
        for shuffle in lineage.shuffle_ids():
            for index, out in lineage.shuffle(shuffle).outputs.items():
                if not out.locations or out.remote or out.consumed:
                    continue
                t_max = float(rng.choice([rng.uniform(0.0, 5.0), rng.uniform(0.0, 100.0), rng.uniform(0.0, 1000.0)]))
                priced = costs.every_peer(shuffle, index, t_max)
                if priced is None:
                    continue
                floor = costs.slower_copy_floor(priced)
                assert floor is priced.base or priced.base.seconds > grid.horizon
                past_horizon += floor is not priced.base
                for load in (1, 2, 5, 40):
                    slower = costs.peer_option(shuffle, index, t_max, priced.peers.slots[:1], 4e8 / (load + 1)).terms()
                    assert slower.b1 >= floor.b1 * (1.0 - 1e-12)
                    assert slower.redo >= floor.redo * (1.0 - 1e-12)
                    lower_b1 += slower.b1 < priced.base.b1 * (1.0 - 1e-9)
    assert past_horizon > 50
    assert lower_b1 > 0  # the full-bandwidth copy's own C_B1 is no floor past the horizon


def test_a_slower_copy_with_a_lower_c_b1_past_the_horizon_is_not_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # X dies at 2 s (90 %) or at 100 s, past the 47 s horizon; copies take 103.5 s plus 9.5 s per
    # copy sharing the peer. Past the horizon the cells are laid out per BT, and the mass at 100 s
    # falls in cells whose midpoints give C_B1 = 12.37, 11.85, 11.43 s at loads 0, 1, 2: the slower
    # copy to c is the cheapest. A bound from the full-bandwidth C_B1 would leave c out.
    config = TRConfig(lifetime="empirical:durations=2;2;2;2;2;2;2;2;2;100", duplication=False, scheduling=False,
                      backup_latency=103.5, local_bandwidth=100 * MB / 9.5)
    policy = make_policy("tr", config)
    events = [*add_executors("abcdef", cores=2), map_stage(0, 1, 0),
              *run_task(0, 0, "a", start=0.0, seconds=4.0, write=100 * MB, shuffle_id=0),
              StageCompleted(time=6.0, stage_id=0), map_stage(1, 1, None, time=6.0, parents=[0], parent_shuffles=[0])]
    feed(policy, events)
    estimator, state = policy.costs, policy.state
    block, loads = state.outputs[(0, 0)], {"b": 1, "c": 2}
    priced = estimator.backup.every_peer(0, 0, 1.0)
    assert priced is not None and priced.base.seconds > estimator.grid.horizon
    slower = [estimator.backup.peer_option(0, 0, 1.0, priced.peers.slots[:1], config.local_bandwidth / n).terms() for n in (2, 3)]
    assert priced.base.b1 > slower[0].b1 > slower[1].b1
    quick = estimator.best_local(block, state, 1.0, 1.0, loads)
    monkeypatch.setattr(type(estimator), "_cannot_win", lambda *args: False)
    assert quick == estimator.best_local(block, state, 1.0, 1.0, loads) == (slower[1].b1, "c")
