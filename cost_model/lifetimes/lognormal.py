"""Log-normal lifetimes: hazard rises to a peak, then falls (long-lived executors keep living)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import log_ndtr, ndtr

from .base import FloatArray, LifetimeModel, as_float_array, check_positive

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


class LogNormal(LifetimeModel):
    """:math:`\\ln T \\sim N(\\mu, \\sigma^2)` with :math:`\\mu = \\ln(\\text{median})`.

    Same law as ``scipy.stats.lognorm(s=sigma, scale=median)``. With :math:`z = (\\ln t - \\mu)/\\sigma`:

    .. math::

        S(t) = \\Phi(-z), \\quad H(t) = -\\ln \\Phi(-z), \\quad
        f(t) = \\frac{\\varphi(z)}{\\sigma t}, \\quad E[T] = \\text{median}\\cdot e^{\\sigma^2/2}.

    ``H`` and ``h`` go through ``log_ndtr`` so the far tail (ages of many medians) stays finite.

    Parameters
    ----------
    median : float
        :math:`e^{\\mu}` in seconds (> 0): half of the executors die before it.
    sigma : float
        Standard deviation of :math:`\\ln T` (dimensionless, > 0).
    """

    name = "lognormal"

    def __init__(self, median: float, sigma: float) -> None:
        self.median_ = check_positive(self.name, "median", median)
        self.sigma_ = check_positive(self.name, "sigma", sigma, "dimensionless")
        self._mu = math.log(self.median_)

    def _z(self, t: FloatArray) -> FloatArray:
        """Standardised log-time; ``-inf`` for ``t <= 0`` (no log(0) warning)."""
        with np.errstate(divide="ignore"):
            log_t = np.log(np.maximum(t, 0.0))
        return (log_t - self._mu) / self.sigma_

    def sf(self, t: ArrayLike) -> FloatArray:
        return np.asarray(ndtr(-self._z(as_float_array(t))), dtype=np.float64)

    def cdf(self, t: ArrayLike) -> FloatArray:
        return np.asarray(ndtr(self._z(as_float_array(t))), dtype=np.float64)

    def cumulative_hazard(self, t: ArrayLike) -> FloatArray:
        return np.asarray(-log_ndtr(-self._z(as_float_array(t))), dtype=np.float64)

    def _log_pdf(self, t: FloatArray) -> FloatArray:
        z = self._z(t)
        with np.errstate(divide="ignore"):
            log_t = np.log(np.maximum(t, 0.0))
        with np.errstate(invalid="ignore", over="ignore"):
            out = -0.5 * z * z - _LOG_SQRT_2PI - math.log(self.sigma_) - log_t
        return np.where(t > 0.0, out, -np.inf)

    def pdf(self, t: ArrayLike) -> FloatArray:
        return np.exp(self._log_pdf(as_float_array(t)))

    def hazard(self, t: ArrayLike) -> FloatArray:
        t_a = as_float_array(t)
        return np.exp(self._log_pdf(t_a) + self.cumulative_hazard(t_a))

    def mean(self) -> float:
        log_mean = self._mu + 0.5 * self.sigma_**2
        return math.exp(log_mean) if log_mean < 709.0 else math.inf

    def mean_residual_life(self, age: ArrayLike) -> FloatArray:
        """:math:`m(\\tau) = E[T]\\,\\Phi(\\sigma - z)/\\Phi(-z) - \\tau`, :math:`z = (\\ln\\tau - \\mu)/\\sigma` (s).

        The ratio is taken in logs (``log_ndtr``) so it stays finite far in the tail, where
        :math:`m(\\tau) \\approx \\sigma\\tau/z`; the subtraction then costs about
        :math:`\\log_{10}(z/\\sigma)` digits.
        """
        age_a = np.maximum(as_float_array(age), 0.0)
        z = self._z(age_a)
        with np.errstate(over="ignore", invalid="ignore"):
            closed = self.mean() * np.exp(log_ndtr(self.sigma_ - z) - log_ndtr(-z)) - age_a
        bad = ~np.isfinite(closed) | (closed <= 0.0)
        if np.any(bad):
            closed = np.where(bad, super().mean_residual_life(np.where(bad, age_a, 0.0)), closed)
        return np.asarray(closed, dtype=np.float64)

    def sample(self, n: int, rng: np.random.Generator) -> FloatArray:
        return rng.lognormal(self._mu, self.sigma_, size=n)

    def spec(self) -> str:
        return f"lognormal:median={self.median_!r},sigma={self.sigma_!r}"
