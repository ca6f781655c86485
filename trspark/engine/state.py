"""The engine's view of one Spark application, rebuilt from protocol events only.

:class:`JobState` is what every policy reads: executors (start time, age, pool, termination
notice), stages (parents, shuffles, unfinished tasks ``N_i``, mean task time ``T_i``, bytes in
and out), map outputs (where they are, their backups, whether they were consumed), running
task copies, and the re-computation bookkeeping the safety belt needs.

It is driver-agnostic: the simulator and the live shim send the same events. Every update is
idempotent where a driver may report the same fact twice (an ``ExecutorLost`` followed by
``BlockLost`` for each of its blocks, a repeated ``ShuffleConsumed``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cost_model.lifetimes import LifetimeModel
from cost_model.lineage import Lineage
from trspark.engine.protocol import (
    REMOTE,
    BackupFailed,
    BlockBackedUp,
    BlockLost,
    Event,
    ExecutorAdded,
    ExecutorLost,
    ExecutorNotice,
    JobEnded,
    JobSubmitted,
    ShuffleConsumed,
    StageCompleted,
    StageSubmitted,
    TaskEnded,
    TaskStarted,
)

BlockId = tuple[int, int]
"""``(shuffle_id, map_index)``: one map output."""


@dataclass(frozen=True)
class PlannedStage:
    """A stage of a submitted job's graph (``JobSubmitted``), before or after Spark submits it."""

    stage_id: int
    num_tasks: int
    shuffle_id: int | None
    parent_stage_ids: tuple[int, ...]


@dataclass
class ExecutorView:
    executor_id: str
    added: float
    started: float
    """Start of the lifetime clock (the VM start if the driver knows it, else registration)."""
    host: str = ""
    cores: int = 1
    pool: str = "default"
    notice_deadline: float | None = None
    """Absolute time the executor will be gone (termination notice / spot block), if known."""
    draining: bool = False
    """A termination notice came (``ExecutorNotice.kind == "notice"``): no new tasks go here."""
    lost: float | None = None
    lost_reason: str = ""
    running: set[tuple[int, int]] = field(default_factory=set)
    """Task copies ``(stage_id, partition)`` running here now."""
    tasks_done: int = 0
    """Tasks that ended successfully here (0: a fresh JVM, its first tasks run slow)."""

    @property
    def alive(self) -> bool:
        return self.lost is None

    def age(self, now: float) -> float:
        """Seconds this executor has lived at ``now`` (τ in the paper)."""
        return max(0.0, now - self.started)

    @property
    def free_cores(self) -> int:
        return max(0, self.cores - len(self.running))


@dataclass
class StageView:
    stage_id: int
    num_tasks: int
    parent_stage_ids: tuple[int, ...] = ()
    parent_shuffle_ids: tuple[int, ...] = ()
    shuffle_id: int | None = None
    attempt: int = 0
    submitted: float = 0.0
    active: bool = True
    """Submitted and not completed (its tasks are runnable or running)."""
    finished: set[int] = field(default_factory=set)
    """Partitions whose output currently exists (or, for a result stage, that completed)."""
    ever_finished: set[int] = field(default_factory=set)
    running: dict[int, set[str]] = field(default_factory=dict)
    """partition -> executors running a copy of it."""
    started_at: dict[tuple[int, str], float] = field(default_factory=dict)
    tasks_done: int = 0
    seconds_sum: float = 0.0
    longest_seconds: float = 0.0
    """Run time of the longest finished task of this stage (s)."""
    read_bytes_sum: int = 0
    write_bytes_sum: int = 0

    @property
    def unfinished(self) -> int:
        """``N_i``: tasks of this stage that have not (or no longer) produced their output."""
        return max(0, self.num_tasks - len(self.finished))

    @property
    def pending_count(self) -> int:
        """Tasks neither finished nor running (waiting for a core)."""
        running_unfinished = sum(1 for p in self.running if p not in self.finished)
        return max(0, self.unfinished - running_unfinished)

    def mean_task_seconds(self, default: float) -> float:
        """``T_i``: mean run time of this stage's finished tasks (``default`` before any finished)."""
        return self.seconds_sum / self.tasks_done if self.tasks_done else default

    def mean_read_bytes(self) -> float | None:
        return self.read_bytes_sum / self.tasks_done if self.tasks_done else None

    def mean_write_bytes(self) -> float | None:
        return self.write_bytes_sum / self.tasks_done if self.tasks_done else None


