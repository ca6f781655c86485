"""The backup stack of TR-Checkpointing (paper §2.3): planned backups, released newest first.

Algorithm 2 decides *whether* and *where* a block goes; the stack decides *when*. Newest first,
because once the newer blocks (the next stage's outputs) are safe, the older blocks they were
computed from need no backup at all -- so a pending entry whose consumers are already safe
(:meth:`JobState.consumers_safe`) is dropped instead of released.

"Newest" is the block's creation time, not when it was planned: a block re-planned on a tick
does not jump ahead of the outputs written after it. Each source executor has its own stack
and at most ``max_in_flight`` released backups at a time (the policy uses one per core of the
source: a copy occupies a core, and the paper backs a block up "immediately" -- queueing it
behind another copy leaves it exposed longer). A released backup is cancelled when its block
is consumed.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

from trspark.engine.commands import Backup, CancelBackup, Command
from trspark.engine.state import JobState
from trspark.engine.views import BlockId, MapOutput


@dataclass(frozen=True)
class PlannedBackup:
    block_id: BlockId
    source: str
    target: str
    bytes: int
    map_id: int | None = None
    created: float = 0.0
    """When the block was written (s): the stack's order key, newest first."""

    def command(self) -> Backup:
        return Backup(
            shuffle_id=self.block_id[0],
            map_index=self.block_id[1],
            source=self.source,
            target=self.target,
            bytes=self.bytes,
            map_id=self.map_id,
        )


