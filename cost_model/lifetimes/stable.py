"""A stable executor (on-demand, reserved): it is never taken away."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from .base import FloatArray, LifetimeModel, as_float_array


class Stable(LifetimeModel):
    """The lifetime of capacity that is never evicted: :math:`T = \\infty` almost surely.

    .. math::

        S(t) = 1, \\quad f(t) = 0, \\quad h(t) = 0, \\quad H(t) = 0, \\quad
        E_\\tau(a, b) = b - a, \\quad E[T] = m(\\tau) = \\infty .

    Every failure probability is 0, every residual-life quantile with ``q > 0`` is ``inf``
    (s) and every draw is ``inf``. Spec: ``stable`` (no parameters).
    """

    name = "stable"
    age_free = True

    def sf(self, t: ArrayLike) -> FloatArray:
        return np.ones(np.shape(t), dtype=np.float64)

    def pdf(self, t: ArrayLike) -> FloatArray:
        return np.zeros(np.shape(t), dtype=np.float64)

    def cumulative_hazard(self, t: ArrayLike) -> FloatArray:
        return np.zeros(np.shape(t), dtype=np.float64)

    def hazard(self, t: ArrayLike) -> FloatArray:
        return np.zeros(np.shape(t), dtype=np.float64)

    def cond_cumulative_hazard(self, age: ArrayLike, t: ArrayLike) -> FloatArray:
        return np.zeros(np.broadcast_shapes(np.shape(age), np.shape(t)), dtype=np.float64)

    def cond_cdf_values(self, age: float | FloatArray, times: Sequence[float]) -> list[float]:
        return [0.0] * len(times)

    def cond_ppf(self, age: ArrayLike, q: ArrayLike) -> FloatArray:
        # The generic bracket search would double its bound 2200 times before reaching inf.
        _, q_a = np.broadcast_arrays(as_float_array(age), as_float_array(q))
        if np.any(~((q_a >= 0.0) & (q_a <= 1.0))):
            raise ValueError(f"cond_ppf: 'q' must be probabilities in [0, 1], got {q!r}")
        return np.where(q_a > 0.0, np.inf, 0.0)

    def expected_lifetime(
        self, age: ArrayLike, a: ArrayLike, b: ArrayLike, *, points: int = 129
    ) -> FloatArray:
        a_a = np.maximum(as_float_array(a), 0.0)
        b_a = np.maximum(as_float_array(b), a_a)
        shape = np.broadcast_shapes(np.shape(age), b_a.shape)
        return np.array(np.broadcast_to(b_a - a_a, shape), dtype=np.float64)

    def mean(self) -> float:
        return float("inf")

    def mean_residual_life(self, age: ArrayLike) -> FloatArray:
        return np.full(np.shape(age), np.inf, dtype=np.float64)

    def sample(self, n: int, rng: np.random.Generator) -> FloatArray:
        return np.full(n, np.inf, dtype=np.float64)

    def spec(self) -> str:
        return "stable"
