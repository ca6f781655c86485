"""The simulator-only ``oracle``: a policy that knows every VM's true death time.

It is the lower bound the real policies chase. It backs up a block only when the VM holding
its last copies is about to die before the block's shuffle is consumed -- i.e. exactly the
blocks that would otherwise be lost -- and sends it to the cheapest safe place. Because the
oracle protects every block that is needed, a shuffle stops being needed as soon as every stage
reading it has completed (its outputs are protected in turn), which is usually long before the
engine-wide ``ShuffleConsumed`` (that one must also cover lineage re-runs). The safe place is a peer that
outlives the danger window (peer copies are 4x faster than remote at the paper's defaults),
else the remote store. A peer copy whose holder later nears death is protected again the same way.

"About to die" means within the *lead* time a copy needs to start and finish:

.. math::

    \\text{lead} = k\\,\\bar T_\\text{task} + \\frac{\\sum_\\text{held} b}{B_\\text{remote}}

with :math:`\\bar T_\\text{task}` the mean task duration seen so far (a backup waits for a free
core) and the bytes the VM holds over its (shared) remote bandwidth -- the slower target, so
the window is long enough whichever target is chosen; ``k = 6``. A VM counts as
endangered from ``2 x lead`` before its death (margin for remote copies and busy cores). Blocks
written inside the window are backed up as soon as they exist.

It releases one backup per source VM at a time (the next when the previous ends): a backup holds
a core, and copies sharing one VM's bandwidth would each hold theirs proportionally longer.
(Perfect-knowledge scheduling hints -- no task on a VM that dies before it ends -- were tried and
left out: at stability <= 10 the idle cores cost more than the killed work saved.)
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from typing import Protocol

from trspark.config import TRConfig
from trspark.engine.policy import Policy
from trspark.engine.protocol import (
    REMOTE,
    Backup,
    BackupFailed,
    BlockBackedUp,
    Command,
    Event,
    ExecutorAdded,
    ExecutorLost,
    ShuffleConsumed,
    StageCompleted,
    StageSubmitted,
    TaskEnded,
    TaskStarted,
)

Block = tuple[int, int]


class FutureView(Protocol):
    """What the oracle may ask the simulator: the true death time of an executor."""

    def death_time(self, executor_id: str) -> float: ...


class OraclePolicy(Policy):
    """Back up exactly the blocks that would be lost before consumption (see module docstring).

    Parameters
    ----------
    config : TRConfig
        Bandwidths (bytes/s) of the cluster.
    horizon : float
        Seconds a peer must outlive the danger window to count as safe (the stable job time).
    lead_tasks : float
        ``k`` in the lead time: task durations to allow for a core to free up.
    """

    name = "oracle"

    def __init__(self, config: TRConfig, horizon: float, lead_tasks: float = 6.0) -> None:
        self.config = config
        self.horizon = horizon
        self.lead_tasks = lead_tasks
        self.future: FutureView | None = None
        self.cores: dict[str, int] = {}
        self.deaths: dict[str, float] = {}
        self._alarms: list[tuple[float, str]] = []
        self.held: dict[str, set[Block]] = {}  # executor -> blocks it holds (origin or peer copy)
        self.held_bytes: dict[str, float] = {}  # executor -> bytes of *needed* blocks it holds
        self.where: dict[Block, set[str]] = {}  # block -> executors / "remote" holding it
        self.blocks_of: dict[int, set[Block]] = {}
        self.size: dict[Block, int] = {}
        self.inflight: set[Block] = set()  # queued or being copied
        self.queue: dict[str, deque[Block]] = {}  # source -> blocks waiting for their turn
        self.copying: dict[str, Block] = {}  # source -> the one block it is copying
        self.source_of: dict[Block, str] = {}
        self.consumed: set[int] = set()  # ShuffleConsumed: never needed again
        self.released: set[int] = set()  # every reader completed: not needed unless one re-runs
        self.readers: dict[int, set[int]] = {}  # shuffle -> stages reading it
        self.completed: set[int] = set()
        self._task_time = 0.0
        self._tasks = 0
        self.backups = 0

    def bind(self, future: FutureView) -> None:
        self.future = future

    # ------------------------------------------------------------------------------ decisions
    def _lead(self, executor: str) -> float:
        mean_task = self._task_time / self._tasks if self._tasks else 1.0
        return self.lead_tasks * mean_task + self.held_bytes.get(executor, 0.0) / self.config.remote_bandwidth

    def _needed(self, shuffle: int) -> bool:
        return shuffle not in self.consumed and shuffle not in self.released

    def _add_holder(self, block: Block, holder: str) -> None:
        holders = self.where.setdefault(block, set())
        if holder in holders:
            return
        holders.add(holder)
        self.blocks_of.setdefault(block[0], set()).add(block)
        if holder != REMOTE:
            self.held.setdefault(holder, set()).add(block)
            if self._needed(block[0]):
                self.held_bytes[holder] = self.held_bytes.get(holder, 0.0) + self.size[block]

    def _set_needed(self, shuffle: int, needed: bool) -> None:
        """Move a shuffle's bytes in or out of its holders' ``held_bytes``."""
        sign = 1.0 if needed else -1.0
        for block in self.blocks_of.get(shuffle, ()):
            for holder in self.where.get(block, ()):
                if holder != REMOTE and holder in self.held_bytes:
                    self.held_bytes[holder] += sign * self.size[block]

    def _endangered(self, executor: str, now: float) -> bool:
        return self.deaths.get(executor, float("inf")) - now <= 2.0 * self._lead(executor)

    def _safe_elsewhere(self, block: Block, executor: str, now: float) -> bool:
        return any(h == REMOTE or (h != executor and not self._endangered(h, now)) for h in self.where.get(block, ()))

    def _target(self, source: str, now: float) -> str:
        """Peer that outlives the danger window by ``horizon``, else remote."""
        if self.config.targets == "remote":
            return REMOTE
        best = max(((d, e) for e, d in self.deaths.items() if e != source), default=None)
        if best is not None and best[0] - now > self.horizon + self._lead(best[1]):
            return best[1]
        return REMOTE

    def _protect(self, executor: str, blocks: Sequence[Block], now: float) -> list[Command]:
        for block in blocks:
            if block in self.inflight or not self._needed(block[0]) or self._safe_elsewhere(block, executor, now):
                continue
            self.inflight.add(block)
            self.queue.setdefault(executor, deque()).append(block)
        return self._release(executor, now)

    def _release(self, executor: str, now: float) -> list[Command]:
        """Start the source's next queued backup if it is not copying one already."""
        if executor in self.copying or executor not in self.deaths:
            return []
        queue = self.queue.get(executor)
        while queue:
            block = queue.popleft()
            if not self._needed(block[0]) or self._safe_elsewhere(block, executor, now) or executor not in self.where.get(block, ()):
                self.inflight.discard(block)
                continue
            self.copying[executor] = block
            self.source_of[block] = executor
            self.backups += 1
            return [Backup(block[0], block[1], executor, self._target(executor, now), self.size[block])]
        return []

    def _finished_copy(self, block: Block, now: float) -> list[Command]:
        self.inflight.discard(block)
        source = self.source_of.pop(block, None)
        if source is None or self.copying.get(source) != block:
            return []
        del self.copying[source]
        return self._release(source, now)

    def _due_alarms(self, now: float) -> list[Command]:
        commands: list[Command] = []
        while self._alarms and self._alarms[0][0] <= now:
            _, executor = heapq.heappop(self._alarms)
            if executor not in self.deaths:
                continue
            if self._endangered(executor, now):
                commands += self._protect(executor, sorted(self.held.get(executor, ())), now)
            else:  # the lead grew or shrank: look again a little later
                heapq.heappush(self._alarms, (max(now + 0.01, self.deaths[executor] - 3 * self._lead(executor)), executor))
        return commands

    # --------------------------------------------------------------------------------- events
    def handle(self, event: Event) -> Sequence[Command]:
        commands = self._update(event)
        return commands + self._due_alarms(event.time)

    def _update(self, event: Event) -> list[Command]:
        if isinstance(event, TaskEnded):
            self._task_time += event.duration
            self._tasks += 1
            if event.successful and event.shuffle_id is not None and event.shuffle_id not in self.consumed:
                block = (event.shuffle_id, event.partition)
                self.size[block] = event.shuffle_write_bytes
                self._add_holder(block, event.executor_id)
                if self._needed(event.shuffle_id) and self._endangered(event.executor_id, event.time):
                    return self._protect(event.executor_id, [block], event.time)
        elif isinstance(event, ExecutorAdded):
            assert self.future is not None, "OraclePolicy.bind(simulator) was not called"
            death = self.future.death_time(event.executor_id)
            self.cores[event.executor_id] = event.cores
            self.deaths[event.executor_id] = death
            self.held_bytes[event.executor_id] = 0.0
            heapq.heappush(self._alarms, (death - 3 * self._lead(event.executor_id), event.executor_id))
        elif isinstance(event, ExecutorLost):
            self.deaths.pop(event.executor_id, None)
            self.held_bytes.pop(event.executor_id, None)
            self.copying.pop(event.executor_id, None)
            for block in self.queue.pop(event.executor_id, deque()):
                self.inflight.discard(block)
            for block in self.held.pop(event.executor_id, set()):
                self.where.get(block, set()).discard(event.executor_id)
        elif isinstance(event, StageSubmitted):
            self.completed.discard(event.stage_id)
            for shuffle in event.parent_shuffle_ids:
                self.readers.setdefault(shuffle, set()).add(event.stage_id)
                if shuffle in self.released:  # a reader runs (again): its input is needed again
                    self.released.discard(shuffle)
                    self._set_needed(shuffle, True)
        elif isinstance(event, StageCompleted):
            if not event.failed:
                self.completed.add(event.stage_id)
                for shuffle, readers in self.readers.items():
                    if event.stage_id in readers and readers <= self.completed and self._needed(shuffle):
                        self._set_needed(shuffle, False)
                        self.released.add(shuffle)
        elif isinstance(event, BlockBackedUp):
            block = (event.shuffle_id, event.map_index)
            if event.shuffle_id not in self.consumed:
                self._add_holder(block, event.target)
            return self._finished_copy(block, event.time)
        elif isinstance(event, BackupFailed):
            block = (event.shuffle_id, event.map_index)
            commands = self._finished_copy(block, event.time)
            for holder in sorted(self.where.get(block, ())):
                if holder != REMOTE and holder in self.deaths and self._endangered(holder, event.time):
                    commands += self._protect(holder, [block], event.time)
            return commands
        elif isinstance(event, ShuffleConsumed):
            if self._needed(event.shuffle_id):
                self._set_needed(event.shuffle_id, False)
            self.consumed.add(event.shuffle_id)
            for block in self.blocks_of.pop(event.shuffle_id, set()):
                for holder in self.where.pop(block, set()):
                    self.held.get(holder, set()).discard(block)
        return []

    def wants(self, event_type: type) -> bool:
        return event_type is not TaskStarted

    def summary(self) -> dict[str, object]:
        return {"backups_planned": self.backups}
