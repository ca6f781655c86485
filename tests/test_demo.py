"""``trspark demo``: the plan and budget, the table from rows, the "within noise" rule, the summary's words,
and the command wired to the benchmark runner (replaced here by rows shaped as the plan asks: the
runner itself is tested live in ``test_tpcds_e2e``)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from jobs import demo as demo_runner
from jobs.demo import DemoPlan, estimate_seconds
from jobs.demo_table import DemoLine, Spread, demo_lines, summary, within_noise
from jobs.tpcds.results import RunRow
from jobs.tpcds.settings import BenchResult, BenchSettings


def run(workload: str, policy: str, seconds: float, *, repeat: int = 0, failed: bool = False, lost: float = 6.0,
        rerun: int = 0, backups: int = 0, scenario: str = "evicted") -> RunRow:
    return RunRow(query=workload, policy=policy, sf=0.1, seed=0, repeat=repeat, scenario=scenario, seconds=seconds,
                  stable_seconds=10.0, slowdown=seconds / 10.0, executors_killed=1, capacity_lost_seconds=lost,
                  tasks_recomputed=rerun, backups_bytes=backups, failed=failed, result_ok=not failed)


def test_spreads_that_overlap_are_within_noise() -> None:
    assert within_noise(Spread(1.4, 1.3, 1.5), Spread(1.45, 1.35, 1.6))  # ranges overlap
    assert within_noise(Spread(1.4, 1.3, 1.5), Spread(1.6, 1.5, 1.7))  # touching counts as overlap
    assert not within_noise(Spread(1.4, 1.3, 1.5), Spread(2.6, 2.2, 3.1))
    assert not within_noise(Spread(1.4, 1.3, 1.5), Spread(math.inf, 2.0, math.inf, failed=1))
    # A big median difference with wide spreads is still noise; a small one with tight spreads is not.
    assert within_noise(Spread(1.2, 1.0, 2.0), Spread(1.9, 1.1, 2.5))
    assert not within_noise(Spread(1.20, 1.19, 1.21), Spread(1.25, 1.24, 1.26))


ROWS = [
    *(run("chain5", "never", s, repeat=r, rerun=40) for r, s in enumerate((22.0, 31.0))),
    *(run("chain5", "always", s, repeat=r, rerun=2, backups=8 * 2**20) for r, s in enumerate((13.0, 14.0))),
    *(run("chain5", "tr", s, repeat=r, rerun=3, backups=2 * 2**20) for r, s in enumerate((13.5, 14.5))),
    run("chain5", "never", 10.0, scenario="stable"),  # stable rows are not in the table
    *(run("q29", "never", s, repeat=r, failed=f) for r, (s, f) in enumerate(((240.0, True), (20.0, False)))),
    *(run("q29", "always", s, repeat=r, backups=4 * 2**20) for r, s in enumerate((12.0, 12.5))),
    *(run("q29", "tr", s, repeat=r, backups=6 * 2**20) for r, s in enumerate((14.0, 15.0))),
]


def test_table_rows_summarise_the_evicted_runs_per_workload_and_policy() -> None:
    lines = demo_lines(ROWS, executors=3)
    assert [(line.workload, line.policy, line.runs) for line in lines] == [
        ("chain5", "never", 2), ("chain5", "always", 2), ("chain5", "tr", 2),
        ("q29", "never", 2), ("q29", "always", 2), ("q29", "tr", 2)]
    never = lines[0]
    assert never.slowdown.median == pytest.approx(2.65)
    assert (never.slowdown.low, never.slowdown.high) == (2.2, 3.1)
    assert never.rerun == 40 and never.lost_seconds == 6.0
    assert never.excess == pytest.approx(2.65 - 1.2)  # floor 1 + 6 / (3 x 10)
    q29_never = lines[3]
    assert q29_never.slowdown.failed == 1 and math.isinf(q29_never.slowdown.high)
    assert q29_never.excess == pytest.approx(0.8)  # the failed run has no excess
    assert q29_never.slowdown.text() == "failed (2.00x-failed)"  # one of two runs failed: median and max
    assert lines[2].backup_bytes == 2 * 2**20


def test_summary_says_saved_cost_and_within_noise_in_plain_words() -> None:
    text = summary(demo_lines(ROWS, executors=3))
    assert text[0] == ("chain5: tr 1.40x (1.35x-1.45x) against vanilla Spark (never) 2.65x (2.20x-3.10x): "
                       "tr saved 1.25x of the stable time")
    assert text[1] == ("chain5: tr 1.40x (1.35x-1.45x) against always 1.35x (1.30x-1.40x): the difference is "
                       "within noise (the spreads overlap); tr backed up 2.0 MiB a run against always's "
                       "8.0 MiB (75% less)")
    assert text[2].startswith("q29: tr 1.45x (1.40x-1.50x) against vanilla Spark (never) failed (2.00x-failed)")
    assert text[3] == ("q29: tr 1.45x (1.40x-1.50x) against always 1.23x (1.20x-1.25x): tr cost 0.22x of the "
                       "stable time; tr backed up 6.0 MiB a run, more than always's 4.0 MiB")


def test_default_plan_needs_three_references_and_two_seeds_and_takes_about_seven_minutes() -> None:
    plan = DemoPlan()
    assert plan.stable_runs >= 3 and plan.seeds >= 2 and plan.policies == ("never", "always", "tr")
    # What the docs and the banner say: about 7 minutes, within the 10-minute budget.
    assert 6.5 * 60 < estimate_seconds(plan) < 7.5 * 60 and estimate_seconds(plan) < demo_runner.BUDGET_S
    # Replacements are warmed before the next schedule's kills, and the estimate counts that run.
    assert plan.settings(Path("r.csv")).rewarm
    assert estimate_seconds(DemoPlan(rewarm=False)) < estimate_seconds(plan)
    # Each policy's session pays its start and its cold first pass once, whatever it runs.
    one_policy = DemoPlan(policies=("never",), workloads=("q3",))
    assert estimate_seconds(one_policy, stable={"q3": 0.0}) == pytest.approx(
        demo_runner.DATA_S + demo_runner.SESSION_START_S + demo_runner.COLD_START_S + 2 * demo_runner.REPLACEMENT_S)
    assert estimate_seconds(DemoPlan(seeds=3)) > estimate_seconds(plan)
    assert demo_runner.stable_guess("chain10") == 2 * demo_runner.stable_guess("chain5")
    assert estimate_seconds(DemoPlan(workloads=("q3",)), stable={"q3": 1.0}) < estimate_seconds(
        DemoPlan(workloads=("q3",)))
    settings = plan.settings(Path("r.csv"))
    assert (settings.repeat, settings.runs("stable"), settings.runs("evicted")) == (2, 3, 2)
    assert settings.stable_runs == "all" and settings.tr_notices and settings.notice == plan.notice > 0
    assert settings.noticed("tr") and not settings.noticed("always") and not settings.noticed("never")
    assert not DemoPlan(notice=0).settings(Path("r.csv")).noticed("tr")
    with pytest.raises(ValueError, match=">= 3 stable runs and >= 2 kill seeds"):
        DemoPlan(seeds=1)
    with pytest.raises(ValueError, match="notice must be >= 0"):
        DemoPlan(notice=-1)


def test_every_demo_jvm_gets_the_small_host_options() -> None:
    # The driver's and the executors' JVMs alike: the estimate's start-up and warm-up times assume them.
    conf = dict(DemoPlan().settings(Path("r.csv")).spark_conf)
    assert conf["spark.driver.extraJavaOptions"] == conf["spark.executor.extraJavaOptions"]
    assert set(conf["spark.executor.extraJavaOptions"].split()) == {"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"}


def test_default_plan_has_one_on_demand_executor_that_is_never_killed() -> None:
    settings = DemoPlan().settings(Path("r.csv"))
    assert settings.pools == (("ondemand", 1), ("spot", 2)) and settings.executors == 3
    assert DemoPlan(on_demand=0).settings(Path("r.csv")).pools == ()
    assert ("spark.trspark.duplication", "false") in settings.spark_conf
    assert settings.hold_replacements, "a replacement JVM starting mid-run would take the survivors' cores"
    assert settings.interleave, "each kill schedule is replayed for every policy in one round"
    # Mid-job reclamations of the spot pool, counted from the first task, on stages spread over the executors.
    assert (settings.reclaim_within, settings.kill_clock) == ((0.3, 0.6), "first-task")
    conf = dict(settings.spark_conf)
    assert conf["spark.sql.adaptive.coalescePartitions.enabled"] == "false"
    assert int(conf["spark.sql.shuffle.partitions"]) == 2 * settings.executors
    with pytest.raises(ValueError, match="on-demand executors must be 0..2"):
        DemoPlan(on_demand=3)


def test_capacity_is_counted_in_the_executors_the_cores_can_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})  # a 2-core machine
    assert DemoPlan().usable_executors == 2.0
    assert DemoPlan().settings(Path("r.csv")).usable_executors == 2.0
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    assert DemoPlan().settings(Path("r.csv")).usable_executors == 3.0  # every executor has a core


def test_demo_command_runs_the_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[DemoPlan] = []

    def fake(plan: DemoPlan, out_dir: Path, console: object) -> list[DemoLine]:
        seen.append(plan)
        return []

    monkeypatch.setattr(demo_runner, "run_demo", fake)
    result = CliRunner().invoke(demo_runner.demo, ["--workloads", "q3,chain3", "--seed", "7", "--out-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert seen == [DemoPlan(workloads=("q3", "chain3"), seed=7)]
    bad = CliRunner().invoke(demo_runner.demo, ["--workloads", "q3,q1000"])
    assert bad.exit_code == 2 and "unknown query 'q1000'" in bad.output
    assert CliRunner().invoke(demo_runner.demo, ["--seeds", "1"]).exit_code == 2


def planned_rows(settings: BenchSettings) -> list[RunRow]:
    """The rows a run of ``settings`` writes: stable runs of never, evicted runs of every policy."""
    evicted = {"never": (26.0, 30.0), "always": (14.0, 15.0), "tr": (13.0, 14.5)}
    rows = [run(q, "never", 10.0, repeat=r, scenario="stable") for q in settings.queries
            for r in range(settings.runs("stable"))]
    for policy in settings.policies:
        rows += [run(q, policy, evicted[policy][r % 2], repeat=r, rerun=30 if policy == "never" else 1,
                     backups={"always": 8, "tr": 3}.get(policy, 0) * 2**20)
                 for q in settings.queries for r in range(settings.runs("evicted"))]
    return rows


def test_trspark_demo_runs_the_plan_through_the_bench_and_prints_table_and_summary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import jobs.tpcds.cli as bench_cli
    from jobs.tpcds import results
    from trspark.cli import cli

    seen: list[BenchSettings] = []

    def fake_run(settings: BenchSettings, console: object) -> BenchResult:
        seen.append(settings)
        rows = planned_rows(settings)
        for row in rows:
            results.append(settings.out, row)
        return BenchResult(rows, {})

    monkeypatch.setattr(bench_cli, "run_with_progress", fake_run)
    monkeypatch.setenv("COLUMNS", "250")  # rich's width; narrower terminals abbreviate cells
    (tmp_path / "results.csv").write_text("rows of an earlier benchmark\n")  # kept aside, not lost
    result = CliRunner().invoke(cli, ["demo", "--out-dir", str(tmp_path), "--seed", "5"])
    assert result.exit_code == 0, result.output
    (settings,) = seen
    assert (settings.queries, settings.policies, settings.seed, settings.sf) == (
        ("q29", "chain4"), ("never", "always", "tr"), 5, 0.1)
    assert (settings.runs("stable"), settings.runs("evicted")) == (3, 2)
    text = " ".join(result.output.split())  # long summary lines wrap at the console's width
    assert "2.80x (2.60x-3.00x)" in text  # never's median and spread per workload
    assert ("q29: tr 1.38x (1.30x-1.45x) against vanilla Spark (never) 2.80x (2.60x-3.00x): tr saved 1.42x "
            "of the stable time") in text
    assert ("chain4: tr 1.38x (1.30x-1.45x) against always 1.45x (1.40x-1.50x): the difference is within noise "
            "(the spreads overlap); tr backed up 3.0 MiB a run against always's 8.0 MiB (62% less)") in text
    assert "demo took" in text and "budget 10 min" in text
    assert (tmp_path / "slowdown.png").read_bytes()[:4] == b"\x89PNG"
    assert len(results.read(tmp_path / "results.csv")) == 6 + 12
    (kept,) = tmp_path.glob("results.*-*.csv")
    assert kept.read_text() == "rows of an earlier benchmark\n"
