"""Cascading re-computation cost Er(t, k) and C_Redo: hand-worked DAGs, Monte Carlo, degenerate inputs.

Closed forms used below, for an executor X with exponential lifetime of rate λ (memoryless, so
its age does not matter) and F(t) = 1 - exp(-λt), consumption at T, F_T = F(T):

    ∫_0^T f(t) F(t)^n dt = F_T^(n+1) / (n+1)      (substitute u = F(t), du = f dt)
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import pytest

from cost_model.lifetimes import Deterministic, Exponential, LifetimeModel, Weibull
from cost_model.lineage import REMOTE, Lineage
from cost_model.recompute import Recompute
from cost_model.timegrid import TimeGrid

FINE = TimeGrid.geometric(2000.0, 512, first=1e-3)


def _lineage(models: dict[str, LifetimeModel], started: dict[str, float] | None = None) -> Lineage:
    lineage = Lineage()
    for name, model in models.items():
        lineage.add_executor(name, model, (started or {}).get(name, 0.0))
    return lineage


# ---- hand-worked DAGs: exponential lifetimes --------------------------------------------------


def test_chain_exponential_matches_hand_formula() -> None:
    # a (C=5, on Z) -> b (C=7, on Y) -> k (C=3, on X), all exponential mean 100 s.
    # Er(t,k) = 3 + F(t)*(7 + F(t)*5)   (b lost w.p. F; given b re-runs, a lost w.p. F)
    lam = 1.0 / 100.0
    lineage = _lineage({e: Exponential(mean=100.0) for e in "XYZ"})
    lineage.add_output("a", 0, "Z", 5.0, 1e6)
    lineage.add_output("b", 0, "Y", 7.0, 1e6, parents=["a"])
    lineage.add_output("k", 0, "X", 3.0, 1e6, parents=["b"])
    rc = Recompute(lineage, FINE)
    f = 1.0 - np.exp(-lam * FINE.edges)
    np.testing.assert_allclose(rc.er("k", 0), 3.0 + f * (7.0 + f * 5.0), rtol=1e-12)
    # C_Redo = 3 F_T + 7 F_T^2/2 + 5 F_T^3/3 with T = 50: F_T = 1 - e^-0.5 = 0.393469
    f_t = 1.0 - np.exp(-0.5)
    expected = 3.0 * f_t + 7.0 * f_t**2 / 2 + 5.0 * f_t**3 / 3  # = 1.82380 s
    assert rc.c_redo("k", 0, 50.0) == pytest.approx(expected, rel=1e-4)


def test_diamond_exponential_charges_shared_ancestor_once() -> None:
    # a (C=10, on W) is read by b (C=2, on Y) and c (C=4, on Z); k (C=1, on X) reads b and c.
    # Er = 1 + F*2 + F*4 + nu_a*F*10, nu_a = P(b or c lost) = 1 - (1-F)^2 = 2F - F^2
    lineage = _lineage({e: Exponential(mean=200.0) for e in "WXYZ"})
    lineage.add_output("a", 0, "W", 10.0, 1.0)
    lineage.add_output("b", 0, "Y", 2.0, 1.0, parents=["a"])
    lineage.add_output("c", 0, "Z", 4.0, 1.0, parents=["a"])
    lineage.add_output("k", 0, "X", 1.0, 1.0, parents=["b", "c"])
    rc = Recompute(lineage, FINE)
    f = 1.0 - np.exp(-FINE.edges / 200.0)
    np.testing.assert_allclose(rc.er("k", 0), 1.0 + 6.0 * f + (2 * f - f**2) * f * 10.0, rtol=1e-12)
    # C_Redo over T = 100: F_T = 1 - e^-0.5
    #   = 1 F_T + 6 F_T^2/2 + 10 (2 F_T^3/3 - F_T^4/4) = 0.393469 + 0.464451 + 0.335734 = 1.193654
    f_t = 1.0 - np.exp(-0.5)
    expected = f_t + 3.0 * f_t**2 + 10.0 * (2 * f_t**3 / 3 - f_t**4 / 4)
    assert rc.c_redo("k", 0, 100.0) == pytest.approx(expected, rel=1e-4)
    # The paper's literal recursion would charge a twice: 1 F_T + 3 F_T^2 + 2 * 10 F_T^3/3 = 1.26933.
    assert rc.c_redo("k", 0, 100.0) < f_t + 3.0 * f_t**2 + 20.0 * f_t**3 / 3 - 0.05


def test_all_to_all_shuffle_with_outputs_on_the_failing_executor() -> None:
    # Shuffle m: 4 map outputs; m0 (C=2) and m1 (C=3) on X itself (Set_N: lost with X for sure),
    # m2 (C=5) on Y (rate 1/50), m3 (C=7) on Z (rate 1/400). Reduce output k (C=1) on X (rate 1/100).
    rates = {"X": 1 / 100, "Y": 1 / 50, "Z": 1 / 400}
    lineage = _lineage({e: Exponential(rate=r) for e, r in rates.items()})
    for i, (ex, c) in enumerate([("X", 2.0), ("X", 3.0), ("Y", 5.0), ("Z", 7.0)]):
        lineage.add_output("m", i, ex, c, 1.0)
    lineage.add_output("r", 0, "X", 1.0, 1.0, parents=["m"])
    rc = Recompute(lineage, FINE)
    t = FINE.edges
    f_y, f_z = 1 - np.exp(-rates["Y"] * t), 1 - np.exp(-rates["Z"] * t)
    np.testing.assert_allclose(rc.er("r", 0), 1.0 + 5.0 + 5.0 * f_y + 7.0 * f_z, rtol=1e-12)
    # ∫_0^T λx e^(-λx t) (1 - e^(-λe t)) dt = F_X(T) - λx/(λx+λe) (1 - e^(-(λx+λe) T)),  T = 60
    big_t, lx = 60.0, rates["X"]

    def cross(le: float) -> float:
        return (1 - np.exp(-lx * big_t)) - lx / (lx + le) * (1 - np.exp(-(lx + le) * big_t))

    expected = 6.0 * (1 - np.exp(-lx * big_t)) + 5.0 * cross(rates["Y"]) + 7.0 * cross(rates["Z"])
    assert rc.c_redo("r", 0, big_t) == pytest.approx(expected, rel=1e-4)  # = 3.49296 s


# ---- hand-worked DAGs: deterministic lifetimes -----------------------------------------------


def test_chain_deterministic_lifetimes_are_exact() -> None:
    # X dies at t=100, Y (holds parent b) at t=50, Z (holds grandparent a) at t=300; all age 0.
    # X's failure at 100 finds b lost (50 <= 100) and a alive (300 > 100): Er(100) = 3 + 7 = 10.
    lineage = _lineage({"X": Deterministic(100.0), "Y": Deterministic(50.0), "Z": Deterministic(300.0)})
    lineage.add_output("a", 0, "Z", 5.0, 1.0)
    lineage.add_output("b", 0, "Y", 7.0, 1.0, parents=["a"])
    lineage.add_output("k", 0, "X", 3.0, 1.0, parents=["b"])
    grid = TimeGrid.from_edges([0, 25, 50, 75, 90, 110, 200, 300, 400])
    rc = Recompute(lineage, grid)
    np.testing.assert_allclose(rc.er("k", 0), [3, 3, 10, 10, 10, 10, 10, 15, 15])
    assert rc.c_redo("k", 0, 99.0) == 0.0  # consumed before X dies
    assert rc.c_redo("k", 0, 150.0) == pytest.approx(10.0, abs=1e-12)
    # Z older by 250 s: it dies at t=50 too, so a is lost as well: Er = 3 + 7 + 5 = 15.
    lineage2 = _lineage(
        {"X": Deterministic(100.0), "Y": Deterministic(50.0), "Z": Deterministic(300.0)}, {"Z": -250.0}
    )
    lineage2.add_output("a", 0, "Z", 5.0, 1.0)
    lineage2.add_output("b", 0, "Y", 7.0, 1.0, parents=["a"])
    lineage2.add_output("k", 0, "X", 3.0, 1.0, parents=["b"])
    assert Recompute(lineage2, grid).c_redo("k", 0, 150.0) == pytest.approx(15.0, abs=1e-12)


def test_diamond_and_all_to_all_deterministic_lifetimes() -> None:
    grid = TimeGrid.from_edges([0, 20, 40, 80, 120, 160, 300, 600])
    # Diamond: a (C=10, W dies at 30) read by b (C=2, Y) and c (C=4, Z); k (C=1) on X dies at 100.
    # Y dies at 60, Z at 500: at t=100 b is lost, c is not; a is lost and needed (b re-runs):
    # Er(100) = 1 + 2 + 10 = 13. With Y also alive at 100, nothing re-runs but k: a is lost but
    # no longer needed, Er = 1.
    for y_life, expected in [(60.0, 13.0), (500.0, 1.0)]:
        lineage = _lineage(
            {"W": Deterministic(30.0), "X": Deterministic(100.0), "Y": Deterministic(y_life), "Z": Deterministic(500.0)}
        )
        lineage.add_output("a", 0, "W", 10.0, 1.0)
        lineage.add_output("b", 0, "Y", 2.0, 1.0, parents=["a"])
        lineage.add_output("c", 0, "Z", 4.0, 1.0, parents=["a"])
        lineage.add_output("k", 0, "X", 1.0, 1.0, parents=["b", "c"])
        assert Recompute(lineage, grid).c_redo("k", 0, 150.0) == pytest.approx(expected, abs=1e-12)
    # All-to-all: map outputs m0 (C=2, on X itself), m1 (C=3, Y dies at 50), m2 (C=5, Z dies at
    # 200); reduce r (C=1) on X dies at 100: Er(100) = 1 + 2 + 3 = 6; consumed at 90 -> 0.
    lineage = _lineage({"X": Deterministic(100.0), "Y": Deterministic(50.0), "Z": Deterministic(200.0)})
    for i, (ex, c) in enumerate([("X", 2.0), ("Y", 3.0), ("Z", 5.0)]):
        lineage.add_output("m", i, ex, c, 1.0)
    lineage.add_output("r", 0, "X", 1.0, 1.0, parents=["m"])
    rc = Recompute(lineage, grid)
    assert rc.c_redo("r", 0, 150.0) == pytest.approx(6.0, abs=1e-12)
    assert rc.c_redo("r", 0, 90.0) == 0.0


def test_deterministic_peer_copy_is_lost_only_when_both_holders_died() -> None:
    # Parent p (C=8) lives on Y (dies at 40) and on a peer copy at Z (dies at 120).
    # k (C=1) on X (dies at 80): at 80 Y is gone but Z still holds p -> Er = 1.
    # With Z dying at 60 instead, p is gone at 80 -> Er = 9.
    grid = TimeGrid.from_edges([0, 30, 70, 90, 200])
    for z_life, expected in [(120.0, 1.0), (60.0, 9.0)]:
        lineage = _lineage({"X": Deterministic(80.0), "Y": Deterministic(40.0), "Z": Deterministic(z_life)})
        lineage.add_output("p", 0, "Y", 8.0, 1.0)
        lineage.add_location("p", 0, "Z")
        lineage.add_output("k", 0, "X", 1.0, 1.0, parents=["p"])
        assert Recompute(lineage, grid).c_redo("k", 0, 150.0) == pytest.approx(expected, abs=1e-12)


# ---- Monte Carlo of evictions ---------------------------------------------------------------


def _sample_residuals(lineage: Lineage, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Residual lifetimes (s from now = 0) of every executor given its age, by inverse-cdf sampling."""
    residual = {}
    for ex in lineage.executors():
        grid = np.linspace(0.0, 30.0 * ex.model.mean(), 300_001)
        cdf = 1.0 - ex.model.cond_sf(-ex.started, grid)
        residual[ex.executor_id] = np.interp(rng.uniform(size=n), cdf, grid, right=np.inf)
    return residual


