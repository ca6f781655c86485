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

from collections import deque
from collections.abc import Sequence

import numpy as np

from cost_model import numerics
from cost_model.lineage import Lineage
from trspark.engine.commands import Command, DropBackup, SchedulingHints
from trspark.engine.events import (
    REMOTE,
    BackupFailed,
    BlockBackedUp,
    Event,
    ExecutorAdded,
    ExecutorLost,
    ExecutorNotice,
    ExecutorRebalance,
    JobSubmitted,
    ShuffleConsumed,
    StageCompleted,
    StageSubmitted,
    TaskEnded,
    Tick,
)
from trspark.engine.interface import Policy
from trspark.engine.settings import TRConfig
from trspark.engine.state import JobState
from trspark.engine.tr.backup_stack import BackupStack, plan_for
from trspark.engine.tr.checkpointing import Costs, decide
from trspark.engine.tr.costs import CostEstimator
from trspark.engine.tr.critical import StablePlacement
from trspark.engine.tr.duplication import Duplicator
from trspark.engine.tr.elastic import IdleRelease
from trspark.engine.tr.horizon import NeedHorizon
from trspark.engine.tr.knowledge import LifetimeKnowledge, pool_models
from trspark.engine.tr.notices import NoticeRules
from trspark.engine.tr.rebalance import RebalanceKnowledge
from trspark.engine.tr.replan import REPLAN_ON_CHANGE, Replanning
from trspark.engine.tr.safety_belt import SafetyBeltMonitor
from trspark.engine.tr.scheduling import GammaLimits, build_limits, limits_changed
from trspark.engine.tr.sizing import SizeAdvisor
from trspark.engine.tr.stall import stall_width
from trspark.engine.views import BlockId, MapOutput

#: Queued re-plans done per event: re-planning is spread over the following events so that no
#: single event pays for many decisions (decision latency, bench/engine.py).
REPLANS_PER_EVENT = 1


#: Events after which a noticed executor may have nothing left to do (a task or copy ended, a
#: shuffle was consumed, a deferred plan came due on a tick, the notice itself).
_MAY_FREE_AN_EXECUTOR = frozenset({TaskEnded, BlockBackedUp, BackupFailed, ShuffleConsumed, StageCompleted, Tick,
                                   ExecutorNotice})
#: Events that change the executors' outlook: task sizes are chosen again.
_OUTLOOK_CHANGED = frozenset({ExecutorAdded, ExecutorLost, ExecutorNotice, ExecutorRebalance, Tick})
#: Events after which the scheduling hints are computed again (besides expired notices and the
#: task ends :meth:`TRPolicy._task_end_reschedules`).
_RESCHEDULE_ON = frozenset({StageSubmitted, StageCompleted, ExecutorAdded, ExecutorLost, ExecutorNotice, ExecutorRebalance})
#: Events after which duplicates may have to give their cores back (tasks start waiting).
_DUPLICATES_CHECKED_ON = frozenset({StageSubmitted, StageCompleted, TaskEnded, ExecutorLost, Tick})


