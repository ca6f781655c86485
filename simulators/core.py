"""The discrete-event simulator: one Spark job on evictable VMs, driven by a policy.

The Spark world model runs on a small event kernel (:mod:`simulators.kernel`: the clock and one
heap of ``(time, priority, seq, kind, payload)`` tuples). It translates its world into
:mod:`trspark.engine.events`, hands each to the policy in non-decreasing time, and
applies every command the policy returns. Its parts: the cluster (:mod:`simulators.cluster`),
the stage lifecycle (:mod:`simulators.stages`), backups (:mod:`simulators.backups`), task copies
(:mod:`simulators.duplicates`), and here the task scheduler and the policy's commands.

Model (Spark semantics, paper §6)
---------------------------------
* Each VM runs ``cores`` task slots. A task's run time is its compute time plus its shuffle read:
  a reduce task reads ``total_write / num_tasks`` bytes of each parent shuffle, the part whose
  blocks survive only remotely at the remote bandwidth, the rest at the local (peer) bandwidth.
* A map output lives on the VM that wrote it and, once backed up, on a peer VM and/or the remote
  store. A VM eviction kills its running tasks and loses every block it holds; a block with no
  surviving copy is lost. A lost block of a shuffle that a running stage still fetches (it has
  a pending task, or one in its read phase) fails that stage's attempt (a FetchFailed): its
  tasks still in their read phase fail, the parent stage re-runs the missing partitions
  (cascading through lost grand-parents, as Spark's ``submitStage`` does), then the consumer is
  re-submitted for its unfinished partitions. A stage whose tasks all read their input already
  runs on, as in Spark; a task of it that is queued again later fails the attempt then.
* A backup holds one core of its source VM for the copy (the paper backs a block up right after
  the task that wrote it; the next task starts only on a free core), so backups cost job time.
  Backups queued on a busy VM start before new tasks there, in the order received.
* A copy of a running task (``DuplicateTask``) starts once its executor has a free core after the
  pending tasks are placed, as the shim launches it (:mod:`simulators.duplicates`).
* An evicted VM is replaced after ``replace_delay`` seconds by a fresh VM of the same pool with a
  new lifetime drawn from that pool's model (:class:`simulators.world.Pool`; each pool draws from
  its own generator, spawned from the run's, so one pool's replacements never shift another's).
* The job fails (reported, never dropped) when a stage fails ``max_stage_attempts`` times in a
  row, when no task succeeds for ``stall_seconds``, or past ``max_slowdown`` x the stable time.

Tie rules (events at the same instant)
--------------------------------------
Same-time heap entries are processed by priority, then by insertion order:

0. evictions -- a task or backup that would end at the very instant its VM dies is lost
   (the conservative choice: Spark cannot commit output from a VM that is gone);
1. termination notices;
2. backup completions -- before task ends, so a consumer scheduled at ``t`` sees the copy;
3. task completions;
4. replacement VMs registering;
5. stages becoming runnable after their driver overhead (``StageSpec.overhead_seconds``);
6. ticks -- the policy re-plans after everything else that happened at ``t``.

New tasks are placed only after every heap entry at the current instant has been processed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from simulators.backups import BackupDriver
from simulators.cluster import ClusterDriver
from simulators.dag import JobSpec
from simulators.duplicates import DuplicateDriver
from simulators.kernel import EventKernel
from simulators.stages import StageDriver
from simulators.state import ACTIVE, TASK_DONE, TICK, Executor, RunResult, Stage
from simulators.transfers import Transfer, TransferSet
from simulators.world import WorldSpec
from trspark.engine import placement
from trspark.engine.commands import (
    Advice,
    Backup,
    CancelBackup,
    Command,
    DropBackup,
    DuplicateTask,
    KillDuplicate,
    ReleaseExecutor,
    SafetyBelt,
    SchedulingHints,
)
from trspark.engine.events import BlockBackedUp, Event, JobEnded, JobSubmitted, TaskEnded, TaskStarted, Tick
from trspark.engine.interface import Policy


class Simulator(ClusterDriver, StageDriver, BackupDriver, DuplicateDriver):
    """Run ``job`` on the cluster ``world`` under ``policy``.

    Parameters
    ----------
    job, world : JobSpec, WorldSpec
    policy : Policy
        Receives every protocol event; its commands are applied immediately.
    rng : numpy.random.Generator
        Source of VM lifetimes (the only randomness in a run).
    period : float
        Seconds between ``Tick`` events.
    deadline : float or None
        Absolute job-time limit (s) after which the run counts as failed.
    stall_seconds : float or None
        Fail after this long without a successful task.
    lifetimes : iterable of float, optional
        Explicit VM lifetimes (s) in the order VMs register, whatever their pool, instead of
        drawing them (for a replayed kill schedule or a hand-checked test); ``inf`` once exhausted.
    """

    def __init__(
        self,
        job: JobSpec,
        world: WorldSpec,
        policy: Policy,
        rng: np.random.Generator,
        *,
        period: float = 5.0,
        deadline: float | None = None,
        stall_seconds: float | None = None,
        trace: Callable[[Event], None] | None = None,
        lifetimes: Iterable[float] | None = None,
    ) -> None:
        self.job = job
        self.world = world
        self.policy = policy
        self.period = period
        self.deadline = deadline
        self.stall_seconds = stall_seconds
        self.trace = trace
        EventKernel.__init__(self)
        self._init_lifetimes(rng, lifetimes)
        self.executors: list[Executor] = []
        self._free: deque[Executor] = deque()
        self._tasks: dict[int, list[Any]] = {}  # tid -> [stage, partition, executor, start, read_end, attempt, speculative]
        self._next_tid = 0
        self._dups: dict[tuple[int, int], set[int]] = {}
        self._wanted: dict[tuple[int, int], str] = {}  # (stage id, partition) -> executor of a copy not started yet
        self.transfers = TransferSet(world.local_bandwidth, world.remote_bandwidth, world.remote_cap)
        self._xfer_by_block: dict[tuple[int, int], list[Transfer]] = {}
        self.hints: SchedulingHints | None = None
        self._order: list[Stage] = []
        self._order_dirty = True
        self._last_progress = 0.0
        self.result = RunResult(job_time=0.0, succeeded=False)
        self.stages = [Stage(i, spec) for i, spec in enumerate(job.stages)]
        by_id = {s.id: s for s in self.stages}
        self.by_shuffle = {s.spec.shuffle_id: s for s in self.stages if s.spec.shuffle_id is not None}
        for s in self.stages:
            s.parents = [by_id[p] for p in s.spec.parents]
            s.after = [by_id[p] for p in s.spec.after]
            for p in s.parents:
                p.children.append(s)
            for p in s.after:
                p.followers.append(s)
            s.read_bytes = sum(p.total_write / s.n for p in s.parents)
        self._active: set[Stage] = set()
        self._sinks_left = sum(1 for s in self.stages if not s.children and not s.followers)
        # Building a frozen protocol event costs ~10 us; skip per-task ones nobody reads.
        self._want_started = trace is not None or policy.wants(TaskStarted)
        self._want_ended = trace is not None or policy.wants(TaskEnded)
        self._want_backed_up = trace is not None or policy.wants(BlockBackedUp)

    # ---------------------------------------------------------------------------------- public
    def death_time(self, executor_id: str) -> float:
        """True absolute death time of an executor (for the simulator-only oracle)."""
        return self.executors[int(executor_id)].death

    def alive_executors(self) -> list[Executor]:
        return [e for e in self.executors if e.alive]

    def run(self) -> RunResult:
        """Simulate until the job ends or fails; return the measurements."""
        for pool, (_, count, _) in enumerate(self._pools):
            for _ in range(count):
                self._add_executor(pool)
        self._push(self.period, TICK, None)
        specs = [stage.spec for stage in self.stages]
        self._emit(JobSubmitted(  # Spark's JobStart: the whole graph before any stage is submitted
            self.now, 0, tuple(s.stage_id for s in specs), tuple(s.num_tasks for s in specs),
            tuple(s.shuffle_id for s in specs), tuple(tuple(s.parents) for s in specs)))
        for stage in self.stages:
            if not stage.children and not stage.followers:
                self._submit(stage)
        self._schedule()
        # indexed by heap entry kind (simulators.state), which is also its tie priority
        self.run_events((self._on_evict, self._on_notice, self._on_xfer_done, self._on_task_done, self._on_vm_add,
                         self._on_stage_ready, self._on_tick))
        self.result.events = self.processed
        self.result.policy_summary = dict(self.policy.summary())
        return self.result

    # ------------------------------------------------------------------------------ kernel hooks
    def before_instant(self, t: float) -> bool:
        return t > self._next_limit() and self._check_limits(t)

    def after_instant(self) -> None:
        self._schedule()  # new tasks are placed once everything at this instant has happened

    def on_empty(self) -> None:
        self._fail("deadlock: nothing left to happen")

    def on_stuck(self, entries: int) -> None:
        # No task will succeed: the run would reach the job time cap, so it stops there.
        if self.deadline is not None:
            self.now = max(self.now, self.deadline)
        self._fail(f"no task succeeded in {entries:,} events (lifetimes far shorter than the tasks)")

    # ------------------------------------------------------------------------------- plumbing

    def _emit(self, event: Event) -> None:
        if self.trace is not None:
            self.trace(event)
        for command in self.policy.handle(event):
            self._apply(command)

    def _next_limit(self) -> float:
        limit = float("inf") if self.deadline is None else self.deadline
        if self.stall_seconds is not None:
            stalled_at = self._last_progress + self.stall_seconds
            limit = stalled_at if stalled_at < limit else limit  # min(), written out: every instant
        return limit

    def _check_limits(self, t: float) -> bool:
        """Fail the run at the first limit crossed before ``t`` (job time cap, stall)."""
        limits = []
        if self.deadline is not None:
            limits.append((self.deadline, f"job time beyond the cap of {self.deadline:.6g} s"))
        if self.stall_seconds is not None:
            limits.append((self._last_progress + self.stall_seconds, f"no task succeeded for {self.stall_seconds:.6g} s"))
        for limit, reason in sorted(limits):
            if t > limit:
                if self.deadline is not None:  # a run that stopped making progress would not finish: it counts at the cap
                    limit = max(limit, self.deadline)
                self.now = max(self.now, limit)
                self._fail(reason)
                return True
        return False

    def _fail(self, reason: str) -> None:
        if self._finished:
            return
        self._finished = True
        self.result.succeeded = False
        self.result.fail_reason = reason
        self.result.job_time = self.now
        self._count_vm_time()
        self._emit(JobEnded(self.now, succeeded=False, job_id=0))

    # ----------------------------------------------------------------------------------- tasks
    def _schedule(self) -> None:
        """Place pending tasks on free cores by the policy's hints (:func:`trspark.engine.placement.place`)."""
        if not self._free or not self._active:
            return
        if self._order_dirty:
            order = placement.order_stages((s.id for s in self._active), self.hints)
            by_id = {s.id: s for s in self._active}
            self._order = [by_id[i] for i in order]
            self._order_dirty = False
        placement.place(self._free, [s.id for s in self._order], self.hints, _Slots(self, {s.id: s for s in self._order}))
        if self._wanted and self._launch_wanted():
            self._schedule()  # a copy's fetch failed: the parents re-run now, on the cores still free

    def _start_task(self, stage: Stage, p: int, e: Executor, *, speculative: bool) -> int:
        read = self._read_seconds(stage)
        tid = self._next_tid
        self._next_tid += 1
        self._tasks[tid] = [stage, p, e, self.now, self.now + read, stage.attempt, speculative]
        e.free -= 1
        e.tasks.add(tid)
        stage.running[p] += 1
        self.result.tasks_run += 1
        self._push(self.now + stage.seconds[p] + read, TASK_DONE, tid)
        if self._want_started:
            self._emit(TaskStarted(self.now, stage.id, p, e.id, stage.attempt, speculative))
        return tid

    def _detach_task(self, tid: int) -> list[Any] | None:
        rec = self._tasks.pop(tid, None)
        if rec is None:
            return None
        stage, p, e = rec[0], rec[1], rec[2]
        e.tasks.discard(tid)
        stage.running[p] -= 1
        copies = self._dups.get((stage.index, p))
        if copies is not None:
            copies.discard(tid)
            if len(copies) <= 1:
                del self._dups[(stage.index, p)]
        return rec

    def _end_task_unsuccessfully(self, tid: int, reason: str) -> None:
        rec = self._detach_task(tid)
        if rec is None:
            return
        stage, p, e, start = rec[0], rec[1], rec[2], rec[3]
        self.result.killed_tasks += 1
        if self._want_ended:
            self._emit(TaskEnded(self.now, stage.id, p, e.id, self.now - start, successful=False,
                                 shuffle_id=stage.spec.shuffle_id, attempt=rec[5], reason=reason))
        if e.alive:
            e.free += 1
            self._release_slot(e)
        if stage.state == ACTIVE and not stage.done[p] and not stage.running[p]:
            self._requeue(stage, [p])

    def _on_task_done(self, tid: Any) -> None:
        rec = self._tasks.get(tid)
        if rec is None:
            return  # killed earlier
        # copies of this partition (DuplicateTask) lose the race; look them up before detaching
        losers = sorted(self._dups.get((rec[0].index, rec[1]), set()) - {tid}) if self._dups else []
        self._detach_task(tid)
        stage, p, e, start = rec[0], rec[1], rec[2], rec[3]
        self._last_progress = self.now
        self.progressed()
        if stage.ever_done[p]:
            self.result.recomputed_tasks += 1
        stage.ever_done[p] = 1
        if not stage.done[p]:  # (a partition is never pending and running at once; stay safe)
            stage.done[p] = 1
            stage.n_done += 1
        if stage.spec.shuffle_id is not None:
            stage.origin[p] = e
            e.blocks.append((stage.index, p))
            self._refresh_block(stage, p)
        if self._want_ended:
            self._emit(TaskEnded(
                self.now, stage.id, p, e.id, self.now - start, successful=True,
                input_bytes=int(stage.inputs[p]), shuffle_read_bytes=int(stage.read_bytes),
                shuffle_write_bytes=int(stage.writes[p]), shuffle_id=stage.spec.shuffle_id,
                attempt=rec[5],
            ))
        for other in losers:
            self._end_task_unsuccessfully(other, "killed")
        e.free += 1
        self._release_slot(e)
        if stage.n_done == stage.n and stage.state == ACTIVE:
            self._complete(stage)

    def _on_tick(self, _: Any) -> None:
        self._emit(Tick(self.now))
        self._push(self.now + self.period, TICK, None)

    # -------------------------------------------------------------------------------- commands
    def _apply(self, command: Command) -> None:
        if self._finished:
            return
        if isinstance(command, Backup):
            self._request_backup(command)
        elif isinstance(command, CancelBackup):
            self._cancel_backup(command)
        elif isinstance(command, DropBackup):
            self._drop_backup(command)
        elif isinstance(command, SchedulingHints):
            self.hints = command
            self._order_dirty = True
        elif isinstance(command, DuplicateTask):
            self._duplicate(command)
        elif isinstance(command, KillDuplicate):
            self._kill_duplicate(command)
        elif isinstance(command, ReleaseExecutor):
            self._release(command)
        elif isinstance(command, SafetyBelt):
            if command.on:
                self.result.safety_belt_firings += 1
        elif isinstance(command, Advice):
            self.result.advice.append(f"{command.kind}: {command.message}")