def _monte_carlo_c_redo(
    lineage: Lineage, root: tuple[Hashable, int], t_max: float, n: int, seed: int
) -> tuple[float, float]:
    """Mean and standard error of the task time re-run because ``root``'s executor X dies before t_max.

    In each sample, if X dies at t <= t_max, every output whose copies have all died by t is lost.
    The root re-runs; every re-run task reads all outputs of its stage's parent shuffles, so each
    lost one of those re-runs too -- each output at most once.
    """
    residual = _sample_residuals(lineage, n, np.random.default_rng(seed))
    t_fail = residual[lineage.output(*root).producer]
    costs = np.zeros(n)
    for i in np.flatnonzero(t_fail <= t_max):
        t = t_fail[i]
        rerun: set[tuple[Hashable, int]] = set()
        todo = [root]
        while todo:
            key = todo.pop()
            if key in rerun:
                continue
            rerun.add(key)
            for parent in lineage.parents(key[0]):
                for j, out in lineage.shuffle(parent).outputs.items():
                    if not (out.remote or out.consumed) and all(residual[e][i] <= t for e in out.locations):
                        todo.append((parent, j))
        costs[i] = sum(lineage.output(*key).run_time for key in rerun)
    return float(costs.mean()), float(costs.std(ddof=1) / np.sqrt(n))


