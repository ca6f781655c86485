"""Exponential lifetimes: constant hazard, memoryless (the paper's §6 VM model)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .base import FloatArray, LifetimeModel, as_float_array


class Exponential(LifetimeModel):
    """:math:`S(t) = e^{-\\lambda t}`, :math:`f(t) = \\lambda e^{-\\lambda t}`, mean :math:`1/\\lambda` (s).

    Parameters
    ----------
    mean : float
        Mean lifetime :math:`1/\\lambda` in seconds (> 0). Give either ``mean`` or ``rate``.
    rate : float
        Eviction rate :math:`\\lambda` in 1/s (> 0).
    """

    name = "exponential"

    def __init__(self, mean: float | None = None, *, rate: float | None = None) -> None:
        if (mean is None) == (rate is None):
            raise ValueError("exponential: give exactly one of 'mean' or 'rate'")
        if mean is not None:
            if not (np.isfinite(mean) and mean > 0):
                raise ValueError(f"exponential: 'mean' must be a finite number > 0 seconds, got {mean!r}")
            self.rate_ = 1.0 / float(mean)
        else:
            assert rate is not None
            if not (np.isfinite(rate) and rate > 0):
                raise ValueError(f"exponential: 'rate' must be a finite number > 0 per second, got {rate!r}")
            self.rate_ = float(rate)

    def sf(self, t: ArrayLike) -> FloatArray:
        return np.exp(-self.rate_ * np.maximum(as_float_array(t), 0.0))

    def pdf(self, t: ArrayLike) -> FloatArray:
        t_a = as_float_array(t)
        return np.where(t_a >= 0.0, self.rate_ * np.exp(-self.rate_ * np.maximum(t_a, 0.0)), 0.0)

    def cumulative_hazard(self, t: ArrayLike) -> FloatArray:
        return self.rate_ * np.maximum(as_float_array(t), 0.0)

    def hazard(self, t: ArrayLike) -> FloatArray:
        return np.full(np.shape(t), self.rate_, dtype=np.float64)

    def mean(self) -> float:
        return 1.0 / self.rate_

    def mean_residual_life(self, age: ArrayLike) -> FloatArray:
        return np.full(np.shape(age), 1.0 / self.rate_, dtype=np.float64)

    def sample(self, n: int, rng: np.random.Generator) -> FloatArray:
        return rng.exponential(1.0 / self.rate_, size=n)

    def spec(self) -> str:
        return f"exponential:mean={1.0 / self.rate_:.17g}"
