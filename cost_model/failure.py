"""Conditional failure probabilities of many executors on a time grid, vectorised per lifetime model."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from .lifetimes.base import FloatArray, LifetimeModel
from .lineage import Lineage

#: Floor of survival probabilities before taking logs (keeps ``log`` finite; exp(-690) ~ 0).
TINY = 1e-300
#: Values of :meth:`FailureTable.cdf_points` one table keeps (a decision reads a few per output).
POINTS_KEPT = 4096


def cond_cdf(model: LifetimeModel, ages: FloatArray, edges: FloatArray) -> FloatArray:
    """:math:`F_e(t) = P(T_e - \\tau_e \\le t \\mid T_e > \\tau_e)` at ``edges`` (``edges[0]`` must be 0).

    Accumulated from :meth:`LifetimeModel.cell_fail_probs`, so ``diff(F)`` is exactly the failure
    mass of each cell, point masses (deterministic lifetimes) included -- unlike ``cond_pdf * dt``.

    Returns
    -------
    ndarray, shape (P, n + 1)
        Dimensionless, non-decreasing along the last axis, ``F[:, 0] = 0``.
    """
    probs = model.cell_fail_probs(ages, edges)
    out = np.zeros((ages.size, edges.size))
    np.cumsum(probs, axis=1, out=out[:, 1:])
    return np.minimum(out, 1.0, out=out)


class FailureTable:
    """:math:`F_e(t)` of every live executor, conditional on its age at time ``now``.

    Row ``e`` is executor slot ``e`` of the lineage (rows of free slots are 0, i.e. never fail;
    they carry no outputs). The grid values are built once per refresh: O(#executors × #edges)
    model evaluations, one vectorised call per lifetime model (executors of one pool share a
    model object). An age-free model (``LifetimeModel.age_free``: exponential, stable) has one
    row for all its executors at every age, taken from the ``previous`` table when there is one.

    Attributes
    ----------
    now : float
        Driver time (s) the executors' ages were taken at.
    cdf : ndarray, shape (capacity, G + 1)
        :math:`F_e(g_i)` on the grid edges, dimensionless (accumulated cell failure masses).
    cdf_padded : ndarray, shape (capacity + 1, G + 1)
        :attr:`cdf` with an extra last row of ones (index -1 selects it as a neutral factor).
    """

    def __init__(self, lineage: Lineage, edges: FloatArray, now: float, previous: FailureTable | None = None) -> None:
        self.now = float(now)
        self.edges = edges
        capacity = lineage.capacity
        self.cdf = np.zeros((capacity, edges.size))
        self._ages = np.zeros(capacity)
        self._group = np.full(capacity, -1, dtype=np.int64)
        self._groups: list[tuple[LifetimeModel, NDArray[np.int64]]] = []
        self._age_free_rows: dict[int, tuple[LifetimeModel, FloatArray]] = {}
        self._continuous = np.ones(capacity, dtype=bool)
        self._points: dict[tuple[int, float], float] = {}
        for index, (model, members) in enumerate(lineage.executor_groups()):
            slots = np.array([ex.slot for ex in members], dtype=np.int64)
            self._ages[slots] = np.maximum(self.now - np.array([ex.started for ex in members]), 0.0)
            self._group[slots] = index
            self._continuous[slots] = model.continuous
            self._groups.append((model, slots))
            self.cdf[slots] = self._grid_values(model, self._ages[slots], previous)
        self.cdf_padded = np.vstack((self.cdf, np.ones(edges.size)))
        #: Whether every row is of a continuous law (:meth:`cdf_interpolated` then calls no model).
        self.all_continuous = bool(np.logical_and.reduce(self._continuous))

    def _grid_values(self, model: LifetimeModel, ages: FloatArray, previous: FailureTable | None) -> FloatArray:
        """``cond_cdf`` of ``model`` at ``ages``, shape ``(len(ages), G + 1)`` or one broadcast row.

        An age-free model's row comes from ``previous`` (same model object, same grid): with exact
        deadlines the table is rebuilt on most events, and these rows would come out the same.
        """
        if not model.age_free:
            return cond_cdf(model, ages, self.edges)
        kept = previous._age_free_rows.get(id(model)) if previous is not None and previous.edges is self.edges else None
        if kept is not None and kept[0] is model:
            row = kept[1]
        else:
            row = cond_cdf(model, ages[:1], self.edges)[0]
            row.setflags(write=False)
        self._age_free_rows[id(model)] = (model, row)
        return row

    def cdf_interpolated(self, times: FloatArray, slots: Sequence[int] | NDArray[np.int64]) -> FloatArray:
        """:math:`F_e(t)` for continuous laws interpolated linearly between grid edges; exact otherwise.

        Free of model calls. Second-order accurate (error :math:`\\le h^2 \\max|F''| / 8` for a cell of
        width :math:`h`) from the second cell on; in the first cell :math:`[0, g_1]`, where
        :math:`F \\propto t^k` with :math:`k < 1` is far from linear, it is only a rough value --
        callers use it there only where it does not matter. Point-mass laws and times past the
        horizon are evaluated exactly with :meth:`cdf_at`.

        Returns
        -------
        ndarray, shape (len(slots), len(times))
        """
        picked = np.asarray(slots, dtype=np.int64)
        edges = self.edges
        if times.size == 0 or np.minimum.reduce(times) < 0.0 or np.maximum.reduce(times) > edges[-1]:
            return self.cdf_at(times, slots)
        # np.minimum/np.maximum rather than np.clip: the same integers without np.clip's Python wrapper.
        right = np.minimum(np.maximum(np.searchsorted(edges, times), 1), edges.size - 1)
        weight = (times - edges[right - 1]) / (edges[right] - edges[right - 1])
        rows = picked[:, None]
        out = self.cdf[rows, right - 1] * (1.0 - weight) + self.cdf[rows, right] * weight
        exact = ~self._continuous[picked]
        if np.logical_or.reduce(exact):
            out[exact] = self.cdf_at(times, picked[exact].tolist())
        return np.asarray(out)

    def cdf_at_slot(self, times: FloatArray, slot: int) -> FloatArray:
        """``cdf_at(times, [slot])[0]``: :math:`F_e(t)` of one slot, shape ``(len(times),)``."""
        model, age = self._law_of(slot)
        out: FloatArray = (1.0 - model.cond_sf(age, times)).reshape(-1)
        return out

    def cdf_points(self, slot: int, times: Sequence[float]) -> list[float]:
        """:math:`F_e(t)` of one slot at each of ``times`` (s from now): :meth:`cdf_at_slot`'s values, up to rounding.

        Kept per table (the table never changes): a decision reads one executor's row at a few
        ends, and the ones not yet kept are evaluated in one model call
        (:meth:`LifetimeModel.cond_cdf_values`).
        """
        kept = self._points
        try:
            return [kept[(slot, t)] for t in times]
        except KeyError:
            pass
        missing = [t for t in times if (slot, t) not in kept]
        if len(kept) + len(missing) > POINTS_KEPT:
            kept.clear()
            missing = list(times)
        model, age = self._law_of(slot)
        values = model.cond_cdf_values(age, missing)
        for at, time in enumerate(missing):  # not zip(strict=True): its keyword is parsed on every call
            kept[(slot, time)] = values[at]
        return [kept[(slot, t)] for t in times]

    def _law_of(self, slot: int) -> tuple[LifetimeModel, float | FloatArray]:
        """The lifetime law of ``slot`` and its age as :meth:`LifetimeModel.cond_sf` takes it for one row."""
        group = int(self._group[slot])
        if group < 0:
            raise ValueError(f"FailureTable: slots [{slot}] hold no live executor")
        model = self._groups[group][0]
        # An age-free law has the same values at every age: the row without broadcasting an age.
        return model, (float(self._ages[slot]) if model.age_free else self._ages[slot:slot + 1, None])

    def cdf_at(self, times: FloatArray, slots: Sequence[int] | NDArray[np.int64] | None = None) -> FloatArray:
        """:math:`F_e(t) = 1 - S_{\\tau_e}(t)` at arbitrary ``times`` (s from now), exact for point masses.

        Its differences are exactly :meth:`LifetimeModel.cell_fail_probs`. Rows: ``slots`` in order, or every
        slot of the table when None.

        Returns
        -------
        ndarray, shape (len(slots) or capacity, len(times))
        """
        if slots is None:
            out = np.zeros((self._ages.size, times.size))
            for model, members in self._groups:
                out[members] = 1.0 - model.cond_sf(self._ages[members, None], times)
            return out
        picked = np.asarray(slots, dtype=np.int64)
        group = self._group[picked]
        if np.logical_or.reduce(group < 0):
            raise ValueError(f"FailureTable: slots {picked[group < 0].tolist()} hold no live executor")
        if picked.size == 1 and times.ndim == 1:
            return self.cdf_at_slot(times, int(picked[0])).reshape(1, times.size)
        if len(self._groups) == 1:  # one lifetime law (one pool): one call, no row sorting
            return 1.0 - self._groups[0][0].cond_sf(self._ages[picked, None], times)
        out = np.empty((picked.size, times.size))
        for index, (model, _members) in enumerate(self._groups):
            rows = np.flatnonzero(group == index)
            if rows.size:
                out[rows] = 1.0 - model.cond_sf(self._ages[picked[rows], None], times)
        return out