def test_diamond_c_redo_agrees_with_monte_carlo() -> None:
    # Weibull lifetimes (shape 0.7, infant mortality) with different ages; distinct executors.
    models = {e: Weibull(shape=0.7, scale=300.0) for e in "WXYZ"}
    lineage = _lineage(models, {"W": -50.0, "X": -10.0, "Y": -400.0, "Z": 0.0})
    lineage.add_output("a", 0, "W", 10.0, 1.0)
    lineage.add_output("b", 0, "Y", 2.0, 1.0, parents=["a"])
    lineage.add_output("c", 0, "Z", 4.0, 1.0, parents=["a"])
    lineage.add_output("k", 0, "X", 1.0, 1.0, parents=["b", "c"])
    model = Recompute(lineage, TimeGrid.geometric(3000.0, 128, first=0.05)).c_redo("k", 0, 200.0)
    mean, stderr = _monte_carlo_c_redo(lineage, ("k", 0), 200.0, 40_000, seed=7)
    # 4 standard errors of the MC mean (~0.6 %) plus 1 % for the grid.
    assert abs(model - mean) <= 4 * stderr + 0.01 * mean, (model, mean, stderr)


def test_two_level_all_to_all_c_redo_agrees_with_monte_carlo() -> None:
    # Stage A: 6 outputs on A0..A5; stage B: 4 outputs on B0..B3, each reads all of A;
    # root r on X reads all of B. Exponential means 150..600 s; all executors distinct.
    rng = np.random.default_rng(11)
    names = [f"A{i}" for i in range(6)] + [f"B{i}" for i in range(4)] + ["X"]
    lineage = _lineage({e: Exponential(mean=float(rng.uniform(150, 600))) for e in names})
    for i in range(6):
        lineage.add_output("A", i, f"A{i}", float(rng.uniform(1, 10)), 1.0)
    for i in range(4):
        lineage.add_output("B", i, f"B{i}", float(rng.uniform(1, 10)), 1.0, parents=["A"])
    lineage.add_output("R", 0, "X", 2.0, 1.0, parents=["B"])
    model = Recompute(lineage, TimeGrid.geometric(3000.0, 128, first=0.05)).c_redo("R", 0, 300.0)
    mean, stderr = _monte_carlo_c_redo(lineage, ("R", 0), 300.0, 20_000, seed=3)
    assert abs(model - mean) <= 4 * stderr + 0.01 * mean, (model, mean, stderr)


