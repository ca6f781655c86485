"""Weibull lifetimes: a hazard that falls (shape < 1), stays (= 1) or rises (> 1) with age."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import gammaincc

from .base import FloatArray, LifetimeModel, as_float_array, check_positive


class Weibull(LifetimeModel):
    """Weibull law with shape :math:`k` and scale :math:`\\lambda` (s), as ``scipy.stats.weibull_min(k, scale=λ)``.

    .. math::

        H(t) = (t/\\lambda)^k, \\quad S(t) = e^{-H(t)}, \\quad
        h(t) = \\frac{k}{\\lambda}\\left(\\frac{t}{\\lambda}\\right)^{k-1}, \\quad
        f(t) = h(t)\\,S(t), \\quad E[T] = \\lambda\\,\\Gamma(1 + 1/k).

    Shape < 1 (infant mortality: young executors die most) has :math:`f(0) = h(0) = \\infty`.

    Parameters
    ----------
    shape : float
        :math:`k`, dimensionless, > 0.
    scale : float
        :math:`\\lambda` in seconds, > 0 (the age by which 63.2 % have died).
    """

    name = "weibull"

    def __init__(self, shape: float, scale: float) -> None:
        self.shape_ = check_positive(self.name, "shape", shape, "dimensionless")
        self.scale_ = check_positive(self.name, "scale", scale)

    def cumulative_hazard(self, t: ArrayLike) -> FloatArray:
        return np.asarray((np.maximum(as_float_array(t), 0.0) / self.scale_) ** self.shape_, dtype=np.float64)

    def sf(self, t: ArrayLike) -> FloatArray:
        return np.exp(-self.cumulative_hazard(t))

    def cond_cumulative_hazard(self, age: ArrayLike, t: ArrayLike) -> FloatArray:
        """:math:`\\Delta H = (\\tau/\\lambda)^k\\,\\operatorname{expm1}(k \\ln(1 + t/\\tau))` for ``0 < t < τ``.

        The factored form keeps its digits for short windows at old ages, where the plain
        difference :math:`H(\\tau+t) - H(\\tau)` of two large numbers would cancel.
        """
        age_a = np.maximum(as_float_array(age), 0.0)
        t_a = as_float_array(t)
        t_pos = np.maximum(t_a, 0.0)
        short = (t_pos < age_a) & (age_a > 0.0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            factored = (age_a / self.scale_) ** self.shape_ * np.expm1(self.shape_ * np.log1p(t_pos / age_a))
        plain = np.maximum(self.cumulative_hazard(age_a + t_pos) - self.cumulative_hazard(age_a), 0.0)
        return np.where(t_a <= 0.0, 0.0, np.where(short, factored, plain))

    def hazard(self, t: ArrayLike) -> FloatArray:
        t_a = as_float_array(t)
        x = np.maximum(t_a, 0.0) / self.scale_
        with np.errstate(divide="ignore"):
            # 0 ** (k - 1) is inf for k < 1: the true limit of the hazard at age 0.
            h = self.shape_ / self.scale_ * x ** (self.shape_ - 1.0)
        return np.where(t_a >= 0.0, h, 0.0)

    def pdf(self, t: ArrayLike) -> FloatArray:
        h = self.hazard(t)
        s = self.sf(t)
        with np.errstate(invalid="ignore"):
            return np.where(s > 0.0, h * s, 0.0)

    def mean(self) -> float:
        # lgamma, not gamma: shape < ~0.006 has Γ(1 + 1/k) beyond float range (mean = inf).
        log_mean = math.log(self.scale_) + math.lgamma(1.0 + 1.0 / self.shape_)
        return math.exp(log_mean) if log_mean < 709.0 else math.inf

    def mean_residual_life(self, age: ArrayLike) -> FloatArray:
        """:math:`m(\\tau) = \\lambda\\,\\Gamma(1+1/k)\\,Q(1/k, x)\\,e^{x}` with :math:`x = (\\tau/\\lambda)^k` (s).

        :math:`Q` is the regularised upper incomplete gamma function. Past :math:`x = 600` the
        product :math:`Q e^x` leaves float range, and the generic quadrature takes over.
        """
        age_a = np.maximum(as_float_array(age), 0.0)
        x = (age_a / self.scale_) ** self.shape_
        a = 1.0 / self.shape_  # ∫_τ^∞ S = (λ/k) Γ(1/k, x) = λ Γ(1 + 1/k) Q(1/k, x)
        with np.errstate(over="ignore", invalid="ignore"):
            closed = self.mean() * gammaincc(a, np.minimum(x, 600.0)) * np.exp(np.minimum(x, 600.0))
        far = (x > 600.0) | ~np.isfinite(closed)
        if np.any(far):
            closed = np.where(far, super().mean_residual_life(np.where(far, age_a, 0.0)), closed)
        return np.asarray(closed, dtype=np.float64)

    def expected_lifetime(
        self, age: ArrayLike, a: ArrayLike, b: ArrayLike, *, points: int = 129
    ) -> FloatArray:
        """:math:`E_\\tau(a,b) = m(\\tau+a)\\,S_\\tau(a) - m(\\tau+b)\\,S_\\tau(b)` in closed form (s).

        From :math:`\\int_u^\\infty S = \\lambda\\,\\Gamma(1+1/k)\\,Q(1/k, x_u)\\,S(u)\\,e^{x_u}`,
        :math:`x_u = (u/\\lambda)^k`, with :math:`g(x) = Q(1/k, x)\\,e^{x}` from ``gammaincc`` up to
        :math:`x = 600` and from its asymptotic series past it (relative error < 1e-12 there).
        Windows shorter than 1e-6 of the remaining life (where the difference would lose more
        than ~1e-10 to cancellation) and dead ages use the generic quadrature.
        """
        age_a = np.maximum(as_float_array(age), 0.0)
        a_a = np.maximum(as_float_array(a), 0.0)
        b_a = np.maximum(as_float_array(b), a_a)
        age_b, a_b, b_b = np.broadcast_arrays(age_a, a_a, b_a)
        scaled = [self._scaled_tail(((age_b + u) / self.scale_) ** self.shape_) for u in (a_b, b_b)]
        # S_tau(u) * g(x_u): a vanishing survival times any g is 0 (no inf * 0, as at u = inf).
        with np.errstate(invalid="ignore"):
            terms = [np.where(sf > 0.0, sf * g, 0.0)
                     for sf, g in zip((self.cond_sf(age_b, a_b), self.cond_sf(age_b, b_b)), scaled, strict=True)]
        closed = self.mean() * (terms[0] - terms[1])
        remaining = self.mean() * terms[0]
        generic = ~np.isfinite(closed) | (b_b - a_b < 1e-6 * remaining)
        out = np.array(np.maximum(closed, 0.0), dtype=np.float64)
        if np.any(generic):
            out[generic] = super().expected_lifetime(age_b[generic], a_b[generic], b_b[generic], points=points)
        return out

    def _scaled_tail(self, x: FloatArray) -> FloatArray:
        """:math:`g(x) = Q(1/k, x)\\,e^{x}` (dimensionless): exact to x = 600, asymptotic series past it.

        .. math:: g(x) \\sim \\frac{x^{s-1}}{\\Gamma(s)} \\sum_{n \\ge 0} \\frac{(s-1)(s-2)\\cdots(s-n)}{x^n}, \\quad s = 1/k
        """
        s = 1.0 / self.shape_
        near = np.minimum(x, 600.0)
        with np.errstate(over="ignore", invalid="ignore"):
            exact = gammaincc(s, near) * np.exp(near)
        far = np.maximum(x, 600.0)
        series, term = np.ones_like(far), np.ones_like(far)
        for n in range(1, 12):
            term = term * (s - n) / far
            series = series + term
        with np.errstate(over="ignore", divide="ignore"):
            asymptotic = np.exp((s - 1.0) * np.log(far) - math.lgamma(s)) * series
        return np.where(x <= 600.0, exact, asymptotic)

    def sample(self, n: int, rng: np.random.Generator) -> FloatArray:
        return self.scale_ * rng.weibull(self.shape_, size=n)

    def spec(self) -> str:
        return f"weibull:shape={self.shape_!r},scale={self.scale_!r}"
