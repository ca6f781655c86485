"""The stage lifecycle of the world model: Spark's ``submitStage``, attempts, lost outputs, reads.

A part of :class:`simulators.core.Simulator` (see :mod:`simulators.model`); the rules are in the
:mod:`simulators.core` docstring.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from simulators.model import WorldModel
from simulators.state import ACTIVE, COMPLETE, IDLE, STAGE_READY, WAITING, Stage
from trspark.engine.events import BlockLost, JobEnded, ShuffleConsumed, StageCompleted, StageSubmitted


class StageDriver(WorldModel):
    """Submits, completes and fails stages; tracks where each map output can be read from."""

    def _submit(self, stage: Stage) -> None:
        """Spark's ``submitStage``: run it when its inputs exist, else submit what is missing."""
        if stage.state in (WAITING, ACTIVE):
            return
        missing = [p for p in stage.parents if p.n_done < p.n] + [a for a in stage.after if not a.ever_completed]
        if missing:
            stage.state = WAITING
            for parent in missing:
                self._submit(parent)
        else:
            self._start_attempt(stage)

    def _start_attempt(self, stage: Stage) -> None:
        stage.state = ACTIVE
        stage.attempt += 1
        todo = [p for p in range(stage.n) if not stage.done[p] and not stage.running[p]]
        stage.pending = deque(todo)
        spec = stage.spec
        if spec.overhead_seconds > 0.0:
            self._push(self.now + spec.overhead_seconds, STAGE_READY, (stage, stage.attempt))
        else:
            self._active.add(stage)
            self._order_dirty = True
        self._emit(
            StageSubmitted(
                self.now,
                stage.id,
                stage.n,
                parent_stage_ids=tuple(p.id for p in stage.parents),
                parent_shuffle_ids=tuple(p.spec.shuffle_id for p in stage.parents if p.spec.shuffle_id is not None),
                shuffle_id=spec.shuffle_id,
                attempt=stage.attempt,
                name=spec.name,
                pending_partitions=None if stage.attempt == 0 else tuple(todo),
            )
        )
        if stage.n_done == stage.n:
            self._complete(stage)

    def _on_stage_ready(self, payload: Any) -> None:
        stage, attempt = payload
        if stage.state == ACTIVE and stage.attempt == attempt:
            self._active.add(stage)
            self._order_dirty = True

    def _complete(self, stage: Stage) -> None:
        stage.state = COMPLETE
        stage.failures = 0
        first = not stage.ever_completed
        stage.ever_completed = True
        self._active.discard(stage)
        self._order_dirty = True
        self._emit(StageCompleted(self.now, stage.id, stage.attempt))
        if stage.spec.shuffle_id is not None and not stage.children and not stage.consumed:
            self._consume(stage)
        for parent in stage.parents:
            self._check_consumed(parent)
        if first and not stage.children and not stage.followers:
            self._sinks_left -= 1
            if self._sinks_left == 0:
                self._finish()
                return
        for child in stage.children + stage.followers:
            if child.state == WAITING:
                child.state = IDLE  # re-check its inputs now
                self._submit(child)

    def _check_consumed(self, stage: Stage) -> None:
        if not stage.consumed and stage.children and all(c.final() for c in stage.children):
            self._consume(stage)

    def _consume(self, stage: Stage) -> None:
        stage.consumed = True
        assert stage.spec.shuffle_id is not None
        self._emit(ShuffleConsumed(self.now, stage.spec.shuffle_id))
        for parent in stage.parents:
            self._check_consumed(parent)

    def _finish(self) -> None:
        for stage in self.stages:
            if stage.spec.shuffle_id is not None and not stage.consumed:
                stage.consumed = True
                self._emit(ShuffleConsumed(self.now, stage.spec.shuffle_id))
        self._finished = True
        self.result.succeeded = True
        self.result.job_time = self.now
        self._count_vm_time()
        self._emit(JobEnded(self.now, succeeded=True, job_id=0))

    def _outputs_lost(self, stage: Stage, parts: list[int]) -> None:
        """Map outputs of ``stage`` are gone: re-run them where a consumer needs them."""
        if stage.state == COMPLETE:
            stage.state = IDLE
        elif stage.state == ACTIVE:
            # An eviction that loses a child's outputs before its parent's resubmits the parent
            # first, which already queued these partitions: queue each once, or it runs twice.
            queued = set(stage.pending)
            self._requeue(stage, [p for p in parts if not stage.running[p] and p not in queued])
            if self._finished:
                return
        needed = False
        for child in stage.children:
            # A FetchFailed needs a task that fetches: a reader whose tasks all read their input
            # runs on, and the lost outputs re-run only once something needs them again.
            if child.state == ACTIVE and (child.pending or self._running_in_read_phase(child)):
                self._fail_attempt(child)
                if self._finished:
                    return
            needed = needed or child.state == WAITING
        if needed:
            self._submit(stage)

    def _requeue(self, stage: Stage, parts: list[int]) -> None:
        """Queue ``parts`` of an active ``stage`` again; if a parent lost a block, their retries fail the attempt.

        A parent may be missing outputs that no task of ``stage`` fetched since they were lost
        (:meth:`_outputs_lost`); a retry fetches them, so, as on a FetchFailed, the attempt fails
        and the parent re-runs them first.
        """
        stage.pending.extend(parts)
        if parts and self._parent_missing(stage):
            self._fetch_failed(stage)

    def _parent_missing(self, stage: Stage) -> bool:
        """Some parent of ``stage`` lost outputs that no task fetched since: the next fetch fails."""
        return any(parent.n_done < parent.n for parent in stage.parents)

    def _fetch_failed(self, stage: Stage) -> None:
        """A task of ``stage`` fetches a lost parent block: the attempt fails and the parents re-run what they lost first."""
        self._fail_attempt(stage)
        for parent in stage.parents:
            if parent.n_done < parent.n and not self._finished:
                self._submit(parent)

    def _fail_attempt(self, stage: Stage) -> None:
        """A consumer hit missing parent outputs (FetchFailed): this attempt fails and waits."""
        self.result.stage_resubmissions += 1
        stage.failures += 1
        self._emit(StageCompleted(self.now, stage.id, stage.attempt, failed=True))
        stage.state = WAITING
        self._active.discard(stage)
        self._order_dirty = True
        stage.pending.clear()
        for tid in sorted(self._running_in_read_phase(stage)):
            self._end_task_unsuccessfully(tid, "fetch_failed")
        if self.world.max_stage_attempts is not None and stage.failures >= self.world.max_stage_attempts:
            self._fail(f"stage {stage.id} failed {stage.failures} consecutive attempts (lost parent outputs)")

    def _running_in_read_phase(self, stage: Stage) -> list[int]:
        # A read ending at the very instant a block is lost did not get it (the eviction wins ties).
        return [tid for tid, rec in self._tasks.items() if rec[0] is stage and rec[4] >= self.now]

    # ---- blocks ------------------------------------------------------------------------------
    def _refresh_block(self, stage: Stage, p: int, lost: dict[Stage, list[int]] | None = None) -> None:
        """Recompute where block ``p`` of map ``stage`` is read from; record it if it is lost."""
        at_origin = stage.origin[p] is not None
        at_peer = stage.peer[p] is not None
        remote_only = not at_origin and not at_peer and bool(stage.remote[p])
        if remote_only != bool(stage.remote_read[p]):
            stage.remote_read[p] = remote_only
            stage.remote_bytes += stage.writes[p] if remote_only else -stage.writes[p]
        if stage.done[p] and not (at_origin or at_peer or stage.remote[p]) and not stage.consumed:
            stage.done[p] = 0
            stage.n_done -= 1
            self.result.blocks_lost += 1
            self._emit(BlockLost(self.now, stage.spec.shuffle_id, p))  # type: ignore[arg-type]
            if lost is not None:
                lost.setdefault(stage, []).append(p)
            else:
                self._outputs_lost(stage, [p])

    def _read_seconds(self, stage: Stage) -> float:
        """Shuffle read time of one task of ``stage`` (s): bytes / bandwidth of where they are."""
        seconds = 0.0
        for parent in stage.parents:
            if parent.total_write <= 0.0:
                continue
            remote_share = parent.remote_bytes / parent.total_write
            per_task = parent.total_write / stage.n
            seconds += per_task * ((1.0 - remote_share) / self.world.local_bandwidth + remote_share / self.world.remote_bandwidth)
        return seconds
