"""Worlds of pools (an on-demand core beside spot VMs) and what a job costs in them."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from simulators.core import Simulator
from simulators.dag import JobSpec
from simulators.metrics import run_row
from simulators.pricing import Prices, money_summary
from simulators.sweep import on_demand_vms
from simulators.world import Pool, WorldSpec, parse_pool
from tests.test_sim_core import Recorder, stage
from trspark.cli import cli
from trspark.engine.events import ExecutorAdded, ExecutorLost
from trspark.engine.protocol import to_json


def job() -> JobSpec:
    return JobSpec("two-stage", (stage(0, [1.0] * 8, write_mb=10.0), stage(1, [1.0] * 4, parents=(0,))))


def pool_run(pools: tuple[Pool, ...], seed: int = 3, **world: object) -> tuple[Simulator, Recorder]:
    recorder = Recorder()
    spec = WorldSpec(vms=sum(p.count for p in pools), cores=1, lifetime=None, pools=pools, **world)  # type: ignore[arg-type]
    sim = Simulator(job(), spec, recorder, np.random.default_rng(seed), period=1.0, stall_seconds=100.0)
    sim.run()
    return sim, recorder


def test_pool_syntax() -> None:
    assert parse_pool("ondemand=2@stable") == Pool("ondemand", 2, "stable")
    assert parse_pool(" spot = 8 @ weibull:shape=0.6,scale=33") == Pool("spot", 8, "weibull:shape=0.6,scale=33")
    assert parse_pool("spot=8") == Pool("spot", 8, None)
    for bad, message in [("spot", "NAME=COUNT"), ("spot=x", "COUNT must be an integer"), ("spot=0", "COUNT must be an integer >= 1"),
                         ("spot=2@", "must follow '@'"), ("sp ot=2", "pool name"), ("spot=2@weird", "unknown lifetime"),
                         ("spot=2@weibull:shape=-1,scale=3", "^'spot=2@weibull:shape=-1,scale=3': weibull: 'shape'")]:
        with pytest.raises(ValueError, match=message):
            parse_pool(bad)
    with pytest.raises(ValueError, match="hold 3 VMs but vms is 4"):
        WorldSpec(vms=4, pools=(Pool("a", 1), Pool("b", 2)))
    with pytest.raises(ValueError, match="must differ"):
        WorldSpec(vms=2, pools=(Pool("a", 1), Pool("a", 1)))


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_a_lifetime_is_evictable_whatever_its_scale() -> None:
    assert WorldSpec.evictable("exponential:mean=1e-9") and WorldSpec.evictable("weibull:shape=0.6,scale=1e-9")
    assert not WorldSpec.evictable("stable") and not WorldSpec.evictable(None)


def test_each_vm_carries_its_pool_and_is_replaced_in_it() -> None:
    sim, rec = pool_run((Pool("ondemand", 2, "stable"), Pool("spot", 3, "exponential:mean=2")), replace_delay=0.5)
    added = rec.of(ExecutorAdded)
    pool_of = {e.executor_id: e.pool for e in added}
    assert [e.pool for e in added[:5]] == ["ondemand", "ondemand", "spot", "spot", "spot"]
    lost = rec.of(ExecutorLost)
    assert lost and all(pool_of[e.executor_id] == "spot" for e in lost)  # stable VMs are never evicted
    # every eviction brings exactly one spot VM, 0.5 s later; the on-demand pool stays at 2
    replacements = added[5:]
    assert len(replacements) == len(lost)  # this seed's last eviction comes more than 0.5 s before the end
    assert all(e.pool == "spot" for e in replacements)
    assert sorted(e.time for e in replacements) == pytest.approx(sorted(e.time + 0.5 for e in lost))
    assert [e.death for e in sim.executors if e.pool == 0] == [float("inf")] * 2


def test_a_pool_draws_its_lifetimes_from_its_own_generator() -> None:
    spot = Pool("spot", 3, "exponential:mean=5")
    small, _ = pool_run((spot, Pool("other", 1, "exponential:mean=7")))
    large, _ = pool_run((spot, Pool("other", 4, "exponential:mean=7")))
    # the spot VMs live the same lives whatever the other pool draws
    assert [e.death for e in small.executors[:3]] == [e.death for e in large.executors[:3]]


def test_simulators_built_from_one_seed_meet_the_same_world() -> None:
    """Policies compared on one seed, and an oracle's family members, must meet the same lifetimes."""
    from simulators.oracle_family import best_run
    from trspark.engine.settings import TRConfig

    pools = (Pool("ondemand", 1, "stable"), Pool("spot", 3, "exponential:mean=3"))
    world = WorldSpec(vms=4, cores=1, lifetime=None, pools=pools)
    seed = np.random.SeedSequence(11)

    def simulator(policy: object, trace: object = None) -> Simulator:
        return Simulator(job(), world, policy, np.random.default_rng(seed), period=1.0, stall_seconds=100.0, trace=trace)  # type: ignore[arg-type]

    def deaths(sim: Simulator) -> list[float]:
        sim.run()
        return [e.death for e in sim.executors[:4]]

    first = deaths(simulator(Recorder()))
    assert deaths(simulator(Recorder())) == first  # the seed was used before: still its first children
    assert any(d != float("inf") for d in first)
    # Every family member is played on that world: the oracle's best is a strategy's, not a luckier world's.
    played: list[Simulator] = []

    def make_sim(policy: object, trace: object) -> Simulator:
        played.append(simulator(policy, trace))
        return played[-1]

    best_run(make_sim, TRConfig(lifetime="exponential:mean=3"), horizon=20.0)
    assert len(played) > 2
    assert all([e.death for e in sim.executors[:4]] == first for sim in played)