class BackupStack:
    """Planned (pending) and released (in-flight) backups per source executor.

    Parameters
    ----------
    max_in_flight : int
        Released, unfinished backups allowed per source executor (>= 1), or 0 = as many as the
        source has cores.
    """

    def __init__(self, max_in_flight: int = 1) -> None:
        if max_in_flight < 0:
            raise ValueError("max_in_flight must be >= 0 (0 = the source's cores)")
        self.max_in_flight = max_in_flight
        self._pending: dict[str, list[tuple[float, int, PlannedBackup]]] = {}
        """source -> heap of (-created, push order, plan): the top is the newest block."""
        self._seq = itertools.count()
        self._planned: dict[BlockId, PlannedBackup] = {}
        """block -> its pending entry (the latest plan wins; stale stack entries are skipped)."""
        self.in_flight: dict[BlockId, PlannedBackup] = {}
        self._busy: dict[str, int] = {}
        """source -> its entries in :attr:`in_flight` (kept with it, so a release does not recount)."""
        self._receiving: dict[str, int] = {}
        """target -> its entries in :attr:`in_flight` (every decision asks for these counts)."""
        self.dropped = 0
        self.released = 0

    # ---- planning -----------------------------------------------------------------------
    def push(self, plan: PlannedBackup) -> None:
        """Plan a backup (replaces an earlier pending plan of the same block)."""
        if plan.block_id in self.in_flight:
            return
        self._planned[plan.block_id] = plan
        heapq.heappush(self._pending.setdefault(plan.source, []), (-plan.created, next(self._seq), plan))

    def unplan(self, block_id: BlockId) -> None:
        """Forget a pending plan (Algorithm 2 changed its mind: no backup any more)."""
        self._planned.pop(block_id, None)

    def is_busy(self, block_id: BlockId) -> bool:
        """Planned or in flight."""
        return block_id in self._planned or block_id in self.in_flight

    def in_flight_to(self, target: str) -> int:
        """Released, unfinished backups to ``target`` (``"remote"`` or a peer id)."""
        return self._receiving.get(target, 0)

    def peer_loads(self, exclude: BlockId | None = None) -> dict[str, int]:
        """Peer -> released, unfinished backups to it (but ``exclude``'s): the copies that share its bandwidth."""
        out = dict(self._receiving)
        out.pop("remote", None)
        plan = self.in_flight.get(exclude) if exclude is not None else None
        if plan is not None and plan.target != "remote":
            out[plan.target] -= 1
            if not out[plan.target]:
                del out[plan.target]
        return out

    def pending_count(self) -> int:
        return len(self._planned)

    # ---- release ----------------------------------------------------------------------------
    def release(self, state: JobState) -> list[Command]:
        """Backups to start now: per source with a free slot, the newest still-useful entries."""
        out: list[Command] = []
        if not self._pending:
            return out
        busy = self._busy
        # A release only reads the state, so a shuffle's consumers_safe holds for the whole call.
        consumers_safe: dict[int, bool] = {}
        for source in list(self._pending):
            stack = self._pending[source]
            limit = self.max_in_flight
            if limit == 0:
                ex = state.executors.get(source)
                limit = ex.cores if ex is not None else 1
            while stack and busy.get(source, 0) < limit:
                plan = heapq.heappop(stack)[2]
                if self._planned.get(plan.block_id) is not plan:
                    continue  # superseded or unplanned
                del self._planned[plan.block_id]
                if not self._useful(plan, state, consumers_safe):
                    self.dropped += 1
                    continue
                self.in_flight[plan.block_id] = plan
                busy[source] = busy.get(source, 0) + 1
                self._receiving[plan.target] = self._receiving.get(plan.target, 0) + 1
                self.released += 1
                out.append(plan.command())
            if not stack:
                del self._pending[source]
        return out

    def _useful(self, plan: PlannedBackup, state: JobState, consumers_safe: dict[int, bool]) -> bool:
        block = state.outputs.get(plan.block_id)
        if block is None or state.is_safe(block) or plan.source not in block.holders():
            return False
        if plan.target in block.backups:
            return False
        if plan.target != "remote":
            peer = state.executors.get(plan.target)
            if peer is None or not peer.alive:
                return False
        safe = consumers_safe.get(block.shuffle_id)
        if safe is None:
            safe = consumers_safe[block.shuffle_id] = state.consumers_safe(block.shuffle_id)
        return not safe

    # ---- outcomes ---------------------------------------------------------------------------
    def finished(self, block_id: BlockId, target: str | None = None) -> None:
        """A released backup (to ``target``, if given) completed or failed: its slot is free."""
        plan = self.in_flight.get(block_id)
        if plan is not None and (target is None or plan.target == target):
            self._finish(block_id)

    def _finish(self, block_id: BlockId) -> None:
        plan = self.in_flight.pop(block_id)
        _count_down(self._busy, plan.source)
        _count_down(self._receiving, plan.target)

    def cancel_consumed(self, shuffle_id: int) -> list[Command]:
        """Cancel released backups of a consumed shuffle and forget its pending plans."""
        out: list[Command] = []
        for block_id in [b for b in self.in_flight if b[0] == shuffle_id]:
            self._finish(block_id)
            out.append(CancelBackup(shuffle_id=block_id[0], map_index=block_id[1]))
        for block_id in [b for b in self._planned if b[0] == shuffle_id]:
            del self._planned[block_id]
        return out

    def executor_lost(self, executor_id: str) -> None:
        """Forget pending backups from or to a lost executor.

        Released ones stay in flight until the driver reports their ``BackupFailed``: the event
        names no source, so forgetting them now would pin that failure on the next backup of the
        same block.
        """
        for block_id, plan in list(self._planned.items()):
            if executor_id in (plan.source, plan.target):
                del self._planned[block_id]
        self._pending.pop(executor_id, None)


def _count_down(counts: dict[str, int], key: str) -> None:
    """One entry of ``key`` fewer; a count that reaches 0 is removed (the counts hold no zeros)."""
    left = counts[key] - 1
    if left:
        counts[key] = left
    else:
        del counts[key]


def plan_for(block: MapOutput, source: str, target: str) -> PlannedBackup:
    return PlannedBackup(
        block_id=block.block_id, source=source, target=target, bytes=block.bytes, map_id=block.map_id,
        created=block.created,
    )