def _three_shared_stages(seed: int, executors: int) -> Lineage:
    """Stages A (8) -> B (8) -> C (4) on executors E0..E3 (of ``executors``), Weibull(0.8) lifetimes,
    random scales, ages and run times from ``default_rng(seed)``: an executor holds outputs of
    all three stages, so losses are correlated across stages."""
    rng = np.random.default_rng(seed)
    names = [f"E{i}" for i in range(executors)]
    lineage = _lineage(
        {e: Weibull(shape=0.8, scale=float(rng.uniform(200, 600))) for e in names},
        {e: -float(rng.uniform(0, 300)) for e in names},
    )
    for i in range(8):
        lineage.add_output("A", i, names[i % 4], float(rng.uniform(1, 10)), 1.0)
    for i in range(8):
        lineage.add_output("B", i, names[1 + i % 3], float(rng.uniform(1, 10)), 1.0, parents=["A"])
    for i in range(4):
        lineage.add_output("C", i, names[(i + 1) % 4], float(rng.uniform(1, 10)), 1.0, parents=["B"])
    return lineage


def test_shared_executors_three_levels_agree_with_monte_carlo() -> None:
    # 4 executors hold outputs of all three stages (the realistic, correlated case): an executor
    # that lost a B output lost its A outputs too. Weibull(0.8) lifetimes, random ages, seeded.
    lineage = _three_shared_stages(seed=6, executors=4)
    lineage.add_output("R", 0, "E0", 2.0, 1.0, parents=["C"])
    model = Recompute(lineage, TimeGrid.geometric(3000.0, 128, first=0.05)).c_redo("R", 0, 300.0)
    mean, stderr = _monte_carlo_c_redo(lineage, ("R", 0), 300.0, 20_000, seed=3)
    # Independence across executors is exact; conditioning on one holder at a time is not:
    # allow 4 standard errors (~1.2 %) plus 2 %.
    assert abs(model - mean) <= 4 * stderr + 0.02 * mean, (model, mean, stderr)