def test_homogeneous_world_sends_todays_executor_events() -> None:
    recorder = Recorder()
    Simulator(job(), WorldSpec(vms=2, cores=1, lifetime=None), recorder, np.random.default_rng(0), period=1.0).run()
    first = recorder.of(ExecutorAdded)[0]
    assert first == ExecutorAdded(0.0, "0", host="vm-0", cores=1)
    assert json.loads(to_json(first))["pool"] == "default"


def test_vm_seconds_count_each_vm_until_it_leaves() -> None:
    sim, _ = pool_run((Pool("ondemand", 1, "stable"), Pool("spot", 2, None)))
    seconds = sim.result.vm_seconds
    assert seconds["ondemand"] == pytest.approx(sim.result.job_time)  # up the whole job
    assert seconds["spot"] == pytest.approx(2 * sim.result.job_time)  # pool without spec: world lifetime None
    sim, rec = pool_run((Pool("spot", 2, "exponential:mean=1.5"),), replace_delay=1.0)
    lost = rec.of(ExecutorLost)
    assert lost
    # each eviction leaves a 1 s gap before its replacement registers (unless the job ends first)
    expected = sum(min(e.left if e.left is not None else sim.result.job_time, sim.result.job_time) - e.born
                   for e in sim.executors)
    assert sim.result.vm_seconds["spot"] == pytest.approx(expected)
    assert expected < 2 * sim.result.job_time


def test_job_cost_is_vm_hours_times_price_plus_remote_writes() -> None:
    world = WorldSpec(vms=3, pools=(Pool("ondemand", 1, "stable"), Pool("spot", 2, "exponential:mean=60")))
    prices = Prices(remote_gb=0.02, remote_1k_requests=0.005)
    assert prices.per_vm_hour(world) == {"ondemand": 0.192, "spot": 0.0768}
    assert Prices(vm={"spot": 0.05}).per_vm_hour(world)["spot"] == 0.05
    row = {"vm_seconds": {"ondemand": 1800.0, "spot": 7200.0}, "backup_bytes_remote": 3 * 2**30, "backups_remote": 200,
           "backup_bytes_local": 1e9}
    # 0.5 h x 0.192 + 2 h x 0.0768 + 3 GB (2^30 bytes each, as AWS bills) x 0.02 + 200/1000 x 0.005
    assert prices.job_cost(row, prices.per_vm_hour(world)) == pytest.approx(0.096 + 0.1536 + 0.06 + 0.001)
    money = money_summary([row, {**row, "backups_remote": 0, "backup_bytes_remote": 0.0}], world, prices)
    assert money["vm_hours_mean"] == pytest.approx(2.5)
    assert money["bytes_copied_mean"] == pytest.approx((3 * 2**30 + 2e9) / 2)
    assert money["cost_usd_mean"] == pytest.approx(0.096 + 0.1536 + (0.06 + 0.001) / 2)
    with pytest.raises(ValueError, match="'spot' must be a finite number of USD >= 0"):
        Prices(vm={"spot": -1.0})


def test_run_row_keeps_the_vm_seconds() -> None:
    sim, _ = pool_run((Pool("ondemand", 1, "stable"), Pool("spot", 1, None)))
    assert run_row(sim.result, 1.0)["vm_seconds"] == sim.result.vm_seconds


