"""A lifetime whose hazard is multiplied by a factor from one age on (an eviction risk raised by a warning)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .base import FloatArray, LifetimeModel, as_float_array, check_nonnegative, check_positive


class Raised(LifetimeModel):
    """Base lifetime :math:`T_0` whose hazard is :math:`k` times larger from age :math:`a` on.

    .. math::

        h(t) = h_0(t)\\,(1 + (k - 1)\\,\\mathbb{1}[t \\ge a]), \\qquad
        H(t) = H_0(t) + (k - 1)\\,\\max(0, H_0(t) - H_0(a)), \\qquad
        S(t) = e^{-H(t)},

    so an executor alive at age :math:`\\tau \\ge a` survives ``u`` more seconds with probability
    :math:`S_{0,\\tau}(u)^k` (a proportional-hazards shift; an exponential base of mean ``m``
    becomes an exponential of mean ``m / k`` after :math:`a`). ``k = 1`` is the base itself; a
    base that never fails (``stable``) still never fails. Ages and times in seconds, ``k``
    dimensionless.

    Parameters
    ----------
    base : LifetimeModel
        Law of the lifetime before the warning.
    onset : float
        Age (s, >= 0) from which the hazard is raised.
    factor : float
        The multiplier ``k`` (> 0).
    """

    def __init__(self, base: LifetimeModel, onset: float, factor: float) -> None:
        if not isinstance(base, LifetimeModel):
            raise ValueError(f"raised: 'base' must be a LifetimeModel, got {base!r}")
        self.base_ = base
        self.onset_ = check_nonnegative("raised", "onset", onset)
        self.factor_ = check_positive("raised", "factor", factor, unit="dimensionless")
        self.continuous = base.continuous

    @property
    def upper(self) -> float:
        return self.base_.upper

    def cumulative_hazard(self, t: ArrayLike) -> FloatArray:
        t_a = as_float_array(t)
        h = self.base_.cumulative_hazard(t_a)
        h_onset = float(self.base_.cumulative_hazard(self.onset_))
        with np.errstate(invalid="ignore"):
            extra = (self.factor_ - 1.0) * np.maximum(h - h_onset, 0.0)
        return np.asarray(np.where(np.isfinite(h), h + extra, np.inf), dtype=np.float64)

    def cond_cumulative_hazard(self, age: ArrayLike, t: ArrayLike) -> FloatArray:
        # The base's own increment split at the onset, so no large H values are subtracted.
        age_a = as_float_array(age)
        t_a = np.maximum(as_float_array(t), 0.0)
        before = np.clip(self.onset_ - age_a, 0.0, None)
        first = np.minimum(t_a, before)
        head = self.base_.cond_cumulative_hazard(age_a, first)
        tail = self.base_.cond_cumulative_hazard(age_a + first, t_a - first)
        with np.errstate(invalid="ignore"):
            return np.asarray(np.where(t_a > 0.0, head + self.factor_ * tail, 0.0), dtype=np.float64)

    def sf(self, t: ArrayLike) -> FloatArray:
        t_a = as_float_array(t)
        return np.asarray(np.where(t_a <= 0.0, 1.0, np.exp(-self.cumulative_hazard(t_a))), dtype=np.float64)

    def hazard(self, t: ArrayLike) -> FloatArray:
        t_a = as_float_array(t)
        return np.asarray(np.where(t_a >= self.onset_, self.factor_, 1.0) * self.base_.hazard(t_a), dtype=np.float64)

    def pdf(self, t: ArrayLike) -> FloatArray:
        t_a = as_float_array(t)
        with np.errstate(invalid="ignore"):
            out = np.where(self.sf(t_a) > 0.0, self.hazard(t_a) * self.sf(t_a), 0.0)
        return np.asarray(np.where(t_a < 0.0, 0.0, out), dtype=np.float64)

    def mean(self) -> float:
        return float(self.mean_residual_life(0.0))

    def mean_residual_life(self, age: ArrayLike) -> FloatArray:
        """:math:`m(\\tau) = E_{0,\\tau}(0, a - \\tau) + S_{0,\\tau}(a - \\tau)\\,\\int_0^\\infty S_{0,\\max(a,\\tau)}(u)^k\\,du` (s)."""
        ages = as_float_array(age)
        out = np.zeros(ages.shape, dtype=np.float64)
        for idx, tau in np.ndenumerate(ages):
            if not np.isfinite(float(self.base_.cumulative_hazard(tau))):
                continue
            before = max(self.onset_ - float(tau), 0.0)
            start = float(tau) + before
            head = float(self.base_.expected_lifetime(tau, 0.0, before)) if before > 0.0 else 0.0
            reach = float(self.base_.cond_sf(tau, before))
            out[idx] = head + reach * self._raised_tail(start)
        return out

    def _raised_tail(self, start: float) -> float:
        """:math:`\\int_0^\\infty S_{0,start}(u)^k\\,du` (s), in units of the base's residual life there."""
        from scipy.integrate import quad  # imported here: the engine's start-up should not pay for it

        scale = max(float(self.base_.mean_residual_life(start)), 1e-12)
        if not np.isfinite(scale):
            return float("inf")

        def surv(x: float) -> float:
            return float(np.exp(-self.factor_ * self.base_.cond_cumulative_hazard(start, scale * x)))

        return scale * float(quad(surv, 0.0, np.inf, limit=200)[0])

    def sample(self, n: int, rng: np.random.Generator) -> FloatArray:
        return self.ppf(rng.uniform(size=n))

    def spec(self) -> str:
        raise NotImplementedError("Raised has no spec of its own; it is built from an executor's warning")
