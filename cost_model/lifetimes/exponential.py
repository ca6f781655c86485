"""Exponential lifetimes: constant hazard, memoryless (the paper's §6 VM model)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from .base import FloatArray, LifetimeModel, as_float_array, check_positive


class Exponential(LifetimeModel):
    """Constant eviction rate :math:`\\lambda` (1/s).

    .. math::

        S(t) = e^{-\\lambda t}, \\quad f(t) = \\lambda e^{-\\lambda t}, \\quad h(t) = \\lambda, \\quad
        E[T] = m(\\tau) = 1/\\lambda, \\quad E_\\tau(a, b) = \\frac{e^{-\\lambda a} - e^{-\\lambda b}}{\\lambda}.

    Memoryless: every conditional quantity is independent of the age τ.

    Parameters
    ----------
    mean : float
        Mean lifetime :math:`1/\\lambda` in seconds (> 0). Give either ``mean`` or ``rate``.
    rate : float
        Eviction rate :math:`\\lambda` in 1/s (> 0).
    """

    name = "exponential"
    age_free = True

    def __init__(self, mean: float | None = None, *, rate: float | None = None) -> None:
        if (mean is None) == (rate is None):
            raise ValueError("exponential: give exactly one of 'mean' (seconds) or 'rate' (1/s)")
        if mean is not None:
            # Remember what was given so that spec() round-trips it bit for bit.
            self._given = ("mean", check_positive(self.name, "mean", mean))
            self.rate_ = 1.0 / self._given[1]
        else:
            assert rate is not None
            self._given = ("rate", check_positive(self.name, "rate", rate, "per second"))
            self.rate_ = self._given[1]
        self._minus_rate = -self.rate_

    def sf(self, t: ArrayLike) -> FloatArray:
        return np.exp(-self.rate_ * np.maximum(as_float_array(t), 0.0))

    def pdf(self, t: ArrayLike) -> FloatArray:
        t_a = as_float_array(t)
        return np.where(t_a >= 0.0, self.rate_ * np.exp(-self.rate_ * np.maximum(t_a, 0.0)), 0.0)

    def cumulative_hazard(self, t: ArrayLike) -> FloatArray:
        return self.rate_ * np.maximum(as_float_array(t), 0.0)

    def hazard(self, t: ArrayLike) -> FloatArray:
        return np.where(as_float_array(t) >= 0.0, self.rate_, 0.0)

    def cond_cumulative_hazard(self, age: ArrayLike, t: ArrayLike) -> FloatArray:
        # Memoryless: λt at any age, with no cancellation of large H(τ) values.
        hazard = self.cumulative_hazard(t)
        out = np.empty(np.broadcast(np.asarray(age), hazard).shape)
        out[...] = hazard
        return out

    def cond_sf(self, age: ArrayLike, t: ArrayLike) -> FloatArray:
        # exp(-cond_cumulative_hazard) as the base computes it, without the intermediate copies:
        # (-λ)·t is -(λ·t) exactly (rounding is symmetric), in the shape of age and t broadcast.
        exponent = self._minus_rate * np.maximum(as_float_array(t), 0.0)
        age_shape = np.shape(age)
        if not age_shape or age_shape == np.shape(exponent):
            return np.exp(exponent)
        out = np.empty(np.broadcast(np.asarray(age), exponent).shape)
        out[...] = exponent
        return np.exp(out, out=out)

    def cond_cdf_values(self, age: float | FloatArray, times: Sequence[float]) -> list[float]:
        # Memoryless: 1 - e^{-λ max(t, 0)} at any age, one exp per end rather than an array round
        # trip. numpy's float64 exp is libm's unless it runs its AVX-512 loop, then within an ulp.
        minus_rate = self._minus_rate
        return [1.0 - math.exp(minus_rate * (0.0 if t < 0.0 else t)) for t in times]  # max(t, 0), inlined

    def prob_fail(self, age: ArrayLike, a: ArrayLike, b: ArrayLike) -> FloatArray:
        if not (isinstance(age, float) and isinstance(a, float) and isinstance(b, float) and math.isfinite(a + b)):
            return super().prob_fail(age, a, b)
        # One finite window at one age: the base's S(a) - S(max(b, a)) clipped to [0, 1], both
        # survivals in one call (exp gives each element the value it gives it alone).
        survival = np.exp(self._minus_rate * np.maximum(np.array([a, b if b > a else a]), 0.0)).tolist()
        return np.asarray(min(max(survival[0] - survival[1], 0.0), 1.0))

    def expected_lifetime(
        self, age: ArrayLike, a: ArrayLike, b: ArrayLike, *, points: int = 129
    ) -> FloatArray:
        a_a = np.maximum(as_float_array(a), 0.0)
        b_a = np.maximum(as_float_array(b), a_a)
        # (e^{-λa} - e^{-λb}) / λ written with expm1 so that short windows keep their digits.
        area = -np.exp(-self.rate_ * a_a) * np.expm1(-self.rate_ * (b_a - a_a)) / self.rate_
        shape = np.broadcast_shapes(np.shape(age), area.shape)
        return np.broadcast_to(area, shape).copy()

    def mean(self) -> float:
        return 1.0 / self.rate_

    def mean_residual_life(self, age: ArrayLike) -> FloatArray:
        return np.full(np.shape(age), 1.0 / self.rate_, dtype=np.float64)

    def sample(self, n: int, rng: np.random.Generator) -> FloatArray:
        return rng.exponential(1.0 / self.rate_, size=n)

    def spec(self) -> str:
        key, value = self._given
        return f"exponential:{key}={value!r}"