SMALL = ["--workload", "bing", "--scale", "0.02", "--cores", "2", "--runs", "3", "--workers", "1", "--seed", "2"]


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_simulate_with_pools_reports_money_per_policy() -> None:
    code, out = invoke("simulate", *SMALL, "--policy", "never,always", "--pool", "ondemand=1@stable",
                       "--pool", "spot=3", "--stability", "20", "--price", "spot=0.05", "--format", "json")
    assert code == 0, out
    never, always = json.loads(out)
    assert never["policy"] == "never" and always["policy"] == "always"
    assert never["lifetime"].startswith("ondemand=1@stable spot=3@exponential:mean=")
    assert never["usd_per_vm_hour"] == {"ondemand": 0.192, "spot": 0.05}
    for summary in (never, always):
        assert summary["vm_hours_mean"] > 0 and summary["cost_usd_mean"] > 0
    assert never["bytes_copied_mean"] == 0 and always["bytes_copied_mean"] > 0


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--pool", "spot=x"], "--pool 'spot=x': COUNT must be an integer"),
        (["--vms", "5", "--pool", "spot=4"], "--vms=5 but the pools hold 4 VMs"),
        (["--pool", "a=2", "--pool", "a=1"], "--pool names must differ"),
        (["--pool", "a=2@stable", "--stability", "5"], "every --pool has its own lifetime"),
        (["--pool", "a=2", "--price", "a"], "--price 'a': expected POOL=USD_PER_VM_HOUR"),
        (["--pool", "a=2", "--price", "a=-2"], "must be a finite number of USD"),
        (["--price", "default=0.1", "--price", "default=0.2"], "pool 'default' is priced twice"),
    ],
)
def test_bad_pool_or_price_is_one_error_line(args: list[str], fragment: str) -> None:
    code, out = invoke("simulate", *SMALL, "--policy", "never", *args)
    assert code == 2 and fragment in out, out
    assert len([line for line in out.splitlines() if line.strip()]) == 1


def test_sweep_over_pools_writes_money_columns(tmp_path: Path) -> None:
    out = tmp_path / "sweep.csv"
    code, text = invoke("simulate", "sweep", "--workloads", "bing", "--policies", "never", "--stabilities", "10,50",
                        "--scale", "0.02", "--cores", "2", "--runs", "2", "--workers", "1", "--pool", "ondemand=1@stable",
                        "--pool", "spot=3", "--out", str(out))
    assert code == 0, text
    rows = list(csv.DictReader(out.open()))
    assert [r["stability"] for r in rows] == ["10.0", "50.0"]
    assert all(r["lifetime"].startswith("ondemand=1@stable spot=3@exponential") for r in rows)
    assert all(float(r["cost_usd_mean"]) > 0 and float(r["vm_hours_mean"]) > 0 for r in rows)
    code, text = invoke("simulate", "sweep", "--policies", "never", "--pool", "a=1@stable", "--out", str(out))
    assert code == 2 and "every --pool has one" in text


def test_the_oracle_sees_every_pool_and_copies_to_stable_peers() -> None:
    from simulators.oracle import OraclePolicy
    from simulators.oracle_family import FAMILY
    from trspark.engine.events import BlockBackedUp
    from trspark.engine.settings import TRConfig

    world = WorldSpec(vms=4, cores=1, lifetime=None,
                      pools=(Pool("ondemand", 1, "stable"), Pool("spot", 3, "exponential:mean=3")))
    policy = OraclePolicy(TRConfig(lifetime="exponential:mean=3"), horizon=20.0, strategy=FAMILY[0])
    recorder = Recorder(policy)
    sim = Simulator(job(), world, recorder, np.random.default_rng(5), period=1.0, stall_seconds=100.0)
    policy.bind(sim)
    sim.run()
    assert sim.death_time("0") == float("inf")  # the on-demand VM
    peers = {e.target for e in recorder.of(BlockBackedUp) if isinstance(e, BlockBackedUp) and e.target != "remote"}
    assert peers == {"0"}  # the only peer that outlives every danger window


def test_on_demand_share_splits_the_vms_and_zero_is_the_homogeneous_world() -> None:
    from simulators.sweep import with_on_demand_share

    world = WorldSpec(vms=10, lifetime="exponential:mean=30")
    assert with_on_demand_share(world, None) is world
    assert with_on_demand_share(world, 0.0) == world  # today's world, pool "default"
    assert with_on_demand_share(world, 25.0).pools == (Pool("ondemand", 2, "stable"), Pool("spot", 8))  # round(2.5)
    assert with_on_demand_share(world, 100.0).pools == (Pool("ondemand", 10, "stable"),)
    with pytest.raises(ValueError, match="percentage"):
        with_on_demand_share(world, 120.0)


