"""Stage and block rules on tiny hand-timed worlds where an eviction's order of losses matters.

Conventions as in ``tests/test_sim_core.py``: sizes in MB, 400 MB/s local, 100 MB/s remote.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from simulators.core import Simulator
from simulators.dag import JobSpec
from simulators.world import WorldSpec
from tests.test_sim_core import Recorder, stage
from trspark.engine.commands import Backup, Command, DuplicateTask
from trspark.engine.events import Event, ExecutorLost, TaskEnded, TaskStarted, Tick
from trspark.engine.interface import Policy


class PeerCopy(Policy):
    """Copies every map output of shuffle ``shuffle`` to the peer ``target`` as soon as it exists."""

    name = "peer-copy"

    def __init__(self, shuffle: int, target: str) -> None:
        self.shuffle = shuffle
        self.target = target

    def handle(self, event: Event) -> Sequence[Command]:
        if (isinstance(event, TaskEnded) and event.successful and event.shuffle_id == self.shuffle
                and event.executor_id != self.target):
            return (Backup(event.shuffle_id, event.partition, event.executor_id, self.target, event.shuffle_write_bytes),)
        return ()


def test_a_parent_lost_after_its_child_is_rerun_once_per_lost_partition() -> None:
    # A -> B -> C on two one-core VMs. A runs on VM0 (0-1); B on VM1 (1-2.25), its output copied
    # to VM0 (2.25-2.5); C on VM0 from 2.25. VM1 dies at 5 (B's output survives on VM0); VM0 dies
    # at 10 holding A's output and the only copy of B's. Both stages lose their one partition,
    # whatever order the eviction finds them in: A re-runs once, then B, then C.
    job = JobSpec("chain", (stage(0, [1.0], write_mb=100), stage(1, [1.0], write_mb=100, parents=(0,)),
                            stage(2, [20.0], parents=(1,))))
    rec = Recorder(PeerCopy(shuffle=1, target="0"))
    sim = Simulator(job, WorldSpec(vms=2, cores=1, lifetime=None), rec, np.random.default_rng(0), period=1.0,
                    stall_seconds=100.0, lifetimes=[10.0, 5.0])
    sim.run()
    started = [(e.time, e.stage_id) for e in rec.of(TaskStarted) if e.time >= 10.0]  # type: ignore[attr-defined]
    assert started == [(10.0, 0), (11.0, 1), pytest.approx((12.25, 2))]
    assert sim.result.recomputed_tasks == 2  # A's and B's partition, once each
    assert sim.result.job_time == pytest.approx(12.25 + 0.25 + 20.0)


def test_a_block_lost_after_every_reader_fetched_it_fails_no_attempt() -> None:
    # Maps 0-1 s on VM0 and VM1; the reducer starts at 1 s on VM0 and has read both outputs
    # (200 MB at 400 MB/s) by 1.5 s. VM1 dies at 3 s: no task will read its output again, so, as
    # in Spark (a stage fails on a FetchFailed, and none comes), the reducer ends at 11.5 s
    # without waiting for map 1 to re-run (on VM0 after 11.5 s: the replacement comes at 23 s).
    job = JobSpec("read", (stage(0, [1.0, 1.0], write_mb=100), stage(1, [10.0], parents=(0,))))
    rec = Recorder()
    sim = Simulator(job, WorldSpec(vms=2, cores=1, lifetime=None, replace_delay=20.0), rec,
                    np.random.default_rng(0), period=1.0, stall_seconds=100.0, lifetimes=[float("inf"), 3.0])
    sim.run()
    assert sim.result.job_time == pytest.approx(11.5)
    assert sim.result.stage_resubmissions == 0
    assert sim.result.recomputed_tasks == 0


def test_a_reader_task_requeued_after_a_silent_loss_fails_its_attempt_and_reruns_the_parent() -> None:
    # Three one-core VMs: maps 0-1 s on VM0 and VM1; reducers 1-11.25 s on VM2 and VM0 (each reads
    # 100 MB: done by 1.25 s). VM1 dies at 3 s: nobody fetches map 1 any more, nothing re-runs. VM2 dies at 5 s,
    # killing reducer 0: its retry must fetch map 1, so (a FetchFailed) map 1 re-runs 5-6 s on a
    # replacement and reducer 0 then runs 6-16.25 s; it never starts reading a lost block.
    job = JobSpec("requeue", (stage(0, [1.0, 1.0], write_mb=100), stage(1, [10.0, 10.0], parents=(0,))))
    rec = Recorder()
    sim = Simulator(job, WorldSpec(vms=3, cores=1, lifetime=None), rec, np.random.default_rng(0), period=1.0,
                    stall_seconds=100.0, lifetimes=[float("inf"), 3.0, 5.0])
    sim.run()
    started = [(e.time, e.stage_id, e.partition) for e in rec.of(TaskStarted)]  # type: ignore[attr-defined]
    assert started == [(0.0, 0, 0), (0.0, 0, 1), (1.0, 1, 0), (1.0, 1, 1), (5.0, 0, 1), (6.0, 1, 0)]
    assert sim.result.job_time == pytest.approx(16.25)
    assert sim.result.recomputed_tasks == 1


class CopyReducerAt(Policy):
    """At the first tick at or after ``at`` s, asks for a copy of stage 1's partition 0 on another live VM."""

    name = "copy-reducer"

    def __init__(self, at: float, vms: Sequence[str]) -> None:
        self.at, self.vms = at, list(vms)
        self.runs_on: str | None = None
        self.sent = False

    def handle(self, event: Event) -> Sequence[Command]:
        if isinstance(event, TaskStarted) and event.stage_id == 1 and event.partition == 0:
            self.runs_on = self.runs_on or event.executor_id
        if isinstance(event, ExecutorLost) and event.executor_id in self.vms:
            self.vms.remove(event.executor_id)
        if isinstance(event, Tick) and event.time >= self.at and not self.sent and self.runs_on is not None:
            self.sent = True
            return (DuplicateTask(1, 0, next(v for v in self.vms if v != self.runs_on)),)
        return ()


def test_a_task_copy_that_would_fetch_a_lost_block_fails_the_attempt_and_reruns_the_parent() -> None:
    # Maps 0-1 s on two VMs; the reducer has read both outputs by 1.5 s. VM1 dies at 3 s: nobody
    # fetches map 1 any more. At 4 s a copy of the reducer is asked for on the idle VM: the copy
    # must fetch map 1, so (a FetchFailed) the attempt fails and map 1 re-runs first.
    job = JobSpec("copy", (stage(0, [1.0, 1.0], write_mb=100), stage(1, [10.0], parents=(0,))))
    rec = Recorder(CopyReducerAt(4.0, ["0", "1", "2"]))
    sim = Simulator(job, WorldSpec(vms=3, cores=1, lifetime=None, replace_delay=100.0), rec,
                    np.random.default_rng(0), period=1.0, stall_seconds=100.0, lifetimes=[float("inf"), 3.0, float("inf")])
    sim.run()
    after = [(e.time, e.stage_id, e.partition) for e in rec.of(TaskStarted) if e.time >= 3.0]  # type: ignore[attr-defined]
    assert after[0] == (4.0, 0, 1)  # map 1 re-runs; no copy of the reducer reads its lost block
    assert sim.result.stage_resubmissions == 1
