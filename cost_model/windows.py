"""The failure table restricted to a time window ``[lo, hi]``: the grid clipped to it and :math:`F_e` on it.

``C_Redo`` and every backup term integrate over such a window; this module computes them and
keeps the ones asked again within a decision.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .failure import FailureTable
from .lifetimes.base import FloatArray
from .timegrid import TimeGrid

#: Windows (holders, lo, hi) kept per failure table: blocks of one shuffle on one executor share them.
_WINDOWS_KEPT = 4096


class Windows:
    """Windows of the failure tables over one :class:`TimeGrid` (see :meth:`Recompute.window`)."""

    def __init__(self, grid: TimeGrid) -> None:
        self.grid = grid
        self._kept: dict[tuple[object, ...], tuple[FloatArray, FloatArray]] = {}
        self._table: FailureTable | None = None

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
        edges = np.maximum(self.grid.edges_to(hi), lo)
        if hi > self.grid.horizon:
            return edges, table.cdf_at(edges, slots)
        if ends is None:
            ends = table.cdf_at(np.array([lo, hi]), slots)
        rows = table.cdf if slots is None else table.cdf[list(slots)]
        grid = self.grid.edges
        # Table rows and end values are computed separately: their differences may be off by a
        # rounding error (~1e-16), which is harmless in the sums they feed.
        return edges, np.where(grid <= lo, ends[:, 0:1], np.where(grid >= hi, ends[:, 1:2], rows))