def test_weibull_stability_keeps_the_mean() -> None:
    from cost_model.lifetimes import from_spec
    from simulators.runner import with_stability

    spec = with_stability(WorldSpec(vms=2), job(), 20.0, shape=0.6).lifetime
    assert spec is not None and spec.startswith("weibull:shape=0.6,scale=")
    assert from_spec(spec).mean() == pytest.approx(20.0 * job().mean_task_seconds(), rel=1e-12)


def test_sweep_over_on_demand_shares_draws_slowdown_against_cost(tmp_path: Path) -> None:
    out, png = tmp_path / "sweep.csv", tmp_path / "cost.png"
    code, text = invoke("simulate", "sweep", "--workloads", "bing", "--policies", "never,efm", "--stabilities", "20",
                        "--on-demand-shares", "0,50", "--shape", "0.6", "--scale", "0.02", "--vms", "4", "--cores", "2",
                        "--runs", "2", "--workers", "1", "--out", str(out), "--cost-plot", str(png))
    assert code == 0, text
    rows = list(csv.DictReader(out.open()))
    assert [(r["policy"], r["on_demand_share"]) for r in rows] == [("never", "0.0"), ("efm", "0.0"),
                                                                   ("never", "50.0"), ("efm", "50.0")]
    assert rows[0]["lifetime"].startswith("weibull:shape=0.6,")
    assert rows[2]["lifetime"].startswith("ondemand=2@stable spot=2@weibull:shape=0.6,")
    # with no on-demand peer efm copies to remote; with one, to it
    assert float(rows[1]["backup_bytes_remote_mean"]) > 0 and float(rows[3]["backup_bytes_remote_mean"]) == 0
    assert png.stat().st_size > 0
    code, text = invoke("simulate", "sweep", "--on-demand-shares", "10", "--pool", "a=2", "--out", str(out))
    assert code == 2 and "either --pool or --on-demand-shares" in text


def test_an_on_demand_share_runs_as_whole_vms_and_never_as_none(tmp_path: Path) -> None:
    assert [on_demand_vms(share, 10) for share in (0, 10, 25, 50, 100)] == [0, 1, 2, 5, 10]
    with pytest.raises(ValueError, match="10 % of 5 VMs rounds to no VM; allowed: 0 or at least 20 %"):
        on_demand_vms(10, 5)  # else the point would be the homogeneous world, labelled 10 %
    code, text = invoke("simulate", "sweep", "--on-demand-shares", "10", "--vms", "5", "--out", str(tmp_path / "s.csv"))
    assert code == 2 and "--on-demand-shares: an on-demand share of 10 % of 5 VMs rounds to no VM" in text
    code, text = invoke("simulate", "sweep", "--workloads", "bing", "--policies", "never", "--stabilities", "20",
                        "--on-demand-shares", "25", "--vms", "10", "--scale", "0.02", "--runs", "1", "--workers", "1",
                        "--out", str(tmp_path / "s.csv"))
    assert code == 0 and "an on-demand share of 25 % of 10 VMs runs as 2 VMs (20 %)" in text, text
    # the row, the progress line and the plots' legends name the share that ran
    assert [row["on_demand_share"] for row in csv.DictReader((tmp_path / "s.csv").open())] == ["20.0"]
    assert "S=20 20% od:" in text and "25% od" not in text


GOLDEN = Path(__file__).parent / "fixtures" / "sim" / "golden_pools_small.json"


def test_golden_mixed_world_is_byte_identical() -> None:
    from simulators.runner import Experiment, run_experiment, with_stability
    from simulators.workloads import WorkloadParams, make_workload

    # efm and pado depend only on the simulator and the pool baselines, not on TR's cost model
    job = make_workload("tpcds", WorkloadParams(scale=0.02), seed=3)
    world = with_stability(WorldSpec(vms=6, cores=2, pools=(Pool("ondemand", 2, "stable"), Pool("spot", 4))), job, 10.0)
    golden = {}
    for policy in ("efm", "pado"):
        summary = run_experiment(Experiment(job, world, policy, runs=4, seed=11), workers=1)
        golden[policy] = {**{k: v for k, v in summary.items() if k != "rows"},
                          **money_summary(summary["rows"], world, Prices())}
    text = json.dumps(golden, indent=2, sort_keys=True) + "\n"
    if os.environ.get("TRSPARK_REGEN_GOLDEN"):
        GOLDEN.write_text(text)
        pytest.skip(f"{GOLDEN.name} regenerated: review its diff")
    assert text == GOLDEN.read_text(), "simulator behaviour changed; if intended, rerun with TRSPARK_REGEN_GOLDEN=1"


