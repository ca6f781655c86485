"""The simulator-only ``oracle``: it knows every VM's true death time; the lower bound to chase.

What ``oracle`` reports for a run is **the best of a small family of clairvoyant strategies per
run**: :func:`~simulators.oracle_family.best_run` plays every strategy of
:data:`~simulators.oracle_family.FAMILY` (and the two trivial baselines ``always`` and ``never``) on the very same world -- the same seed, hence the same VM lifetimes --
and keeps the fastest run (a successful run before a failed one). It never looks at another
policy's results and hard-codes no numbers; the non-clairvoyant ``tr`` and ``stage`` are not in
the family. Hindsight is legitimate here because the oracle already sees the future: choosing
the strategy that turns out best on this world is one more use of the same knowledge. Each run
records which strategy won (``policy_summary["strategy"]``) and every member's job time.

Every strategy is an :class:`OraclePolicy` with a :class:`Strategy`:

**Scheduling** (perfect-knowledge TR-Scheduling, ``Strategy.scheduling``): the γ rule of
:mod:`trspark.engine.placement` with exact lifetimes: a task of stage ``s`` may start on VM ``v``
only if ``T_s <= d_v - t`` (``d_v`` the true death time, ``t`` now), with ``T_s`` the longest
compute time of one of ``s``'s tasks plus its shuffle read at the local bandwidth, both from the
job itself. Limits are refreshed with every event, so they are never staler than the last event.
A task started on a VM that dies before the task ends produces nothing, so the rule only keeps
such work on cores that finish it (``placement`` still runs a stage that would otherwise starve).
This is the largest gain: at stability 5 a third of all started tasks die with their VM.

**Backups**: back up a block only when the VM holding its last copies is about to die while
the block's shuffle is still needed, and send it to the cheapest safe place: a peer that
outlives the danger window by the stable job time (peer copies are 4x faster than remote at the
paper's defaults), else the remote store. A peer copy whose holder later nears death is
protected again the same way. A shuffle stops being needed once it is consumed or, with
``Strategy.release_early``, once every stage reading it has completed (its outputs are protected
in turn), which is usually long before the engine-wide ``ShuffleConsumed``.
"About to die" means within ``window`` x the *lead* time a copy needs to start and finish:

.. math::

    \\text{lead} = k\\,\\bar T_\\text{task} + \\frac{\\sum_\\text{held} b}{B_\\text{remote}}

with :math:`\\bar T_\\text{task}` the mean task duration seen so far (a backup waits for a free
core) and the bytes the VM holds over its (shared) remote bandwidth -- the slower target, so
the window is long enough whichever target is chosen; ``k = 6``; ``window = 2`` by default and
``inf`` for "back up every needed block as soon as it exists". At most ``Strategy.parallel``
backups per source VM are in flight at a time (the next starts when one ends): a backup holds a
core, and copies sharing one VM's bandwidth would each hold theirs proportionally longer.

The family (:data:`~simulators.oracle_family.FAMILY`): ``needed+sched`` (the heuristic above with scheduling; the policy
``build_policy("oracle")`` returns on its own), ``needed+sched/4`` (four backups in flight per
VM), ``all+sched`` (every needed block backed up at once), and ``needed`` and ``all`` without
scheduling (the γ rule idles a dying VM's cores for the stage's *longest* task, which costs when
the actual task would have fitted), plus ``always`` and ``never``, so the oracle is never worse
than either on any run. ``needed+sched`` alone already beats every policy of the stability sweep
at most points; the family mostly trims the few runs where an early death makes the γ rule idle
cores that a luckier placement would have used.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from trspark.engine.commands import Backup, Command
from trspark.engine.events import (
    REMOTE,
    BackupFailed,
    BlockBackedUp,
    Event,
    ExecutorAdded,
    ExecutorLost,
    ShuffleConsumed,
    StageCompleted,
    StageSubmitted,
    TaskEnded,
    TaskStarted,
)
from trspark.engine.interface import Policy
from trspark.engine.placement import gamma_hints
from trspark.engine.settings import TRConfig

Block = tuple[int, int]


class FutureView(Protocol):
    """What the oracle may ask the simulator: true death times and the job it runs."""

    job: Any  # simulators.dag.JobSpec: every task's true compute time and output size

    def death_time(self, executor_id: str) -> float: ...


@dataclass(frozen=True)
class Strategy:
    """One clairvoyant way to play a run (see the module docstring).

    window : float
        A VM is endangered from ``window x lead`` before its death (``inf``: from its start).
    parallel : int
        Backups in flight per source VM.
    scheduling : bool
        Perfect-knowledge scheduling hints: no task starts on a VM that dies before it ends.
    release_early : bool
        A shuffle stops being needed once every reader stage completed (else: once consumed).
    sched_margin : float
        Seconds a task must end before its VM's death (for copying its output off).
    """

    name: str
    window: float = 2.0
    parallel: int = 1
    scheduling: bool = False
    release_early: bool = True
    sched_margin: float = 0.0


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

    def __init__(self, config: TRConfig, horizon: float, lead_tasks: float = 6.0,
                 strategy: Strategy | None = None) -> None:
        self.config = config
        self.horizon = horizon
        self.lead_tasks = lead_tasks
        self.strategy = strategy or Strategy("needed")
        self._expected: dict[int, float] = {}  # stage -> longest run time of one of its tasks (s)
        self._hinted = False
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
        self.copying: dict[str, set[Block]] = {}  # source -> the blocks it is copying
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
        bw = self.config.local_bandwidth
        by_id = {st.stage_id: st for st in future.job.stages}
        for st in future.job.stages:
            n = max(st.num_tasks, 1)
            read = sum(float(by_id[p].shuffle_write_bytes.sum()) / n for p in st.parents if p in by_id) / bw
            self._expected[st.stage_id] = float(st.task_seconds.max(initial=0.0)) + read

    # ------------------------------------------------------------------------------ decisions
    def _lead(self, executor: str) -> float:
        mean_task = self._task_time / self._tasks if self._tasks else 1.0
        return self.lead_tasks * mean_task + self.held_bytes.get(executor, 0.0) / self.config.remote_bandwidth

    def _needed(self, shuffle: int) -> bool:
        return shuffle not in self.consumed and shuffle not in self.released

    def _hints(self, now: float) -> list[Command]:
        """Perfect-knowledge γ rule: a task may start only where it ends before the VM dies."""
        if not self.strategy.scheduling or not self._expected:
            return []
        longest = max(self._expected.values())
        margin = self.strategy.sched_margin
        limits = {e: d - now - margin for e, d in self.deaths.items() if d - now - margin < longest}
        if not limits and not self._hinted:
            return []
        self._hinted = bool(limits)
        return [gamma_hints((), limits, self._expected)]

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
        death = self.deaths.get(executor, float("inf"))
        return death - now <= self.strategy.window * self._lead(executor) or (
            self.strategy.window == float("inf") and death < float("inf"))

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
        """Start the source's next queued backups while it copies fewer than ``parallel``."""
        if executor not in self.deaths:
            return []
        copying = self.copying.setdefault(executor, set())
        queue = self.queue.get(executor)
        commands: list[Command] = []
        while queue and len(copying) < self.strategy.parallel:
            block = queue.popleft()
            if not self._needed(block[0]) or self._safe_elsewhere(block, executor, now) or executor not in self.where.get(block, ()):
                self.inflight.discard(block)
                continue
            copying.add(block)
            self.source_of[block] = executor
            self.backups += 1
            commands.append(Backup(block[0], block[1], executor, self._target(executor, now), self.size[block]))
        return commands

    def _finished_copy(self, block: Block, now: float) -> list[Command]:
        self.inflight.discard(block)
        source = self.source_of.pop(block, None)
        if source is None or block not in self.copying.get(source, set()):
            return []
        self.copying[source].discard(block)
        return self._release(source, now)

    def _alarm_time(self, executor: str) -> float:
        """When to look at ``executor`` again: a little before its danger window opens."""
        if self.strategy.window == float("inf"):
            return float("-inf")
        return self.deaths[executor] - (self.strategy.window + 1.0) * self._lead(executor)

    def _due_alarms(self, now: float) -> list[Command]:
        commands: list[Command] = []
        while self._alarms and self._alarms[0][0] <= now:
            _, executor = heapq.heappop(self._alarms)
            if executor not in self.deaths:
                continue
            if self._endangered(executor, now):
                commands += self._protect(executor, sorted(self.held.get(executor, ())), now)
            else:  # the lead grew or shrank: look again a little later
                heapq.heappush(self._alarms, (max(now + 0.01, self._alarm_time(executor)), executor))
        return commands

    # --------------------------------------------------------------------------------- events
    def handle(self, event: Event) -> Sequence[Command]:
        commands = self._update(event)
        return commands + self._due_alarms(event.time) + self._hints(event.time)

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
            heapq.heappush(self._alarms, (self._alarm_time(event.executor_id), event.executor_id))
        elif isinstance(event, ExecutorLost):
            self._on_executor_lost(event)
        elif isinstance(event, StageSubmitted):
            self._on_stage_submitted(event)
        elif isinstance(event, StageCompleted):
            self._on_stage_completed(event)
        elif isinstance(event, BlockBackedUp):
            block = (event.shuffle_id, event.map_index)
            if event.shuffle_id not in self.consumed:
                self._add_holder(block, event.target)
            return self._finished_copy(block, event.time)
        elif isinstance(event, BackupFailed):
            return self._on_backup_failed(event)
        elif isinstance(event, ShuffleConsumed):
            self._on_consumed(event)
        return []

    def _on_executor_lost(self, event: ExecutorLost) -> None:
        """Forget a gone executor: its death time, the bytes and blocks it held, its queued copies."""
        self.deaths.pop(event.executor_id, None)
        self.held_bytes.pop(event.executor_id, None)
        self.copying.pop(event.executor_id, None)
        for block in self.queue.pop(event.executor_id, deque()):
            self.inflight.discard(block)
        for block in self.held.pop(event.executor_id, set()):
            self.where.get(block, set()).discard(event.executor_id)

    def _on_stage_submitted(self, event: StageSubmitted) -> None:
        """Record the stage's inputs; an input released early is needed again."""
        self.completed.discard(event.stage_id)
        for shuffle in event.parent_shuffle_ids:
            self.readers.setdefault(shuffle, set()).add(event.stage_id)
            if shuffle in self.released:  # a reader runs (again): its input is needed again
                self.released.discard(shuffle)
                self._set_needed(shuffle, True)

    def _on_stage_completed(self, event: StageCompleted) -> None:
        """With ``release_early``, a shuffle whose readers all completed is no longer needed."""
        if not event.failed:
            self.completed.add(event.stage_id)
            for shuffle, readers in self.readers.items():
                if (self.strategy.release_early and event.stage_id in readers and readers <= self.completed
                        and self._needed(shuffle)):
                    self._set_needed(shuffle, False)
                    self.released.add(shuffle)

    def _on_backup_failed(self, event: BackupFailed) -> list[Command]:
        """Free the copy slot and protect the block again on each endangered holder."""
        block = (event.shuffle_id, event.map_index)
        commands = self._finished_copy(block, event.time)
        for holder in sorted(self.where.get(block, ())):
            if holder != REMOTE and holder in self.deaths and self._endangered(holder, event.time):
                commands += self._protect(holder, [block], event.time)
        return commands

    def _on_consumed(self, event: ShuffleConsumed) -> None:
        """A consumed shuffle is not needed any more: forget where its blocks are."""
        if self._needed(event.shuffle_id):
            self._set_needed(event.shuffle_id, False)
        self.consumed.add(event.shuffle_id)
        for block in self.blocks_of.pop(event.shuffle_id, set()):
            for holder in self.where.pop(block, set()):
                self.held.get(holder, set()).discard(block)

    def wants(self, event_type: type) -> bool:
        return event_type is not TaskStarted

    def summary(self) -> dict[str, object]:
        return {"backups_planned": self.backups}


INF = float("inf")
