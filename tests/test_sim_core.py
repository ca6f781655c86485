"""The simulator's failure and bandwidth rules on tiny DAGs whose timelines are worked by hand.

Conventions: sizes in MB (10^6 bytes), bandwidths 400 MB/s local and 100 MB/s remote unless set.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from simulators.core import Simulator
from simulators.dag import JobSpec, StageSpec
from simulators.world import WorldSpec
from trspark.engine.baselines import AlwaysPolicy, NeverPolicy
from trspark.engine.commands import Advice, Command, DuplicateTask, ReleaseExecutor, SafetyBelt
from trspark.engine.events import (
    BlockBackedUp,
    BlockLost,
    Event,
    ExecutorAdded,
    ExecutorLost,
    ExecutorNotice,
    ShuffleConsumed,
    StageCompleted,
    StageSubmitted,
    TaskEnded,
    TaskStarted,
    Tick,
)
from trspark.engine.interface import Policy

MB = 1e6


class Recorder(Policy):
    """Records every event and delegates decisions to ``inner``."""

    name = "recorder"

    def __init__(self, inner: Policy | None = None) -> None:
        self.inner = inner or NeverPolicy()
        self.events: list[Event] = []

    def handle(self, event: Event) -> Sequence[Command]:
        self.events.append(event)
        return self.inner.handle(event)

    def of(self, kind: type) -> list[Event]:
        return [e for e in self.events if isinstance(e, kind)]


def stage(sid: int, seconds: Sequence[float], write_mb: float = 0.0, parents: tuple[int, ...] = ()) -> StageSpec:
    n = len(seconds)
    return StageSpec(
        stage_id=sid, task_seconds=np.asarray(seconds, dtype=float), shuffle_write_bytes=np.full(n, write_mb * MB),
        parents=parents, shuffle_id=sid if write_mb > 0 else None, name=f"s{sid}",
    )


def run(job: JobSpec, *, vms: int, cores: int, lifetimes: Sequence[float] = (), policy: Policy | None = None,
        **world: object) -> tuple[Simulator, Recorder]:
    recorder = Recorder(policy)
    spec = WorldSpec(vms=vms, cores=cores, lifetime=None, **world)  # type: ignore[arg-type]
    sim = Simulator(job, spec, recorder, np.random.default_rng(0), period=1.0, stall_seconds=100.0, lifetimes=lifetimes)
    sim.run()
    return sim, recorder


def backups(rec: Recorder) -> list[float]:
    """(time, seconds) of each backup in order, flattened: pytest.approx compares flat float lists on
    every pytest version, while nested tuples are rejected by some."""
    return [x for e in rec.of(BlockBackedUp) for x in (e.time, e.seconds)]  # type: ignore[attr-defined]


def test_stable_job_time_is_map_makespan_plus_read_plus_reduce() -> None:
    # maps 1 s and 2 s on two cores; the reducer reads 2 x 100 MB at 400 MB/s (0.5 s), computes 1 s
    job = JobSpec("two-stage", (stage(0, [1.0, 2.0], write_mb=100), stage(1, [1.0], parents=(0,))))
    sim, rec = run(job, vms=1, cores=2)
    assert sim.result.succeeded
    assert sim.result.job_time == pytest.approx(3.5)
    assert sim.result.recomputed_tasks == 0
    assert [e.stage_id for e in rec.of(StageCompleted)] == [0, 1]  # type: ignore[attr-defined]
    ends = rec.of(TaskEnded)
    assert ends[-1].shuffle_read_bytes == 200 * MB  # type: ignore[attr-defined]


def test_lost_block_is_rerun_and_consumer_resubmitted() -> None:
    # VM1 holds map output 1 and dies at 1.2 s while the reducer (started at 1 s) still reads.
    job = JobSpec("lost", (stage(0, [1.0, 1.0], write_mb=100), stage(1, [4.0], parents=(0,))))
    sim, rec = run(job, vms=2, cores=1, lifetimes=[float("inf"), 1.2])
    # map 1 re-runs 1.2-2.2; the reducer re-runs 2.2 + 0.5 read + 4 compute
    assert sim.result.job_time == pytest.approx(6.7)
    assert sim.result.recomputed_tasks == 1
    assert sim.result.blocks_lost == 1
    assert sim.result.stage_resubmissions == 1
    lost = rec.of(BlockLost)
    assert [(e.shuffle_id, e.map_index) for e in lost] == [(0, 1)]  # type: ignore[attr-defined]
    resubmitted = [e for e in rec.of(StageSubmitted) if e.attempt > 0]  # type: ignore[attr-defined]
    assert [(e.stage_id, e.pending_partitions) for e in resubmitted] == [(0, (1,)), (1, (0,))]  # type: ignore[attr-defined]
    failed = [e for e in rec.of(TaskEnded) if not e.successful]  # type: ignore[attr-defined]
    assert len(failed) == 1 and failed[0].reason in ("fetch_failed", "executor_lost")  # type: ignore[attr-defined]


def test_cascading_recomputation_through_lost_grandparent() -> None:
    # One single-core VM runs A (0-1), B (1-3: 1 s read of 400 MB + 1 s), C (3-5). It dies at
    # 3.5 s losing A's and B's outputs; its replacement re-runs A (3.5-4.5), B (4.5-6.5), C (6.5-8.5).
    job = JobSpec("chain", (stage(0, [1.0], write_mb=400), stage(1, [1.0], write_mb=400, parents=(0,)),
                            stage(2, [1.0], parents=(1,))))
    sim, rec = run(job, vms=1, cores=1, lifetimes=[3.5])
    assert sim.result.job_time == pytest.approx(8.5)
    assert sim.result.recomputed_tasks == 2
    assert sim.result.blocks_lost == 2
    kinds = [type(e).__name__ for e in rec.events if isinstance(e, (ExecutorLost, ExecutorAdded))]
    assert kinds == ["ExecutorAdded", "ExecutorLost", "ExecutorAdded"]
    killed = [e for e in rec.of(TaskEnded) if not e.successful]  # type: ignore[attr-defined]
    assert [(e.stage_id, e.reason) for e in killed] == [(2, "executor_lost")]  # type: ignore[attr-defined]


def test_replacement_vm_arrives_after_the_delay() -> None:
    job = JobSpec("one", (stage(0, [1.0]),))
    sim, rec = run(job, vms=1, cores=1, lifetimes=[0.5], replace_delay=2.0)
    assert sim.result.job_time == pytest.approx(3.5)  # killed at 0.5, new VM at 2.5, task 2.5-3.5
    assert [e.time for e in rec.of(ExecutorAdded)] == [0.0, 2.5]
    assert sim.result.evictions == 1


def test_backup_to_remote_survives_eviction_and_is_read_remotely() -> None:
    # always: map output (100 MB) goes to remote 1-2 s holding the core; VM dies at 2.5 s; the
    # reducer on the replacement reads it from remote: 100 MB / 100 MB/s = 1 s, then 1 s compute.
    job = JobSpec("safe", (stage(0, [1.0], write_mb=100), stage(1, [1.0], parents=(0,))))
    sim, rec = run(job, vms=1, cores=1, lifetimes=[2.5], policy=AlwaysPolicy())
    backed = rec.of(BlockBackedUp)
    assert [(e.time, e.target, e.seconds) for e in backed] == [(2.0, "remote", 1.0)]  # type: ignore[attr-defined]
    assert sim.result.blocks_lost == 0
    assert sim.result.recomputed_tasks == 0
    # the reducer started at 2.0 on the only core and was killed at 2.5; rerun 2.5 + 1 + 1
    assert sim.result.job_time == pytest.approx(4.5)


def test_remote_cap_is_shared_by_uploading_vms() -> None:
    # Two VMs each back up 100 MB at t=1; per-VM remote 100 MB/s but a total cap of 100 MB/s:
    # each gets 50 MB/s, so both finish at t=3 (without the cap: t=2).
    job = JobSpec("cap", (stage(0, [1.0, 1.0], write_mb=100), stage(1, [0.1], parents=(0,))))
    _, capped = run(job, vms=2, cores=1, policy=AlwaysPolicy(), remote_cap=100 * MB)
    assert [e.time for e in capped.of(BlockBackedUp)] == pytest.approx([3.0, 3.0])
    _, free = run(job, vms=2, cores=1, policy=AlwaysPolicy())
    assert [e.time for e in free.of(BlockBackedUp)] == pytest.approx([2.0, 2.0])


def test_shares_are_recomputed_when_a_transfer_starts_and_ends() -> None:
    # One VM, two cores: backup A (200 MB) runs alone 1-2 s at 100 MB/s, shares 50/50 from 2 s with
    # backup B (200 MB) until A ends at 4 s; B then has 100 MB left at full rate: ends at 5 s.
    job = JobSpec("share", (stage(0, [1.0, 2.0], write_mb=200), stage(1, [0.1], parents=(0,))))
    _, rec = run(job, vms=1, cores=2, policy=AlwaysPolicy())
    assert backups(rec) == pytest.approx([4.0, 3.0, 5.0, 3.0])


def test_backup_latency_is_paid_once_per_copy_before_the_bytes_move() -> None:
    # As above with a 0.5 s per-copy latency: A is set up 1-1.5 s, alone at 100 MB/s until B
    # starts at 2 s (50 MB done); B's setup 2-2.5 s already shares the VM's bandwidth, so A has
    # 150 MB at 50 MB/s: ends at 5 s; B moved 125 MB by then, the rest 75 MB at 100 MB/s: 5.75 s.
    job = JobSpec("latency", (stage(0, [1.0, 2.0], write_mb=200), stage(1, [0.1], parents=(0,))))
    _, rec = run(job, vms=1, cores=2, policy=AlwaysPolicy(), backup_latency=0.5)
    assert backups(rec) == pytest.approx([5.0, 4.0, 5.75, 3.75])


def test_eviction_wins_a_tie_with_task_completion() -> None:
    # The task would end at exactly 1.0 s, when its VM dies: it is lost and re-run.
    job = JobSpec("tie", (stage(0, [1.0]),))
    sim, rec = run(job, vms=1, cores=1, lifetimes=[1.0])
    assert sim.result.job_time == pytest.approx(2.0)
    assert sim.result.killed_tasks == 1


def test_events_are_time_ordered_and_complete() -> None:
    job = JobSpec("all", (stage(0, [1.0, 1.0, 1.0], write_mb=50), stage(1, [1.0, 1.0], write_mb=10, parents=(0,)),
                          stage(2, [1.0], parents=(1,))))
    sim, rec = run(job, vms=2, cores=1, lifetimes=[2.2], policy=AlwaysPolicy())
    times = [e.time for e in rec.events]
    assert times == sorted(times)
    kinds = {type(e).__name__ for e in rec.events}
    expected = {"ExecutorAdded", "ExecutorLost", "StageSubmitted", "StageCompleted", "TaskStarted", "TaskEnded",
                "BlockBackedUp", "ShuffleConsumed", "Tick", "JobEnded"}
    assert expected <= kinds
    assert sorted(e.shuffle_id for e in rec.of(ShuffleConsumed)) == [0, 1]  # type: ignore[attr-defined]
    ticks = [e.time for e in rec.of(Tick)]
    assert ticks == pytest.approx([float(i) for i in range(1, len(ticks) + 1)])
    assert sim.result.succeeded


def test_deterministic_knowledge_and_notices_announce_true_deaths() -> None:
    job = JobSpec("one", (stage(0, [3.0]),))
    _, rec = run(job, vms=1, cores=1, lifetimes=[2.0], knowledge="deterministic", notice=0.5)
    kinds = [(type(e).__name__, e.time) for e in rec.events if type(e).__name__.startswith("Executor")]
    # added at 0 with its true deadline, a 0.5 s notice at 1.5, lost at 2.0, replacement (no death)
    assert kinds == [("ExecutorAdded", 0.0), ("ExecutorNotice", 0.0), ("ExecutorNotice", 1.5),
                     ("ExecutorLost", 2.0), ("ExecutorAdded", 2.0)]
    notices = [e for e in rec.events if type(e).__name__ == "ExecutorNotice"]
    assert all(e.deadline == 2.0 for e in notices)  # type: ignore[attr-defined]


class ReleaseOnNotice(Policy):
    """Lets every VM go the moment it gets a termination notice."""

    name = "release-on-notice"

    def handle(self, event: Event) -> Sequence[Command]:
        if isinstance(event, ExecutorNotice) and event.kind == "notice":
            return [ReleaseExecutor(event.executor_id)]
        return []


def test_a_released_vm_leaves_at_once_and_its_replacement_comes_from_then() -> None:
    # VM 0 dies at 10 s with an 8 s notice (at 2 s); VM 1 never dies; replacements take 3 s.
    # The 12 s task starts on VM 0 at 0; released at 2 s, it re-runs on VM 1 from 2 s (ends 14 s),
    # not from the death at 10 s (22 s); VM 0's replacement registers at 5 s, and the death
    # planned for 10 s no longer happens.
    job = JobSpec("one", (stage(0, [12.0]),))
    sim, rec = run(job, vms=2, cores=1, lifetimes=[10.0], policy=ReleaseOnNotice(), notice=8.0, replace_delay=3.0)
    lost = [(e.time, e.executor_id, e.reason) for e in rec.of(ExecutorLost)]  # type: ignore[attr-defined]
    assert lost == [(2.0, "0", "released")]
    assert [e.time for e in rec.of(ExecutorAdded)] == [0.0, 0.0, 5.0]
    assert (sim.result.releases, sim.result.evictions, sim.result.killed_tasks) == (1, 0, 1)
    assert sim.result.job_time == pytest.approx(14.0)


class Scripted(Policy):
    """Duplicates partition 0 of stage 0 onto executor 1 when it starts; fires the safety belt."""

    name = "scripted"

    def handle(self, event: Event) -> Sequence[Command]:
        if isinstance(event, TaskStarted) and event.stage_id == 0 and event.partition == 0 and not event.speculative:
            return (DuplicateTask(0, 0, "1"), SafetyBelt(True, "test"), Advice("split", "stage 0 is long", 0))
        return ()


def test_duplicate_task_first_finisher_wins_and_commands_are_recorded() -> None:
    # The original runs on VM0, which dies at 1.5 s; the copy on VM1 finishes at 2.0 s.
    job = JobSpec("dup", (stage(0, [2.0]),))
    sim, rec = run(job, vms=2, cores=1, lifetimes=[1.5], policy=Scripted())
    assert sim.result.job_time == pytest.approx(2.0)  # without the copy: re-run 1.5-3.5
    started = rec.of(TaskStarted)
    assert [(e.executor_id, e.speculative) for e in started] == [("0", False), ("1", True)]  # type: ignore[attr-defined]
    assert sim.result.safety_belt_firings == 1
    assert sim.result.advice == ["split: stage 0 is long"]


def test_duplicate_loser_is_killed() -> None:
    # Both copies healthy: the original (started first) wins at 2.0, the copy is killed then.
    job = JobSpec("dup2", (stage(0, [2.0]),))
    sim, rec = run(job, vms=2, cores=1, policy=Scripted())
    ends = rec.of(TaskEnded)
    assert [(e.executor_id, e.successful, e.reason) for e in ends] == [("0", True, "success"), ("1", False, "killed")]  # type: ignore[attr-defined]
    assert sim.result.job_time == pytest.approx(2.0)


def test_a_copy_wanted_on_a_busy_executor_starts_when_that_executor_frees_a_core() -> None:
    # As the shim does: partition 0 (4 s) runs on VM0, the copy is wanted on VM1 while VM1 runs
    # partition 1 (until 1.0 s). It starts there at 1.0 and ends at 5.0; VM0 dies at 2.0.
    # Dropping the request instead would re-run partition 0 from 2.0 to 6.0.
    job = JobSpec("dup3", (stage(0, [4.0, 1.0]),))
    sim, rec = run(job, vms=2, cores=1, lifetimes=[2.0], policy=Scripted())
    started = [(e.time, e.partition, e.executor_id, e.speculative) for e in rec.of(TaskStarted)]  # type: ignore[attr-defined]
    assert started == [(0.0, 0, "0", False), (0.0, 1, "1", False), (1.0, 0, "1", True)]
    assert sim.result.job_time == pytest.approx(5.0)


def test_a_wanted_copy_is_dropped_when_its_task_ends_first() -> None:
    # VM1 is busy until 5.0, the original ends at 4.0: the copy never starts.
    job = JobSpec("dup4", (stage(0, [4.0, 5.0]),))
    sim, rec = run(job, vms=2, cores=1, policy=Scripted())
    assert [e.speculative for e in rec.of(TaskStarted)] == [False, False]  # type: ignore[attr-defined]
    assert sim.result.job_time == pytest.approx(5.0)
    assert not sim._wanted


def _oracle_run(job: JobSpec, strategy: object, *, vms: int, cores: int, lifetimes: Sequence[float]) -> Simulator:
    from simulators.oracle import OraclePolicy, Strategy
    from trspark.engine.settings import TRConfig

    assert isinstance(strategy, Strategy)
    policy = OraclePolicy(TRConfig(), horizon=10.0, strategy=strategy)
    spec = WorldSpec(vms=vms, cores=cores, lifetime=None)
    sim = Simulator(job, spec, policy, np.random.default_rng(0), period=1.0, stall_seconds=100.0, lifetimes=lifetimes)
    policy.bind(sim)
    sim.run()
    return sim


def test_oracle_starts_no_task_on_a_vm_that_dies_before_it_ends() -> None:
    # VM0 dies at 5 s, VM1 never. The only task takes 10 s. Without scheduling it starts on VM0
    # (first free core), dies with it at 5 s and re-runs on VM1 (or VM0's replacement): 15 s.
    # The clairvoyant γ rule sends it to VM1 at once: 10 s.
    from simulators.oracle import Strategy
    from simulators.oracle_family import FAMILY

    job = JobSpec("one", (stage(0, [10.0]),))
    old = _oracle_run(job, Strategy("needed"), vms=2, cores=1, lifetimes=[5.0, float("inf")])
    assert old.result.job_time == pytest.approx(15.0)
    assert old.result.killed_tasks == 1
    new = _oracle_run(job, FAMILY[0], vms=2, cores=1, lifetimes=[5.0, float("inf")])
    assert new.result.job_time == pytest.approx(10.0)
    assert new.result.killed_tasks == 0


def _two_vms_one_dies_at_2_5s(policy: Policy, trace: object) -> Simulator:
    """Two maps of 2 s writing 100 MB each, then a 2 s reducer, on two single-core VMs; VM1 dies at 2.5 s."""
    job = JobSpec("two", (stage(0, [2.0, 2.0], write_mb=100), stage(1, [2.0], parents=(0,))))
    return Simulator(job, WorldSpec(vms=2, cores=1, lifetime=None), policy, np.random.default_rng(0), period=1.0,
                     stall_seconds=100.0, lifetimes=[float("inf"), 2.5], trace=trace)  # type: ignore[arg-type]


def test_oracle_is_the_best_of_its_family_and_never_worse_than_always_or_never() -> None:
    # Two maps of 2 s on two single-core VMs, VM1 dies at 2.5 s after writing 100 MB, then a
    # 2 s reducer: every family member, always and never run on the same lifetimes, and the
    # oracle reports the fastest of them.
    from simulators.oracle_family import best_run
    from trspark.engine.settings import TRConfig

    make_sim = _two_vms_one_dies_at_2_5s

    events: list[Event] = []
    best = best_run(make_sim, TRConfig(), 10.0, trace=events.append)
    times = best.policy_summary["job_times"]
    assert set(times) >= {"needed+sched", "needed", "always", "never"}
    assert best.job_time == pytest.approx(min(times.values()))
    assert best.job_time <= times["always"] and best.job_time <= times["never"]
    assert best.job_time == pytest.approx(times[best.policy_summary["strategy"]])
    assert events and isinstance(events[-1], Event)  # the winner was replayed with the trace


def test_oracle_backup_driver_plays_only_members_that_place_tasks_as_the_driver_does() -> None:
    # oracle-backup-driver: clairvoyant about backups only -- no member with the clairvoyant γ rule.
    from simulators.oracle_family import FAMILY, best_run
    from trspark.engine.settings import TRConfig

    make_sim = _two_vms_one_dies_at_2_5s

    best = best_run(make_sim, TRConfig(), 10.0, scheduling=False)
    times = best.policy_summary["job_times"]
    assert set(times) == {st.name for st in FAMILY if not st.scheduling} | {"always", "never"}
    assert best.job_time == pytest.approx(min(times.values()))


@pytest.mark.parametrize("mean", [1e-300, 1e-9])
def test_lifetimes_far_below_the_tasks_fail_the_run_at_the_cap_instead_of_spinning(
        monkeypatch: pytest.MonkeyPatch, mean: float) -> None:
    """VMs dying at the same instant (1e-300 s) or nanoseconds apart never let a task end nor the
    clock reach the cap: after that many entries without a task succeeding, the run stops."""
    import simulators.kernel

    monkeypatch.setattr(simulators.kernel, "MAX_ENTRIES_WITHOUT_PROGRESS", 2000)
    job = JobSpec(name="j", stages=(stage(0, [1.0, 1.0]),))
    world = WorldSpec(vms=2, cores=1, lifetime=f"exponential:mean={mean}")
    sim = Simulator(job, world, NeverPolicy(), np.random.default_rng(0), deadline=40.0, stall_seconds=100.0)
    result = sim.run()
    assert not result.succeeded
    assert result.fail_reason == "no task succeeded in 2,000 events (lifetimes far shorter than the tasks)"
    assert result.job_time == 40.0  # counted at the job time cap, which it would never reach
    assert 2000 < sim.processed < 2100


def test_a_run_that_stops_making_progress_counts_at_the_job_time_cap() -> None:
    """No task succeeds for stall_seconds: the run would never finish, so it counts at the cap,
    not at the moment it was given up (which made a stalling policy look faster)."""
    job = JobSpec(name="j", stages=(stage(0, [10.0, 10.0]),))
    world = WorldSpec(vms=2, cores=1, lifetime="exponential:mean=2")
    sim = Simulator(job, world, NeverPolicy(), np.random.default_rng(0), deadline=400.0, stall_seconds=50.0)
    result = sim.run()
    assert not result.succeeded and result.fail_reason == "no task succeeded for 50 s"
    assert result.job_time == 400.0
