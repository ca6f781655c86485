"""Backup costs C_B1, C_R, C_B2, the peer-loss term, best peer, shared remote bandwidth, T_max estimate."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import quad

from cost_model.backup import BackupCosts, shared_remote_bandwidth
from cost_model.lifetimes import Deterministic, Exponential, LifetimeModel, Weibull
from cost_model.lineage import Lineage
from cost_model.recompute import Recompute
from cost_model.stage_estimate import next_stage_start
from cost_model.timegrid import TimeGrid

FINE = TimeGrid.geometric(5000.0, 512, first=1e-3)
AGES = {"X": 50.0, "Y": 200.0, "Z": 10.0, "P1": 0.0, "P2": 400.0, "P3": 30.0}
MODELS: dict[str, LifetimeModel] = {
    "X": Weibull(shape=0.8, scale=400.0),
    "Y": Weibull(shape=1.3, scale=600.0),
    "Z": Weibull(shape=0.8, scale=400.0),
    "P1": Weibull(shape=0.6, scale=300.0),  # infant mortality, young: risky
    "P2": Weibull(shape=0.6, scale=3000.0),  # old and long-lived: safe
    "P3": Exponential(mean=150.0),
}


def _chain_lineage() -> Lineage:
    """a (C=5, on Z) -> b (C=7, on Y) -> k (C=3, 2 GB, on X); executors aged AGES at now = 0."""
    lineage = Lineage()
    for name, model in MODELS.items():
        lineage.add_executor(name, model, started=-AGES[name])
    lineage.add_output("a", 0, "Z", 5.0, 1e6)
    lineage.add_output("b", 0, "Y", 7.0, 1e6, parents=["a"])
    lineage.add_output("k", 0, "X", 3.0, 2e9, parents=["b"])
    return lineage


def _cdf(name: str, t: float) -> float:
    return float(1.0 - MODELS[name].cond_sf(AGES[name], t))


def _pdf(name: str, t: float) -> float:
    return float(MODELS[name].cond_pdf(AGES[name], t))


def _er(t: float) -> float:
    # Chain over distinct executors: Er(t) = 3 + F_Y(t) (7 + F_Z(t) 5).
    return 3.0 + _cdf("Y", t) * (7.0 + _cdf("Z", t) * 5.0)


@pytest.mark.parametrize(("bandwidth", "t_max"), [(20e6, 300.0), (5e6, 300.0), (20e6, 60.0)])
def test_backup_terms_match_numeric_integration(bandwidth: float, t_max: float) -> None:
    # BT = 2 GB / 20 MB/s = 100 s (< T) or 400 s (> T); the third case has T = 60 < BT = 100.
    costs = BackupCosts(Recompute(_chain_lineage(), FINE), bandwidth, bandwidth, 1e12)
    got = costs.remote("k", 0, t_max)
    bt = 2e9 / bandwidth
    assert got.seconds == pytest.approx(bt)
    b1 = quad(lambda t: _pdf("X", t) * t, 0.0, bt, limit=200)[0]
    redo = quad(lambda t: _pdf("X", t) * _er(t), 0.0, min(bt, t_max), limit=200)[0]
    b2 = bt * max(_cdf("X", t_max) - _cdf("X", bt), 0.0)
    assert got.b1 == pytest.approx(b1, rel=3e-4)
    assert got.redo == pytest.approx(redo, rel=3e-4)
    assert got.b2 == pytest.approx(b2, rel=1e-9, abs=1e-12)
    assert got.peer_loss == 0.0
    assert got.total == pytest.approx(b1 + redo + b2, rel=3e-4)


def test_peer_loss_matches_double_integral() -> None:
    # C_P(Y) = ∫_BT^T f_X(t) [F_Y(t) Er(t) + ∫_t^T f_Y(u) Er(u) du] dt, BT = 2 GB / 50 MB/s = 40 s.
    costs = BackupCosts(Recompute(_chain_lineage(), FINE), 50e6, 50e6, 1e12)
    bt, t_max = 40.0, 400.0
    got = {c.target: c for c in costs.local("k", 0, t_max, ["P1", "P2", "P3"])}
    for peer in ("P1", "P2", "P3"):

        def inner(t: float, peer: str = peer) -> float:
            later = quad(lambda u: _pdf(peer, u) * _er(u), t, t_max, limit=200)[0]
            return _pdf("X", t) * (_cdf(peer, t) * _er(t) + later)

        expected = quad(inner, bt, t_max, limit=200)[0]
        assert got[peer].peer_loss == pytest.approx(expected, rel=3e-4), peer
        assert got[peer].seconds == pytest.approx(bt)


def test_best_local_destination_is_the_cheapest_and_never_a_holder() -> None:
    lineage = _chain_lineage()
    costs = BackupCosts(Recompute(lineage, FINE), 50e6, 50e6, 1e12)
    every = costs.local("k", 0, 400.0, ["Y", "Z", "P1", "P2", "P3"])
    best = costs.best_local_destination("k", 0, 400.0)
    assert best is not None
    assert best.total == min(c.total for c in every)
    assert best.target == "P2"  # old, long-lived Weibull(0.6, 3000): the safest peer
    assert costs.best_local_destination("k", 0, 400.0, candidates=["X"]) is None
    with pytest.raises(ValueError, match="already holds"):
        costs.local("k", 0, 400.0, ["X"])
    with pytest.raises(ValueError, match="unknown executor"):
        costs.local("k", 0, 400.0, ["nobody"])


def test_deterministic_lifetimes_hand_worked() -> None:
    # X dies at t=100, Z (holds the parent a, C=5) at t=110; k (C=3) is 2 GB on X.
    # Grid edges put 100 at the middle of its cell (95, 105], so cell midpoints are exact.
    lineage = Lineage()
    for name, life in {"X": 100.0, "Z": 110.0, "early": 50.0, "late": 120.0, "never": 1e6}.items():
        lineage.add_executor(name, Deterministic(life), started=0.0)
    lineage.add_output("a", 0, "Z", 5.0, 1.0)
    lineage.add_output("k", 0, "X", 3.0, 2e9, parents=["a"])
    grid = TimeGrid.from_edges([0, 10, 20, 60, 95, 105, 115, 125, 140, 150, 200, 400])
    # BT = 2 GB / 100 MB/s = 20 s, T = 150: X dies after the copy: C_B1 = C_R = 0, C_B2 = BT = 20.
    fast = BackupCosts(Recompute(lineage, grid), 100e6, 100e6, 1e12)
    remote = fast.remote("k", 0, 150.0)
    assert (remote.b1, remote.redo, remote.b2) == (0.0, 0.0, 20.0)
    # Peer copy: lost when the peer dies before T too. Peer dead at 50 (before X): loss at 100,
    # Er(100) = 3 (Z alive). Peer dead at 120 (after X): loss at 120, Er(120) = 3 + 5 = 8 (Z died
    # at 110). A peer outliving T costs nothing.
    peer = {c.target: c.peer_loss for c in fast.local("k", 0, 150.0, ["early", "late", "never"])}
    assert peer == {"early": pytest.approx(3.0), "late": pytest.approx(8.0), "never": 0.0}
    best = fast.best_local_destination("k", 0, 150.0, ["early", "late", "never"])
    assert best is not None and best.target == "never" and best.total == pytest.approx(20.0)
    # BT = 2 GB / 10 MB/s = 200 s > T = 150: X dies during the copy at 100:
    # C_B1 = 100 (copy time lost), C_R = Er(100) = 3, C_B2 = 0, and no peer term.
    slow = BackupCosts(Recompute(lineage, grid), 10e6, 10e6, 1e12)
    cost = slow.remote("k", 0, 150.0)
    assert (cost.b1, cost.redo, cost.b2) == (pytest.approx(100.0), pytest.approx(3.0), 0.0)
    assert [c.peer_loss for c in slow.local("k", 0, 150.0, ["early", "late"])] == [0.0, 0.0]


def test_per_copy_latency_lengthens_every_copy_and_prices_tiny_outputs() -> None:
    # BT = L + size / bandwidth. Deterministic world of the test above: X dies at 100, T = 150.
    lineage = Lineage()
    for name, life in {"X": 100.0, "Z": 110.0, "never": 1e6}.items():
        lineage.add_executor(name, Deterministic(life), started=0.0)
    lineage.add_output("a", 0, "Z", 5.0, 1.0)
    lineage.add_output("k", 0, "X", 3.0, 2e9, parents=["a"])
    lineage.add_output("tiny", 0, "X", 3.0, 1e3, parents=["a"])
    grid = TimeGrid.from_edges([0, 10, 20, 60, 95, 105, 115, 125, 140, 150, 200, 400])
    plain = BackupCosts(Recompute(lineage, grid), 100e6, 100e6, 1e12)
    slow = BackupCosts(Recompute(lineage, grid), 100e6, 100e6, 1e12, latency=5.0)
    # 2 GB: X dies after the copy either way, so C_B = BT = 20 s, or 25 s with L = 5 s.
    assert plain.remote("k", 0, 150.0).total == pytest.approx(20.0)
    assert slow.remote("k", 0, 150.0).total == pytest.approx(25.0)
    assert slow.best_local_destination("k", 0, 150.0, ["never"]).total == pytest.approx(5.0 + 2e9 / 100e6)  # type: ignore[union-attr]
    # 1 kB: free without latency (10 us), the full latency with it.
    assert plain.remote("tiny", 0, 150.0).total == pytest.approx(1e-5)
    assert slow.remote("tiny", 0, 150.0).seconds == pytest.approx(5.0 + 1e-5)
    assert slow.copy_seconds(1e3, 100e6) == pytest.approx(5.0 + 1e-5)
    with pytest.raises(ValueError, match="latency"):
        BackupCosts(Recompute(lineage, grid), 100e6, 100e6, 1e12, latency=-1.0)


def test_shared_remote_bandwidth_and_its_effect() -> None:
    assert shared_remote_bandwidth(100e6, 250e6, 0) == 100e6
    assert shared_remote_bandwidth(100e6, 250e6, 4) == 50e6  # 250 / (4 + 1)
    costs = BackupCosts(Recompute(_chain_lineage(), FINE), 400e6, 100e6, 250e6)
    assert costs.remote("k", 0, 300.0).seconds == pytest.approx(20.0)  # 2 GB / 100 MB/s
    busy = costs.remote("k", 0, 300.0, concurrent=4)
    assert busy.seconds == pytest.approx(40.0)  # 2 GB / 50 MB/s
    assert busy.total > costs.remote("k", 0, 300.0).total


@pytest.mark.parametrize("t_max", [0.0, 60.0, 300.0, 1e8])
@pytest.mark.parametrize("concurrent", [0, 4])
def test_the_remote_options_floor_is_its_b2_and_bounds_its_total(t_max: float, concurrent: int) -> None:
    costs = BackupCosts(Recompute(_chain_lineage(), FINE), 400e6, 100e6, 250e6)
    for shuffle in ("a", "b", "k"):
        option = costs.remote(shuffle, 0, t_max, concurrent=concurrent)
        floor = costs.remote_option(shuffle, 0, t_max, concurrent=concurrent).floor
        assert floor == option.b2  # the same computation, not an approximation of it
        assert floor <= option.total
    assert costs.remote_option("k", 0, 300.0).floor > 0.0  # X may die after the 20 s copy and before T


def test_degenerate_sizes_and_scales_are_finite() -> None:
    lineage = _chain_lineage()
    lineage.add_output("z", 0, "X", 1.0, 0.0, parents=["b"])  # zero-size block
    costs = BackupCosts(Recompute(lineage, FINE), 1e6, 1e6, 1e6)
    zero = costs.remote("z", 0, 300.0)
    assert (zero.seconds, zero.b1, zero.redo, zero.b2, zero.total) == (0.0, 0.0, 0.0, 0.0, 0.0)
    peer_only = costs.local("z", 0, 300.0, ["P2"])[0]
    assert peer_only.total == peer_only.peer_loss > 0.0
    # 2 GB at 1e-12 B/s: the copy never ends, X surely fails during it; C_B1 -> E[residual life].
    crawl = BackupCosts(Recompute(lineage, FINE), 1e-12, 1e-12, 1e-12).remote("k", 0, 300.0)
    residual = quad(lambda t: float(MODELS["X"].cond_sf(AGES["X"], t)), 0.0, np.inf, limit=200)[0]
    assert np.isfinite(crawl.total)
    assert crawl.b1 == pytest.approx(residual, rel=2e-2)
    assert crawl.b2 == 0.0
    # t_max = 0: consumed now, nothing to re-compute.
    now = costs.remote("k", 0, 0.0)
    assert now.redo == 0.0 and now.b2 == 0.0


@pytest.mark.parametrize("scale", [1e-12, 1e12])
def test_backup_costs_scale_with_time(scale: float) -> None:
    # Scaling lifetimes, ages, run times, T and the grid by s (sizes fixed, bandwidths / s)
    # scales every cost by s: compare with the unit-scale answer.
    def costs_at(s: float) -> tuple[float, ...]:
        lineage = Lineage()
        for name in ("X", "Y", "P"):
            lineage.add_executor(name, Weibull(shape=0.8, scale=400.0 * s), started=-50.0 * s)
        lineage.add_output("p", 0, "Y", 7.0 * s, 1e6)
        lineage.add_output("k", 0, "X", 3.0 * s, 2e9, parents=["p"])
        grid = TimeGrid.geometric(5000.0 * s, 128, first=1e-3 * s)
        costs = BackupCosts(Recompute(lineage, grid), 50e6 / s, 20e6 / s, 1e12 / s)
        remote, local = costs.remote("k", 0, 300.0 * s), costs.local("k", 0, 300.0 * s, ["P"])[0]
        return (remote.b1, remote.redo, remote.b2, local.peer_loss, local.total)

    np.testing.assert_allclose(np.array(costs_at(scale)) / scale, costs_at(1.0), rtol=1e-9)


def test_bad_inputs_raise_clear_value_errors() -> None:
    rc = Recompute(_chain_lineage(), FINE)
    for name, args in [
        ("local_bandwidth", (0.0, 1.0, 1.0)),
        ("remote_bandwidth", (1.0, -5.0, 1.0)),
        ("remote_cap", (1.0, 1.0, float("inf"))),
    ]:
        with pytest.raises(ValueError, match=name):
            BackupCosts(rc, *args)
    costs = BackupCosts(rc, 1e6, 1e6, 1e6)
    with pytest.raises(ValueError, match="t_max"):
        costs.remote("k", 0, float("nan"))
    with pytest.raises(ValueError, match="concurrent"):
        costs.remote("k", 0, 1.0, concurrent=-1)
    with pytest.raises(ValueError, match="unknown map output"):
        costs.remote("k", 7, 1.0)


def test_next_stage_start_estimate() -> None:
    # alpha * sum(N_i T_i) / cores = 1.5 * (10*2 + 4*5) / 4 = 15 s
    assert next_stage_start([10, 4], [2.0, 5.0], cores=4, alpha=1.5) == pytest.approx(15.0)
    assert next_stage_start([], [], cores=1) == 0.0
    with pytest.raises(ValueError, match="alpha"):
        next_stage_start([1], [1.0], cores=1, alpha=0.5)
    with pytest.raises(ValueError, match="cores"):
        next_stage_start([1], [1.0], cores=0)
    with pytest.raises(ValueError, match="same shape"):
        next_stage_start([1, 2], [1.0], cores=1)
    with pytest.raises(ValueError, match="unfinished"):
        next_stage_start([-1], [1.0], cores=1)


def test_windows_past_the_horizon_and_interpolated_peer_cdfs() -> None:
    # A coarse 32-cell grid whose horizon (150 s) ends before T = 400 s: windows are extended past
    # the horizon and evaluated exactly, and Er is held at its horizon value (documented). So the
    # reference is the double integral with Er(min(t, 150)); 1 % for the coarse cells.
    horizon, bt, t_max = 150.0, 40.0, 400.0
    short = BackupCosts(Recompute(_chain_lineage(), TimeGrid.geometric(horizon, 32, first=0.05)), 50e6, 50e6, 1e12)
    got = {c.target: c for c in short.local("k", 0, t_max, ["P1", "P2", "P3"])}

    def er(t: float) -> float:
        return _er(min(t, horizon))

    for peer in ("P1", "P2", "P3"):

        def inner(t: float, peer: str = peer) -> float:
            # split at the horizon, where Er has a kink, so that quad converges quickly
            cut = max(t, horizon)
            later = sum(quad(lambda u: _pdf(peer, u) * er(u), a, b)[0] for a, b in ((t, cut), (cut, t_max)))
            return _pdf("X", t) * (_cdf(peer, t) * er(t) + later)

        expected = quad(inner, bt, horizon)[0] + quad(inner, horizon, t_max)[0]
        assert got[peer].peer_loss == pytest.approx(expected, rel=0.01), peer
        assert got[peer].b2 == pytest.approx(bt * (_cdf("X", t_max) - _cdf("X", bt)), rel=1e-9)
    # Interpolated cdfs: second-order accurate on the table's grid, exact for point masses.
    lineage = _chain_lineage()
    lineage.add_executor("D", Deterministic(500.0), started=-100.0)
    table = Recompute(lineage, FINE).table
    slots = [lineage.executor(e).slot for e in ("P1", "P3", "D")]
    times = np.array([3.7, 150.0, 399.0, 400.0, 401.0])
    np.testing.assert_allclose(table.cdf_interpolated(times, slots), table.cdf_at(times, slots), rtol=1e-3, atol=1e-12)
    np.testing.assert_array_equal(table.cdf_interpolated(times, slots[2:]), [[0.0, 0.0, 0.0, 1.0, 1.0]])
