"""The ``efm`` and ``pado`` baselines on hand-made events, and ``pado``'s placement in the simulator."""

from __future__ import annotations

import numpy as np
import pytest
from engine_world import MB, feed, map_stage, run_task

from simulators.core import Simulator
from simulators.dag import JobSpec
from simulators.world import Pool, WorldSpec
from tests.test_sim_core import Recorder, stage
from trspark.engine import placement
from trspark.engine.commands import Advice, Backup, SchedulingHints
from trspark.engine.events import (
    REMOTE,
    ExecutorAdded,
    ExecutorLost,
    JobEnded,
    JobSubmitted,
    StageCompleted,
    TaskStarted,
    Tick,
)
from trspark.engine.pool_baselines import EFMPolicy, PadoPolicy
from trspark.engine.registry import make_policy, policy_names


def added(executor: str, pool: str, cores: int = 1) -> ExecutorAdded:
    return ExecutorAdded(time=0.0, executor_id=executor, cores=cores, pool=pool)


def backups(commands: list) -> list[tuple[int, str, str]]:  # type: ignore[type-arg]
    return [(c.map_index, c.source, c.target) for c in commands if isinstance(c, Backup)]


def test_registry_builds_the_pool_baselines() -> None:
    assert {"efm", "pado"} <= set(policy_names())
    assert make_policy("efm").name == "efm" and make_policy("pado").name == "pado"
    efm = make_policy("efm", on_demand_pools=("reserved",))
    assert isinstance(efm, EFMPolicy) and efm.pools.on_demand_pools == {"reserved"}


def test_efm_copies_spot_outputs_to_the_least_loaded_on_demand_peer() -> None:
    policy = EFMPolicy()
    events = [added("od1", "ondemand"), added("od2", "ondemand"), added("s1", "spot"), added("s2", "spot"),
              map_stage(0, 4, 0)]
    events += run_task(0, 0, "s1", start=0.0, seconds=1.0, write=30 * MB, shuffle_id=0)
    events += run_task(0, 1, "s2", start=0.0, seconds=2.0, write=10 * MB, shuffle_id=0)
    events += run_task(0, 2, "s1", start=1.0, seconds=2.0, write=10 * MB, shuffle_id=0)
    events += run_task(0, 3, "od1", start=0.0, seconds=4.0, write=10 * MB, shuffle_id=0)
    # od1 gets the first 30 MB, od2 the next 10 MB, then od2 again (10 < 30); od1's own output stays
    assert backups(feed(policy, events)) == [(0, "s1", "od1"), (1, "s2", "od2"), (2, "s1", "od2")]
    assert policy.summary() == {"backups_planned": 3, "to_on_demand_peer": 3, "to_remote": 0}


def test_efm_falls_back_to_remote_without_an_on_demand_peer() -> None:
    policy = EFMPolicy()
    events = [added("od", "ondemand"), added("s", "spot"), map_stage(0, 2, 0),
              ExecutorLost(time=0.5, executor_id="od")]
    events += run_task(0, 0, "s", start=0.0, seconds=1.0, write=MB, shuffle_id=0)
    assert backups(feed(policy, events)) == [(0, "s", REMOTE)]
    # a homogeneous cluster (no pool named on-demand) sends everything to the remote store
    homogeneous = feed(EFMPolicy(), [added("x", "default"), map_stage(0, 1, 0),
                                     *run_task(0, 0, "x", start=0.0, seconds=1.0, write=MB, shuffle_id=0),
                                     *run_task(0, 1, "x", start=1.0, seconds=1.0, write=MB, shuffle_id=0)])
    assert backups(homogeneous) == [(0, "x", REMOTE), (1, "x", REMOTE)]
    # The user hears once that efm is copying what always-checkpoint copies.
    (advice,) = [c for c in homogeneous if isinstance(c, Advice)]
    assert "no on-demand executor is alive" in advice.message and "ondemand" in advice.message


def graph() -> JobSubmitted:
    """0 (4 maps) -> 1 (2 maps) -> 3 (result) <- 2 (4 maps)."""
    return JobSubmitted(0.0, 0, stage_ids=(0, 1, 2, 3), num_tasks=(4, 2, 4, 1), shuffle_ids=(0, 1, 2, None),
                        parents=((), (0,), (), (1, 2)))


def test_pado_marks_the_costliest_lineage_that_fits_the_stable_share() -> None:
    policy = PadoPolicy()
    # 2 of 6 cores on-demand; w = {0: 4, 1: 2, 2: 4, 3: 1} task-seconds (1 s before any task)
    # C = {0: 4, 1: 6, 2: 4}; budget 11 / 3: stage 1 fits (2), stage 0 would make 6 > 3.67
    commands = feed(policy, [added("od", "ondemand", 2), added("s1", "spot", 2), added("s2", "spot", 2), graph()])
    hints = [c for c in commands if isinstance(c, SchedulingHints)][-1]
    assert policy.critical == (1,)
    assert hints.stage_order == (1,) and hints.forbidden == {1: ("s1", "s2")}
    assert policy.limits is not None and policy.limits[2] == {1: pytest.approx(1.0)}
    assert placement.allowed("od", 1, hints) and not placement.allowed("s1", 1, hints)
    assert placement.allowed("s1", 0, hints) and placement.allowed("s1", 2, hints)


