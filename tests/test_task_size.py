"""The lifetime-aware task-size rule on hand-worked cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cost_model.lifetimes import Deterministic, Exponential, Stable, Weibull
from cost_model.task_size import (
    FractionTooLarge,
    Placement,
    check_fraction,
    expected_loss,
    largest_task_seconds,
    loss_fraction,
    partition_bytes,
    split_count,
)

ONE_MINUS_TWO_OVER_E = 1.0 - 2.0 / math.e  # r(x = 1) of an exponential law without restart cost


def test_exponential_loss_matches_the_closed_form():
    # lambda = 0.01 /s, L = 100 s: x = 1, lost work = (1 - e^-1)/lambda - L e^-1 = 100 (1 - 2/e) s.
    model = Exponential(rate=0.01)
    assert float(expected_loss(model, 100.0)) == pytest.approx(100.0 * ONE_MINUS_TWO_OVER_E, rel=1e-12)
    # With a restart cost c = 10 s: + c (1 - e^-1).
    assert float(expected_loss(model, 100.0, restart=10.0)) == pytest.approx(
        100.0 * ONE_MINUS_TWO_OVER_E + 10.0 * (1.0 - math.exp(-1.0)), rel=1e-12)


def test_exponential_rule_hits_x_equal_one():
    model = Exponential(rate=0.01)
    assert largest_task_seconds(model, ONE_MINUS_TWO_OVER_E) == pytest.approx(100.0, rel=1e-8)
    with_restart = ONE_MINUS_TWO_OVER_E + 10.0 * (1.0 - math.exp(-1.0)) / 100.0
    assert largest_task_seconds(model, with_restart, restart=10.0) == pytest.approx(100.0, rel=1e-8)


def test_exponential_small_fraction_is_two_f_over_lambda():
    # r = x/2 - x^2/3 + ...: for f = 0.01 the root is x = 0.02 (1 + 0.0133...) to second order.
    rate, f = 1.0 / 1000.0, 0.01
    limit = largest_task_seconds(Exponential(rate=rate), f)
    assert limit == pytest.approx(2.0 * f / rate, rel=0.02)
    assert float(loss_fraction(Exponential(rate=rate), limit)) == pytest.approx(f, rel=1e-9)


def test_exponential_rule_ignores_age():
    model = Exponential(mean=300.0)
    assert largest_task_seconds(Placement([model], ages=[1000.0]), 0.05) == pytest.approx(largest_task_seconds(model, 0.05), rel=1e-9)


def test_restart_cost_alone_beyond_the_fraction_allows_no_task():
    # c * lambda = 20 * 0.01 = 0.2 > f = 0.1: even a tiny task loses more than 10 % on average.
    assert largest_task_seconds(Exponential(rate=0.01), 0.1, restart=20.0) == 0.0


def test_deterministic_lifetime_allows_exactly_the_remaining_life():
    # Dies at age 100; started at age 30: nothing is lost below 70 s, everything from 70 s on.
    model = Deterministic(at=100.0)
    for f in (0.01, 0.1, 0.5):
        assert largest_task_seconds(Placement([model], ages=[30.0]), f) == pytest.approx(70.0, rel=1e-9)
    assert float(expected_loss(model, 80.0, age=30.0, restart=5.0)) == pytest.approx(75.0)
    assert float(expected_loss(model, 60.0, age=30.0, restart=5.0)) == 0.0


def test_stable_capacity_sets_no_limit():
    assert largest_task_seconds(Stable(), 0.01) == math.inf
    assert float(expected_loss(Stable(), 1e6)) == 0.0


def test_a_stable_pool_halves_the_loss_of_an_equal_mixture():
    model = Exponential(rate=0.01)
    f = ONE_MINUS_TWO_OVER_E / 2.0
    assert largest_task_seconds(Placement([model, Stable()]), f) == pytest.approx(100.0, rel=1e-8)
    # Three spot cores for one stable core: the loss is 3/4 of the spot one.
    r = float(loss_fraction(Placement([model, Stable()], weights=[3.0, 1.0]), 100.0))
    assert r == pytest.approx(0.75 * ONE_MINUS_TWO_OVER_E, rel=1e-12)


def test_young_executors_of_a_decreasing_hazard_allow_shorter_tasks():
    model = Weibull(shape=0.6, scale=600.0)
    young = largest_task_seconds(Placement([model], ages=[0.0]), 0.05)
    old = largest_task_seconds(Placement([model], ages=[3600.0]), 0.05)
    assert 0.0 < young < old < math.inf


def test_the_limit_grows_with_the_fraction():
    model = Weibull(shape=1.5, scale=600.0)
    limits = [largest_task_seconds(model, f) for f in (0.01, 0.05, 0.1, 0.2)]
    assert limits == sorted(limits) and len(set(limits)) == 4


def test_partition_bytes_and_split_count():
    assert partition_bytes(20.0, 50e6) == 1e9
    assert partition_bytes(math.inf, 50e6) == math.inf
    assert split_count(250.0, 100.0) == 3
    assert split_count(100.0, 100.0) == 1
    assert split_count(1e9, math.inf) == 1


@pytest.mark.parametrize("call", [
    lambda: largest_task_seconds(Exponential(rate=0.01), 0.0),
    lambda: largest_task_seconds(Exponential(rate=0.01), 1.0),
    lambda: Placement([]),
    lambda: Placement([Stable()], weights=[0.0]),
    lambda: Placement([Stable()], ages=[1.0, 2.0]),
    lambda: largest_task_seconds(Stable(), 0.1, restart=-1.0),
    lambda: partition_bytes(10.0, 0.0),
    lambda: split_count(10.0, 0.0),
])
def test_bad_input_is_rejected(call):
    with pytest.raises(ValueError, match="task size"):
        call()


def test_loss_fraction_is_vectorised():
    out = loss_fraction(Exponential(rate=0.01), np.array([0.0, 100.0]))
    assert out.shape == (2,) and out[0] == 0.0 and out[1] == pytest.approx(ONE_MINUS_TWO_OVER_E)


def exponential_peak() -> float:
    """The largest r(x) = (1 - e^-x (1 + x)) / x of an exponential law (no restart cost), by golden search."""
    from scipy.optimize import minimize_scalar

    found = minimize_scalar(lambda x: -(1.0 - math.exp(-x) * (1.0 + x)) / x, bounds=(0.1, 10.0), method="bounded",
                            options={"xatol": 1e-10})
    return float(-found.fun)


def test_a_fraction_above_the_peak_loss_is_refused_not_read_as_no_limit():
    # r rises to ~0.298 at x ~ 1.8 and falls again (an attempt loses at most one lifetime of work):
    # above the peak every length would pass, though a long task would rarely finish.
    model, peak = Exponential(rate=1 / 60), exponential_peak()
    assert 0.29 < peak < 0.3
    assert math.isfinite(largest_task_seconds(model, peak - 1e-3))
    for call in (largest_task_seconds, check_fraction):
        with pytest.raises(FractionTooLarge) as raised:
            call(model, peak + 1e-3)
        assert raised.value.peak == pytest.approx(peak, abs=1e-3)
    check_fraction(model, peak - 1e-3)  # no error below the peak


def test_a_lifetime_whose_loss_peaks_past_the_longest_length_searched_sets_no_limit():
    # r of an exponential peaks at ~1.8 means: past the search's ~30 years for a mean of 1e10 s.
    model = Exponential(mean=1e10)
    check_fraction(model, 0.05)
    assert largest_task_seconds(model, 0.05) == math.inf


def test_with_stable_capacity_above_the_peak_there_is_no_limit():
    # Three stable cores to one evictable: the mixture's r peaks at a quarter of the exponential's.
    mixture = Placement([Exponential(rate=1 / 60), Stable()], weights=[1.0, 3.0])
    assert largest_task_seconds(mixture, 0.1) == math.inf


@pytest.mark.parametrize("mean", [1e-5, 1e-6])
def test_executors_living_less_than_a_millisecond_allow_no_task(mean: float):
    assert largest_task_seconds(Exponential(rate=1 / mean), 0.05) == 0.0