@dataclass
class MapOutput:
    shuffle_id: int
    map_index: int
    stage_id: int
    executor_id: str
    """Where the original copy lives (the executor that wrote it)."""
    bytes: int
    seconds: float
    """Run time of the map task that produced it (its re-computation cost ``C_k``)."""
    created: float
    map_id: int | None = None
    backups: set[str] = field(default_factory=set)
    """Finished backups: ``"remote"`` and/or peer executor ids."""
    source_lost: bool = False
    """The writing executor died; the block lives on only in ``backups``."""
    last_peer: str | None = None
    """The peer that received the latest peer copy (a driver may keep only that one)."""
    consumed: bool = False

    @property
    def block_id(self) -> BlockId:
        return (self.shuffle_id, self.map_index)

    @property
    def on_remote(self) -> bool:
        return REMOTE in self.backups

    def backup_source(self) -> str | None:
        """Where to copy from: the writer while it lives, else the newest peer copy."""
        if not self.source_lost:
            return self.executor_id
        holders = self.holders()
        if self.last_peer in holders:
            return self.last_peer
        return holders[0] if holders else None

    def holders(self) -> list[str]:
        """Executors holding a copy (the writer unless lost, then peer backups)."""
        out = [] if self.source_lost else [self.executor_id]
        return out + sorted(b for b in self.backups if b != REMOTE)


LifetimeOf = Callable[[ExecutorView], LifetimeModel]
"""An executor's lifetime law, from what the state knows of it (start, termination notice)."""


