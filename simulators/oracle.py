"""The simulator-only ``oracle``: a policy that knows every VM's true death time.

It is the lower bound the real policies chase. It backs up a block only when the VM holding
its last copies is about to die before the block's shuffle is consumed -- i.e. exactly the
blocks that would otherwise be lost -- and sends it to the cheapest safe place: a peer that
outlives the danger window (peer copies are 4x faster than remote at the paper's defaults),
else the remote store. A peer copy whose holder later nears death is protected again the same way.

"About to die" means within the *lead* time a copy needs to start and finish:

.. math::

    \\text{lead} = k\\,\\bar T_\\text{task} + \\frac{\\sum_\\text{held} b}{B_\\text{remote}}

with :math:`\\bar T_\\text{task}` the mean task duration seen so far (a backup waits for a free
core) and the bytes the VM holds over its (shared) remote bandwidth -- the slower target, so
the window is long enough whichever target is chosen; ``k = 3``. A VM counts as
endangered from ``2 x lead`` before its death (margin for remote copies and busy cores). Blocks
written inside the window are backed up as soon as they exist.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Protocol

from trspark.config import TRConfig
from trspark.engine.policy import Policy
from trspark.engine.protocol import (
    REMOTE,
    Backup,
    BackupFailed,
    BlockBackedUp,
    BlockLost,
    Command,
    Event,
    ExecutorAdded,
    ExecutorLost,
    ShuffleConsumed,
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

    def __init__(self, config: TRConfig, horizon: float, lead_tasks: float = 3.0) -> None:
        self.config = config
        self.horizon = horizon
        self.lead_tasks = lead_tasks
        self.future: FutureView | None = None
        self.cores: dict[str, int] = {}
        self.deaths: dict[str, float] = {}
        self._alarms: list[tuple[float, str]] = []
        self.held: dict[str, set[Block]] = {}  # executor -> blocks it holds (origin or peer copy)
        self.where: dict[Block, set[str]] = {}  # block -> executors / "remote" holding it
        self.size: dict[Block, int] = {}
        self.inflight: set[Block] = set()
        self.consumed: set[int] = set()
        self._task_time = 0.0
        self._tasks = 0
        self.backups = 0

    def bind(self, future: FutureView) -> None:
        self.future = future

    # ------------------------------------------------------------------------------ decisions
    def _lead(self, executor: str) -> float:
        mean_task = self._task_time / self._tasks if self._tasks else 1.0
        held = self.held.get(executor, ())
        copy = sum(self.size[b] for b in held) / self.config.remote_bandwidth
        return self.lead_tasks * mean_task + copy

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
        commands: list[Command] = []
        for block in blocks:
            if block in self.inflight or block[0] in self.consumed or self._safe_elsewhere(block, executor, now):
                continue
            self.inflight.add(block)
            self.backups += 1
            commands.append(Backup(block[0], block[1], executor, self._target(executor, now), self.size[block]))
        return commands

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
                self.where.setdefault(block, set()).add(event.executor_id)
                self.held.setdefault(event.executor_id, set()).add(block)
                if self._endangered(event.executor_id, event.time):
                    return self._protect(event.executor_id, [block], event.time)
        elif isinstance(event, ExecutorAdded):
            assert self.future is not None, "OraclePolicy.bind(simulator) was not called"
            death = self.future.death_time(event.executor_id)
            self.cores[event.executor_id] = event.cores
            self.deaths[event.executor_id] = death
            heapq.heappush(self._alarms, (death - 3 * self._lead(event.executor_id), event.executor_id))
        elif isinstance(event, ExecutorLost):
            self.deaths.pop(event.executor_id, None)
            for block in self.held.pop(event.executor_id, set()):
                self.where.get(block, set()).discard(event.executor_id)
        elif isinstance(event, BlockBackedUp):
            block = (event.shuffle_id, event.map_index)
            self.inflight.discard(block)
            if event.shuffle_id not in self.consumed:
                self.where.setdefault(block, set()).add(event.target)
                if event.target != REMOTE:
                    self.held.setdefault(event.target, set()).add(block)
        elif isinstance(event, BackupFailed):
            block = (event.shuffle_id, event.map_index)
            self.inflight.discard(block)
            commands: list[Command] = []
            for holder in sorted(self.where.get(block, ())):
                if holder != REMOTE and holder in self.deaths and self._endangered(holder, event.time):
                    commands += self._protect(holder, [block], event.time)
            return commands
        elif isinstance(event, BlockLost):
            self.where.pop((event.shuffle_id, event.map_index), None)
        elif isinstance(event, ShuffleConsumed):
            self.consumed.add(event.shuffle_id)
            for block in [b for b in self.where if b[0] == event.shuffle_id]:
                for holder in self.where.pop(block):
                    self.held.get(holder, set()).discard(block)
        return []

    def wants(self, event_type: type) -> bool:
        return event_type is not TaskStarted

    def summary(self) -> dict[str, object]:
        return {"backups_planned": self.backups}
