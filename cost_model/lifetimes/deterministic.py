"""A known lifetime (e.g. an AWS spot block): the executor dies exactly at age ``at``."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .base import FloatArray, LifetimeModel, as_float_array, check_positive


class Deterministic(LifetimeModel):
    """Point mass at :math:`T = a` (``at``, seconds).

    .. math::

        S(t) = \\mathbb{1}[t < a], \\quad H(t) = 0 \\text{ if } t < a \\text{ else } \\infty, \\quad
        E_\\tau(u, v) = \\max(0, \\min(v, a - \\tau) - u), \\quad m(\\tau) = \\max(0, a - \\tau).

    There is no density: ``pdf`` and ``cond_pdf`` are 0 everywhere (the whole mass is the atom
    at ``a``) and ``hazard`` is 0 before ``a`` and ``inf`` from it on. The failure lands in the
    cell :math:`(g_i, g_{i+1}]` holding ``a - τ`` in :meth:`cell_fail_probs`, and
    ``prob_fail(τ, u, v)`` is 1 exactly when ``u < a - τ <= v``. An executor seen alive at
    ``τ >= a`` fails now (see the base module's conventions).

    Parameters
    ----------
    at : float
        The lifetime in seconds (> 0).
    """

    name = "deterministic"
    continuous = False

    def __init__(self, at: float) -> None:
        self.at_ = check_positive(self.name, "at", at)

    @property
    def upper(self) -> float:
        return self.at_

    def sf(self, t: ArrayLike) -> FloatArray:
        return np.where(as_float_array(t) < self.at_, 1.0, 0.0)

    def cumulative_hazard(self, t: ArrayLike) -> FloatArray:
        return np.where(as_float_array(t) < self.at_, 0.0, np.inf)

    def hazard(self, t: ArrayLike) -> FloatArray:
        return self.cumulative_hazard(t)

    def pdf(self, t: ArrayLike) -> FloatArray:
        return np.zeros(np.shape(t), dtype=np.float64)

    def expected_lifetime(
        self, age: ArrayLike, a: ArrayLike, b: ArrayLike, *, points: int = 129
    ) -> FloatArray:
        a_a = np.maximum(as_float_array(a), 0.0)
        b_a = np.maximum(as_float_array(b), a_a)
        remaining = self.at_ - as_float_array(age)
        return np.asarray(np.clip(np.minimum(b_a, remaining) - a_a, 0.0, None), dtype=np.float64)

    def mean(self) -> float:
        return self.at_

    def mean_residual_life(self, age: ArrayLike) -> FloatArray:
        return np.asarray(np.maximum(self.at_ - as_float_array(age), 0.0), dtype=np.float64)

    def sample(self, n: int, rng: np.random.Generator) -> FloatArray:
        return np.full(n, self.at_, dtype=np.float64)

    def spec(self) -> str:
        return f"deterministic:at={self.at_!r}"
