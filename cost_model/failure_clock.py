"""The failure table of a lineage's executors, taken at the ages of one instant, and when it is rebuilt.

Staleness rule: the table :math:`F_e(g_i)` is taken at the ages of one instant (its ``now``). It
is rebuilt when executors come or go, and when the clock has moved ``max_staleness`` seconds or
more past it; in between, ages lag by less than ``max_staleness``. A rebuild that leaves the grid values unchanged (a memoryless law) keeps
:attr:`FailureClock.version`, the version every term derived from the table is keyed by.
"""

from __future__ import annotations

import math

import numpy as np

from .failure import FailureTable
from .lineage import Lineage
from .timegrid import TimeGrid


class FailureClock:
    """The current :class:`FailureTable` of ``lineage``'s executors on ``grid``, built lazily.

    Parameters
    ----------
    now : float
        Driver time (s) of the first table.
    max_staleness : float
        Seconds the clock may move before the table is stale (> 0).
    """

    def __init__(self, lineage: Lineage, grid: TimeGrid, now: float, max_staleness: float) -> None:
        if not (math.isfinite(max_staleness) and max_staleness > 0.0):
            raise ValueError(f"Recompute: 'max_staleness' must be a finite number > 0 seconds, got {max_staleness!r}")
        if not math.isfinite(now):
            raise ValueError(f"Recompute: 'now' must be a finite time in seconds, got {now!r}")
        self.lineage = lineage
        self.grid = grid
        self.max_staleness = float(max_staleness)
        self.now = float(now)
        self._table: FailureTable | None = None
        self._due: tuple[float, int] | None = None
        """(clock, executors version) of a rebuild put off until the table is next read."""
        self._table_executors = -1
        self._occupants: dict[int, str] = {}
        self.version = 0
        """Bumped only when a grid value a memoised ``Er`` or per-shuffle term can have read changed."""

    def move_to(self, now: float) -> bool:
        """Move the clock to ``now`` (s); whether the table (or its rebuild put off) is ``max_staleness`` old."""
        if not math.isfinite(now):
            raise ValueError(f"Recompute.advance: 'now' must be a finite time in seconds, got {now!r}")
        self.now = float(now)
        built = self._due[0] if self._due is not None else None if self._table is None else self._table.now
        return built is not None and self.now - built >= self.max_staleness

    def rebuild(self, eager: bool) -> None:
        """Rebuild the table at the current clock: now, or (``eager`` false) as of this clock when next read."""
        if eager:
            self._due = None
            self._rebuild_table(self.now)
        else:
            self._due = (self.now, self.lineage.executors_version)

    @property
    def table(self) -> FailureTable:
        """The current failure table (rebuilt when executors changed, or as of a rebuild put off)."""
        if self._due is not None:
            # Executors that came or went since would have made the first read rebuild it at this clock.
            at, executors = self._due
            self._due = None
            self._rebuild_table(at if executors == self.lineage.executors_version else self.now)
        elif self._table is None or self._table_executors != self.lineage.executors_version:
            self._rebuild_table(self.now)
        assert self._table is not None
        return self._table

    def _rebuild_table(self, now: float) -> None:
        """A failure table at clock ``now`` (s); derived terms are invalidated only as far as needed.

        The per-shuffle products (:class:`ShuffleTerms`, one row per slot) are rebuilt whenever
        the table's arrays differ. The memoised ``Er`` of (shuffle, X) reads the table only
        through the grid values :math:`F_e(g_i)` of slots holding outputs of the ancestry --
        including X's row, which enters only if X holds some (otherwise X's row is like any
        empty one). Holdings are versioned per shuffle: an executor that leaves makes its
        copies lost and one that gets an output changes its shuffle, both bump the versions in
        the key. So ``Er`` stays valid when every executor still in its slot kept its grid
        values bit for bit, whatever executors joined or left and whichever slots were reused.
        Under a memoryless law (exponential) the grid values do not depend on the ages, so
        periodic refreshes and executor churn keep every ``Er``.
        """
        old, old_occupants = self._table, self._occupants
        table = FailureTable(self.lineage, self.grid.edges, now, previous=old)
        occupants = {ex.slot: ex.executor_id for ex in self.lineage.executors()}
        self._table, self._occupants = table, occupants
        self._table_executors = self.lineage.executors_version
        if old is not None and occupants == old_occupants and np.array_equal(old.cdf, table.cdf):
            return  # the same arrays: every derived term stays valid
        if old is None or not self._grid_values_kept(old, old_occupants, table, occupants):
            self.version += 1

    @staticmethod
    def _grid_values_kept(
        old: FailureTable, old_occupants: dict[int, str], new: FailureTable, occupants: dict[int, str]
    ) -> bool:
        """Every executor still in its slot since ``old`` has the same grid values in ``new``."""
        kept = [slot for slot, executor_id in old_occupants.items() if occupants.get(slot) == executor_id]
        return bool(np.array_equal(old.cdf[kept], new.cdf[kept]))
