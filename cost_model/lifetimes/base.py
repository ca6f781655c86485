"""The one interface every executor-lifetime model implements.

A lifetime model describes the random time ``T`` (seconds) from an executor's start until it is
taken away. Subclasses supply the least they must -- ``sf`` and ``pdf`` (and, where it helps
numerics, ``cumulative_hazard`` / ``mean`` / ``sample``) -- and this base derives the rest,
including the *conditional* quantities TR-Spark needs for an executor that has already lived
``age`` seconds (paper §4.1, our notation):

.. math::

    f(t \\mid \\tau) = \\frac{f(\\tau + t)}{S(\\tau)}, \\qquad
    P(a \\le T - \\tau < b \\mid T > \\tau) = \\frac{S(\\tau + a) - S(\\tau + b)}{S(\\tau)}, \\qquad
    E_\\tau(a, b) = \\int_a^b \\frac{S(\\tau + u)}{S(\\tau)}\\,du .

Times ``t``, ``a``, ``b`` in the conditional methods are measured *from now* (the executor's
current age ``τ``), never absolute. All methods are vectorised over numpy arrays and broadcast
their arguments; scalars in give numpy scalars / 0-d results out.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

_TINY = 1e-300


def as_float_array(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


class LifetimeModel(ABC):
    """Distribution of an executor's lifetime ``T`` in seconds (support ``[0, upper)``)."""

    #: Short name used by :func:`cost_model.lifetimes.from_spec` (e.g. ``"weibull"``).
    name: str = ""

    # ---- what a model must supply ------------------------------------------------------------
    @abstractmethod
    def sf(self, t: ArrayLike) -> FloatArray:
        """Survival function :math:`S(t) = P(T > t)`; ``S(t) = 1`` for ``t <= 0``."""

    @abstractmethod
    def pdf(self, t: ArrayLike) -> FloatArray:
        """Density :math:`f(t) = -dS/dt` in 1/s (0 outside the support)."""

    @abstractmethod
    def mean(self) -> float:
        """:math:`E[T]` in seconds."""

    @abstractmethod
    def sample(self, n: int, rng: np.random.Generator) -> FloatArray:
        """``n`` independent lifetimes (seconds) drawn with ``rng``."""

    @abstractmethod
    def spec(self) -> str:
        """The ``from_spec`` string that rebuilds this model."""

    # ---- derived ------------------------------------------------------------------------------
    @property
    def upper(self) -> float:
        """Supremum of the support in seconds (``inf`` unless the lifetime is bounded)."""
        return float("inf")

    def cdf(self, t: ArrayLike) -> FloatArray:
        """:math:`F(t) = 1 - S(t)`."""
        return 1.0 - self.sf(t)

    def cumulative_hazard(self, t: ArrayLike) -> FloatArray:
        """:math:`H(t) = -\\ln S(t)` (``inf`` past the support)."""
        with np.errstate(divide="ignore"):
            return -np.log(self.sf(t))

    def hazard(self, t: ArrayLike) -> FloatArray:
        """:math:`h(t) = f(t) / S(t)` in 1/s (``inf`` past the support)."""
        s = self.sf(t)
        f = self.pdf(t)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(s > _TINY, f / np.maximum(s, _TINY), np.inf)

    # ---- conditional on having lived `age` seconds ---------------------------------------------
    def cond_sf(self, age: ArrayLike, t: ArrayLike) -> FloatArray:
        """:math:`P(T > \\tau + t \\mid T > \\tau) = S(\\tau + t) / S(\\tau)`.

        An executor already past the support (``S(τ) = 0``) is treated as failing now (0).
        """
        age_a = as_float_array(age)
        t_a = np.maximum(as_float_array(t), 0.0)
        s0 = self.sf(age_a)
        st = self.sf(age_a + t_a)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(s0 > _TINY, np.clip(st / np.maximum(s0, _TINY), 0.0, 1.0), 0.0)

    def cond_pdf(self, age: ArrayLike, t: ArrayLike) -> FloatArray:
        """Failure density ``t`` seconds from now given alive at age τ: :math:`f(\\tau+t)/S(\\tau)` (1/s)."""
        age_a = as_float_array(age)
        t_a = as_float_array(t)
        s0 = self.sf(age_a)
        f = np.where(t_a >= 0.0, self.pdf(age_a + np.maximum(t_a, 0.0)), 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(s0 > _TINY, f / np.maximum(s0, _TINY), 0.0)

    def prob_fail(self, age: ArrayLike, a: ArrayLike, b: ArrayLike) -> FloatArray:
        """:math:`P(\\text{fail in } [\\tau+a, \\tau+b) \\mid T > \\tau)` (dimensionless, 0 if b <= a)."""
        a_a = np.maximum(as_float_array(a), 0.0)
        b_a = np.maximum(as_float_array(b), a_a)
        return np.clip(self.cond_sf(age, a_a) - self.cond_sf(age, b_a), 0.0, 1.0)

    def expected_lifetime(self, age: ArrayLike, a: ArrayLike, b: ArrayLike, *, points: int = 129) -> FloatArray:
        """Expected time alive within ``[τ+a, τ+b]``: :math:`E_\\tau(a,b) = \\int_a^b S(\\tau+u)/S(\\tau)\\,du` (s).

        This is the paper's ``E(t_i, t_j)``: the part of a window an executor is expected to
        survive. Integrated with the composite Simpson rule on ``points`` nodes (odd).
        """
        a_a = np.maximum(as_float_array(a), 0.0)
        b_a = np.maximum(as_float_array(b), a_a)
        u = np.linspace(0.0, 1.0, points)
        shape = np.broadcast_shapes(np.shape(age), a_a.shape, b_a.shape)
        a_b = np.broadcast_to(a_a, shape)[..., None]
        b_b = np.broadcast_to(b_a, shape)[..., None]
        age_b = np.broadcast_to(as_float_array(age), shape)[..., None]
        grid = a_b + (b_b - a_b) * u
        vals = self.cond_sf(age_b, grid)
        from scipy.integrate import simpson

        return np.asarray(simpson(vals, x=grid, axis=-1), dtype=np.float64)

    def mean_residual_life(self, age: ArrayLike) -> FloatArray:
        """:math:`m(\\tau) = E[T - \\tau \\mid T > \\tau] = \\int_0^\\infty S(\\tau+u)\\,du / S(\\tau)` (s).

        Generic numeric version (models override with closed forms where they exist).
        """
        from scipy.integrate import quad

        ages = as_float_array(age)
        out = np.empty(ages.shape, dtype=np.float64)
        for idx, tau in np.ndenumerate(ages):
            s0 = float(self.sf(tau))
            if s0 <= _TINY:
                out[idx] = 0.0
                continue
            upper = self.upper - float(tau) if np.isfinite(self.upper) else np.inf
            val, _ = quad(lambda u, tau=tau: float(self.sf(tau + u)), 0.0, upper, limit=200)
            out[idx] = val / s0
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec()!r})"
