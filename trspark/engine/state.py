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

from collections.abc import Callable
from typing import Any

from cost_model.lifetimes import LifetimeModel
from trspark.engine.events import (
    REMOTE,
    BackupFailed,
    BlockBackedUp,
    BlockLost,
    Event,
    ExecutorAdded,
    ExecutorLost,
    ExecutorNotice,
    ExecutorRebalance,
    JobEnded,
    JobSubmitted,
    ReleaseKept,
    ShuffleConsumed,
    StageCompleted,
    StageSubmitted,
    TaskEnded,
    TaskStarted,
)
from trspark.engine.records import JobRecords
from trspark.engine.views import (
    BlockId,
    ExecutorView,
    MapOutput,
    PlannedStage,
    StageView,
    never_evicted,
    notice_expired,
    observed_lifetime,
)


class JobState(JobRecords):
    """Executors, stages and map outputs of one application, updated by :meth:`apply`.

    With a ``lineage`` the state also keeps the cost model's view of the same facts in step --
    executors (with their lifetime law), map outputs, their copies, forgotten shuffles -- through
    :class:`~cost_model.lineage.Lineage`'s public methods, in the handler that changes its own
    record. There is no second copy kept by anyone else. Parameters: see :class:`JobRecords`.
    """

    # ---- updates ----------------------------------------------------------------------------
    def apply(self, event: Event) -> None:
        """Fold one event into the state (events arrive in non-decreasing time)."""
        if event.time > self.now:  # max(now, time), without the builtin's cost on every event
            self.now = event.time
        if self._retiring:
            self._retire()
        if self.notices_expired_now:
            self.notices_expired_now = []
        if self.with_deadline:
            self._expire_notices()
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
        if old is not None and old.alive:
            # A repeated ExecutorAdded names the pool found later: what happened meanwhile stays.
            view.running, view.tasks_done = old.running, old.tasks_done
            view.notice_deadline, view.draining, view.noticed_at = old.notice_deadline, old.draining, old.noticed_at
            view.rebalance_at = old.rebalance_at
        self.executors[e.executor_id] = view
        lineage, lifetime_of = self.lineage, self._lifetime_of
        if lineage is None or lifetime_of is None:
            return
        model = lifetime_of(view)
        if lineage.has_executor(e.executor_id):
            lineage.set_model(e.executor_id, model)
        else:
            lineage.add_executor(e.executor_id, model, started=view.started)
        self._mark_safe(e.executor_id, model)

    def _mark_safe(self, executor_id: str, model: LifetimeModel) -> None:
        if never_evicted(model):
            self.safe_holders.add(executor_id)
        else:
            self.safe_holders.discard(executor_id)

    def _executor_notice(self, e: ExecutorNotice) -> None:
        ex = self.executors.get(e.executor_id)
        if ex is not None and ex.alive:
            ex.notice_deadline = e.deadline
            if e.kind == "notice":
                ex.draining = True
                ex.noticed_at = e.time if ex.noticed_at is None else ex.noticed_at
            if e.deadline is not None:
                self.with_deadline.add(e.executor_id)
            self.refresh_lifetimes()

    def _expire_notices(self) -> None:
        """Forget the termination notice of an executor that outlived it (:func:`notice_expired`):
        it takes tasks again, and its lifetime model is its pool's once more."""
        expired = [ex for ex in (self.executors.get(i) for i in self.with_deadline)
                   if ex is not None and ex.noticed_at is not None and ex.notice_deadline is not None
                   and notice_expired(ex.noticed_at, ex.notice_deadline, self.now)]
        for ex in expired:
            ex.notice_deadline, ex.noticed_at, ex.draining = None, None, False
            self.with_deadline.discard(ex.executor_id)
            self.notices_expired_now.append(ex.executor_id)
        if expired:
            self.refresh_lifetimes()

    def _executor_rebalance(self, e: ExecutorRebalance) -> None:
        ex = self.executors.get(e.executor_id)
        if ex is not None and ex.alive and ex.rebalance_at is None:
            # The first recommendation counts: the risk is raised from when it was posted.
            ex.rebalance_at = max(ex.started, e.since if e.since is not None else e.time)
            self.refresh_lifetimes()

    def refresh_lifetimes(self) -> None:
        """Give the lineage each executor's current lifetime law (after a notice, or a refit of the laws)."""
        lineage, lifetime_of = self.lineage, self._lifetime_of
        if lineage is None or lifetime_of is None:
            return
        for executor in lineage.executors():
            view = self.executors.get(executor.executor_id)
            if view is not None:
                model = lifetime_of(view)
                lineage.set_model(executor.executor_id, model)
                self._mark_safe(executor.executor_id, model)

    def _executor_lost(self, e: ExecutorLost) -> None:
        if self.lineage is not None and self.lineage.has_executor(e.executor_id):
            self.lineage.remove_executor(e.executor_id)
        self.safe_holders.discard(e.executor_id)
        self.with_deadline.discard(e.executor_id)
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
            self._copy_gone(block)
            if block.executor_id == e.executor_id:
                block.source_lost = True
            if not block.consumed and not block.holders() and not block.on_remote:
                self._drop_output(block)
        # Every reader of a view copes with a missing executor: a late event from it (a task
        # end, a backup's report) finds nothing, as it would find a dead one.
        del self.executors[e.executor_id]

    def _job_submitted(self, e: JobSubmitted) -> None:
        self.job_stages[e.job_id] = tuple(e.stage_ids)
        if e.sql_execution is not None:
            self.open_shuffles.update(s for s in e.shuffle_ids if s is not None and s not in self.consumed_shuffles)
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
        still_running = self._stop_copy(stage, e.partition, e.executor_id, e.time, lost=False)
        ex = self.executors.get(e.executor_id)
        if ex is not None:
            ex.running.discard((e.stage_id, e.partition))
        self.task_seconds_total += e.duration
        if not e.successful:
            if e.reason == "executor_lost" and still_running:  # else counted when the executor was lost
                self.lost_work_seconds += e.duration
            return
        shuffle = e.shuffle_id if e.shuffle_id is not None else stage.shuffle_id
        if ex is None and shuffle is not None:
            # A map output reported after its executor was lost went with it: Spark drops it with the
            # executor's outputs (or ignores the completion as possibly bogus) and runs the partition
            # again. Its time was counted as lost work when the executor went.
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
        if e.duration > stage.longest_seconds:
            stage.longest_seconds = e.duration
        stage.read_bytes_sum += e.shuffle_read_bytes + e.input_bytes
        stage.write_bytes_sum += e.shuffle_write_bytes
        if shuffle is not None and shuffle not in self.consumed_shuffles:  # a late copy: nobody reads it
            self._new_output(e, stage, shuffle)

    def _new_output(self, e: TaskEnded, stage: StageView, shuffle: int) -> None:
        """The map output of a successful task: in the records, their indexes and the lineage."""
        old = self.outputs.get((shuffle, e.partition))
        if old is not None:
            self._forget_copies(old)
        self._placed((shuffle, e.partition), e.executor_id, old)
        self._held.setdefault(e.executor_id, set()).add((shuffle, e.partition))
        block = self.outputs[(shuffle, e.partition)] = MapOutput(
            shuffle_id=shuffle, map_index=e.partition, stage_id=e.stage_id, executor_id=e.executor_id,
            bytes=e.shuffle_write_bytes, seconds=e.duration, created=e.time, map_id=e.map_id,
        )
        self._by_shuffle.setdefault(shuffle, {})[block.block_id] = block
        if self.lineage is not None:
            # A consumed parent (a later job read it) costs nothing to lose: it stays out of the lineage.
            parents = [s for s in stage.parent_shuffle_ids if s not in self.consumed_shuffles]
            self.lineage.add_output(shuffle, e.partition, e.executor_id, e.duration, float(e.shuffle_write_bytes),
                                    parents=parents)

    def _stop_copy(self, stage: StageView, partition: int, executor_id: str, now: float, *, lost: bool) -> bool:
        """Forget one running attempt; whether it was still known as running."""
        copies = stage.running.get(partition)
        if copies is not None:
            copies.discard(executor_id)
            if not copies:
                del stage.running[partition]
        started = stage.started_at.pop((partition, executor_id), None)
        if lost and started is not None:
            self.lost_work_seconds += max(0.0, now - started)
        return started is not None

    def _block_backed_up(self, e: BlockBackedUp) -> None:
        block = self.outputs.get((e.shuffle_id, e.map_index))
        if block is None:
            return
        target_alive = e.target == REMOTE or (e.target in self.executors and self.executors[e.target].alive)
        if target_alive:
            block.backups.add(e.target)
            self._not_unbacked(block)
            if e.target == REMOTE:
                self._off_remote.discard(block.block_id)
            if e.target != REMOTE:
                if block.last_peer != e.target:
                    self._unname(block, peer_only=True)
                    self._name(e.target, block.block_id)
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
        self._copy_gone(block)
        self._held.get(holder, set()).discard(block_id)
        if not block.consumed and not block.holders() and not block.on_remote:
            self._drop_output(block)
        lineage = self.lineage
        if lineage is not None and lineage.has_output(*block_id) and holder in lineage.output(*block_id).locations:
            lineage.remove_location(block_id[0], block_id[1], holder)

    def _block_lost(self, e: BlockLost) -> None:
        """The driver has no copy of the output it can serve (none left, or the store's copy turned
        out unreadable): every copy is gone, in the state and in the lineage, whatever was known."""
        block = self.outputs.get((e.shuffle_id, e.map_index))
        if block is not None:
            self._drop_output(block)
        lineage = self.lineage
        if lineage is not None and lineage.has_output(e.shuffle_id, e.map_index):
            out = lineage.output(e.shuffle_id, e.map_index)
            for holder in [*sorted(out.locations), *([REMOTE] if out.remote else [])]:
                lineage.remove_location(e.shuffle_id, e.map_index, holder)

    def _shuffle_consumed(self, e: ShuffleConsumed) -> None:
        """The readers of ``e.shuffle_id`` finished: it is consumed once no reader's output needs it.

        A reader whose own output is lost later is re-run by Spark, and reads this shuffle again:
        so a shuffle stays needed until each reader stage that writes a shuffle has had that
        shuffle consumed in turn (the simulator's rule, and paper §2.3's "no longer needed").
        The live shim reports a plain job's shuffle at its readers' end, and a SQL query's
        shuffles at the query's end (a later query stage can read one again). With adaptive
        execution a query stage's output is read by a later job, so its inputs must wait for
        that job: consumed at once, their backups would go and a lost output would re-run the
        whole lineage. Consuming a shuffle may consume the parents that waited on it.
        """
        self._readers_done.add(e.shuffle_id)
        self.open_shuffles.discard(e.shuffle_id)
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
            for block in self._by_shuffle.get(shuffle, {}).values():
                block.consumed = True
                self._off_remote.discard(block.block_id)
            # Policies still see the consumed outputs while they handle this event (to drop
            # their backups); the next event retires them.
            self._retiring.add(shuffle)
            writer = self.writer_stage(shuffle)
            if writer is not None:
                pending.extend(writer.parent_shuffle_ids)

    def _job_ended(self, e: JobEnded) -> None:
        self.job_ended = True
        if e.job_id is not None:
            self._forget_job_graph(e.job_id)


def _ignore(state: JobState, event: object) -> None:
    return None


_HANDLERS: dict[type, Callable[[JobState, Any], None]] = {
    ExecutorAdded: JobState._executor_added,
    ExecutorNotice: JobState._executor_notice,
    ExecutorRebalance: JobState._executor_rebalance,
    ExecutorLost: JobState._executor_lost,
    ReleaseKept: _ignore,  # only the idle release's clocks change (tr.elastic)
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