class JobState:
    """Executors, stages and map outputs of one application, updated by :meth:`apply`.

    With a ``lineage`` the state also keeps the cost model's view of the same facts in step --
    executors (with their lifetime law), map outputs, their copies, forgotten shuffles -- through
    :class:`~cost_model.lineage.Lineage`'s public methods, in the handler that changes its own
    record. There is no second copy kept by anyone else.

    Parameters
    ----------
    default_task_seconds : float
        Task run time assumed for a stage before any of its tasks finished (s).
    lineage : Lineage, optional
        The cost model's lineage to feed (the policies that price blocks give one).
    lifetime_of : callable, optional
        The lifetime law of an executor (required with ``lineage``).
    """

    def __init__(self, default_task_seconds: float = 1.0, *, lineage: Lineage | None = None,
                 lifetime_of: LifetimeOf | None = None) -> None:
        if (lineage is None) != (lifetime_of is None):
            raise ValueError("JobState: give both 'lineage' and 'lifetime_of', or neither")
        self.lineage = lineage
        self._lifetime_of = lifetime_of
        self.default_task_seconds = default_task_seconds
        self.now = 0.0
        self.executors: dict[str, ExecutorView] = {}
        """The alive executors. A lost one is dropped (its lifetime stays in ``lifetimes``): a
        long application with spot churn sees thousands come and go."""
        self.stages: dict[int, StageView] = {}
        self.outputs: dict[BlockId, MapOutput] = {}
        self.shuffle_stage: dict[int, int] = {}
        """shuffle id -> the stage that writes it."""
        self.shuffle_readers: dict[int, set[int]] = {}
        """shuffle id -> stages that read it."""
        self.consumed_shuffles: set[int] = set()
        self._readers_done: set[int] = set()
        """Shuffles a driver said were consumed (their readers finished) while a reader's own
        output is still needed: consumed once it is (see :meth:`_shuffle_consumed`)."""
        self.consumed_now: list[int] = []
        """The shuffles the last event consumed (a ``ShuffleConsumed`` may consume none, or its
        own shuffle and the parents that waited on it)."""
        self.planned: dict[int, PlannedStage] = {}
        """stage id -> the stage as the job's graph announced it (``JobSubmitted``)."""
        self.planned_readers: dict[int, set[int]] = {}
        """shuffle id -> stages of a submitted job's graph that read it (submitted or not yet)."""
        self.job_stages: dict[int, tuple[int, ...]] = {}
        """job id -> the stage ids of its graph, from ``JobSubmitted`` until its ``JobEnded``."""
        self._retiring: set[int] = set()
        """Shuffles consumed by the previous event: retired when the next event arrives."""
        self._tasks_done = 0
        self._task_seconds_done = 0.0
        """Finished tasks and their run time over the whole application (retired stages too)."""
        self._warm_tasks_done = 0
        self._warm_seconds_done = 0.0
        """The same, without the first task of each executor JVM (see :meth:`mean_warm_task_seconds`)."""
        self._alive_cores = 0
        self._held: dict[str, set[BlockId]] = {}
        """executor -> outputs it holds a copy of (as writer or peer backup): O(own) eviction."""
        self._by_shuffle: dict[int, set[BlockId]] = {}
        self.lifetimes: dict[str, list[tuple[float, bool]]] = {}
        """pool -> ``(lifetime seconds, observed eviction?)`` of executors that left (censored if not evicted)."""
        self.first_recompute_time: float | None = None
        self.recompute_seconds = 0.0
        """Task-seconds spent re-running map tasks whose output had been lost."""
        self.lost_work_seconds = 0.0
        """Task-seconds of running tasks killed by executor loss."""
        self.task_seconds_total = 0.0
        self.job_ended = False

    # ---- queries --------------------------------------------------------------------------
    def alive_executors(self) -> list[ExecutorView]:
        return list(self.executors.values())  # a lost executor is dropped from ``executors``

    def total_cores(self) -> int:
        """Cores of the alive executors (kept as a running count: asked on every decision)."""
        return self._alive_cores

    def active_stages(self) -> list[StageView]:
        return [s for s in self.stages.values() if s.active]

    def runnable_stages(self) -> list[StageView]:
        """Active stages with tasks waiting for a core (all their parent shuffles complete)."""
        return [s for s in self.active_stages() if s.pending_count and self._inputs_ready(s)]

    def _inputs_ready(self, stage: StageView) -> bool:
        for shuffle in stage.parent_shuffle_ids:
            writer = self.shuffle_stage.get(shuffle)
            if writer is not None and self.stages[writer].unfinished > 0:
                return False
        return True

    def live_outputs(self) -> Iterator[MapOutput]:
        """Map outputs that still exist and may still be read."""
        return (b for b in self.outputs.values() if not b.consumed)

    def outputs_on(self, executor_id: str) -> list[MapOutput]:
        """Unconsumed outputs with a copy on ``executor_id`` (in creation order)."""
        held = self._held.get(executor_id, set())
        return [b for key, b in self.outputs.items() if key in held and not b.consumed]

    def holders_alive(self) -> bool:
        """Every executor holding a copy of an output is alive (a late task end of a lost one may break it)."""
        return all(e in self.executors for e in self._held)

    def writer_stage(self, shuffle_id: int) -> StageView | None:
        """The stage that writes ``shuffle_id``, if Spark submitted it and it is not retired."""
        return self.stages.get(self.shuffle_stage.get(shuffle_id, -1))

    def reader_stages(self, shuffle_id: int) -> list[StageView]:
        return [self.stages[s] for s in sorted(self.shuffle_readers.get(shuffle_id, ())) if s in self.stages]

    def unsubmitted_readers(self, shuffle_id: int) -> list[PlannedStage]:
        """Stages a job's graph says will read ``shuffle_id`` that Spark has not submitted yet."""
        # planned_readers holds only stages of a graph, each in self.planned (never pruned).
        return [self.planned[s] for s in sorted(self.planned_readers.get(shuffle_id, ())) if s not in self.stages]

    def is_safe(self, block: MapOutput) -> bool:
        """The block survives any eviction: consumed, or on remote storage."""
        return block.consumed or block.on_remote

    def consumers_safe(self, shuffle_id: int) -> bool:
        """Every reader of ``shuffle_id`` finished and its own outputs are safe (paper §2.3).

        Then the shuffle's blocks are no longer needed for any re-computation: lost reader
        outputs come back from their backups, not by re-running the readers.
        """
        if shuffle_id in self.consumed_shuffles:
            return True
        readers = self.reader_stages(shuffle_id)
        if not readers:
            return False
        for stage in readers:
            if stage.unfinished > 0:
                return False
            if stage.shuffle_id is None or stage.shuffle_id in self.consumed_shuffles:
                continue  # a finished result stage, or one whose own readers are done, needs nothing more
            outputs, shuffle = self.outputs, stage.shuffle_id
            for p in range(stage.num_tasks):
                out = outputs.get((shuffle, p))
                if out is None or not (out.consumed or REMOTE in out.backups):  # is_safe, inlined: a hot loop
                    return False
        return True

    def mean_task_seconds(self) -> float:
        """Mean run time of every successful task so far (s), retired stages included."""
        return self._task_seconds_done / self._tasks_done if self._tasks_done else self.default_task_seconds

    def mean_warm_task_seconds(self) -> float:
        """Mean run time (s) of the successful tasks that were not their executor's first one.

        A fresh JVM runs its first task several times slower (class loading, JIT, code
        generation), so its first task says little about the next ones. What a warm executor could still run before its
        deadline is judged by this mean; :meth:`mean_task_seconds` until a warm task has ended.
        """
        if not self._warm_tasks_done:
            return self.mean_task_seconds()
        return self._warm_seconds_done / self._warm_tasks_done

    # ---- updates ----------------------------------------------------------------------------
    def apply(self, event: Event) -> None:
        """Fold one event into the state (events arrive in non-decreasing time)."""
        self.now = max(self.now, event.time)
        if self._retiring:
            self._retire()
        if self.consumed_now:
            self.consumed_now = []
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def _executor_added(self, e: ExecutorAdded) -> None:
        started = e.vm_started if e.vm_started is not None else e.time
        old = self.executors.get(e.executor_id)
        if old is not None and old.alive:
            self._alive_cores -= old.cores
        self._alive_cores += max(1, e.cores)
        view = ExecutorView(
            executor_id=e.executor_id, added=e.time, started=started, host=e.host, cores=max(1, e.cores), pool=e.pool
        )
        self.executors[e.executor_id] = view
        lineage = self.lineage
        if lineage is not None and self._lifetime_of is not None and not lineage.has_executor(e.executor_id):
            lineage.add_executor(e.executor_id, self._lifetime_of(view), started=view.started)

    def _executor_notice(self, e: ExecutorNotice) -> None:
        ex = self.executors.get(e.executor_id)
        if ex is not None and ex.alive:
            ex.notice_deadline = e.deadline
            ex.draining = ex.draining or e.kind == "notice"
            self.refresh_lifetimes()

    def refresh_lifetimes(self) -> None:
        """Give the lineage each executor's current lifetime law (after a notice, or a refit of the laws)."""
        lineage, lifetime_of = self.lineage, self._lifetime_of
        if lineage is None or lifetime_of is None:
            return
        for executor in lineage.executors():
            view = self.executors.get(executor.executor_id)
            if view is not None:
                lineage.set_model(executor.executor_id, lifetime_of(view))

    def _executor_lost(self, e: ExecutorLost) -> None:
        if self.lineage is not None and self.lineage.has_executor(e.executor_id):
            self.lineage.remove_executor(e.executor_id)
        ex = self.executors.get(e.executor_id)
        if ex is None or not ex.alive:
            return
        ex.lost, ex.lost_reason = e.time, e.reason
        self._alive_cores -= ex.cores
        self.lifetimes.setdefault(ex.pool, []).append(observed_lifetime(ex, e))
        for stage_id, partition in list(ex.running):
            stage = self.stages.get(stage_id)
            if stage is not None:
                self._stop_copy(stage, partition, e.executor_id, e.time, lost=True)
        ex.running.clear()
        for key in sorted(self._held.pop(e.executor_id, set())):
            block = self.outputs.get(key)
            if block is None:
                continue
            block.backups.discard(e.executor_id)
            if block.executor_id == e.executor_id:
                block.source_lost = True
            if not block.consumed and not block.holders() and not block.on_remote:
                self._drop_output(block)
        # Every reader of a view copes with a missing executor: a late event from it (a task
        # end, a backup's report) finds nothing, as it would find a dead one.
        del self.executors[e.executor_id]

    def _job_submitted(self, e: JobSubmitted) -> None:
        self.job_stages[e.job_id] = tuple(e.stage_ids)
        for stage_id, tasks, shuffle, parents in zip(e.stage_ids, e.num_tasks, e.shuffle_ids, e.parents, strict=True):
            self.planned[stage_id] = PlannedStage(stage_id, tasks, shuffle, tuple(parents))
        for stage in (self.planned[s] for s in e.stage_ids):
            for parent in stage.parent_stage_ids:
                writer = self.planned.get(parent)
                if writer is not None and writer.shuffle_id is not None:
                    self.planned_readers.setdefault(writer.shuffle_id, set()).add(stage.stage_id)

    def _stage_submitted(self, e: StageSubmitted) -> None:
        stage = self.stages.get(e.stage_id)
        if stage is None:
            stage = StageView(
                stage_id=e.stage_id,
                num_tasks=e.num_tasks,
                parent_stage_ids=tuple(e.parent_stage_ids),
                parent_shuffle_ids=tuple(e.parent_shuffle_ids),
                shuffle_id=e.shuffle_id,
                submitted=e.time,
            )
            self.stages[e.stage_id] = stage
        stage.attempt, stage.active = e.attempt, True
        if e.pending_partitions is not None:
            # A re-submitted attempt runs only the missing partitions: everything else exists.
            stage.finished = set(range(stage.num_tasks)) - set(e.pending_partitions)
        if e.shuffle_id is not None:
            self.shuffle_stage[e.shuffle_id] = e.stage_id
        for shuffle in e.parent_shuffle_ids:
            self.shuffle_readers.setdefault(shuffle, set()).add(e.stage_id)

    def _stage_completed(self, e: StageCompleted) -> None:
        stage = self.stages.get(e.stage_id)
        if stage is not None:
            stage.active = False
            self._retire_stage(stage)

    def _task_started(self, e: TaskStarted) -> None:
        stage = self.stages.get(e.stage_id)
        ex = self.executors.get(e.executor_id)
        if stage is None or ex is None or not ex.alive:
            return
        stage.running.setdefault(e.partition, set()).add(e.executor_id)
        stage.started_at[(e.partition, e.executor_id)] = e.time
        ex.running.add((e.stage_id, e.partition))

    def _task_ended(self, e: TaskEnded) -> None:
        stage = self.stages.get(e.stage_id)
        if stage is None:
            return
        self._stop_copy(stage, e.partition, e.executor_id, e.time, lost=False)
        ex = self.executors.get(e.executor_id)
        if ex is not None:
            ex.running.discard((e.stage_id, e.partition))
        self.task_seconds_total += e.duration
        if not e.successful:
            if e.reason == "executor_lost":
                self.lost_work_seconds += e.duration
            return
        if ex is not None:
            if ex.tasks_done:
                self._warm_tasks_done += 1
                self._warm_seconds_done += e.duration
            ex.tasks_done += 1
        if e.partition in stage.ever_finished and e.partition not in stage.finished:
            # A re-run of an output that existed once and was lost: re-computation (paper §5).
            if self.first_recompute_time is None:
                self.first_recompute_time = e.time - e.duration
            self.recompute_seconds += e.duration
        stage.finished.add(e.partition)
        stage.ever_finished.add(e.partition)
        stage.tasks_done += 1
        stage.seconds_sum += e.duration
        self._tasks_done += 1
        self._task_seconds_done += e.duration
        stage.longest_seconds = max(stage.longest_seconds, e.duration)
        stage.read_bytes_sum += e.shuffle_read_bytes + e.input_bytes
        stage.write_bytes_sum += e.shuffle_write_bytes
        shuffle = e.shuffle_id if e.shuffle_id is not None else stage.shuffle_id
        if shuffle is not None and shuffle not in self.consumed_shuffles:  # a late copy: nobody reads it
            old = self.outputs.get((shuffle, e.partition))
            if old is not None:
                self._forget_copies(old)
            self._held.setdefault(e.executor_id, set()).add((shuffle, e.partition))
            self._by_shuffle.setdefault(shuffle, set()).add((shuffle, e.partition))
            self.outputs[(shuffle, e.partition)] = MapOutput(
                shuffle_id=shuffle,
                map_index=e.partition,
                stage_id=e.stage_id,
                executor_id=e.executor_id,
                bytes=e.shuffle_write_bytes,
                seconds=e.duration,
                created=e.time,
                map_id=e.map_id,
            )
            if self.lineage is not None:
                self.lineage.add_output(shuffle, e.partition, e.executor_id, e.duration, float(e.shuffle_write_bytes),
                                        parents=stage.parent_shuffle_ids)

    def _stop_copy(self, stage: StageView, partition: int, executor_id: str, now: float, *, lost: bool) -> None:
        copies = stage.running.get(partition)
        if copies is not None:
            copies.discard(executor_id)
            if not copies:
                del stage.running[partition]
        started = stage.started_at.pop((partition, executor_id), None)
        if lost and started is not None:
            self.lost_work_seconds += max(0.0, now - started)

    def _block_backed_up(self, e: BlockBackedUp) -> None:
        block = self.outputs.get((e.shuffle_id, e.map_index))
        if block is None:
            return
        target_alive = e.target == REMOTE or (e.target in self.executors and self.executors[e.target].alive)
        if target_alive:
            block.backups.add(e.target)
            if e.target != REMOTE:
                block.last_peer = e.target
                self._held.setdefault(e.target, set()).add(block.block_id)
        lineage = self.lineage
        if lineage is not None and e.target in block.backups and lineage.has_shuffle(e.shuffle_id):
            lineage.add_location(e.shuffle_id, e.map_index, e.target)

    def drop_copy(self, block_id: BlockId, holder: str) -> None:
        """The driver says ``holder`` no longer has a copy of the block (e.g. a failed backup from it)."""
        block = self.outputs.get(block_id)
        if block is None:
            return
        if holder == block.executor_id:
            block.source_lost = True
        block.backups.discard(holder)
        self._held.get(holder, set()).discard(block_id)
        if not block.consumed and not block.holders() and not block.on_remote:
            self._drop_output(block)
        lineage = self.lineage
        if lineage is not None and lineage.has_output(*block_id) and holder in lineage.output(*block_id).locations:
            lineage.remove_location(block_id[0], block_id[1], holder)

    def _block_lost(self, e: BlockLost) -> None:
        block = self.outputs.get((e.shuffle_id, e.map_index))
        if block is not None and not block.on_remote:
            self._drop_output(block)

    def _forget_copies(self, block: MapOutput) -> None:
        for holder in [block.executor_id, *block.backups]:
            self._held.get(holder, set()).discard(block.block_id)

    def _drop_output(self, block: MapOutput) -> None:
        self._forget_copies(block)
        self._by_shuffle.get(block.shuffle_id, set()).discard(block.block_id)
        del self.outputs[block.block_id]
        stage = self.stages.get(block.stage_id)
        if stage is not None:
            stage.finished.discard(block.map_index)

    def _shuffle_consumed(self, e: ShuffleConsumed) -> None:
        """The readers of ``e.shuffle_id`` finished: it is consumed once no reader's output needs it.

        A reader whose own output is lost later is re-run by Spark, and reads this shuffle again:
        so a shuffle stays needed until each reader stage that writes a shuffle has had that
        shuffle consumed in turn (the simulator's rule, and paper §2.3's "no longer needed").
        The live shim reports a shuffle at its readers' end; with adaptive execution a query
        stage's output is read by a later job, so its inputs must wait for that job: consumed
        at once, their backups would go and a lost output would re-run the whole lineage.
        Consuming a shuffle may consume the parents that waited on it.
        """
        self._readers_done.add(e.shuffle_id)
        pending = [e.shuffle_id]
        while pending:
            shuffle = pending.pop()
            if shuffle in self.consumed_shuffles or shuffle not in self._readers_done:
                continue
            if any(r.shuffle_id is not None and r.shuffle_id not in self.consumed_shuffles
                   for r in self.reader_stages(shuffle)):
                continue
            self._readers_done.discard(shuffle)
            self.consumed_shuffles.add(shuffle)
            self.consumed_now.append(shuffle)
            if self.lineage is not None:
                # Consumed outputs are never charged: forgetting the shuffle is the same for every
                # Er, and keeps a long application's lineage to the shuffles in play.
                self.lineage.forget_shuffle(shuffle)
            for key in self._by_shuffle.get(shuffle, ()):
                self.outputs[key].consumed = True
            # Policies still see the consumed outputs while they handle this event (to drop
            # their backups); the next event retires them.
            self._retiring.add(shuffle)
            writer = self.writer_stage(shuffle)
            if writer is not None:
                pending.extend(writer.parent_shuffle_ids)

    # ---- retirement -------------------------------------------------------------------------
    # A long application (a notebook, a SQL server) runs thousands of jobs through one engine.
    # What no decision can need again is dropped, so memory and the per-event cost stay those of
    # the work in flight (bench/engine_long_app.py measures both).
    def _retire(self) -> None:
        """Drop the outputs of consumed shuffles, and their stages once nothing reads or runs them."""
        for shuffle in sorted(self._retiring):
            for key in self._by_shuffle.pop(shuffle, ()):
                block = self.outputs.pop(key, None)
                if block is not None:
                    self._forget_copies(block)
            writer = self.writer_stage(shuffle)
            for stage in [*self.reader_stages(shuffle), *([writer] if writer is not None else [])]:
                self._retire_stage(stage)
        self._retiring.clear()

    def _retire_stage(self, stage: StageView) -> None:
        """Forget a stage that is over: not running, its output and every input consumed.

        ``consumers_safe`` and ``_inputs_ready`` read a missing stage as "nothing needed"; a
        later job that re-submits the stage starts a fresh view of it.
        """
        if stage.active or stage.running:
            return
        shuffles = (*stage.parent_shuffle_ids, *(() if stage.shuffle_id is None else (stage.shuffle_id,)))
        if any(s not in self.consumed_shuffles for s in shuffles):
            return
        del self.stages[stage.stage_id]
        if stage.shuffle_id is not None and self.shuffle_stage.get(stage.shuffle_id) == stage.stage_id:
            del self.shuffle_stage[stage.shuffle_id]
        for shuffle in stage.parent_shuffle_ids:
            readers = self.shuffle_readers.get(shuffle)
            if readers is not None:
                readers.discard(stage.stage_id)
                if not readers:
                    del self.shuffle_readers[shuffle]

    def _forget_job_graph(self, job_id: int) -> None:
        """An ended job's graph: its stages no longer planned unless a running job lists them too."""
        ended = self.job_stages.pop(job_id, ())
        still_listed = {s for stages in self.job_stages.values() for s in stages}
        gone = [self.planned[s] for s in ended if s in self.planned and s not in still_listed]
        for stage in gone:
            for parent in stage.parent_stage_ids:
                writer = self.planned.get(parent)
                if writer is None or writer.shuffle_id is None:
                    continue
                readers = self.planned_readers.get(writer.shuffle_id, set())
                readers.discard(stage.stage_id)
                if not readers:
                    self.planned_readers.pop(writer.shuffle_id, None)
        for stage in gone:
            del self.planned[stage.stage_id]

    def shuffle_outputs(self, shuffle_id: int) -> list[MapOutput]:
        """Existing outputs of one shuffle."""
        return [self.outputs[k] for k in sorted(self._by_shuffle.get(shuffle_id, ()))]

    def _job_ended(self, e: JobEnded) -> None:
        self.job_ended = True
        if e.job_id is not None:
            self._forget_job_graph(e.job_id)