def test_peer_copies_remote_and_consumed_outputs_agree_with_monte_carlo() -> None:
    # Like the test above on 5 executors, plus peer copies (some on the failing executor E0),
    # one remote copy and one consumed output.
    lineage = _three_shared_stages(seed=9, executors=5)
    for sid, idx, target in [("A", 1, "E4"), ("A", 2, "E0"), ("B", 0, "E0"), ("B", 4, "E4"), ("C", 2, "E0"), ("A", 5, REMOTE)]:
        lineage.add_location(sid, idx, target)
    lineage.mark_consumed("A", 6)
    lineage.add_output("R", 0, "E0", 2.0, 1.0, parents=["C"])
    model = Recompute(lineage, TimeGrid.geometric(3000.0, 128, first=0.05)).c_redo("R", 0, 300.0)
    mean, stderr = _monte_carlo_c_redo(lineage, ("R", 0), 300.0, 20_000, seed=3)
    # 13.04 vs 13.01 +- 0.18 s here; allow 4 standard errors plus 2 %.
    assert abs(model - mean) <= 4 * stderr + 0.02 * mean, (model, mean, stderr)


# ---- what makes a parent free, depth, incremental updates -----------------------------------


def _chain(models: dict[str, LifetimeModel] | None = None) -> Lineage:
    """a (C=5, on Z) -> b (C=7, on Y) -> k (C=3, on X), exponential mean 100 s unless given."""
    lineage = _lineage(models or {e: Exponential(mean=100.0) for e in "XYZ"})
    lineage.add_output("a", 0, "Z", 5.0, 1e6)
    lineage.add_output("b", 0, "Y", 7.0, 1e6, parents=["a"])
    lineage.add_output("k", 0, "X", 3.0, 1e6, parents=["b"])
    return lineage


def test_remote_backed_and_consumed_outputs_cost_nothing() -> None:
    lineage = _chain()
    rc = Recompute(lineage, FINE)
    f = 1.0 - np.exp(-FINE.edges / 100.0)
    lineage.add_location("b", 0, REMOTE)  # parent safe: the cascade stops at b
    np.testing.assert_allclose(rc.er("k", 0), 3.0)
    lineage.remove_location("b", 0, REMOTE)
    lineage.mark_consumed("a")  # grandparent will never be read again
    np.testing.assert_allclose(rc.er("k", 0), 3.0 + 7.0 * f, rtol=1e-12)
    lineage.mark_consumed("k", 0)
    assert rc.c_redo("k", 0, 50.0) == 0.0
    np.testing.assert_array_equal(rc.er("k", 0), 0.0)
    lineage.mark_consumed("k", 0, consumed=False)
    lineage.add_location("k", 0, REMOTE)
    assert rc.c_redo("k", 0, 50.0) == 0.0


def test_depth_limit() -> None:
    lineage = _chain()
    f = 1.0 - np.exp(-FINE.edges / 100.0)
    np.testing.assert_array_equal(Recompute(lineage, FINE, depth=0).er("k", 0), 3.0)
    np.testing.assert_allclose(Recompute(lineage, FINE, depth=1).er("k", 0), 3.0 + 7.0 * f, rtol=1e-12)
    np.testing.assert_allclose(Recompute(lineage, FINE, depth=2).er("k", 0), 3.0 + f * (7.0 + 5.0 * f), rtol=1e-12)
    # depth 0: C_Redo = C_k * P(X fails by T) = 3 (1 - e^-0.5)
    assert Recompute(lineage, FINE, depth=0).c_redo("k", 0, 50.0) == pytest.approx(3.0 * (1 - np.exp(-0.5)), rel=1e-12)


