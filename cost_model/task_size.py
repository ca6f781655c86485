"""Lifetime-aware task sizing: the longest task whose expected loss to an eviction stays small.

A task of ``L`` seconds of work starts on an executor of age ``τ`` (s). If the executor dies
``t < L`` seconds later, the work done so far (``t`` s) is lost and the task pays a restart
cost ``c`` (s: launch, re-reading its input) before it runs again elsewhere. With
:math:`S_\\tau(t) = P(T > \\tau + t \\mid T > \\tau)` and :math:`F_\\tau = 1 - S_\\tau`, the expected
loss of one attempt is

.. math::

    \\ell_\\tau(L) = \\int_0^L (t + c)\\,dF_\\tau(t)
                 = \\underbrace{E_\\tau(0, L) - L\\,S_\\tau(L)}_{\\text{work lost}}
                   + c\\,\\bigl(1 - S_\\tau(L)\\bigr) \\quad [\\mathrm{s}],

with :math:`E_\\tau(0, L) = \\int_0^L S_\\tau(u)\\,du` the expected time alive in the task's window
(:meth:`~cost_model.lifetimes.base.LifetimeModel.expected_lifetime`; the middle form is
integration by parts, :math:`\\int_0^L t\\,dF = \\int_0^L (S(t) - S(L))\\,dt`). It is exact for point
masses too. The *loss fraction* is :math:`r(L) = \\ell_\\tau(L) / L` (dimensionless).

The rule: tasks are at most

.. math:: L^* = \\sup\\{L : r(u) \\le f \\ \\ \\forall u \\in (0, L]\\} \\quad [\\mathrm{s}],

the end of the first stretch where the loss fraction stays within ``f``. A task may land on
any executor, so with several executors (or pools) the loss is their weighted mean,
:math:`\\ell(L) = \\sum_e w_e\\,\\ell_{\\tau_e}(L) / \\sum_e w_e` (weights: e.g. cores), and an
executor that is never evicted contributes 0.

Hand-worked cases:

* Exponential, rate λ (1/s), ``c = 0``: with :math:`x = \\lambda L`,
  :math:`r = (1 - e^{-x}(1 + x)) / x = x/2 - x^2/3 + O(x^3)`, so :math:`L^* \\approx 2f/\\lambda`
  for small ``f`` (``x = 1`` gives ``r = 1 - 2/e``); a restart cost adds
  :math:`c(1 - e^{-x})/L \\to c\\lambda`, and when :math:`c\\lambda \\ge f` no length meets the rule
  (:math:`L^* = 0`). Memoryless: the age does not matter.
* Deterministic lifetime ``D`` s from now: nothing is lost while ``L < D`` and everything at
  ``L >= D``, so :math:`L^* = D` whatever ``f`` (< 1).
* Stable capacity: :math:`\\ell = 0`, :math:`L^* = \\infty` (no limit).

``r`` is found on a geometric grid of lengths and the first crossing refined with Brent's
method, so a law whose ``r`` dips above ``f`` between two grid points (ratio 1.1) could be
missed; for the smooth laws and point masses of :mod:`cost_model.lifetimes` it is not.

The partition size follows from the stage's processing rate ``R`` (bytes of input per second
of one task): :math:`B^* = L^* R` bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from .lifetimes.base import FloatArray, LifetimeModel, as_float_array

#: Shortest and longest task lengths searched (s): below 1 ms no task is useful, past ~30 years
#: there is no limit worth stating.
MIN_SECONDS = 1e-3
MAX_SECONDS = 1e9
_GRID_RATIO = 1.1


def expected_loss(
    model: LifetimeModel, length: ArrayLike, *, age: float = 0.0, restart: float = 0.0
) -> FloatArray:
    """:math:`\\ell_\\tau(L) = E_\\tau(0, L) - L\\,S_\\tau(L) + c\\,(1 - S_\\tau(L))` in seconds.

    Parameters
    ----------
    model : LifetimeModel
        The executor's lifetime law.
    length : array_like
        Task lengths ``L`` (s of work, >= 0).
    age : float
        The executor's age τ when the task starts (s).
    restart : float
        ``c``: seconds a cut task pays again before its work restarts (>= 0).
    """
    lengths = np.maximum(as_float_array(length), 0.0)
    survive = model.cond_sf(age, lengths)
    alive = model.expected_lifetime(age, 0.0, lengths)
    work = np.maximum(alive - lengths * survive, 0.0)
    return np.asarray(work + restart * (1.0 - survive), dtype=np.float64)


@dataclass(frozen=True)
class Placement:
    """Where a task may run: executors' (or pools') lifetime laws, their ages and how likely each is.

    Parameters
    ----------
    models : sequence of LifetimeModel
        The lifetime law of each executor (or pool) a task may land on.
    ages : sequence of float, optional
        Each one's age τ (s) when the task starts; default all 0.
    weights : sequence of float, optional
        How likely a task lands on each (e.g. its cores); default equal.
    """

    models: Sequence[LifetimeModel]
    ages: Sequence[float] | None = None
    weights: Sequence[float] | None = None

    def __post_init__(self) -> None:
        n = len(self.models)
        if n == 0:
            raise ValueError("task size: give at least one lifetime model")
        ages = [0.0] * n if self.ages is None else [float(a) for a in self.ages]
        weights = [1.0] * n if self.weights is None else [float(w) for w in self.weights]
        if len(ages) != n or len(weights) != n:
            raise ValueError(f"task size: {n} models but {len(ages)} ages and {len(weights)} weights")
        if any(not (a >= 0.0 and math.isfinite(a)) for a in ages):
            raise ValueError(f"task size: ages must be finite seconds >= 0, got {ages!r}")
        if any(not (w >= 0.0 and math.isfinite(w)) for w in weights) or sum(weights) <= 0.0:
            raise ValueError(f"task size: weights must be >= 0 and not all 0, got {weights!r}")
        object.__setattr__(self, "ages", ages)
        object.__setattr__(self, "weights", weights)


def loss_fraction(where: LifetimeModel | Placement, length: ArrayLike, *, restart: float = 0.0) -> FloatArray:
    """:math:`r(L) = \\sum_e w_e\\,\\ell_{\\tau_e}(L) / (L \\sum_e w_e)` (dimensionless; 0 at ``L = 0``).

    ``where`` is one executor's law (at age 0) or a :class:`Placement`.
    """
    place = where if isinstance(where, Placement) else Placement([where])
    if not (restart >= 0.0 and math.isfinite(restart)):
        raise ValueError(f"task size: 'restart' must be finite seconds >= 0, got {restart!r}")
    lengths = np.maximum(as_float_array(length), 0.0)
    total = np.zeros(lengths.shape)
    weights = list(place.weights or ())
    for model, age, weight in zip(place.models, place.ages or (), weights, strict=True):
        if weight > 0.0:
            total = total + weight * expected_loss(model, lengths, age=age, restart=restart)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(lengths > 0.0, total / (sum(weights) * lengths), 0.0)
    return np.asarray(ratio, dtype=np.float64)


def largest_task_seconds(where: LifetimeModel | Placement, fraction: float, *, restart: float = 0.0) -> float:
    """:math:`L^*`: the longest task (s) whose expected loss fraction stays within ``fraction``.

    ``inf`` when nothing is ever lost (stable capacity); 0 when even the shortest task exceeds
    ``fraction`` (the restart cost alone exceeds it, or executors live less than
    :data:`MIN_SECONDS`). Raises :class:`FractionTooLarge` when ``fraction`` is not below the
    peak of :math:`r` and no executor is stable: every length would pass, as :math:`r` falls for
    tasks far longer than a lifetime.

    Parameters
    ----------
    where : LifetimeModel or Placement
        One executor's law (at age 0), or the executors a task may land on.
    fraction : float
        ``f`` in (0, 1): the largest acceptable expected loss per second of task work.
    restart : float
        ``c`` (s), see :func:`expected_loss`.
    """
    if not (0.0 < fraction < 1.0):
        raise ValueError(f"task size: 'fraction' must be in (0, 1), got {fraction!r}")

    def excess(length: float) -> float:
        return float(loss_fraction(where, length, restart=restart)) - fraction

    grid, ratios = _loss_on_grid(where, restart)
    over = np.flatnonzero(ratios > fraction)
    if over.size == 0:
        return _nothing_over(where, fraction, ratios)
    first = int(over[0])
    if first == 0:
        return 0.0
    from scipy.optimize import brentq  # imported here: the engine's start-up should not pay for it

    lo, hi = float(grid[first - 1]), float(grid[first])
    return float(brentq(excess, lo, hi, xtol=1e-9 * hi, rtol=1e-12))


def check_fraction(where: LifetimeModel | Placement, fraction: float, *, restart: float = 0.0) -> None:
    """Raise :class:`FractionTooLarge` where :func:`largest_task_seconds` would, without its root search."""
    _grid, ratios = _loss_on_grid(where, restart)
    if not np.any(ratios > fraction):
        _nothing_over(where, fraction, ratios)


def _loss_on_grid(where: LifetimeModel | Placement, restart: float) -> tuple[FloatArray, FloatArray]:
    """Task lengths (s) from :data:`MIN_SECONDS` to :data:`MAX_SECONDS`, ratio :data:`_GRID_RATIO`, and ``r`` there."""
    steps = math.ceil(math.log(MAX_SECONDS / MIN_SECONDS) / math.log(_GRID_RATIO))
    grid = np.asarray(MIN_SECONDS * _GRID_RATIO ** np.arange(steps + 1), dtype=np.float64)
    return grid, loss_fraction(where, grid, restart=restart)


def _nothing_over(where: LifetimeModel | Placement, fraction: float, ratios: FloatArray) -> float:
    """:math:`L^*` (s) when ``r`` stays within ``fraction`` at every length searched."""
    peak = float(np.max(ratios))
    if peak <= 0.0:
        return math.inf  # nothing is ever lost: stable capacity
    if ratios[1] < ratios[0]:
        return 0.0  # r peaked below the shortest task searched: executors live less than a millisecond
    if _has_stable_capacity(where):
        return math.inf  # a task that keeps being lost on evictable executors ends on a stable one
    if ratios[-1] >= ratios[-2]:
        return math.inf  # r still rises at the longest length searched: its peak, past ~30 years, limits nothing
    # r(L) falls again for tasks far longer than a lifetime (an attempt loses at most one
    # lifetime of work), so a fraction above its peak would pass tasks that rarely finish.
    raise FractionTooLarge(fraction, peak)


class FractionTooLarge(ValueError):
    """The loss fraction asked for is not below the peak of :math:`r` (dimensionless) for these lifetimes."""

    def __init__(self, fraction: float, peak: float) -> None:
        super().__init__(f"task size: 'fraction' {fraction:g} is not below the largest expected loss fraction "
                         f"these lifetimes give ({peak:.3f}): every task length would pass")
        self.fraction = fraction
        self.peak = peak


def _has_stable_capacity(where: LifetimeModel | Placement) -> bool:
    """Whether a task may land on an executor that is never evicted (a model with no loss at any length)."""
    place = where if isinstance(where, Placement) else Placement([where])
    probe = np.array([MAX_SECONDS])
    return any(weight > 0.0 and float(expected_loss(model, probe, age=age)[0]) == 0.0
               for model, age, weight in zip(place.models, place.ages or (), place.weights or (), strict=True))


def partition_bytes(task_seconds: float, rate: float) -> float:
    """:math:`B^* = L^* R`: bytes of input a task may take (``inf`` when ``L^*`` is).

    ``rate`` is the stage's processing rate ``R`` in bytes of input per second of one task (> 0).
    """
    if not (rate > 0.0 and math.isfinite(rate)):
        raise ValueError(f"task size: 'rate' must be a finite number of bytes/s > 0, got {rate!r}")
    if task_seconds < 0.0:
        raise ValueError(f"task size: 'task_seconds' must be >= 0, got {task_seconds!r}")
    return task_seconds * rate


def split_count(task_seconds: float, limit: float) -> int:
    """Pieces of equal work a task of ``task_seconds`` is cut into so that each is <= ``limit`` s.

    :math:`k = \\lceil t / L^* \\rceil` (1 when ``limit`` is infinite or the task already fits).
    """
    if not limit > 0.0:
        raise ValueError(f"task size: 'limit' must be > 0 seconds, got {limit!r}")
    if not math.isfinite(limit) or task_seconds <= limit:
        return 1
    return math.ceil(task_seconds / limit)
