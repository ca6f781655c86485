"""Termination notices in the TR-Spark policy: the last responsible moment and early release.

A block on a noticed executor is planned at its last responsible moment,
``deadline - notice_margin - period - BT_total`` (s), where ``BT_total`` copies every unconsumed
output the executor holds one after the other at the slower target's speed. A noticed executor
with no room for a task and nothing needed on it is released before its deadline.
"""

from __future__ import annotations

import heapq
from collections.abc import Set as AbstractSet

from trspark.engine.commands import Command, ReleaseExecutor
from trspark.engine.settings import TRConfig
from trspark.engine.state import JobState
from trspark.engine.tr.backup_stack import BackupStack
from trspark.engine.tr.costs import CostEstimator
from trspark.engine.tr.elastic import IdleRelease
from trspark.engine.tr.knowledge import LifetimeKnowledge
from trspark.engine.tr.scheduling import every_one_noticed, expected_task_seconds, has_room, shortest_task
from trspark.engine.views import BlockId, MapOutput

_NOBODY: frozenset[str] = frozenset()
"""No executor is going (:meth:`NoticeRules._going`)."""

#: Seconds from the end of a task on a noticed executor until its output's copy is reported
#: done, on top of the copy itself: at most 0.8 s (median 0.15 s) over 40 live copies
#: in live traces. The room rule keeps this, not ``notice.margin``: see
#: :meth:`NoticeRules._notice_allowance`.
NOTICE_COPY_LATENCY = 1.0


class NoticeRules:
    """The notice half of :class:`~trspark.engine.tr.policy.TRPolicy` (its tables are set there)."""

    config: TRConfig
    knowledge: LifetimeKnowledge
    state: JobState
    costs: CostEstimator
    stack: BackupStack
    decisions: dict[str, int]
    released: set[str]
    idle: IdleRelease
    _deferred: dict[BlockId, float]
    _deferred_due: list[tuple[float, BlockId]]
    _copy_totals: dict[str, float]
    _draining: set[str]

    def _defer(self, block: MapOutput) -> bool:
        """Put off Algorithm 2 for a block on a noticed executor until its last responsible moment.

        That moment is ``deadline - notice_margin - period - BT_total``: ``BT_total`` copies every
        unconsumed output the executor holds one after the other at the slower target's speed
        (they share its bandwidth), ``period`` allows for the tick that brings the engine back.
        """
        source = self.state.executors.get(self._source(block) or "")
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
        source = self.state.executors.get(self._source(block) or "")
        if source is None or source.notice_deadline is not None:
            return False
        if self._copy_total(source.executor_id) + config.notice_margin > config.notice_window:
            return False
        self.decisions["left_to_notice"] += 1
        return True

    def _going(self) -> AbstractSet[str]:
        """Executors told to go (on a notice or idle) whose loss the driver has not reported yet."""
        if not self.released and not self.idle.released:  # most of the time: no new set per decision
            return _NOBODY
        return self.released | self.idle.released

    def _source(self, block: MapOutput) -> str | None:
        """The holder a copy of ``block`` is read from: one that is not going, while there is one."""
        return block.backup_source(self._going())

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
        """``BT_total`` (s) of the executor's unconsumed outputs not on the store yet, once per executor and event.

        (Listing an executor's outputs scans the job's outputs; a notice plans every block of the
        executor in one event, and with ``notice.expected`` every plan asks for its source's
        total, so the sums are cached per executor until the next event, which may add or save
        an output at the same instant: the policy empties the cache then.)
        """
        totals = self._copy_totals
        if executor_id not in totals:
            slowest = self._slowest_bandwidth()
            totals[executor_id] = sum(self.costs.copy_seconds(b.bytes, slowest)
                                      for b in self.state.outputs_on(executor_id) if not b.on_remote)
        return totals[executor_id]

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
        # Between jobs no task event comes, only the next tick: an executor whose room ends before
        # then goes now, not after its deadline.
        until_next_look = 0.0 if state.job_stages or state.active_stages() else self.config.period
        for executor_id in sorted(self._draining):
            ex = state.executors.get(executor_id)
            if ex is None or not ex.alive or not ex.draining:  # gone, or it outlived its notice
                self._draining.discard(executor_id)
            elif (self.config.notice_release and unnoticed
                  and not has_room(ex, state.now, allowance, shortest + until_next_look)
                  and self._idle_and_empty(executor_id)):
                self._draining.discard(executor_id)
                self.released.add(executor_id)
                out.append(ReleaseExecutor(executor_id, reason="notice: no task, nothing needed held"))
        return out

    def _idle_and_empty(self, executor_id: str) -> bool:
        """True when losing ``executor_id`` now costs nothing.

        It runs no task (running tasks finish under a notice, as under Spark's decommissioning),
        no backup reads from or writes to it, and each output it holds is safe (consumed or on
        remote storage), has another live holder that is not being released itself, or is no
        longer needed (its readers finished and their outputs are covered, paper §2.3). A block
        Algorithm 2 chose to leave there (its readers come before the deadline) or that still
        waits for its last responsible moment keeps the executor. So does an output that a stage reads once its first task
        started, until the stage completes, whatever copy the output has: an executor keeps the
        locations a task of the stage fetched, and the stage's later tasks carry the epoch of its
        start, which does not clear them. Those tasks would fetch from this executor after it is
        gone, and Spark would count a FetchFailed and run the stage again.
        """
        state = self.state
        ex = state.executors[executor_id]
        if ex.running:
            return False
        if any(executor_id in (plan.source, plan.target) for plan in self.stack.in_flight.values()):
            return False
        held = state.outputs_on(executor_id)
        if any(stage.active and (stage.running or stage.tasks_done) for shuffle_id in {b.shuffle_id for b in held}
               for stage in state.reader_stages(shuffle_id)):
            return False
        # A holder told to go (on a notice or idle) keeps no copy for long: its copy saves nothing.
        going = self._going()
        for block in held:
            if state.is_safe(block) or any(h != executor_id and h not in going for h in block.holders()):
                continue
            if not state.consumers_safe(block.shuffle_id):
                return False
        return True