class TRPolicy(NoticeRules, Replanning, Policy):
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
        prior = from_spec(config.lifetime)
        self.knowledge = knowledge or RebalanceKnowledge(prior, config.knowledge, pools=pool_models(prior, config.pool_lifetimes),
                                                         factor=config.rebalance_hazard_factor)
        self.critical = StablePlacement(config.stable_pools(), config.rebalance_hazard_factor, config.stall_weight)
        lineage = Lineage()
        self.state = JobState(lineage=lineage, lifetime_of=self.knowledge.model)
        self.costs = CostEstimator(config, self.knowledge, lineage)
        self.stack = BackupStack(max_in_flight=0)  # one per core of the source
        self.belt = SafetyBeltMonitor(config.beta, enabled=config.safety_belt)
        self.duplicator = Duplicator(self.knowledge)
        self.splitter = SizeAdvisor(config, self.knowledge)
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
        self._copy_totals: dict[str, float] = {}  # executor -> BT_total, for the event being handled
        # Executors under a notice not yet released (checked for release after the events that
        # can free them), and those released.
        self._draining: set[str] = set()
        self.released: set[str] = set()
        self.released_gone = 0
        self.idle = IdleRelease(config.release_idle, config.release_min_executors)
        # How long a block must survive: until its readers finished and their outputs are covered.
        self.horizon = NeedHorizon(config.alpha, self._covered_count, ttl=min(0.5, config.period))

    # ---- the event loop ---------------------------------------------------------------------
    def handle(self, event: Event) -> Sequence[Command]:
        """Fold ``event`` into the state and the cost model's clock, then answer: first what the
        event itself asks for, then the steps any event may call for, in that order."""
        state = self.state
        state.apply(event)
        if self._copy_totals:  # an event at the same instant may have added or saved an output
            self._copy_totals.clear()
        self.costs.advance(state.now, tick=isinstance(event, Tick), forgotten=state.consumed_now,
                           deadlines_pending=bool(state.with_deadline))
        return self._on_event(event) + self._after_event(event)

    def _on_event(self, event: Event) -> list[Command]:
        """What ``event`` itself asks for."""
        state = self.state
        if isinstance(event, TaskEnded):
            return self._on_task_ended(event)
        if isinstance(event, BlockBackedUp):
            self.stack.finished((event.shuffle_id, event.map_index), event.target)
        elif isinstance(event, BackupFailed):
            self._on_backup_failed(event)
        elif isinstance(event, ExecutorLost):
            return self._on_executor_lost(event)
        elif isinstance(event, (ExecutorAdded, ExecutorRebalance)):
            return self._replan(REPLAN_ON_CHANGE)
        elif isinstance(event, ExecutorNotice) and event.kind == "notice":
            self._plan_noticed(event.executor_id)
            # One already released stays released: ReleaseExecutor is sent once.
            noticed = state.executors.get(event.executor_id)
            if noticed is not None and noticed.alive and event.executor_id not in self.released:
                self._draining.add(event.executor_id)
        elif isinstance(event, ShuffleConsumed):
            self.critical.forget(state.consumed_now)
            return [command for shuffle in state.consumed_now for command in self._on_consumed(shuffle)]
        elif isinstance(event, Tick):
            return self._on_tick()
        elif isinstance(event, JobSubmitted) and (released := self.belt.job_submitted(state)) is not None:
            self.stack.max_in_flight = 0  # back to one released backup per core of the source
            return [released]
        return []

    def _after_event(self, event: Event) -> list[Command]:
        """The steps any event may call for: task sizes, work built ahead, hints, duplicates,
        deferred and queued re-plans, backups released, executors let go."""
        # Events are final classes: their type picks the steps (one set lookup, not a chain of
        # isinstance checks on every event).
        state, out, kind = self.state, [], type(event)
        if kind in _OUTLOOK_CHANGED:
            self.splitter.refresh(state)
        # Built here, not inside the next task's decision: the table after executors came or went,
        # the terms of the shuffles a new stage reads.
        if kind is ExecutorAdded or kind is ExecutorLost:
            self.costs.recompute.build_pending()
        elif isinstance(event, StageSubmitted):
            self.costs.recompute.build_pending(event.parent_shuffle_ids)
        if kind in _RESCHEDULE_ON or state.notices_expired_now or (
                isinstance(event, TaskEnded) and self._task_end_reschedules(event)):
            out += self._scheduling()
        # Tasks start waiting when a stage is submitted or becomes runnable (a parent completed),
        # a task fails or an executor goes: copies then give their cores back.
        if self.config.duplication and kind in _DUPLICATES_CHECKED_ON:
            out += self.duplicator.kill_if_needed(state)
        if self._deferred_due and self._deferred_due[0][0] <= state.now:
            self._plan_due()
        # An event that already ran Algorithm 2 for its own block does no queued re-plans.
        self._work_queue(0 if self._planned_now else REPLANS_PER_EVENT)
        self._planned_now = False
        out += self.stack.release(state)
        if self._draining and kind in _MAY_FREE_AN_EXECUTOR:
            out += self._releases()
        if self.idle.enabled:
            self.idle.observe(event, state)
            if kind is Tick:
                out += self.idle.releases(state, self.stack, self.released)
        return out

    def _task_end_reschedules(self, event: TaskEnded) -> bool:
        """Whether a task's end changes the scheduling hints."""
        return bool(self._draining  # a noticed executor's room shrinks
                    or self.critical.active  # a stable core freed: the wait for it changed
                    or (self.config.warm_first and self._first_task_of(event)))  # a fresh executor is warm now

    def _on_task_ended(self, event: TaskEnded) -> list[Command]:
        if not event.successful:
            if self.config.duplication:
                self.duplicator.attempt_failed(event.stage_id, event.partition, event.executor_id)
            return []
        stage = self.state.stages.get(event.stage_id)
        shuffle = event.shuffle_id if event.shuffle_id is not None else (stage.shuffle_id if stage else None)
        if shuffle is not None and event.executor_id not in self.state.executors:
            # Reported after its executor was lost, the output went with it and runs again: a copy
            # of it still running elsewhere is that run, not a duplicate to kill.
            return []
        out: list[Command] = []
        if self.config.duplication:
            out += self.duplicator.on_task_succeeded(self.state, event.stage_id, event.partition)
        block = self.state.outputs.get((shuffle, event.partition)) if shuffle is not None else None
        if block is not None:
            self._plan(block)
            self._planned_now = True
        out += self.splitter.stage_done(self.state, event.stage_id)
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
        if self._failed_at and next(iter(self._failed_at.values())) != self.state.now:
            self._failed_at.clear()  # only failures at this very instant are read (_plan): time moved on
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
        source = self._source(block)
        if source is None or source == target:
            return
        self.stack.push(plan_for(block, source, target))

    def _costs(self, block: MapOutput) -> Costs:
        """The cost terms of ``block``, with every input read from the state and the stack here."""
        state = self.state
        t_max = self.horizon(state, block)
        weight = float(stall_width(state, block.shuffle_id)) if self.config.stall_weight else 1.0
        costs = self.costs.costs(block, state, t_max, weight=weight, remote_in_flight=self.stack.in_flight_to(REMOTE),
                                 peer_loads=self.stack.peer_loads(exclude=block.block_id), exclude=self._going(),
                                 exact_lowest=self.critical.reads_costs)
        self.critical.observe(block, state, costs)
        return costs

    def _belt_target(self, block: MapOutput) -> str | None:
        if self.config.targets != "local":
            return REMOTE
        return self.costs.best_peer(block, self.horizon(self.state, block))

    def _covered_count(self, state: JobState, shuffle_id: int) -> int:
        """Outputs of ``shuffle_id`` that are covered or safe (``state.is_safe``).

        Covered: backed up somewhere, or a backup is planned or running (``stack.is_busy``), so
        its parents need not outlive it. The horizon asks this of every reader level, so every
        output with a backup is counted at once and only those without one are tested.
        """
        is_busy, is_safe = self.stack.is_busy, state.is_safe
        unbacked = state.unbacked_outputs(shuffle_id)
        covered = sum(1 for key, block in unbacked.items() if is_busy(key) or is_safe(block))
        return state.output_count(shuffle_id) - len(unbacked) + covered

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
            limits = self.critical.restrict(state, limits)
            if limits_changed(self.limits, limits):
                self.limits = limits
                self.hints = limits.hints()
                out.append(self.hints)
        out += self.splitter.check(state)
        return out

    def prepare(self) -> None:
        # The first executor's task-size search, the first quadrature and (knowledge "fitted")
        # the first refit after evictions would import scipy on the event path: 0.5-1.3 s of
        # CPU, seconds of wall time while executors start or die.
        numerics.load(fits=self.knowledge.mode == "fitted")

    def summary(self) -> dict[str, object]:
        return {
            "backups_planned_local": self.decisions["local"],
            "backups_planned_remote": self.decisions["remote"],
            "decisions_none": self.decisions["none"],
            "decisions_deferred": self.decisions["deferred"],
            "decisions_left_to_notice": self.decisions["left_to_notice"],
            "executors_released": self.released_gone + len(self.released),
            "executors_released_idle": self.idle.gone + len(self.idle.released),
            "idle_releases_kept": self.idle.kept,
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
