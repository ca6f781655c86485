"""The TR-Spark policy: events in, backup / scheduling / duplication commands out.

Per event, in one direction: the event is folded into :class:`~trspark.engine.state.JobState`
(which feeds the cost model's lineage), the cost model's clock moves
(:meth:`CostEstimator.advance`), then the decisions below read the state and the cost terms and
the backup stack turns them into commands:

* ``TaskEnded`` (a new map output) -- Algorithm 2 for that block; a backup decision goes on the
  backup stack. A successful copy kills its other copies.
* ``BlockBackedUp`` / ``BackupFailed`` -- the source's slot frees; a failed block is re-planned.
* ``ExecutorLost`` / ``ExecutorAdded`` / ``ExecutorNotice`` -- the stack forgets what the lost
  executor was part of; lifetime models are refreshed (a notice, a refit) and the newest blocks
  are queued for re-planning.
* A termination notice (``kind == "notice"``) does not copy at once: Algorithm 2 for a block
  on a noticed executor waits until its *last responsible moment*, ``deadline - margin - period
  - copy time`` of everything that executor holds (``notice.margin``), then runs with what is
  known by then. Outputs consumed meanwhile are never copied, and a peer that got its own
  notice meanwhile is not chosen (the copy would have to move again).
* With ``notice.expected`` (every eviction is announced), a block on an executor without a
  notice waits for that notice while everything the executor holds could be copied within the
  window.
* ``ShuffleConsumed`` -- released backups of the shuffle are cancelled, finished ones dropped.
* ``Tick`` -- queue the newest unsafe blocks for re-planning (their risk grows as executors age
  and parents are lost); the safety belt, TR-Scheduling hints, duplication, splitting advice.
* An executor under a notice that has no room left for a task before its deadline, runs no task,
  sends no backup, holds nothing needed that lives nowhere else and has no output a running
  task reads is released (``ReleaseExecutor``, ``notice.release``): its replacement can start
  before the deadline.

After every event a few queued re-plans run (``REPLANS_PER_EVENT``: no single event pays for
many decisions) and the stack releases what it can (newest first, per source executor).
Once the safety belt fires, every unsafe output goes to remote (the local-only variant: to the
best peer), as ``always`` would.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence

import numpy as np

from cost_model.lineage import Lineage
from trspark.engine.interface import Policy
from trspark.engine.protocol import (
    REMOTE,
    BackupFailed,
    BlockBackedUp,
    Command,
    DropBackup,
    Event,
    ExecutorAdded,
    ExecutorLost,
    ExecutorNotice,
    ReleaseExecutor,
    SchedulingHints,
    ShuffleConsumed,
    StageCompleted,
    StageSubmitted,
    TaskEnded,
    Tick,
)
from trspark.engine.settings import TRConfig
from trspark.engine.state import BlockId, JobState, MapOutput
from trspark.engine.tr.backup_stack import BackupStack, plan_for
from trspark.engine.tr.checkpointing import Costs, decide
from trspark.engine.tr.costs import CostEstimator
from trspark.engine.tr.duplication import Duplicator, SplitAdvisor
from trspark.engine.tr.horizon import NeedHorizon
from trspark.engine.tr.knowledge import LifetimeKnowledge
from trspark.engine.tr.safety_belt import SafetyBeltMonitor
from trspark.engine.tr.scheduling import (
    GammaLimits,
    build_limits,
    every_one_noticed,
    expected_task_seconds,
    has_room,
    limits_changed,
    shortest_task,
)
from trspark.engine.tr.stall import stall_width

#: Blocks queued for re-planning per tick (newest first): older blocks have usually been
#: planned or are about to be consumed, and the stack serves the newest first anyway.
REPLAN_LIMIT = 64
#: Blocks queued for re-planning after an eviction or a new executor.
REPLAN_ON_CHANGE = 16
#: Queued re-plans done per event: re-planning is spread over the following events so that no
#: single event pays for many decisions (decision latency, bench/engine.py).
REPLANS_PER_EVENT = 1
#: Seconds from the end of a task on a noticed executor until its output's copy is reported
#: done, on top of the copy itself: at most 0.8 s (median 0.15 s) over 40 live copies
#: in live traces. The room rule keeps this, not ``notice.margin``: see
#: :meth:`TRPolicy._notice_allowance`.
NOTICE_COPY_LATENCY = 1.0


#: Events after which a noticed executor may have nothing left to do (a task or copy ended, a
#: shuffle was consumed, a deferred plan came due on a tick, the notice itself).
_MAY_FREE_AN_EXECUTOR = (TaskEnded, BlockBackedUp, BackupFailed, ShuffleConsumed, StageCompleted, Tick, ExecutorNotice)


class TRPolicy(Policy):
    """TR-Spark (paper §3-§5) behind the engine interface.

    Parameters
    ----------
    config : TRConfig
        β, γ, α, grid size, recursion depth, period, bandwidths, targets, knowledge, switches.
    knowledge : LifetimeKnowledge, optional
        Override the lifetime knowledge built from ``config`` (tests, the robustness sweep).
    """

    name = "tr"

    def __init__(self, config: TRConfig, knowledge: LifetimeKnowledge | None = None) -> None:
        from cost_model.lifetimes import from_spec

        self.config = config
        self.knowledge = knowledge or LifetimeKnowledge(from_spec(config.lifetime), config.knowledge)
        lineage = Lineage()
        self.state = JobState(lineage=lineage, lifetime_of=self.knowledge.model)
        self.costs = CostEstimator(config, self.knowledge, lineage)
        self.stack = BackupStack(max_in_flight=0)  # one per core of the source
        self.belt = SafetyBeltMonitor(config.beta, enabled=config.safety_belt)
        self.duplicator = Duplicator(self.knowledge)
        self.splitter = SplitAdvisor()
        self.hints: SchedulingHints | None = None
        self.limits: GammaLimits | None = None  # the numbers behind self.hints
        self.decisions = {"local": 0, "remote": 0, "none": 0, "deferred": 0, "left_to_notice": 0}
        self._planned_now = False
        self._failed_at: dict[BlockId, float] = {}
        self._replan_queue: deque[BlockId] = deque()
        self._queued: set[BlockId] = set()
        # Blocks on noticed executors waiting for their last responsible moment: block -> time,
        # and a heap of (time, block) to find the due ones (stale heap entries are skipped).
        self._deferred: dict[BlockId, float] = {}
        self._deferred_due: list[tuple[float, BlockId]] = []
        self._copy_totals: tuple[float, dict[str, float]] = (-1.0, {})  # (instant, executor -> BT_total)
        # Executors under a notice not yet released (checked for release after the events that
        # can free them), and those released.
        self._draining: set[str] = set()
        self.released: set[str] = set()
        # How long a block must survive: until its readers finished and their outputs are covered.
        self.horizon = NeedHorizon(config.alpha, self._covered, ttl=min(0.5, config.period))

    # ---- the event loop ---------------------------------------------------------------------
    def handle(self, event: Event) -> Sequence[Command]:
        state = self.state
        state.apply(event)
        self.costs.advance(state.now, tick=isinstance(event, Tick), forgotten=state.consumed_now)
        out: list[Command] = []
        if isinstance(event, TaskEnded):
            out += self._on_task_ended(event)
        elif isinstance(event, BlockBackedUp):
            self.stack.finished((event.shuffle_id, event.map_index), event.target)
        elif isinstance(event, BackupFailed):
            self._on_backup_failed(event)
        elif isinstance(event, ExecutorLost):
            self.stack.executor_lost(event.executor_id)
            if self.knowledge.observe(state):
                state.refresh_lifetimes()
            self._replan_lost_copies(event.executor_id)
            out += self._replan(REPLAN_ON_CHANGE)
        elif isinstance(event, ExecutorAdded):
            out += self._replan(REPLAN_ON_CHANGE)
        elif isinstance(event, ExecutorNotice):
            if event.kind == "notice":
                self._plan_noticed(event.executor_id)
                if (noticed := state.executors.get(event.executor_id)) is not None and noticed.alive:
                    self._draining.add(event.executor_id)
        elif isinstance(event, ShuffleConsumed):
            for shuffle in state.consumed_now:
                out += self._on_consumed(shuffle)
        elif isinstance(event, Tick):
            out += self._on_tick()
        if isinstance(event, (StageSubmitted, StageCompleted, ExecutorAdded, ExecutorLost, ExecutorNotice)) or (
                isinstance(event, TaskEnded) and (
                    self._draining  # a noticed executor's room shrinks
                    or (self.config.warm_first and self._first_task_of(event)))):  # a fresh executor is warm now
            out += self._scheduling()
        # Tasks start waiting when a stage is submitted or becomes runnable (a parent completed),
        # a task fails or an executor goes: copies then give their cores back.
        if self.config.duplication and isinstance(event, (StageSubmitted, StageCompleted, TaskEnded, ExecutorLost, Tick)):
            out += self.duplicator.kill_if_needed(state)
        if self._deferred_due and self._deferred_due[0][0] <= state.now:
            self._plan_due()
        # An event that already ran Algorithm 2 for its own block does no queued re-plans.
        self._work_queue(0 if self._planned_now else REPLANS_PER_EVENT)
        self._planned_now = False
        out += self.stack.release(state)
        if self._draining and isinstance(event, _MAY_FREE_AN_EXECUTOR):
            out += self._releases()
        return out

    def _on_task_ended(self, event: TaskEnded) -> list[Command]:
        if not event.successful:
            return []
        out: list[Command] = []
        if self.config.duplication:
            out += self.duplicator.on_task_succeeded(self.state, event.stage_id, event.partition)
        stage = self.state.stages.get(event.stage_id)
        shuffle = event.shuffle_id if event.shuffle_id is not None else (stage.shuffle_id if stage else None)
        block = self.state.outputs.get((shuffle, event.partition)) if shuffle is not None else None
        if block is not None:
            self._plan(block)
            self._planned_now = True
        out += self._check_belt()
        if self.config.duplication:  # a core just freed: idle if nothing waiting may use it
            out += self.duplicator.duplicate_on_idle(self.state, self.hints, self.config.warm_first)
        return out

    def _check_belt(self) -> list[Command]:
        belt = self.belt.check(self.state)
        if belt is None:
            return []
        # Always-checkpoint from now on: every unsafe block, released as fast as ``always`` does.
        self.stack.max_in_flight = 1 << 30
        self._replan(limit=None)
        return [belt]

    def _on_backup_failed(self, event: BackupFailed) -> None:
        """Free the slot; if the source no longer holds the block, forget that copy; re-plan later.

        The re-plan goes through the queue (never at once) and not at the same instant, so a
        driver that keeps failing a backup cannot spin the engine in a loop at one point in time.
        """
        block_id = (event.shuffle_id, event.map_index)
        plan = self.stack.in_flight.get(block_id)
        if plan is not None and plan.target != event.target:
            plan = None
        self.stack.finished(block_id, event.target)
        # A driver that names no source (the simulator) says "source does not hold the block" in words.
        missing = event.source_missing if event.source else "hold" in event.reason
        if plan is not None and missing and event.source in ("", plan.source):
            self.state.drop_copy(block_id, plan.source)
        self._failed_at[block_id] = self.state.now
        if block_id in self.state.outputs and block_id not in self._queued:
            self._queued.add(block_id)
            self._replan_queue.append(block_id)

    def _on_consumed(self, shuffle_id: int) -> list[Command]:
        out = self.stack.cancel_consumed(shuffle_id)
        for block in self.state.shuffle_outputs(shuffle_id):
            if block.backups:
                out.append(DropBackup(shuffle_id=shuffle_id, map_index=block.map_index))
        return out

    def _first_task_of(self, event: TaskEnded) -> bool:
        """Did ``event`` end the first successful task of its executor?"""
        executor = self.state.executors.get(event.executor_id)
        return event.successful and executor is not None and executor.tasks_done == 1

    def _on_tick(self) -> list[Command]:
        out: list[Command] = self._check_belt()
        out += self._replan()
        out += self._scheduling()
        if self.config.duplication:
            out += self.duplicator.duplicate_on_idle(self.state, self.hints, self.config.warm_first)
        return out

    # ---- TR-Checkpointing -------------------------------------------------------------------
    def _plan(self, block: MapOutput) -> None:
        """Algorithm 2 for one block, its outcome onto the backup stack."""
        state = self.state
        if state.is_safe(block) or not block.holders() or block.block_id in self.stack.in_flight:
            return
        if self._failed_at.get(block.block_id) == state.now:
            return  # its backup failed at this very instant: wait for time to move on
        if self.belt.on:
            target = self._belt_target(block)
        elif self._defer(block) or self._left_to_notice(block):
            self.stack.unplan(block.block_id)
            return
        else:
            target = decide(self._costs(block))
        if target is None or target in block.backups:
            self.decisions["none"] += 1
            self.stack.unplan(block.block_id)
            return
        self.decisions["remote" if target == REMOTE else "local"] += 1
        source = block.backup_source()
        if source is None or source == target:
            return
        self.stack.push(plan_for(block, source, target))

    def _costs(self, block: MapOutput) -> Costs:
        """The cost terms of ``block``, with every input read from the state and the stack here."""
        state = self.state
        t_max = self.horizon(state, block)
        weight = float(stall_width(state, block.shuffle_id)) if self.config.stall_weight else 1.0
        return self.costs.costs(block, state, t_max, weight=weight, remote_in_flight=self.stack.in_flight_to(REMOTE))

    def _defer(self, block: MapOutput) -> bool:
        """Put off Algorithm 2 for a block on a noticed executor until its last responsible moment.

        That moment is ``deadline - notice_margin - period - BT_total``: ``BT_total`` copies every
        unconsumed output the executor holds one after the other at the slower target's speed
        (they share its bandwidth), ``period`` allows for the tick that brings the engine back.
        """
        source = self.state.executors.get(block.backup_source() or "")
        if source is None or not source.draining or source.notice_deadline is None:
            return False
        config = self.config
        due = source.notice_deadline - config.notice_margin - config.period - self._copy_total(source.executor_id)
        if self.state.now >= due:
            self._deferred.pop(block.block_id, None)
            return False
        previous = self._deferred.get(block.block_id)
        if previous != due:
            self.decisions["deferred"] += previous is None
            self._deferred[block.block_id] = due
            heapq.heappush(self._deferred_due, (due, block.block_id))
        return True

    def _left_to_notice(self, block: MapOutput) -> bool:
        """With ``notice.expected``, leave a block on an executor without a notice to its notice.

        Every eviction is announced ``notice_window`` s ahead, so the block is lost only if the
        executor cannot save it once noticed: when ``BT_total`` (every unconsumed output it holds
        that is not on the store yet, one after the other at the slower target's speed) plus
        ``notice_margin`` exceeds the window. Until then a copy now only costs. (Decommissioning
        also moves blocks only at the notice; here the choice of what and where stays
        Algorithm 2's, at the notice.)
        """
        config = self.config
        if not config.notice_expected or not self.knowledge.uses_notices:
            return False
        source = self.state.executors.get(block.backup_source() or "")
        if source is None or source.notice_deadline is not None:
            return False
        if self._copy_total(source.executor_id) + config.notice_margin > config.notice_window:
            return False
        self.decisions["left_to_notice"] += 1
        return True

    def _slowest_bandwidth(self) -> float:
        """The slower of the allowed backup targets' bandwidths (bytes/s)."""
        config = self.config
        if config.targets == "both":
            return min(config.local_bandwidth, config.remote_bandwidth)
        return config.local_bandwidth if config.targets == "local" else config.remote_bandwidth

    def _notice_allowance(self) -> float:
        """Seconds a task on a noticed executor must leave before the deadline: saving its output.

        ``A = BT(b_max) + L``: the copy time (s) of ``b_max``, the largest mean task output of
        the runnable stages, at the slower target's speed, plus :data:`NOTICE_COPY_LATENCY` ``L``.
        The task's own length needs no margin: ET is already its stage's longest finished task.
        ``notice.margin`` is left out: a task that misses the deadline costs one re-run, a core
        kept idle is lost for sure.
        """
        if not self._draining:
            return 0.0
        largest = max((s.mean_write_bytes() or 0.0 for s in self.state.runnable_stages()), default=0.0)
        return self.costs.copy_seconds(largest, self._slowest_bandwidth()) + NOTICE_COPY_LATENCY

    def _copy_total(self, executor_id: str) -> float:
        """``BT_total`` (s) of the executor's unconsumed outputs not on the store yet, once per executor and instant.

        (Listing an executor's outputs scans the job's outputs; a notice plans every block of the
        executor at the same instant, and with ``notice.expected`` every plan asks for its
        source's total, so the sums are cached per executor for that instant.)
        """
        at, totals = self._copy_totals
        if at != self.state.now:
            totals = {}
            self._copy_totals = (self.state.now, totals)
        if executor_id not in totals:
            slowest = self._slowest_bandwidth()
            totals[executor_id] = sum(self.costs.copy_seconds(b.bytes, slowest)
                                      for b in self.state.outputs_on(executor_id) if not b.on_remote)
        return totals[executor_id]

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

    def _belt_target(self, block: MapOutput) -> str | None:
        if self.config.targets != "local":
            return REMOTE
        return self.costs.best_peer(block, self.horizon(self.state, block))

    def _covered(self, block: MapOutput) -> bool:
        """Backed up somewhere, or a backup is planned or running: its parents need not outlive it."""
        return bool(block.backups) or self.stack.is_busy(block.block_id)

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
        (insertion order of ``state.outputs`` is creation order). No key is below the smallest
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
        for block in reversed(state.outputs.values()):
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

    def _replan_lost_copies(self, executor_id: str) -> None:
        """Algorithm 2 at once for the blocks that lost a copy with ``executor_id`` and live on elsewhere.

        A block with a peer copy looked safe (both holders had to fail); with one copy gone its
        risk is back to one executor's, and waiting for the next tick left it exposed.
        """
        for block in list(self.state.live_outputs()):
            lost_copy = block.last_peer == executor_id or (block.executor_id == executor_id and block.source_lost)
            if lost_copy and block.holders() and not block.on_remote:
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

    # ---- early release of noticed executors ------------------------------------------------
    def _releases(self) -> list[Command]:
        """``ReleaseExecutor`` for each noticed executor that has nothing left to do.

        No task fits there before its deadline any more (idle between two stages is not "nothing
        left to do": the next stage's tasks would fit), and losing it now costs nothing
        (:meth:`_idle_and_empty`).

        While no executor without a notice is left, none is released: the noticed ones then take
        tasks whatever their room (:func:`~trspark.engine.tr.scheduling.notice_rules`: someone
        must run them), so they are not out of work. Releasing them would leave the job to
        replacement JVMs still starting, which run their first tasks many times slower.
        """
        out: list[Command] = []
        state = self.state
        # The shortest task and the copy allowance are the same for every noticed executor.
        shortest = shortest_task(expected_task_seconds(state), state.mean_warm_task_seconds())
        allowance = self._notice_allowance()
        # (A released executor had a notice: it counts as noticed until the driver reports it lost.)
        unnoticed = not every_one_noticed(state.alive_executors())
        for executor_id in sorted(self._draining):
            ex = state.executors.get(executor_id)
            if ex is None or not ex.alive:
                self._draining.discard(executor_id)
            elif (self.config.notice_release and unnoticed and not has_room(ex, state.now, allowance, shortest)
                  and self._idle_and_empty(executor_id)):
                self._draining.discard(executor_id)
                self.released.add(executor_id)
                out.append(ReleaseExecutor(executor_id, reason="notice: no task, nothing needed held"))
        return out

    def _idle_and_empty(self, executor_id: str) -> bool:
        """True when losing ``executor_id`` now costs nothing.

        It runs no task (running tasks finish under a notice, as under Spark's decommissioning),
        no backup reads from or writes to it, and each output it holds is safe (consumed or on
        remote storage), has another live holder, or is no longer needed (its readers finished
        and their outputs are covered, paper §2.3). A block Algorithm 2 chose to leave there
        (its readers come before the deadline) or that still waits for its last responsible
        moment keeps the executor. So does an output that a running task reads: that task took
        the output's location when it started, so it would fetch from this executor after it
        is gone (Spark then counts a FetchFailed, unregisters the executor's outputs and re-runs
        their stages), whatever copy the output has.
        """
        state = self.state
        ex = state.executors[executor_id]
        if ex.running:
            return False
        if any(executor_id in (plan.source, plan.target) for plan in self.stack.in_flight.values()):
            return False
        held = state.outputs_on(executor_id)
        if any(stage.running for shuffle_id in {b.shuffle_id for b in held}
               for stage in state.reader_stages(shuffle_id)):
            return False
        for block in held:
            if state.is_safe(block) or any(h != executor_id for h in block.holders()):
                continue
            if not state.consumers_safe(block.shuffle_id):
                return False
        return True

    # ---- TR-Scheduling ----------------------------------------------------------------------
    def _scheduling(self) -> list[Command]:
        state = self.state
        executors = state.alive_executors()
        residual = self.knowledge.mean_residual_life(executors, state.now) if executors else np.zeros(0)
        out: list[Command] = []
        if self.config.scheduling:
            gamma = 1.0 if self.knowledge.mode == "deterministic" else self.config.gamma
            limits = build_limits(state, residual, executors, gamma, notice_allowance=self._notice_allowance(),
                                  released=self.released, warm_first=self.config.warm_first,
                                  order=self.config.scheduling_order)
            if limits_changed(self.limits, limits):
                self.limits = limits
                self.hints = limits.hints()
                out.append(self.hints)
        out += self.splitter.check(state, residual)
        return out

    def summary(self) -> dict[str, object]:
        return {
            "backups_planned_local": self.decisions["local"],
            "backups_planned_remote": self.decisions["remote"],
            "decisions_none": self.decisions["none"],
            "decisions_deferred": self.decisions["deferred"],
            "decisions_left_to_notice": self.decisions["left_to_notice"],
            "executors_released": len(self.released),
            "backups_released": self.stack.released,
            "backups_dropped_consumers_safe": self.stack.dropped,
            "safety_belt": self.belt.on,
            "safety_belt_at": self.belt.fired_at,
            "safety_belt_reason": self.belt.reason,
            "duplicates_started": self.duplicator.started,
            "duplicates_killed": self.duplicator.killed,
            "split_advice": sorted(self.splitter.advised),
            "lifetime_refits": self.knowledge.refits,
        }
