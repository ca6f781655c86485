"""``oracle-backup``: clairvoyant backups under ``tr``'s own scheduling, on hand-made worlds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from simulators.core import RunResult, Simulator
from simulators.dag import JobSpec
from simulators.oracle import OraclePolicy
from simulators.oracle_backup import BACKUP_FAMILY, ClairvoyantBackups, backup_family
from simulators.oracle_family import FAMILY, best_run
from simulators.world import WorldSpec
from tests.test_sim_core import Recorder, stage
from trspark.engine.baselines import AlwaysPolicy
from trspark.engine.events import BlockBackedUp
from trspark.engine.interface import Policy
from trspark.engine.registry import make_policy
from trspark.engine.settings import TRConfig


def two_maps_then_reduce() -> JobSpec:
    """Two maps of 2 s writing 100 MB each, then a 2 s reducer reading both."""
    return JobSpec("two", (stage(0, [2.0, 2.0], write_mb=100), stage(1, [2.0], parents=(0,))))


def play(policy: ClairvoyantBackups, lifetimes: list[float]) -> tuple[RunResult, Recorder]:
    recorder = Recorder(policy)
    sim = Simulator(two_maps_then_reduce(), WorldSpec(vms=2, cores=1, lifetime=None), recorder,
                    np.random.default_rng(0), period=1.0, stall_seconds=100.0, lifetimes=lifetimes)
    policy.bind(sim)
    return sim.run(), recorder


CONFIG = TRConfig(lifetime="exponential:mean=3")


def oracle_backup(strategy_index: int = 0) -> ClairvoyantBackups:
    return ClairvoyantBackups(make_policy("tr", CONFIG),
                              OraclePolicy(CONFIG, horizon=10.0, strategy=BACKUP_FAMILY[strategy_index]))


def make_sim(lifetimes: list[float]) -> Callable[[Policy, Any], Simulator]:
    def build(policy: Policy, trace: Any) -> Simulator:
        return Simulator(two_maps_then_reduce(), WorldSpec(vms=2, cores=1, lifetime=None), policy,
                         np.random.default_rng(0), period=1.0, stall_seconds=100.0, lifetimes=lifetimes, trace=trace)
    return build


def members() -> Callable[[], list[tuple[str, Policy]]]:
    return backup_family(CONFIG, 10.0, lambda: make_policy("tr", CONFIG))


@pytest.mark.parametrize("strategy_index", [0, 1])  # needed, needed/4: they copy only from dying VMs
def test_no_copy_when_no_vm_dies(strategy_index: int) -> None:
    # tr believes the VMs die (mean 3 s) and would copy; the oracle knows none does.
    result, rec = play(oracle_backup(strategy_index), [float("inf"), float("inf")])
    assert rec.of(BlockBackedUp) == []
    assert result.backups_local == result.backups_remote == 0


def test_the_reported_run_copies_nothing_when_no_vm_dies() -> None:
    # "all" copies every needed block at once; on a world without deaths it cannot be faster,
    # so the run the family reports is one without copies.
    best = best_run(make_sim([float("inf"), float("inf")]), CONFIG, 10.0, members=members())
    assert best.backups_local == best.backups_remote == 0
    assert best.policy_summary["strategy"] == "needed"


def test_copies_an_output_whose_holder_dies_before_the_consumer_runs() -> None:
    # VM1 writes its map output at 2 s and dies at 2.5 s, before the reducer reads it: the
    # oracle copies it, to VM0 (which never dies), so the map is not re-run.
    result, rec = play(oracle_backup(), [float("inf"), 2.5])
    copies = [e for e in rec.of(BlockBackedUp) if isinstance(e, BlockBackedUp)]
    assert [(e.shuffle_id, e.map_index, e.target) for e in copies] == [(0, 1, "0")]  # map 1 ran on VM1
    assert result.recomputed_tasks == 0


def test_the_schedulers_backups_are_dropped() -> None:
    # always copies every output; under ClairvoyantBackups without a backup policy nothing is copied.
    result, rec = play(ClairvoyantBackups(AlwaysPolicy(), None), [float("inf"), 2.5])
    assert rec.of(BlockBackedUp) == []
    assert result.recomputed_tasks == 1  # VM1's output was lost and re-computed


def test_a_backup_strategy_must_not_schedule() -> None:
    with pytest.raises(ValueError, match="schedules tasks itself"):
        ClairvoyantBackups(make_policy("tr", TRConfig()), OraclePolicy(TRConfig(), 10.0, strategy=FAMILY[0]))


def test_oracle_backup_is_the_best_of_its_family_under_trs_scheduling() -> None:
    best = best_run(make_sim([float("inf"), 2.5]), CONFIG, 10.0, members=members())
    times = best.policy_summary["job_times"]
    assert set(times) == {st.name for st in BACKUP_FAMILY} | {"none"}
    assert best.job_time == pytest.approx(min(times.values()))
    assert times["needed"] <= times["none"]
    assert best.policy_summary["scheduler"] == "tr"


def test_simulate_run_plays_oracle_backup_and_the_driver_variant() -> None:
    from simulators.runner import Experiment, simulate_run, stable_job_time, with_stability
    from simulators.workloads import WorkloadParams, make_workload

    job = make_workload("bing", WorkloadParams(scale=0.01), seed=0)
    world = with_stability(WorldSpec(vms=4, cores=2), job, 10.0)
    stable = stable_job_time(job, world)
    seed = np.random.SeedSequence(0).spawn(1)[0]
    for name, members in (("oracle-backup", {"needed", "needed/4", "all", "none"}),
                          ("oracle-backup-driver", {"needed", "all", "always", "never"})):
        result = simulate_run(Experiment(job, world, name, TRConfig(), runs=1), seed, stable)
        assert set(result.policy_summary["job_times"]) == members
        assert result.succeeded