def observed_lifetime(executor: ExecutorView, lost: ExecutorLost) -> tuple[float, bool]:
    """``(lifetime s, evicted?)`` of an executor that is gone, for lifetime fits.

    An executor that left early under a termination notice (released, decommissioned) would
    have been evicted at the deadline: its lifetime is the deadline's age, an observed eviction.
    Without a notice only an eviction is observed; any other loss censors the lifetime there.
    """
    deadline = executor.notice_deadline
    if executor.draining and deadline is not None and lost.reason != "evicted":
        return max(deadline, lost.time) - executor.started, True
    return executor.age(lost.time), lost.reason == "evicted"


def _ignore(state: JobState, event: object) -> None:
    return None


_HANDLERS: dict[type, Callable[[JobState, Any], None]] = {
    ExecutorAdded: JobState._executor_added,
    ExecutorNotice: JobState._executor_notice,
    ExecutorLost: JobState._executor_lost,
    JobSubmitted: JobState._job_submitted,
    StageSubmitted: JobState._stage_submitted,
    StageCompleted: JobState._stage_completed,
    TaskStarted: JobState._task_started,
    TaskEnded: JobState._task_ended,
    BlockBackedUp: JobState._block_backed_up,
    BackupFailed: _ignore,
    BlockLost: JobState._block_lost,
    ShuffleConsumed: JobState._shuffle_consumed,
    JobEnded: JobState._job_ended,
}