def test_tr_without_notices_in_a_noticed_world_is_tr_in_a_world_without_notices(tmp_path: Path) -> None:
    noticed, plain = tmp_path / "noticed.csv", tmp_path / "plain.csv"
    grid = ["--workloads", "bing", "--stabilities", "5", "--pool", "ondemand=1@stable", "--pool", "spot=3",
            "--scale", "0.02", "--cores", "2", "--runs", "4", "--workers", "1"]
    code, text = invoke("simulate", "sweep", *grid, "--policies", "tr,tr-without-notices", "--notice", "1",
                        "--out", str(noticed))
    assert code == 0, text
    code, text = invoke("simulate", "sweep", *grid, "--policies", "tr", "--out", str(plain))
    assert code == 0, text
    with_notices, deaf = list(csv.DictReader(noticed.open()))
    (without,) = list(csv.DictReader(plain.open()))
    assert deaf["policy"] == "tr-without-notices"
    # the same worlds, every notice withheld: run for run what tr does when no notice comes
    for column in ("slowdown_mean", "recomputed_tasks_mean", "bytes_copied_mean", "evictions_mean"):
        assert deaf[column] == without[column], column
    # and the notices are what differs: tr hears them, and the paired ratio is taken on the same seeds
    assert with_notices["slowdown_mean"] != deaf["slowdown_mean"]
    ratio = float(with_notices["slowdown_mean"]) / float(deaf["slowdown_mean"])
    assert float(deaf["tr_ratio"]) == pytest.approx(ratio)
    assert float(deaf["tr_ratio_ci95_low"]) <= ratio <= float(deaf["tr_ratio_ci95_high"])


def test_a_spot_price_also_prices_the_all_spot_point_of_a_sweep_over_on_demand_shares(tmp_path: Path) -> None:
    """At 0 % on demand every VM is a spot VM: ``--price spot=X`` is its price as at the other shares."""
    out = tmp_path / "sweep.csv"
    code, text = invoke("simulate", "sweep", "--workloads", "bing", "--policies", "never", "--stabilities", "20",
                        "--scale", "0.02", "--cores", "2", "--vms", "4", "--runs", "2", "--workers", "1",
                        "--on-demand-shares", "0,25", "--price", "spot=0.01", "--out", str(out))
    assert code == 0, text
    rows = {row["on_demand_share"]: row for row in csv.DictReader(out.open())}
    all_spot = rows["0.0"]
    assert float(all_spot["cost_usd_mean"]) == pytest.approx(float(all_spot["vm_hours_mean"]) * 0.01)
    code, text = invoke("simulate", "sweep", "--workloads", "bing", "--policies", "never", "--stabilities", "20",
                        "--vms", "4", "--on-demand-shares", "25", "--price", "default=0.01", "--out", str(out))
    assert code == 2 and "no pool 'default' in this world; pools: ondemand, spot" in text, text
    for shares, pool, left in (("0", "ondemand", "spot"), ("100", "spot", "ondemand")):  # a pool no point of the sweep has
        code, text = invoke("simulate", "sweep", "--workloads", "bing", "--policies", "never", "--stabilities", "20",
                            "--vms", "4", "--on-demand-shares", shares, "--price", f"{pool}=0.01", "--out", str(out))
        assert code == 2 and f"no pool '{pool}' in this world; pools: {left}" in text, text


def test_the_tables_gb_are_the_gb_the_remote_store_is_priced_per() -> None:
    """With only remote GB priced (at 1 USD), $ per job is the table's backup GB remote."""
    code, out = invoke("simulate", *SMALL, "--policy", "always", "--stability", "1000", "--price", "default=0",
                       "--remote-gb-price", "1", "--remote-request-price", "0")
    assert code == 0, out
    cells = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in out.splitlines() if line.count("│") == 3}
    assert float(cells["backup GB remote"]) > 0
    assert float(cells["$ per job"]) == pytest.approx(float(cells["backup GB remote"]), rel=0.01)  # 3 digits shown
