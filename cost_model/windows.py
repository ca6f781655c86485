"""The failure table restricted to a time window ``[lo, hi]``: the grid clipped to it and :math:`F_e` on it.

``C_Redo`` and every backup term integrate over such a window; this module computes them and
keeps the ones asked again within a decision.

Inside the grid's horizon a window is the grid with every edge at or below ``lo`` set to
``lo`` and every edge at or above ``hi`` set to ``hi``, and :math:`F_e` the table row with the
same edges set to :math:`F_e(lo)` and :math:`F_e(hi)`: the two ends are found by bisection on
the (sorted) grid and the values written into one copy of the rows. Many windows of one
decision share ``hi`` (the consumption time ``T``), and so do many decisions of one table:
the grid clipped at ``hi`` and the table interpolated at ``hi`` are kept per ``hi``.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from .failure import FailureTable
from .lifetimes.base import FloatArray
from .timegrid import TimeGrid

#: Windows (holders, lo, hi) kept per failure table: blocks of one shuffle on one executor share them.
_WINDOWS_KEPT = 4096

#: Clipped grids and interpolated table columns kept (one per window end asked for).
_ENDS_KEPT = 256


class Windows:
    """Windows of the failure tables over one :class:`TimeGrid` (see :meth:`Recompute.window`)."""

    def __init__(self, grid: TimeGrid) -> None:
        self.grid = grid
        self._edges = grid.edges
        self._sorted = grid.edges.tolist()
        self._horizon = self._sorted[-1]
        self._kept: dict[tuple[object, ...], tuple[FloatArray, FloatArray]] = {}
        self._table: FailureTable | None = None
        self._clipped: dict[float, FloatArray] = {}
        self._columns: dict[float, FloatArray] = {}
        self._columns_of: FailureTable | None = None
        self._lowest: tuple[FailureTable | None, NDArray[np.int64] | None, list[float]] = (None, None, [])

    def get(
        self, table: FailureTable, slots: Sequence[int] | None, lo: float, hi: float, ends: FloatArray | None
    ) -> tuple[FloatArray, FloatArray]:
        """``(edges, cdf)`` of the window ``[lo, hi]`` (s from now) for ``slots`` (None: all) of ``table``.

        Without ``ends`` the answer is kept (read-only) until the table changes: a decision asks
        for the same window several times.
        """
        if ends is not None:
            return self._window(table, slots, lo, hi, ends)
        if self._table is not table or len(self._kept) >= _WINDOWS_KEPT:
            self._table, self._kept = table, {}
        key = (None if slots is None else tuple(slots), lo, hi)
        cached = self._kept.get(key)
        if cached is None:
            cached = self._window(table, slots, lo, hi, None)
            for array in cached:
                array.setflags(write=False)
            self._kept[key] = cached
        return cached

    def _window(
        self, table: FailureTable, slots: Sequence[int] | None, lo: float, hi: float, ends: FloatArray | None
    ) -> tuple[FloatArray, FloatArray]:
        if not self._inside(lo, hi):
            return self._general_window(table, slots, lo, hi, ends)
        if ends is None:
            ends = table.cdf_at(np.array([lo, hi]), slots)
        rows = table.cdf[list(slots)] if slots is not None else table.cdf.copy()
        return self._window_edges(lo, hi), self._with_ends(rows, lo, hi, ends[:, 0:1], ends[:, 1:2])

    def _general_window(
        self, table: FailureTable, slots: Sequence[int] | None, lo: float, hi: float, ends: FloatArray | None
    ) -> tuple[FloatArray, FloatArray]:
        """Any window: past the horizon the window is evaluated; inside it, table values with ``ends`` at the ends."""
        edges = np.maximum(self.grid.edges_to(hi), lo)
        if hi > self.grid.horizon:
            return edges, table.cdf_at(edges, slots)
        if ends is None:
            ends = table.cdf_at(np.array([lo, hi]), slots)
        rows = table.cdf if slots is None else table.cdf[list(slots)]
        grid = self.grid.edges
        return edges, np.where(grid <= lo, ends[:, 0:1], np.where(grid >= hi, ends[:, 1:2], rows))

    def _inside(self, lo: float, hi: float) -> bool:
        """Whether ``0 <= lo <= hi <= horizon`` (both finite): the windows :meth:`_window` writes into a copy of the rows."""
        return 0.0 <= lo <= hi <= self._horizon and math.isfinite(hi)

    def _window_edges(self, lo: float, hi: float) -> FloatArray:
        """:math:`\\max(\\min(g_i, hi), lo)` (s) for ``0 <= lo <= hi <= horizon``; for ``lo = 0`` the kept read-only :meth:`clipped`."""
        clipped = self.clipped(hi)
        return clipped if lo == 0.0 else np.maximum(clipped, lo)

    def _with_ends(self, values: FloatArray, lo: float, hi: float, at_lo: FloatArray | float, at_hi: FloatArray | float) -> FloatArray:
        """``values`` (table rows, last axis the grid) with the edges ``<= lo`` set to ``at_lo`` and those ``>= hi`` to ``at_hi``, in place.

        Table rows and end values are computed separately: their differences may be off by a
        rounding error (~1e-16), which is harmless in the sums they feed. ``lo`` wins where both hold.
        """
        values[..., bisect_left(self._sorted, hi):] = at_hi
        values[..., :bisect_right(self._sorted, lo)] = at_lo
        return values

    def split(self, lo: float, hi: float) -> tuple[int, int]:
        """``(n, m)``: the grid edges ``[:n]`` are ``<= lo`` and the edges ``[m:]`` are ``>= hi``."""
        return bisect_right(self._sorted, lo), bisect_left(self._sorted, hi)

    def clipped(self, hi: float) -> FloatArray:
        """:math:`\\min(g_i, hi)` (s) for ``0 <= hi <= horizon``: the edges of ``[0, hi]``, kept read-only per ``hi``."""
        out = self._clipped.get(hi)
        if out is None:
            if len(self._clipped) >= _ENDS_KEPT:
                self._clipped = {}
            out = np.minimum(self._edges, hi)
            out.setflags(write=False)
            self._clipped[hi] = out
        return out

    def row(self, table: FailureTable, slot: int, lo: float, hi: float, f_lo: float, f_hi: float) -> tuple[FloatArray, FloatArray]:
        """The window ``[lo, hi]`` of one slot with its ends ``F(lo) = f_lo``, ``F(hi) = f_hi`` given: ``(edges, cdf)``, both 1-D.

        The values of ``get(table, [slot], lo, hi, ends=[[f_lo, f_hi]])`` (row 0 of its cdf). For
        ``lo = 0`` the edges are the kept read-only :meth:`clipped` array.
        """
        if not self._inside(lo, hi):
            edges, cdf = self._general_window(table, [slot], lo, hi, np.array([[f_lo, f_hi]]))
            return edges, cdf[0]
        return self._window_edges(lo, hi), self._with_ends(table.cdf[slot].copy(), lo, hi, f_lo, f_hi)

    def column(self, table: FailureTable, time: float) -> FloatArray:
        """:math:`F_e(time)` of every slot of ``table`` interpolated as :meth:`FailureTable.cdf_interpolated` does.

        For ``0 <= time <= horizon`` and rows of continuous laws only (the point-mass rows that
        ``cdf_interpolated`` evaluates exactly are left interpolated here). Kept read-only per
        ``(table, time)``.
        """
        if self._columns_of is not table or len(self._columns) >= _ENDS_KEPT:
            self._columns_of, self._columns = table, {}
        out = self._columns.get(time)
        if out is None:
            out = self.interpolated(table, time)
            out.setflags(write=False)
            self._columns[time] = out
        return out

    def lowest_at(self, table: FailureTable, slots: NDArray[np.int64], time: float) -> float:
        """A lower bound of :math:`\\min_e F_e(time)` over ``slots`` as :meth:`column` interpolates it, for ``0 <= time <= horizon``.

        The rows' minimum at each grid edge, :math:`m_j = \\min_e F_e(g_j)`, interpolated:
        :math:`m_{j-1}(1 - w) + m_j w \\le F_e(g_{j-1})(1 - w) + F_e(g_j) w` for every row, as
        :math:`w \\in [0, 1]`; equal when the rows are (one age-free law). The minima are kept
        per ``(table, slots)`` object, so one pass over the rows serves every decision of a table.
        """
        kept_table, kept_slots, minima = self._lowest
        if kept_table is not table or kept_slots is not slots:
            minima = np.minimum.reduce(table.cdf[slots], axis=0).tolist()
            self._lowest = (table, slots, minima)
        edges = self._sorted
        right = self._cell_end(time)
        weight = (time - edges[right - 1]) / (edges[right] - edges[right - 1])
        return float(minima[right - 1] * (1.0 - weight) + minima[right] * weight)

    def _cell_end(self, time: float) -> int:
        """The index (1 .. G) of the right edge of the grid cell holding ``time``: the first cell before the grid, the last past it."""
        right = bisect_left(self._sorted, time)
        last = len(self._sorted) - 1
        # min(max(right, 1), last), written out: the builtins' argument parsing outweighs two comparisons.
        return 1 if right < 1 else (last if right > last else right)

    def interpolated(self, table: FailureTable, time: float) -> FloatArray:
        """:meth:`column` without keeping it: :math:`F(g_{j-1})(1 - w) + F(g_j) w`, a new array."""
        edges = self._sorted
        right = self._cell_end(time)
        weight = (time - edges[right - 1]) / (edges[right] - edges[right - 1])
        cdf = table.cdf
        out: FloatArray = cdf[:, right - 1] * (1.0 - weight) + cdf[:, right] * weight
        return out