def test_pado_re_ranks_with_observed_task_times_and_never_backs_up() -> None:
    policy = PadoPolicy()
    events = [added("od", "ondemand", 4), added("s", "spot", 2), graph(), map_stage(0, 4, 0)]
    for p in range(4):
        events += run_task(0, p, "s", start=0.0, seconds=3.0, write=MB, shuffle_id=0)
    events.append(StageCompleted(12.0, 0))
    commands = feed(policy, events)
    # w = {0: 12, 1: 6, 2: 12, 3: 3} (3 s per task everywhere), budget 2/3 x 33 = 22:
    # C(1) = 18 first (6), then C(0) = 12 (6 + 12 = 18 <= 22); stage 2 would reach 30
    assert policy.critical == (1, 0)
    assert not any(isinstance(c, Backup) for c in commands)
    # with the on-demand executor gone nothing is restricted
    out = feed(policy, [ExecutorLost(13.0, "od"), Tick(14.0)])
    assert policy.critical == () and out[-1] == SchedulingHints()


def test_pado_ranks_a_chain_longer_than_the_recursion_limit_listed_child_first() -> None:
    policy = PadoPolicy()
    depth = 3000
    stages = list(range(depth))
    job = JobSubmitted(time=0.0, job_id=0, stage_ids=tuple(reversed(stages)), num_tasks=(1,) * depth,
                       shuffle_ids=tuple(reversed(stages)), parents=tuple(() if s == 0 else (s - 1,) for s in reversed(stages)))
    feed(policy, [added("od", "ondemand", 1), added("s", "spot", 1), job])
    cost = policy.lineage_cost(policy.stage_work())
    assert cost[depth - 1] == pytest.approx(depth) and cost[0] == pytest.approx(1.0)


def test_pado_counts_each_ancestor_once_through_a_diamond() -> None:
    # 3 reads 1 and 2, 2 reads 1, 1 reads 0: 2's lineage holds 1 and 0 although 1 is also 3's parent.
    policy = PadoPolicy()
    job = JobSubmitted(time=0.0, job_id=0, stage_ids=(3, 2, 1, 0), num_tasks=(1, 2, 4, 8),
                       shuffle_ids=(None, 2, 1, 0), parents=((1, 2), (1,), (0,), ()))
    feed(policy, [added("od", "ondemand", 1), added("s", "spot", 1), job])
    work = policy.stage_work()
    assert work == {3: 1.0, 2: 2.0, 1: 4.0, 0: 8.0}
    assert policy.lineage_cost(work) == {3: 15.0, 2: 14.0, 1: 12.0, 0: 8.0}


def test_pado_forgets_the_stages_of_ended_jobs_but_not_those_a_running_job_lists() -> None:
    policy = PadoPolicy()
    first = JobSubmitted(time=0.0, job_id=0, stage_ids=(0, 1), num_tasks=(2, 2), shuffle_ids=(0, None), parents=((), (0,)))
    second = JobSubmitted(time=1.0, job_id=1, stage_ids=(0, 2), num_tasks=(2, 2), shuffle_ids=(0, None), parents=((), (0,)))
    feed(policy, [added("od", "ondemand", 1), added("s", "spot", 1), first, second])
    assert set(policy.graph) == {0, 1, 2}
    feed(policy, [JobEnded(time=2.0, job_id=0)])
    assert set(policy.graph) == {0, 2}  # stage 0 is listed by the running job 1
    feed(policy, [JobEnded(time=3.0, job_id=1)])
    assert policy.graph == {} and policy.seconds == {}


def test_pado_runs_critical_tasks_on_the_on_demand_pool_in_the_simulator() -> None:
    job = JobSpec("chain", (stage(0, [1.0] * 6, write_mb=5.0), stage(1, [1.0] * 2, write_mb=5.0, parents=(0,)),
                            stage(2, [1.0] * 2, parents=(1,))))
    world = WorldSpec(vms=4, cores=1, lifetime=None, pools=(Pool("ondemand", 1, "stable"), Pool("spot", 3, "stable")))
    recorder = Recorder(PadoPolicy())
    Simulator(job, world, recorder, np.random.default_rng(0), period=1.0).run()
    # w = {0: 6, 1: 2, 2: 2} (1 s tasks), budget 1/4 x 10 = 2.5: stage 1 (C = 8) fits, stage 0 does not
    assert recorder.inner.critical == (1,)  # type: ignore[attr-defined]
    starts: dict[int, set[str]] = {}
    for e in recorder.of(TaskStarted):
        assert isinstance(e, TaskStarted)
        starts.setdefault(e.stage_id, set()).add(e.executor_id)
    # both tasks of stage 1 wait for VM "0", the only on-demand one; the others use every VM
    assert starts[1] == {"0"} and starts[0] == {"0", "1", "2", "3"}
