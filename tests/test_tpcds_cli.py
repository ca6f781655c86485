"""``trspark bench tpcds`` turns its options into BenchSettings; bad options are one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from jobs.tpcds import recorded_run, runner, schedules
from jobs.tpcds.settings import BenchResult, BenchSettings
from trspark.cli import cli


def test_options_reach_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import jobs.tpcds.cli as bench_cli

    seen: list[BenchSettings] = []

    def recording_run(settings: BenchSettings, console: object) -> BenchResult:
        seen.append(settings)
        return BenchResult([], {})

    monkeypatch.setattr(bench_cli, "run_with_progress", recording_run)
    out = tmp_path / "r.csv"
    result = CliRunner().invoke(cli, ["bench", "tpcds", "--sf", "1", "--queries", "q3,q7", "--warmup", "1",
                                      "--stable-runs", "never", "--notice", "5", "--out", str(out),
                                      "--conf", "spark.sql.autoBroadcastJoinThreshold=-1", "--hold-replacements",
                                      "--rewarm-passes", "3"])
    assert result.exit_code == 0, result.output
    (s,) = seen
    assert s.executor_cpus is None  # default: executors share the machine's cores
    assert s.hold_replacements and not BenchSettings(sf=1, queries=(), policies=(), out=out).hold_replacements
    assert (s.queries, s.warmup, s.stable_runs, s.notice, s.stability) == (("q3", "q7"), 1, "never", 5.0, 3.0)
    assert s.spark_conf == (("spark.sql.autoBroadcastJoinThreshold", "-1"),)
    assert (s.rewarm, s.rewarm_passes) == (True, 3)
    assert BenchSettings(sf=1, queries=(), policies=(), out=out).rewarm_passes == 1  # default: one pass, as before
    assert BenchSettings(sf=1, queries=(), policies=(), out=out).warmup is None  # default: warm up all


@pytest.mark.parametrize(("args", "message"), [
    (["--stable-runs", "some"], "Invalid value for '--stable-runs'"),
    (["--warmup", "0"], "Invalid value for '--warmup'"),
    (["--rewarm-passes", "0"], "Invalid value for '--rewarm-passes'"),
    (["--conf", "autoBroadcast=-1"], "allowed: KEY=VALUE with a spark.* key"),
    (["--executor-cpus", "0"], "Invalid value for '--executor-cpus'"),
    (["--executor-cpus", "0.5", "--master", "spark://h:7077"], "caps executors of a local-cluster only"),
    (["--pool", "ondemand=1"], "allowed: ondemand=COUNT@stable (never killed) or spot=COUNT (killed)"),
    (["--pool", "spot=2@stable"], "allowed: ondemand=COUNT@stable"),
    (["--pool", "spot=0"], "allowed: ondemand=COUNT@stable"),
    (["--pool", "spot=1", "--master", "spark://h:7077"], "pools are local-cluster slots"),
    (["--pool", "spot=3", "--executors", "5"], "5, but the pools hold 3 executors"),
    (["--interleave", "--master", "spark://h:7077"], "policies take turns on local clusters"),
    (["--stable-runs", "rounds"], "it needs --interleave and no --reference"),
])
def test_bad_option_is_one_clear_error(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["bench", "tpcds", *args])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_reference_gives_never_median_stable_times(tmp_path: Path) -> None:
    from jobs.tpcds.results import RunRow, append

    ref = tmp_path / "ref.csv"
    for k, (policy, scenario, seconds, failed) in enumerate([
            ("never", "stable", 10.0, False), ("never", "stable", 14.0, False), ("never", "stable", 99.0, True),
            ("tr", "stable", 1.0, False), ("never", "evicted", 50.0, False)]):
        append(ref, RunRow(query="q3", policy=policy, sf=1.0, seed=0, repeat=k, scenario=scenario, seconds=seconds,
                           failed=failed))
    assert runner.reference_times(ref, ("q3",)) == {"q3": 12.0}  # failed, other policies, evicted: ignored
    result = CliRunner().invoke(cli, ["bench", "tpcds", "--queries", "q3,q7", "--reference", str(ref)])
    assert result.exit_code == 2
    assert "Invalid value for '--reference'" in result.output and "never for q7" in result.output


def test_rounds_need_interleaved_runs_and_a_measured_reference(tmp_path: Path) -> None:
    out = tmp_path / "x.csv"
    with pytest.raises(ValueError, match="needs interleave"):
        BenchSettings(sf=1, queries=(), policies=(), out=out, stable_runs="rounds")
    with pytest.raises(ValueError, match="no given reference"):
        BenchSettings(sf=1, queries=(), policies=(), out=out, stable_runs="rounds", interleave=True, reference=out)
    with pytest.raises(ValueError, match="one of all, never, rounds"):
        BenchSettings(sf=1, queries=(), policies=(), out=out, stable_runs="sometimes")
    assert BenchSettings(sf=1, queries=(), policies=(), out=out, stable_runs="rounds", interleave=True).interleave


def test_rereference_takes_the_median_of_vanilla_sparks_stable_runs_in_the_rounds() -> None:
    from jobs.tpcds.results import RunRow

    def row(query: str, policy: str, scenario: str, seconds: float, repeat: int, failed: bool = False) -> RunRow:
        return RunRow(query=query, policy=policy, sf=1.0, seed=0, repeat=repeat, scenario=scenario, seconds=seconds,
                      stable_seconds=5.0, slowdown=seconds / 5.0, failed=failed)

    rows = [row("q3", "never", "stable", 1.0, 0), row("q3", "never", "stable", 5.0, 1),
            row("q3", "never", "stable", 6.0, 2), row("q3", "never", "stable", 9.0, 3),
            row("q3", "never", "stable", 40.0, 4, failed=True), row("q3", "tr", "stable", 1.0, 2),
            row("q3", "never", "evicted", 12.0, 0), row("q3", "tr", "evicted", 9.0, 0),
            row("q7", "never", "stable", 4.0, 0), row("q7", "tr", "evicted", 10.0, 0)]
    runner.rereference(rows, first=1)
    # q3: the median of 5, 6 and 9 s (the first run, a failed run and other policies' runs left out).
    assert [r.stable_seconds for r in rows[:8]] == [6.0] * 8
    assert rows[6].slowdown == 2.0 and rows[7].slowdown == 1.5
    # q7 has only a first stable run here: it keeps the reference it was written with.
    assert [(r.stable_seconds, r.slowdown) for r in rows[8:]] == [(5.0, 0.8), (5.0, 2.0)]


def test_schedules_do_not_depend_on_the_query_list() -> None:
    def schedules(queries: tuple[str, ...]) -> dict[tuple[str, int], runner.Schedule]:
        settings = BenchSettings(sf=1, queries=queries, policies=("never",), out=Path("x.csv"), repeat=2)
        ctx = recorded_run.BenchContext(settings, {}, {}, stable=dict.fromkeys(queries, 20.0))
        runner.draw_schedules(ctx)
        return ctx.schedules

    full, subset = schedules(("q3", "q7", "q19")), schedules(("q19",))
    assert subset[("q19", 0)] == full[("q19", 0)] and subset[("q19", 1)] == full[("q19", 1)]
    assert full[("q19", 0)] != full[("q19", 1)] and full[("q3", 0)] != full[("q19", 0)]


def test_schedules_can_be_redrawn_until_the_first_kill_lands_early_in_the_query() -> None:
    def schedules(within: float | None) -> list[runner.Schedule]:
        settings = BenchSettings(sf=1, queries=("q3",), policies=("never",), out=Path("x.csv"), repeat=20,
                                 stability=1.5, first_kill_within=within)
        ctx = recorded_run.BenchContext(settings, {}, {}, stable={"q3": 4.0})
        runner.draw_schedules(ctx)
        return [ctx.schedules[("q3", r)] for r in range(20)]

    drawn, early = schedules(None), schedules(0.5)
    # As drawn, some schedules leave a 4 s query untouched (no kill in its first 2 s); redrawn, none does.
    assert any(s[0][0] > 2.0 for s in drawn)
    assert all(s and s[0][0] <= 2.0 for s in early)
    # A schedule already early enough is kept as drawn, and a redraw is as reproducible as a draw.
    assert all(e == d for d, e in zip(drawn, early, strict=True) if d[0][0] <= 2.0)
    assert early == schedules(0.5)


def test_a_pool_reclamation_kills_every_spot_executor_at_one_time_within_its_range(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def schedules(policies: tuple[str, ...], queries: tuple[str, ...] = ("q3", "q7")) -> dict:
        settings = BenchSettings(sf=1, queries=queries, policies=policies, out=Path("x.csv"), repeat=30,
                                 stability=1.5, notice=1.0, executors=4, pools=(("ondemand", 1), ("spot", 3)),
                                 reclaim_within=(0.3, 0.6))
        ctx = recorded_run.BenchContext(settings, {}, {}, stable={"q3": 4.0, "q7": 2.0})
        runner.draw_schedules(ctx)
        return ctx.schedules

    drawn = schedules(("never", "tr"))
    for (query, _), schedule in drawn.items():
        (t,) = {t for t, _ in schedule}
        assert [rank for _, rank in schedule] == [0, 0, 0]  # the 3 spot slots; on-demand is spared
        low = 0.3 * {"q3": 4.0, "q7": 2.0}[query]
        assert max(low, 1.0) <= t <= 0.6 * {"q3": 4.0, "q7": 2.0}[query]  # never before tr's notice
    assert len({s[0][0] for (q, _), s in drawn.items() if q == "q3"}) == 30  # one draw per repeat
    # Without a noticed policy a reclamation may come before 1 s; the draws are reproducible by seed and name.
    assert any(schedule[0][0] < 1.0 for (q, _), schedule in schedules(("never",)).items() if q == "q7")
    assert schedules(("never", "tr"), ("q7",)) == {k: v for k, v in drawn.items() if k[0] == "q7"}

    import jobs.tpcds.cli as bench_cli

    seen: list[runner.BenchSettings] = []
    monkeypatch.setattr(bench_cli, "run_with_progress", lambda settings, console: seen.append(settings) or
                        runner.BenchResult([], {}))
    args = ["bench", "tpcds", "--queries", "q3", "--out", str(tmp_path / "r.csv")]
    result = CliRunner().invoke(cli, [*args, "--reclaim-within", "0.3,0.6", "--kill-clock", "first-task"])
    assert result.exit_code == 0, result.output
    assert (seen[0].reclaim_within, seen[0].kill_clock) == ((0.3, 0.6), "first-task")
    for bad in ("0.6,0.3", "-1,1", "0.5", "a,b"):
        result = CliRunner().invoke(cli, [*args, "--reclaim-within", bad])
        assert result.exit_code == 2 and "--reclaim-within" in result.output and "LOW,HIGH" in result.output
    result = CliRunner().invoke(cli, [*args, "--kill-clock", "later"])
    assert result.exit_code == 2 and "'query', 'first-task'" in result.output
    with pytest.raises(ValueError, match="kill clock must be one of query, first-task"):
        BenchSettings(sf=1, queries=("q3",), policies=("never",), out=Path("x.csv"), kill_clock="later")


def test_pools_set_the_executors_spare_the_on_demand_slots_and_draw_kills_for_spot_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import jobs.tpcds.cli as bench_cli
    from jobs.tpcds import pools

    seen: list[runner.BenchSettings] = []
    monkeypatch.setattr(bench_cli, "run_with_progress", lambda settings, console: seen.append(settings) or
                        runner.BenchResult([], {}))
    result = CliRunner().invoke(cli, ["bench", "tpcds", "--queries", "q3", "--out", str(tmp_path / "r.csv"),
                                      "--pool", "spot=3", "--pool", "ondemand=1@stable"])
    assert result.exit_code == 0, result.output
    agreeing = CliRunner().invoke(cli, ["bench", "tpcds", "--queries", "q3", "--out", str(tmp_path / "r.csv"),
                                        "--pool", "spot=3", "--pool", "ondemand=1@stable", "--executors", "4"])
    assert agreeing.exit_code == 0, agreeing.output
    (s, _) = seen
    assert (s.pools, s.executors) == ((("ondemand", 1), ("spot", 3)), 4)
    spare = pools.spare(s.pools)
    assert spare is not None and spare("0") and not spare("1") and not spare("4")
    ctx = recorded_run.BenchContext(s, {}, {}, stable={"q3": 20.0})
    runner.draw_schedules(ctx)
    # The schedule of the three spot slots, drawn from the same seed (ranks count spot executors only).
    import zlib

    import numpy as np

    from jobs.harness.kill_schedule import draw_schedule

    rng = np.random.default_rng([s.seed, zlib.crc32(b"q3"), 0])
    spot_only = draw_schedule(schedules.lifetime_spec(s, ctx.stable, "q3"), 3, s.time_cap, rng,
                              replacement_delay=s.replacement_delay)
    assert ctx.schedules[("q3", 0)] == spot_only and {rank for _, rank in spot_only} == {0, 1, 2}
    with pools.metadata_server(s.pools) as url:
        options = pools.plugin_options(url, "exponential:mean=60")
        assert url is not None and options["notice_url"] == url + "/vm-{executorId}"
    assert options["pool_lifetimes"] == {"ondemand": "stable", "spot": "exponential:mean=60"}


class _FakeInjector:
    """Kills ``during`` executors in the run and ``after`` more at notice deadlines past its end."""

    def __init__(self, during: int, after: int, notice: float | None) -> None:
        self.during, self.after, self.notice = during, after, notice
        self.window: float | None = None

    def __enter__(self) -> _FakeInjector:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def elapsed(self) -> float:
        return 1.0

    def kills_by(self, t: float) -> int:
        return self.during

    def finish(self, window: float) -> int:
        self.window = window
        return self.after


@pytest.mark.parametrize("policy", ["tr", "always"])
@pytest.mark.parametrize(("during", "after", "warmed"), [(0, 0, False), (1, 0, True), (0, 1, True)])
def test_replacements_are_warmed_after_any_kill_during_or_after_the_run(
        policy: str, during: int, after: int, warmed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jobs.tpcds.queries import load
    from jobs.tpcds.query_run import Outcome

    groups: list[str] = []
    monkeypatch.setattr(recorded_run, "execute", lambda spark, query, group, cap: groups.append(group) or Outcome(1.0))
    injector = _FakeInjector(during, after, notice=5.0 if policy == "tr" else None)
    monkeypatch.setattr(recorded_run, "_injector", lambda *args: injector)
    monkeypatch.setattr(recorded_run.metrics, "plugin_counters", lambda sc: {})
    monkeypatch.setattr(recorded_run.metrics, "plugin_fell_back", lambda sc: False)

    class Api:
        def tasks_recomputed(self, group: str) -> int:
            return 0

    class Count:  # both executors registered and alive, none gone still listed
        def __call__(self) -> int:
            return 2

        def settled(self) -> bool:
            return True

    s = BenchSettings(sf=1, queries=("q3",), policies=("always", "tr"), out=tmp_path / "r.csv", executors=2, notice=5.0)
    ctx = recorded_run.BenchContext(s, {"q3": load("q3")}, {})
    row = recorded_run.run_once(ctx, spark=type("Spark", (), {"sparkContext": None})(), api=Api(),
                                count=Count(), policy=policy, scenario="evicted", query=load("q3"), r=0)
    assert row.executors_killed == during  # a kill after the run's end is not the run's
    # Every policy makes the kills due within the notice window after the end (noticed ones at their deadlines).
    assert injector.window == 5.0
    assert [g.startswith("rewarm-") for g in groups] == ([False, True] if warmed else [False])


@pytest.mark.parametrize(("times", "passes", "ran"), [
    ([20.0, 14.0, 11.0, 10.0], 4, 3),  # cold, cooling, within 1.25 x 10 s: stop there
    ([20.0, 14.0, 13.0, 13.0], 3, 3),  # never warm enough: the cap
    ([20.0, 11.0], 1, 1),  # one pass (the default) whatever it took
    ([12.5, 30.0], 4, 1),  # exactly at the bound counts as warm
])
def test_rewarm_runs_passes_until_one_is_within_the_bound_of_the_stable_time(
        times: list[float], passes: int, ran: int, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    from jobs.tpcds.queries import load
    from jobs.tpcds.query_run import Outcome

    left = iter(times)
    groups: list[str] = []
    monkeypatch.setattr(recorded_run, "execute", lambda spark, query, group, cap: groups.append(group) or Outcome(next(left)))
    assert recorded_run.REWARM_WITHIN == 1.25
    with caplog.at_level("WARNING", logger=recorded_run.log.name):
        assert recorded_run.rewarm(None, load("q3"), "rewarm-x", 60.0, passes, stable=10.0) == ran
    assert groups == ["rewarm-x"] * ran
    # Only several passes allowed and none warm enough is worth a warning (one pass is the default).
    still_cold = passes > 1 and times[ran - 1] > 12.5
    assert [r.getMessage() for r in caplog.records] == (
        [f"rewarm-x: the last of {passes} re-warm passes still took 1.3x the stable time (> 1.25x); the next runs "
         "start on cold executors"] if still_cold else [])


def test_rewarm_without_a_stable_time_or_after_a_failed_pass_goes_on_to_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    from jobs.tpcds.queries import load
    from jobs.tpcds.query_run import Outcome

    outcomes = iter([Outcome(1.0, error="lost executor"), Outcome(1.0), Outcome(1.0)])
    monkeypatch.setattr(recorded_run, "execute", lambda spark, query, group, cap: next(outcomes))
    assert recorded_run.rewarm(None, load("q3"), "g", 60.0, 3, stable=10.0) == 2  # the failed pass does not count as warm
    monkeypatch.setattr(recorded_run, "execute", lambda spark, query, group, cap: Outcome(1.0))
    assert recorded_run.rewarm(None, load("q3"), "g", 60.0, 3, stable=None) == 3


def test_the_rewarm_bound_in_the_help_is_the_runner_s() -> None:
    result = CliRunner().invoke(cli, ["bench", "tpcds", "--help"])
    assert f"{recorded_run.REWARM_WITHIN:g}x the query's stable time" in " ".join(result.output.split())


def test_on_a_console_that_is_no_terminal_each_step_is_a_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    from jobs.tpcds.cli import run_with_progress
    from jobs.tpcds.settings import Progress

    def fake_run(settings: BenchSettings, hooks: Progress) -> BenchResult:
        hooks.start(3)
        hooks.step("never: starting Spark")
        hooks.advance()
        hooks.step("never · stable · q3 · run 1/3")
        return BenchResult(rows=[], skipped={})

    monkeypatch.setattr(runner, "run", fake_run)
    out = io.StringIO()
    run_with_progress(BenchSettings(sf=0.1, queries=("q3",), policies=("never",), out=Path("r.csv")),
                      Console(file=out, width=200))
    assert out.getvalue().splitlines() == ["[0:00] never: starting Spark (0/3 done)",
                                           "[0:00] never · stable · q3 · run 1/3 (1/3 done)"]