def simulate(job: JobSpec, world: WorldSpec, policy: Policy, seed: int | np.random.SeedSequence, **kwargs: object) -> RunResult:
    """Convenience: one run with a fresh ``numpy.random.Generator`` from ``seed``."""
    return Simulator(job, world, policy, np.random.default_rng(seed), **kwargs).run()  # type: ignore[arg-type]



class _Slots:
    """The simulator's side of :func:`trspark.engine.placement.place`: one free core per slot."""

    __slots__ = ("sim", "stages")

    def __init__(self, sim: Simulator, stages: dict[int, Stage]) -> None:
        self.sim = sim
        self.stages = stages

    def executor(self, slot: Executor) -> str:
        return slot.id

    def usable(self, slot: Executor) -> bool:
        return slot.alive and slot.free > 0

    def pending(self, stage_id: int) -> bool:
        return bool(self.stages[stage_id].pending)

    def running(self, stage_id: int) -> bool:
        stage = self.stages[stage_id]
        return any(stage.running[p] for p in range(stage.n))

    def start(self, slot: Executor, stages: Sequence[int]) -> bool:
        stage = self.stages[stages[0]]
        self.sim._start_task(stage, stage.pending.popleft(), slot, speculative=False)
        return True


__all__: Sequence[str] = ("Executor", "RunResult", "Simulator", "Stage", "simulate")