def test_incremental_updates_match_a_fresh_model() -> None:
    # One Recompute kept across many lineage changes must agree with one built from scratch.
    rng = np.random.default_rng(1)
    models = {f"E{i}": Weibull(shape=float(rng.uniform(0.6, 1.5)), scale=float(rng.uniform(100, 900))) for i in range(6)}
    lineage = _lineage(models, {e: -float(rng.uniform(0, 500)) for e in models})
    rc = Recompute(lineage, TimeGrid.geometric(2000.0, 64), now=0.0)
    names = list(models)
    for i in range(12):
        lineage.add_output("A", i, names[i % 6], float(rng.uniform(1, 5)), 1.0)
    for i in range(6):
        lineage.add_output("B", i, names[(i + 2) % 6], float(rng.uniform(1, 5)), 1.0, parents=["A"])
    lineage.add_output("R", 0, "E0", 1.0, 1.0, parents=["B"])
    before = rc.c_redo("R", 0, 100.0)
    lineage.add_location("B", 1, "E5")  # peer copy: B1 now needs E3 and E5 to die
    lineage.add_location("A", 3, REMOTE)
    lineage.mark_consumed("A", 4)
    lineage.add_output("A", 12, "E1", 2.5, 1.0)
    lineage.add_executor("E6", Weibull(shape=1.0, scale=300.0), started=0.0)
    lineage.add_output("A", 13, "E6", 4.0, 1.0)
    lineage.remove_executor("E2")  # A2, A8 and B0 are now lost (Set_N for everyone)
    rc.advance(30.0)  # the clock moves past max_staleness: ages advance by 30 s
    after = rc.c_redo("R", 0, 100.0)
    fresh = Recompute(lineage, TimeGrid.geometric(2000.0, 64), now=30.0).c_redo("R", 0, 100.0)
    assert after == pytest.approx(fresh, rel=1e-12)
    assert after != pytest.approx(before, rel=1e-3)


def test_executor_loss_makes_outputs_lost_and_certain() -> None:
    lineage = _chain()
    rc = Recompute(lineage, FINE)
    f = 1.0 - np.exp(-FINE.edges / 100.0)
    lineage.remove_executor("Y")  # b is lost: re-run for sure, a lost with prob F
    np.testing.assert_allclose(rc.er("k", 0), 3.0 + 7.0 + 5.0 * f, rtol=1e-12)
    assert lineage.output("b", 0).locations == set()


def test_a_new_lifetime_model_takes_effect_at_once() -> None:
    # A termination notice: Y (holds b) will now die at t=10 for sure, so from t=10 on b is lost
    # (and a with Z's unchanged exponential law); the failure table is rebuilt for the new law.
    lineage = _chain()
    rc = Recompute(lineage, FINE)
    before = rc.c_redo("k", 0, 50.0)
    lineage.set_model("Y", Deterministic(10.0))
    assert lineage.has_executor("Y") and not lineage.has_executor("Q")
    f_z = 1.0 - np.exp(-FINE.edges / 100.0)
    # Er(t) = 3 + [t >= 10] (7 + 5 F_Z(t)) on the grid edges
    np.testing.assert_allclose(rc.er("k", 0), 3.0 + (FINE.edges >= 10.0) * (7.0 + 5.0 * f_z), rtol=1e-12)
    assert rc.c_redo("k", 0, 50.0) > before


def test_staleness_rule_refreshes_ages() -> None:
    # Weibull shape 2 (wear-out): an older executor fails sooner, so C_Redo grows with time.
    lineage = _chain({e: Weibull(shape=2.0, scale=300.0) for e in "XYZ"})
    rc = Recompute(lineage, FINE, now=0.0, max_staleness=10.0)
    c0 = rc.c_redo("k", 0, 60.0)
    rc.advance(5.0)  # younger than max_staleness: table kept, ages as of t=0
    assert rc.now_of_table == 0.0
    assert rc.c_redo("k", 0, 60.0) == c0
    rc.advance(100.0)
    assert rc.now_of_table == 100.0
    assert rc.c_redo("k", 0, 60.0) > 1.5 * c0


# ---- degenerate inputs ----------------------------------------------------------------------


