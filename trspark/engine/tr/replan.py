"""Re-planning in the TR-Spark policy: which blocks get Algorithm 2 again, and when.

After an eviction, a new executor or a tick the most exposed unsafe blocks are queued; a few
queued re-plans run per event, so that no single event pays for many decisions.
"""

from __future__ import annotations

import heapq
from collections import deque

from trspark.engine.commands import Command
from trspark.engine.events import REMOTE, ExecutorLost
from trspark.engine.state import JobState
from trspark.engine.tr.backup_stack import BackupStack
from trspark.engine.tr.knowledge import LifetimeKnowledge
from trspark.engine.views import BlockId, MapOutput

#: Blocks queued for re-planning per tick (newest first): older blocks have usually been
#: planned or are about to be consumed, and the stack serves the newest first anyway.
REPLAN_LIMIT = 64
#: Blocks queued for re-planning after an eviction or a new executor.
REPLAN_ON_CHANGE = 16


class Replanning:
    """The re-planning half of :class:`~trspark.engine.tr.policy.TRPolicy` (its tables are set there)."""

    knowledge: LifetimeKnowledge
    state: JobState
    stack: BackupStack
    _replan_queue: deque[BlockId]
    _queued: set[BlockId]
    _deferred: dict[BlockId, float]
    _deferred_due: list[tuple[float, BlockId]]
    released: set[str]
    released_gone: int

    def _plan(self, block: MapOutput) -> None:
        """Algorithm 2 for one block (the policy's)."""
        raise NotImplementedError

    def _replan(self, limit: int | None = REPLAN_LIMIT) -> list[Command]:
        """Queue the most exposed unsafe, not in-flight blocks (at most ``limit``) for Algorithm 2 again.

        Most exposed = the shortest expected remaining life of the safest executor holding a copy
        (with exact lifetimes: the blocks on the executors that die next), newest first among
        equals (a memoryless belief makes every executor equal). ``limit=None`` (the safety belt
        firing) plans every such block at once instead.
        """
        for block in self._most_exposed(limit):
            if limit is None:
                self._plan(block)
            elif block.block_id not in self._queued:
                self._queued.add(block.block_id)
                self._replan_queue.append(block.block_id)
        return []

    def _most_exposed(self, limit: int | None) -> list[MapOutput]:
        """The unsafe, not in-flight blocks with a live copy, most exposed first (all, or the first ``limit``).

        Sort key: the largest mean residual life among the block's holders; ties newest first
        (:meth:`~trspark.engine.records.JobRecords.outputs_off_remote`). No key is below the smallest
        residual life of an alive executor when every holder is alive, so once ``limit`` blocks
        with that key are found, newest first, they are the answer and the scan stops (under a
        memoryless belief every block has that key).
        """
        state = self.state
        executors = state.alive_executors()
        residual = dict(zip((e.executor_id for e in executors),
                            self.knowledge.mean_residual_life(executors, state.now) if executors else (), strict=True))
        floor = min(residual.values()) if residual and limit is not None and state.holders_alive() else None
        in_flight = self.stack.in_flight
        keyed: list[tuple[float, int, MapOutput]] = []
        at_floor = 0
        for block in state.outputs_off_remote():
            backups = block.backups
            if block.consumed or REMOTE in backups or block.block_id in in_flight:
                continue
            if backups:
                holders = block.holders()
                if not holders:
                    continue
                key = max(residual.get(h, 0.0) for h in holders)
            elif block.source_lost:
                continue  # no copy left
            else:
                key = residual.get(block.executor_id, 0.0)
            keyed.append((key, len(keyed), block))
            if key == floor:
                at_floor += 1
                if at_floor == limit:
                    return [b for k, _, b in keyed if k == floor]
        keyed.sort(key=lambda item: item[:2])  # ties stay newest first
        return [b for _, _, b in (keyed if limit is None else keyed[:limit])]

    def _on_executor_lost(self, event: ExecutorLost) -> list[Command]:
        """An executor went: forget what it was part of, refit the lifetimes, re-plan what it held."""
        if event.executor_id in self.released:  # gone: an executor added later under its id is another
            self.released.discard(event.executor_id)
            self.released_gone += 1
        self.stack.executor_lost(event.executor_id)
        self.knowledge.forget(event.executor_id)
        if self.knowledge.observe(self.state):
            self.state.refresh_lifetimes()
        self._replan_lost_copies(event.executor_id)
        return self._replan(REPLAN_ON_CHANGE)

    def _replan_lost_copies(self, executor_id: str) -> None:
        """Algorithm 2 at once for the blocks whose writer or newest peer copy was on ``executor_id`` and that live on elsewhere.

        A block with a peer copy looked safe (both holders had to fail); with one copy gone its
        risk is back to one executor's, and waiting for the next tick left it exposed. A block
        that loses an older peer copy still has two holders and waits for the tick's re-plan.
        """
        # Listed before planning, which changes none of these fields.
        lost_copy = [block for block in self.state.outputs_naming(executor_id) if
                     block.last_peer == executor_id or (block.source_lost and block.executor_id == executor_id)]
        for block in lost_copy:
            if block.holders() and not block.on_remote:
                self._plan(block)

    def _plan_noticed(self, executor_id: str) -> None:
        """Algorithm 2 for every unsafe block held by an executor that got a notice.

        Newest first (the stack serves the newest first too): with the deadline known, a block
        whose readers will be done before it is left alone, the others are copied while the
        window lasts -- from their last responsible moment (:meth:`_defer`) on.
        """
        for block in reversed(self.state.outputs_on(executor_id)):
            self._plan(block)

    def _work_queue(self, budget: int) -> None:
        """Re-plan up to ``budget`` queued blocks (oldest request first)."""
        while budget > 0 and self._replan_queue:
            block_id = self._replan_queue.popleft()
            self._queued.discard(block_id)
            block = self.state.outputs.get(block_id)
            if block is not None and not block.consumed and not block.on_remote and block.holders():
                self._plan(block)
                budget -= 1

    def _plan_due(self) -> None:
        """Algorithm 2 for the deferred blocks whose last responsible moment has come."""
        now = self.state.now
        while self._deferred_due and self._deferred_due[0][0] <= now:
            due, block_id = heapq.heappop(self._deferred_due)
            if self._deferred.get(block_id) != due:
                continue  # re-deferred to another moment, or planned meanwhile
            del self._deferred[block_id]
            block = self.state.outputs.get(block_id)
            if block is not None and not block.consumed and not block.on_remote and block.holders():
                self._plan(block)
