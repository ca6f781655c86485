"""The live executors but a block's holders: the peers a copy of it can go to, kept until executors come or go."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .lineage import Executor, Lineage


@dataclass(frozen=True, slots=True)
class Peers:
    """The live executors but some (a block's holders), in the lineage's executor order."""

    executors: list[Executor]
    """The peers."""
    slots: NDArray[np.int64]
    """The failure-table slot of each peer."""
    index: dict[str, int]
    """Executor id -> its index among *every* live executor (holders included)."""
    skipped: list[int]
    """The indices in :attr:`index` of the executors left out, ascending."""

    def position(self, executor_id: str) -> int | None:
        """The index of ``executor_id`` in :attr:`executors`, or None when it is not a peer."""
        at = self.index.get(executor_id)
        if at is None or at in self.skipped:
            return None
        return at - bisect_left(self.skipped, at)

    def load_groups(self, skip: Sequence[str], loads: Mapping[str, int]) -> list[tuple[int, NDArray[np.int64]]]:
        """The peers but ``skip`` grouped by the copies they receive (``loads``): ``(load, positions in executor order)``, by load."""
        position = self.position
        taken = {at for executor_id in skip if (at := position(executor_id)) is not None}
        groups: dict[int, list[int]] = {}
        for executor_id, load in loads.items():
            if load and (at := position(executor_id)) is not None and at not in taken:
                groups.setdefault(load, []).append(at)
        free = np.empty(len(self.executors), dtype=bool)
        free.fill(True)
        if taken:
            free[list(taken)] = False
        out = [(load, np.array(sorted(members), dtype=np.int64)) for load, members in groups.items()]
        for _load, members_at in out:
            free[members_at] = False
        unloaded = free.nonzero()[0]
        if unloaded.size:
            out.append((0, unloaded))
        return sorted(out, key=lambda group: group[0])


class PeerSets:
    """:class:`Peers` of a :class:`Lineage` per set of holders, kept while its executors stay the same."""

    def __init__(self, lineage: Lineage) -> None:
        self.lineage = lineage
        self._version = -1
        self._everyone: tuple[list[Executor], dict[str, int], NDArray[np.int64]] = ([], {}, np.zeros(0, dtype=np.int64))
        self._kept: dict[frozenset[str], Peers] = {}

    def _refresh(self) -> None:
        lineage = self.lineage
        if self._version != lineage.executors_version:
            executors = lineage.executors()
            index = {ex.executor_id: at for at, ex in enumerate(executors)}
            self._everyone = (executors, index, np.array([ex.slot for ex in executors], dtype=np.int64))
            self._version, self._kept = lineage.executors_version, {}

    def live_slots(self, holders: Collection[str]) -> NDArray[np.int64] | None:
        """The failure-table slots of every live executor, or None when all of them are among ``holders``.

        A superset of :meth:`without`'s slots, for bounds over the peers without listing them.
        """
        self._refresh()
        _executors, index, slots = self._everyone
        # Fewer holders than live executors (the usual case) leave one out without counting.
        if len(holders) >= slots.size and sum(1 for executor_id in holders if executor_id in index) >= slots.size:
            return None
        return slots

    def without(self, holders: frozenset[str]) -> Peers:
        """Every live executor but ``holders``, in the lineage's executor order."""
        self._refresh()
        kept = self._kept.get(holders)
        if kept is None:
            executors, index, slots = self._everyone
            skipped = sorted(index[h] for h in holders if h in index)
            parts = [slice(lo + 1, hi) for lo, hi in zip([-1, *skipped], [*skipped, len(executors)], strict=True)]
            kept = Peers([ex for part in parts for ex in executors[part]],
                         np.concatenate([slots[part] for part in parts]), index, skipped)
            self._kept[holders] = kept
        return kept