@pytest.mark.parametrize("scale", [1e-12, 1.0, 1e12])
def test_scale_invariance_from_1e_minus_12_to_1e12(scale: float) -> None:
    # Scaling every time (lifetimes, run times, T, grid) by s scales C_Redo by s.
    lineage = _chain({e: Exponential(mean=100.0 * scale) for e in "XYZ"})
    for key, c in [("a", 5.0), ("b", 7.0), ("k", 3.0)]:
        out = lineage.output(key, 0)
        lineage.add_output(key, 0, out.producer, c * scale, 1.0, parents=lineage.parents(key))
    rc = Recompute(lineage, TimeGrid.geometric(2000.0 * scale, 512, first=1e-3 * scale))
    f_t = 1.0 - np.exp(-0.5)
    expected = (3.0 * f_t + 7.0 * f_t**2 / 2 + 5.0 * f_t**3 / 3) * scale
    value = rc.c_redo("k", 0, 50.0 * scale)
    assert np.isfinite(value)
    assert value == pytest.approx(expected, rel=1e-4)


def test_zero_age_zero_runtime_and_t_max_zero() -> None:
    lineage = _lineage({"X": Weibull(shape=0.5, scale=100.0), "Y": Deterministic(10.0)})
    lineage.add_output("p", 0, "Y", 0.0, 0.0)
    lineage.add_output("k", 0, "X", 0.0, 0.0, parents=["p"])
    rc = Recompute(lineage, FINE)
    assert rc.c_redo("k", 0, 0.0) == 0.0
    assert rc.c_redo("k", 0, 1e3) == 0.0
    # Past the horizon Er is held constant and the failure mass still counts.
    lineage.add_output("k", 0, "X", 2.0, 0.0, parents=["p"])
    long = rc.c_redo("k", 0, 1e9)
    assert long == pytest.approx(2.0, rel=1e-9)


def test_bad_inputs_raise_clear_value_errors() -> None:
    lineage = _chain()
    rc = Recompute(lineage, FINE)
    with pytest.raises(ValueError, match="t_max"):
        rc.c_redo("k", 0, -1.0)
    with pytest.raises(ValueError, match="t_max"):
        rc.c_redo("k", 0, float("nan"))
    with pytest.raises(ValueError, match="unknown map output"):
        rc.c_redo("k", 9, 1.0)
    with pytest.raises(ValueError, match="unknown shuffle"):
        rc.er("nope", 0)
    with pytest.raises(ValueError, match="depth"):
        Recompute(lineage, FINE, depth=-1)
    with pytest.raises(ValueError, match="max_staleness"):
        Recompute(lineage, FINE, max_staleness=0.0)
    with pytest.raises(ValueError, match="unknown executor"):
        lineage.add_output("k", 1, "Q", 1.0, 1.0)
    with pytest.raises(ValueError, match="run_time"):
        lineage.add_output("k", 1, "X", -1.0, 1.0)
    with pytest.raises(ValueError, match="size"):
        lineage.add_output("k", 1, "X", 1.0, float("inf"))
    with pytest.raises(ValueError, match="already registered"):
        lineage.add_executor("X", Exponential(mean=1.0))
    with pytest.raises(ValueError, match="cannot read itself"):
        lineage.add_output("k", 1, "X", 1.0, 1.0, parents=["k"])
    with pytest.raises(ValueError, match="edges"):
        TimeGrid.from_edges([0.0, 2.0, 1.0])
    with pytest.raises(ValueError, match="horizon"):
        TimeGrid.geometric(0.0)
    with pytest.raises(ValueError, match="size"):
        TimeGrid.geometric(10.0, size=1)


def test_lineage_aggregates_per_executor_and_location_group() -> None:
    lineage = _lineage({e: Exponential(mean=10.0) for e in "XYZ"})
    for i, (ex, c) in enumerate([("X", 1.0), ("X", 2.0), ("Y", 4.0)]):
        lineage.add_output("s", i, ex, c, 1.0)
    state = lineage.shuffle("s")
    x, y, z = (lineage.executor(e).slot for e in "XYZ")
    assert (state.single_cost[x], state.single_cost[y], state.single_count[x]) == (3.0, 4.0, 2)
    lineage.add_location("s", 2, "Z")  # Y4 -> multi {Y, Z}
    assert state.single_cost[y] == 0.0
    assert state.multi == {frozenset({y, z}): [4.0, 1.0]}
    lineage.remove_executor("Z")  # back to Y only
    assert state.multi == {}
    assert state.single_cost[y] == 4.0
    lineage.remove_executor("X")  # X's two outputs are lost
    assert (state.lost_cost, state.lost_count) == (3.0, 2)
    lineage.add_executor("W", Exponential(mean=5.0))  # reuses a free slot, which holds nothing
    assert state.single_cost[lineage.executor("W").slot] == 0.0
    assert len(lineage) == 3
