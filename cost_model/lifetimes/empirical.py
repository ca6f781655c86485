"""Kaplan–Meier lifetimes fitted from observed executor lifetimes, censored survivors included."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .base import FloatArray, LifetimeModel, as_float_array

_MODEL = "empirical"


class Empirical(LifetimeModel):
    """Kaplan–Meier survival from lifetimes, with an exponential tail past the longest one.

    With distinct event times :math:`t_1 < \\dots < t_m`, :math:`d_j` failures at :math:`t_j` and
    :math:`n_j` executors still observed just before it, up to the horizon :math:`t_h` (the
    longest duration, failed or censored):

    .. math::

        \\hat S(t) = \\prod_{t_j \\le t} \\left(1 - \\frac{d_j}{n_j}\\right) \\quad (t \\le t_h), \\qquad
        \\hat S(t) = \\hat S(t_h)\\,e^{-\\hat\\lambda (t - t_h)} \\quad (t > t_h),
        \\qquad \\hat\\lambda = \\frac{\\sum_i \\delta_i}{\\sum_i d_i} .

    Kaplan–Meier says nothing past the longest observation; when survivors remain there
    (:math:`\\hat S(t_h) > 0`) the tail is exponential with the pool's overall failure rate
    :math:`\\hat\\lambda` (failures per second of observed life, the censored MLE of a constant
    rate). When the longest duration is a failure, :math:`\\hat S(t_h) = 0` and the support ends
    at :math:`t_h`. The mean is :math:`\\int_0^\\infty \\hat S`, exact for the steps plus
    :math:`\\hat S(t_h)/\\hat\\lambda` for the tail.

    ``S`` is a step function: its failures are atoms at the event times, so ``pdf``/``hazard``
    (continuous part) are 0 up to :math:`t_h` and :math:`\\hat\\lambda \\hat S(t)` /
    :math:`\\hat\\lambda` in the tail. Use :meth:`cell_fail_probs` to integrate failures.

    Parameters
    ----------
    durations : array_like
        Observed lifetimes :math:`d_i` in seconds (> 0): to the eviction, or to the end of
        observation for a survivor.
    observed : array_like of {0, 1} or bool, optional
        :math:`\\delta_i = 1` if executor *i* was evicted at :math:`d_i`, 0 if still alive then
        (right-censored). Default: all evicted.

    Attributes
    ----------
    times_ : ndarray
        Distinct durations (s), ascending; :math:`\\hat S` drops only at those with failures.
    survival_ : ndarray
        :math:`\\hat S` just after each of ``times_``.
    horizon_ : float
        Longest duration :math:`t_h` (s).
    tail_rate_ : float
        :math:`\\hat\\lambda` (1/s).
    n_events_ : int
        Number of observed evictions.
    """

    name = _MODEL
    continuous = False

    def __init__(self, durations: ArrayLike, observed: ArrayLike | None = None) -> None:
        from scipy.stats import CensoredData, ecdf  # imported here: only a fitted model needs scipy.stats

        self._durations, self._observed = _validate(durations, observed)
        result = ecdf(
            CensoredData(uncensored=self._durations[self._observed], right=self._durations[~self._observed])
        )
        self.times_: FloatArray = np.asarray(result.sf.quantiles, dtype=np.float64)
        self.survival_: FloatArray = np.clip(np.asarray(result.sf.probabilities, dtype=np.float64), 0.0, 1.0)
        self.horizon_ = float(self.times_[-1])
        self.n_events_ = int(self._observed.sum())
        self.tail_rate_ = self.n_events_ / float(self._durations.sum())
        # S is levels[j] on [knots[j], knots[j+1]); area[j] = ∫_0^{knots[j]} S.
        self._knots = np.concatenate(([0.0], self.times_))
        self._levels = np.concatenate(([1.0], self.survival_))
        self._area = np.concatenate(([0.0], np.cumsum(self._levels[:-1] * np.diff(self._knots))))
        self._last = float(self.survival_[-1])

    @classmethod
    def fit(cls, durations: ArrayLike, observed: ArrayLike | None = None) -> Empirical:
        """Fit Kaplan–Meier to ``durations`` (s) with eviction flags ``observed`` (same as the constructor)."""
        return cls(durations, observed)

    @property
    def upper(self) -> float:
        return self.horizon_ if self._last == 0.0 else float("inf")

    # ---- S and H -------------------------------------------------------------------------------
    def _level(self, t: FloatArray) -> FloatArray:
        """Kaplan–Meier step value at ``t`` (ignoring the tail)."""
        return np.asarray(self._levels[np.searchsorted(self.times_, t, side="right")], dtype=np.float64)

    def sf(self, t: ArrayLike) -> FloatArray:
        t_a = as_float_array(t)
        tail = self._last * np.exp(-self.tail_rate_ * np.maximum(t_a - self.horizon_, 0.0))
        return np.where(t_a > self.horizon_, tail, self._level(t_a))

    def cumulative_hazard(self, t: ArrayLike) -> FloatArray:
        t_a = as_float_array(t)
        with np.errstate(divide="ignore"):
            steps = -np.log(self._level(t_a))
        tail = steps + self.tail_rate_ * np.maximum(t_a - self.horizon_, 0.0)
        return np.where(t_a > self.horizon_, tail, steps)

    def cond_cumulative_hazard(self, age: ArrayLike, t: ArrayLike) -> FloatArray:
        age_a = as_float_array(age)
        t_a = as_float_array(t)
        # In the tail the law is memoryless: λt exactly, whatever the age.
        tail = self.tail_rate_ * np.maximum(t_a, 0.0)
        inside = super().cond_cumulative_hazard(age_a, t_a)
        return np.where((age_a >= self.horizon_) & (self._last > 0.0), tail, inside)

    def hazard(self, t: ArrayLike) -> FloatArray:
        t_a = as_float_array(t)
        return np.where(self.sf(t_a) <= 0.0, np.inf, np.where(t_a > self.horizon_, self.tail_rate_, 0.0))

    def pdf(self, t: ArrayLike) -> FloatArray:
        t_a = as_float_array(t)
        return np.where(t_a > self.horizon_, self.tail_rate_ * self.sf(t_a), 0.0)

    # ---- integrals of S ------------------------------------------------------------------------
    def _integrated_sf(self, t: FloatArray) -> FloatArray:
        """:math:`I(t) = \\int_0^t \\hat S(u)\\,du` (s), exact."""
        t_c = np.clip(t, 0.0, self.horizon_)
        j = np.searchsorted(self._knots, t_c, side="right") - 1
        steps = self._area[j] + self._levels[j] * (t_c - self._knots[j])
        beyond = np.maximum(t - self.horizon_, 0.0)
        return np.asarray(
            steps - self._last * np.expm1(-self.tail_rate_ * beyond) / self.tail_rate_, dtype=np.float64
        )

    def expected_lifetime(
        self, age: ArrayLike, a: ArrayLike, b: ArrayLike, *, points: int = 129
    ) -> FloatArray:
        age_a = as_float_array(age)
        a_a = np.maximum(as_float_array(a), 0.0)
        b_a = np.maximum(as_float_array(b), a_a)
        s0 = self.sf(age_a)
        with np.errstate(divide="ignore", invalid="ignore"):
            steps = (self._integrated_sf(age_a + b_a) - self._integrated_sf(age_a + a_a)) / s0
        # In the tail the law is memoryless; this form also survives S(τ) underflowing.
        rate = self.tail_rate_
        tail = -np.exp(-rate * a_a) * np.expm1(-rate * (b_a - a_a)) / rate
        out = np.where(age_a >= self.horizon_, tail, steps)
        return np.where(self._alive(age_a), out, 0.0)

    def mean(self) -> float:
        return float(self._area[-1] + self._last / self.tail_rate_)

    def mean_residual_life(self, age: ArrayLike) -> FloatArray:
        age_a = as_float_array(age)
        with np.errstate(divide="ignore", invalid="ignore"):
            steps = (self.mean() - self._integrated_sf(age_a)) / self.sf(age_a)
        out = np.where(age_a >= self.horizon_, 1.0 / self.tail_rate_, steps)
        return np.where(self._alive(age_a), np.maximum(out, 0.0), 0.0)

    # ---- sampling and spec ---------------------------------------------------------------------
    def sample(self, n: int, rng: np.random.Generator) -> FloatArray:
        u = 1.0 - rng.random(n)  # in (0, 1]
        # T = first time at which S drops below u (inverse transform of the step function) ...
        idx = np.searchsorted(-self.survival_, -u, side="right")
        steps = self.times_[np.minimum(idx, self.times_.size - 1)]
        # ... or, if S never does within the data, a draw from the exponential tail.
        with np.errstate(divide="ignore"):
            tail = self.horizon_ + np.log(self._last / u) / self.tail_rate_
        return np.where(idx < self.times_.size, steps, tail)

    def spec(self) -> str:
        durations = ";".join(repr(float(d)) for d in self._durations)
        observed = ";".join("1" if o else "0" for o in self._observed)
        return f"{_MODEL}:durations={durations},observed={observed}"


def _validate(durations: ArrayLike, observed: ArrayLike | None) -> tuple[FloatArray, NDArray[np.bool_]]:
    """Durations as floats > 0 and eviction flags as bools, or a ``ValueError`` naming the parameter."""
    try:
        d = np.asarray(durations, dtype=np.float64).ravel()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{_MODEL}: 'durations' must be numbers (seconds), got {durations!r}") from exc
    if d.size == 0 or not np.all(np.isfinite(d)) or np.any(d <= 0.0):
        raise ValueError(f"{_MODEL}: 'durations' must be a non-empty list of finite numbers > 0 seconds")
    if observed is None:
        return d, np.ones(d.size, dtype=bool)
    try:
        flags = np.asarray(observed, dtype=np.float64).ravel()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{_MODEL}: 'observed' must be 0/1 flags, got {observed!r}") from exc
    if flags.shape != d.shape:
        raise ValueError(f"{_MODEL}: 'observed' must have one flag per duration ({d.size}), got {flags.size}")
    if not np.all((flags == 0.0) | (flags == 1.0)):
        raise ValueError(f"{_MODEL}: 'observed' flags must be 0 (still alive) or 1 (evicted)")
    if not np.any(flags == 1.0):
        raise ValueError(f"{_MODEL}: 'observed' needs at least one eviction (1) to estimate lifetimes")
    return d, flags == 1.0
