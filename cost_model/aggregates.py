"""What a :class:`~cost_model.lineage.Lineage` keeps: executors, map outputs and per-shuffle aggregates.

See :mod:`cost_model.lineage` for what the aggregates mean and how they are kept up to date.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter

import numpy as np
from numpy.typing import NDArray

from .lifetimes.base import FloatArray, LifetimeModel

Group = int | frozenset[int] | None
"""Where an output's run time is aggregated: a slot (single), a slot set (multi), -1 (lost), None (excluded)."""
LOST = -1


@dataclass(slots=True)
class Executor:
    """A live executor: its slot (row in the cost model's arrays), start time (s) and lifetime law."""

    executor_id: str
    slot: int
    started: float
    model: LifetimeModel


@dataclass(slots=True)
class Output:
    """One map output ``(shuffle_id, map_index)``."""

    shuffle_id: Hashable
    map_index: int
    producer: str
    """Executor that ran the map task."""
    run_time: float
    """:math:`C_j`: the task's run time in seconds (its re-computation cost)."""
    size: float
    """Bytes written (all shuffle blocks of the map task)."""
    locations: set[str]
    """Executors holding a copy (the producer, then peers it was backed up to)."""
    remote: bool = False
    """Backed up to remote storage: safe."""
    consumed: bool = False
    """Will not be read again (not even to re-compute a descendant)."""
    group: Group = None


@dataclass(slots=True)
class ShuffleState:
    """Aggregates of the live outputs of one shuffle (see the module docstring)."""

    parents: set[Hashable] = field(default_factory=set)
    outputs: dict[int, Output] = field(default_factory=dict)
    single_cost: FloatArray = field(default_factory=lambda: np.zeros(0))
    """:math:`\\sum C_j` (s) per executor slot over outputs that live only there."""
    single_count: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    multi: dict[frozenset[int], list[float]] = field(default_factory=dict)
    """Slot set -> ``[sum C_j (s), count]`` for outputs living on several executors."""
    multi_by_slot: dict[int, set[frozenset[int]]] = field(default_factory=dict)
    lost_cost: float = 0.0
    lost_count: int = 0
    version: int = 0
    multi_version: int = 0
    """Bumped when :attr:`multi` changes (a subset of the changes that bump :attr:`version`)."""
    multi_keys_version: int = 0
    """Bumped when a slot set enters or leaves :attr:`multi` (a subset of the changes that bump :attr:`multi_version`)."""
    _multi_arrays: tuple[int, int, NDArray[np.int64], FloatArray] | None = None
    """(multi version, keys version, slots, costs) of the last :meth:`multi_arrays`."""
    _multi_slots: tuple[int, NDArray[np.int64]] | None = None
    _multi_rows: tuple[int, dict[frozenset[int], int]] | None = None
    """(keys version, slot set -> row): where each slot set's cost is in the arrays."""
    multi_touched: set[frozenset[int]] = field(default_factory=set)
    """Slot sets whose entry of :attr:`multi` changed since the last :meth:`multi_arrays` (kept by :class:`Lineage`)."""

    def multi_arrays(self) -> tuple[NDArray[np.int64], FloatArray]:
        """:attr:`multi` as arrays for vectorised use: slot sets padded with -1 ``(M, L_max)`` and costs ``(M,)``.

        Rows in the order of :attr:`multi`, slots ascending. Cached until :attr:`multi` changes,
        not on every change of the shuffle (an output added on one executor leaves it alone).
        The slot array is the same object until a slot set enters or leaves :attr:`multi`
        (a backup to a pair that already shares outputs changes only the costs), so what is
        derived from the slots alone can be kept by identity.
        """
        cached = self._multi_arrays
        if cached is not None and cached[0] == self.multi_version:
            return cached[2], cached[3]
        multi, keys_version = self.multi, self.multi_keys_version
        if cached is not None and cached[1] == keys_version and 4 * len(self.multi_touched) < len(multi):
            # The same slot sets in the same order: only the touched costs change.
            costs = cached[3].copy()
            rows = self._rows_of_sets()
            for group in self.multi_touched:
                costs[rows[group]] = multi[group][0]
        else:
            costs = np.fromiter(map(itemgetter(0), multi.values()), dtype=np.float64, count=len(multi))
        self.multi_touched.clear()
        costs.setflags(write=False)
        slots_cached = self._multi_slots
        if slots_cached is not None and slots_cached[0] == keys_version:
            slots = slots_cached[1]
        else:
            slots = self._slot_sets()
            slots.setflags(write=False)
            self._multi_slots = (keys_version, slots)
        self._multi_arrays = (self.multi_version, keys_version, slots, costs)
        return slots, costs

    def _rows_of_sets(self) -> dict[frozenset[int], int]:
        cached = self._multi_rows
        if cached is not None and cached[0] == self.multi_keys_version:
            return cached[1]
        rows = {group: row for row, group in enumerate(self.multi)}
        self._multi_rows = (self.multi_keys_version, rows)
        return rows

    def _slot_sets(self) -> NDArray[np.int64]:
        """The slot sets of :attr:`multi`, one row each, ascending, padded with -1: ``(M, L_max)``."""
        multi = self.multi
        width = max(map(len, multi), default=0)
        if multi and min(map(len, multi)) == width:  # the usual case (one peer copy each): no loop per group
            slots = np.fromiter(chain.from_iterable(multi), dtype=np.int64, count=len(multi) * width)
            slots = slots.reshape(len(multi), width)
            slots.sort(axis=1)
        else:
            slots = np.full((len(multi), width), -1, dtype=np.int64)
            for row, sig in enumerate(multi):
                slots[row, : len(sig)] = sorted(sig)
        return slots

    def _grow(self, capacity: int) -> None:
        if self.single_cost.size < capacity:
            self.single_cost = np.concatenate((self.single_cost, np.zeros(capacity - self.single_cost.size)))
            self.single_count = np.concatenate(
                (self.single_count, np.zeros(capacity - self.single_count.size, dtype=np.int64))
            )
