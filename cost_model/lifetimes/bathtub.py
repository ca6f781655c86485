"""GCP-preemptible-style lifetimes: bathtub hazard, and nobody lives past 24 hours.

Google's preemptible VMs are always stopped after 24 h, and measurements (Kadupitiya, Jadhao,
Sharma, "Modeling the temporally constrained preemptions of transient cloud VMs", HPDC'20) found
the preemption hazard bathtub-shaped: many VMs go in the first hours, few in mid-life, and the
rate climbs again towards the 24 h limit. This model builds that shape from three independent
causes of death (competing risks, so their hazards add) and a hard cap.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from .base import (
    FloatArray,
    LifetimeModel,
    as_float_array,
    check_nonnegative,
    check_positive,
    check_unit_interval,
)
from .capped import Capped

_MODEL = "bathtub"


class _BathtubRisks(LifetimeModel):
    """The three competing causes of :class:`Bathtub` before its cap (continuous, unbounded)."""

    def __init__(
        self,
        early_prob: float,
        early_mean: float,
        mid_rate: float,
        late_prob: float,
        late_scale: float,
        cap: float,
    ) -> None:
        self.early_prob = early_prob
        self.early_mean = early_mean
        self.mid_rate = mid_rate
        self.late_scale = late_scale
        # c in H_late(t) = c (e^{(t-cap)/s} - e^{-cap/s}), chosen so that H_late(cap) = -ln(1 - late_prob).
        self._late_coef = -math.log1p(-late_prob) / -math.expm1(-cap / late_scale)
        self._late_base = self._late_coef * math.exp(-cap / late_scale)
        self._cap = cap

    def cumulative_hazard(self, t: ArrayLike) -> FloatArray:
        t_a = np.maximum(as_float_array(t), 0.0)
        if self.early_prob == 1.0:
            early = t_a / self.early_mean
        else:
            early = -np.log1p(self.early_prob * np.expm1(-t_a / self.early_mean))
        with np.errstate(over="ignore"):
            late = self._late_base * np.expm1(t_a / self.late_scale)
        return np.asarray(early + self.mid_rate * t_a + late, dtype=np.float64)

    def sf(self, t: ArrayLike) -> FloatArray:
        return np.exp(-self.cumulative_hazard(t))

    def hazard(self, t: ArrayLike) -> FloatArray:
        t_raw = as_float_array(t)
        t_a = np.maximum(t_raw, 0.0)
        decay = np.exp(-t_a / self.early_mean)
        if self.early_prob == 1.0:
            early = np.full(t_a.shape, 1.0 / self.early_mean)
        else:
            early = (
                self.early_prob
                * decay
                / (self.early_mean * (1.0 + self.early_prob * np.expm1(-t_a / self.early_mean)))
            )
        with np.errstate(over="ignore"):
            late = self._late_base / self.late_scale * np.exp(t_a / self.late_scale)
        return np.where(t_raw >= 0.0, early + self.mid_rate + late, 0.0)

    def pdf(self, t: ArrayLike) -> FloatArray:
        s = self.sf(t)
        with np.errstate(invalid="ignore"):
            return np.where(s > 0.0, self.hazard(t) * s, 0.0)

    def mean(self) -> float:
        # Past the cap the late hazard explodes within a few late_scale; 60 of them end the
        # integral long after S has underflowed. Breakpoints let quad resolve each phase.
        end = self._cap + 60.0 * self.late_scale
        return _integrate_sf(self, 0.0, end, [10.0 * self.early_mean, self._cap])

    def sample(self, n: int, rng: np.random.Generator) -> FloatArray:
        early = np.where(rng.random(n) < self.early_prob, rng.exponential(self.early_mean, n), np.inf)
        mid = rng.exponential(1.0 / self.mid_rate, n) if self.mid_rate > 0.0 else np.full(n, np.inf)
        # Inverse of H_late: t = s ln(1 + E / (c e^{-cap/s})) with E ~ Exp(1).
        with np.errstate(divide="ignore"):
            late = self.late_scale * np.log1p(rng.exponential(1.0, n) / self._late_base)
        return np.asarray(np.minimum(np.minimum(early, mid), late), dtype=np.float64)

    def spec(self) -> str:
        raise NotImplementedError("the uncapped part of a Bathtub has no spec; use Bathtub.spec()")


def _integrate_sf(model: LifetimeModel, lo: float, hi: float, breaks: list[float]) -> float:
    """:math:`\\int_{lo}^{hi} S(u)\\,du` (s) by adaptive quadrature, with breakpoints inside (lo, hi)."""
    from scipy.integrate import quad  # imported here: the engine's start-up should not pay for it

    inside = sorted(b for b in breaks if lo < b < hi)
    value, _ = quad(lambda u: float(model.sf(u)), lo, hi, points=inside or None, limit=200)
    return float(value)


class Bathtub(Capped):
    """Competing early / mid-life / late risks, and certain death at ``cap`` (GCP: 24 h).

    .. math::

        H(t) = \\underbrace{-\\ln\\!\\left(1 - p_e + p_e e^{-t/m_e}\\right)}_{\\text{early}}
             + \\underbrace{\\lambda_m t}_{\\text{mid-life}}
             + \\underbrace{c\\,\\bigl(e^{(t - T_c)/s} - e^{-T_c/s}\\bigr)}_{\\text{late}}
             \\quad (t < T_c), \\qquad S(t) = 0 \\ (t \\ge T_c),

    with :math:`c = -\\ln(1 - p_l) / (1 - e^{-T_c/s})`. Its hazard
    :math:`h(t) = \\frac{p_e e^{-t/m_e}}{m_e (1 - p_e + p_e e^{-t/m_e})} + \\lambda_m + \\frac{c}{s} e^{(t-T_c)/s}`
    falls from :math:`p_e/m_e + \\lambda_m` over the first hours, stays near :math:`\\lambda_m`
    in mid-life and climbs again in the last few ``late_scale`` before the cap. The executors that
    survive all three causes die exactly at :math:`T_c` (an atom of mass :math:`S(T_c^-)`).

    The defaults give about 43 % of VMs preempted within 3 h, 46 % within 6 h, a near-flat middle
    (hazard 1e-6/s) and 25 % reaching the 24 h limit -- roughly the published GCP observations.
    Fit your own pool's lifetimes with :class:`Empirical` instead when you have them.

    Parameters
    ----------
    early_prob : float
        :math:`p_e` in [0, 1]: share of VMs taken by the early cause (if it were the only one).
    early_mean : float
        :math:`m_e` in seconds (> 0): mean time to an early preemption.
    mid_rate : float
        :math:`\\lambda_m` in 1/s (>= 0): constant background preemption rate.
    late_prob : float
        :math:`p_l` in [0, 1): probability the late cause strikes before the cap (if it were the
        only one).
    late_scale : float
        :math:`s` in seconds (> 0): e-folding time of the late hazard's climb towards the cap.
    cap : float
        :math:`T_c` in seconds (> 0): the maximum lifetime (GCP: 86400).
    """

    name = _MODEL

    def __init__(
        self,
        early_prob: float = 0.45,
        early_mean: float = 3600.0,
        mid_rate: float = 1e-6,
        late_prob: float = 0.5,
        late_scale: float = 3600.0,
        cap: float = 86400.0,
    ) -> None:
        rate = check_nonnegative(_MODEL, "mid_rate", mid_rate, "per second")
        risks = _BathtubRisks(
            early_prob=check_unit_interval(_MODEL, "early_prob", early_prob),
            early_mean=check_positive(_MODEL, "early_mean", early_mean),
            mid_rate=rate,
            late_prob=check_unit_interval(_MODEL, "late_prob", late_prob, closed_right=False),
            late_scale=check_positive(_MODEL, "late_scale", late_scale),
            cap=check_positive(_MODEL, "cap", cap),
        )
        super().__init__(risks, cap)
        self._risks = risks
        self._params = {
            "early_prob": risks.early_prob,
            "early_mean": risks.early_mean,
            "mid_rate": rate,
            "late_prob": float(late_prob),
            "late_scale": risks.late_scale,
            "cap": self.cap_,
        }

    def mean(self) -> float:
        breaks = [10.0 * self._risks.early_mean, self.cap_ - 10.0 * self._risks.late_scale]
        return _integrate_sf(self, 0.0, self.cap_, breaks)

    def mean_residual_life(self, age: ArrayLike) -> FloatArray:
        # The generic quadrature over the bounded support [τ, cap] beats Capped's subtraction here.
        return LifetimeModel.mean_residual_life(self, age)

    def spec(self) -> str:
        return f"{_MODEL}:" + ",".join(f"{key}={value!r}" for key, value in self._params.items())
