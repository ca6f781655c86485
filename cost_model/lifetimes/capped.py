"""A lifetime model cut off at a fixed age: whoever is still alive then dies exactly then."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .base import FloatArray, LifetimeModel, as_float_array, check_positive


class Capped(LifetimeModel):
    """:math:`T = \\min(T_0, c)` for a base lifetime :math:`T_0` and a cap :math:`c` (seconds).

    .. math::

        S(t) = S_0(t)\\,\\mathbb{1}[t < c], \\quad
        P(T = c) = S_0(c^-), \\quad
        E_\\tau(a, b) = E_{0,\\tau}(a, \\min(b, c - \\tau)), \\quad
        m(\\tau) = m_0(\\tau) - \\frac{S_0(c)}{S_0(\\tau)}\\,m_0(c).

    The density, hazard and ``cond_pdf`` are those of the base before the cap (the atom at ``c``
    is not in them: use :meth:`cell_fail_probs`). Shared by :class:`Notice` (cap = the notice's
    deadline) and :class:`Bathtub` (cap = 24 h); not registered in ``from_spec`` on its own.

    Parameters
    ----------
    base : LifetimeModel
        Law of the lifetime without the cap.
    cap : float
        Age in seconds (> 0) at which every survivor dies.
    """

    continuous = False

    def __init__(self, base: LifetimeModel, cap: float) -> None:
        if not isinstance(base, LifetimeModel):
            raise ValueError(f"{self.name or 'capped'}: 'base' must be a LifetimeModel, got {base!r}")
        self.base_ = base
        self.cap_ = check_positive(self.name or "capped", "cap", cap)

    @property
    def upper(self) -> float:
        return min(self.cap_, self.base_.upper)

    def sf(self, t: ArrayLike) -> FloatArray:
        t_a = as_float_array(t)
        return np.where(t_a < self.cap_, self.base_.sf(t_a), 0.0)

    def cumulative_hazard(self, t: ArrayLike) -> FloatArray:
        t_a = as_float_array(t)
        return np.where(t_a < self.cap_, self.base_.cumulative_hazard(t_a), np.inf)

    def cond_cumulative_hazard(self, age: ArrayLike, t: ArrayLike) -> FloatArray:
        # The base's own (possibly cancellation-free) increment, until the cap ends everything.
        age_a = as_float_array(age)
        t_a = as_float_array(t)
        inside = self.base_.cond_cumulative_hazard(np.minimum(age_a, self.cap_), t_a)
        ends = (age_a + np.maximum(t_a, 0.0) >= self.cap_) & (t_a > 0.0)
        return np.where(ends, np.inf, inside)

    def hazard(self, t: ArrayLike) -> FloatArray:
        t_a = as_float_array(t)
        return np.where(t_a < self.cap_, self.base_.hazard(t_a), np.inf)

    def pdf(self, t: ArrayLike) -> FloatArray:
        t_a = as_float_array(t)
        return np.where(t_a < self.cap_, self.base_.pdf(t_a), 0.0)

    def expected_lifetime(
        self, age: ArrayLike, a: ArrayLike, b: ArrayLike, *, points: int = 129
    ) -> FloatArray:
        age_a = as_float_array(age)
        a_a = np.maximum(as_float_array(a), 0.0)
        # Past the cap nothing survives, so the window ends there; the base's own integral is
        # then exact for the capped law (same S before the cap, same S(τ) for τ < cap).
        hi = np.maximum(np.minimum(as_float_array(b), self.cap_ - age_a), a_a)
        inside = self.base_.expected_lifetime(age_a, a_a, hi, points=points)
        return np.where(age_a < self.cap_, inside, 0.0)

    def mean(self) -> float:
        beyond = float(self.base_.mean_residual_life(self.cap_))
        if not np.isfinite(beyond):
            return float(self.mean_residual_life(0.0))  # see there
        return self.base_.mean() - float(self.base_.sf(self.cap_)) * beyond

    def mean_residual_life(self, age: ArrayLike) -> FloatArray:
        age_a = as_float_array(age)
        before = np.minimum(age_a, self.cap_)
        beyond = float(self.base_.mean_residual_life(self.cap_))
        if not np.isfinite(beyond):
            # A base that never ends (stable) or whose mean is infinite: inf - inf has no meaning,
            # but the cap bounds the life, so m(τ) = E_0,τ(0, c - τ) is finite and exact.
            inside = self.base_.expected_lifetime(before, 0.0, self.cap_ - before)
            return np.where(age_a < self.cap_, inside, 0.0)
        # Survival from τ to the cap, times the base's expected life beyond the cap, is what the
        # cap takes away from the base's mean residual life.
        lost = self.base_.cond_sf(before, self.cap_ - before) * beyond
        return np.where(age_a < self.cap_, np.maximum(self.base_.mean_residual_life(before) - lost, 0.0), 0.0)

    def sample(self, n: int, rng: np.random.Generator) -> FloatArray:
        return np.minimum(self.base_.sample(n, rng), self.cap_)

    def spec(self) -> str:
        raise NotImplementedError("Capped has no spec of its own; use Notice or Bathtub")
