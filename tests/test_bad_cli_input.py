"""Bad input on the command line: any text for any option of any ``trspark`` command, and event
logs that are cut off, damaged or huge. The answer is a result or one ``Error:`` line with exit
code 2, never a traceback. Hypothesis draws the input; ``derandomize`` fixes the examples.

Commands that would start Spark (``bench``, ``demo``) validate their options in click callbacks
before any work, so for them the options are parsed (``make_context``) but the command is not run.
The others run for real, on settings small enough to finish in a moment when the drawn value
happens to be valid.
"""

from __future__ import annotations

import json
import random
import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from trspark.cli import cli

LOG = Path(__file__).parent / "fixtures" / "eventlogs" / "join_agg.json"
FIXED = settings(derandomize=True, deadline=None, max_examples=150,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])
# Options that name where to write or read (a drawn name would create it) or a store to contact.
NOT_DRAWN = {"--out", "--out-dir", "--cache", "--plot", "--cost-plot", "--csv", "--reference", "--path", "--master"}
RUN_FOR_REAL = {
    ("simulate",): ["simulate", "--workload", "tpcds", "--policy", "never", "--scale", "0.001", "--vms", "2",
                    "--runs", "1", "--workers", "1"],
    ("whatif",): ["whatif", str(LOG), "--policy", "never", "--runs", "1", "--workers", "1"],
    ("size",): ["size"],
    ("report",): ["report", str(LOG)],
    ("gc",): ["gc", "--dry-run"],
}


def _commands(command: click.Command, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], click.Command]]:
    found = [(path, command)]
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            found += _commands(command.get_command(ctx, name), (*path, name))
    return found


def _valued_options() -> list[tuple[tuple[str, ...], str]]:
    return sorted((path, param.opts[0]) for path, command in _commands(cli, ())
                  for param in command.params
                  if isinstance(param, click.Option) and not param.is_flag and not param.count
                  and param.opts[0] not in NOT_DRAWN)


OPTIONS = _valued_options()


def _one_error_line(output: str) -> None:
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, output


def test_the_drawn_options_cover_every_command_that_takes_values() -> None:
    commands = {path for path, _ in OPTIONS}
    assert {("simulate",), ("whatif",), ("size",), ("report",), ("gc",), ("bench", "tpcds"), ("demo",)} <= commands
    assert len(OPTIONS) > 100


@FIXED
@given(hs.sampled_from(OPTIONS), hs.text(max_size=30))
def test_any_text_for_any_option_is_accepted_or_refused_in_one_line_with_exit_2(
        tmp_path: Path, option: tuple[tuple[str, ...], str], value: str) -> None:
    path, name = option
    if path not in RUN_FOR_REAL:
        command = cli
        for part in path:
            command = command.get_command(click.Context(command), part)
        try:
            command.make_context(" ".join(path), [name, value])
        except click.ClickException as exc:
            assert exc.exit_code == 2, exc.format_message()
            assert len(exc.format_message().splitlines()) == 1, exc.format_message()
        return
    args = RUN_FOR_REAL[path] + [name, value]
    args += ["--out", str(tmp_path / "report")] if path == ("report",) else []
    args += ["--path", str(tmp_path)] if path == ("gc",) else []
    result = CliRunner().invoke(cli, args)
    assert result.exit_code in (0, 2), (args, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)
    if result.exit_code == 2:
        _one_error_line(result.output)


@pytest.mark.parametrize(("args", "message"), [
    (RUN_FOR_REAL[("simulate",)] + ["--stability", "inf"], "--stability=inf is not valid; allowed: a finite number > 0"),
    (RUN_FOR_REAL[("simulate",)] + ["--local-bw", "inf"], "--local-bw"),
    (RUN_FOR_REAL[("simulate",)] + ["--max-slowdown", "0.5"], "--max-slowdown=0.5 is not valid; allowed: a finite number > 1"),
    (RUN_FOR_REAL[("simulate",)] + ["--split-overhead", "0.1"], "--split-overhead given without --split lifetime"),
    (RUN_FOR_REAL[("size",)] + ["--rate", "inf"], "--rate='inf' is not valid"),
    (RUN_FOR_REAL[("report",)] + ["--price", "default=nan"], "expected POOL=USD_PER_HOUR"),
    # NaN passes every "< 0" check: a replacement at time NaN stalled the event loop for good.
    (RUN_FOR_REAL[("simulate",)] + ["--replace-delay", "nan"], "--replace-delay=nan is not valid"),
    (RUN_FOR_REAL[("simulate",)] + ["--notice", "nan"], "--notice=nan is not valid"),
    (RUN_FOR_REAL[("simulate",)] + ["--split", "lifetime", "--split-fraction", "nan"], "--split-fraction"),
    (RUN_FOR_REAL[("simulate",)] + ["--split", "lifetime", "--split-overhead", "nan"], "--split-overhead"),
    (RUN_FOR_REAL[("simulate",)] + ["--seed", "-1"], "--seed"),
])
def test_infinite_and_nan_numbers_are_refused_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    args += ["--out", str(tmp_path / "report")] if args[0] == "report" else []
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    _one_error_line(result.output)
    assert message in result.output


@pytest.mark.parametrize(("args", "message"), [
    # The loss fraction r(L) of an exponential law peaks at ~0.298: above it every length would pass.
    (RUN_FOR_REAL[("size",)] + ["--fraction", "0.3"], "--fraction=0.3 is not below the largest expected loss fraction --lifetime="),
    (RUN_FOR_REAL[("simulate",)] + ["--split", "lifetime", "--split-fraction", "0.5"], "--split-fraction=0.5 is not below"),
    (RUN_FOR_REAL[("report",)] + ["--price", "default=-1"], "Invalid value for --price"),
    (RUN_FOR_REAL[("size",)] + ["--pool", "ondemand=2@stable"], "--pool ondemand=2@stable: size takes NAME=SPEC, no VM count"),
    (RUN_FOR_REAL[("report",)] + ["--out", str(LOG / "report")], "Invalid value for --out: cannot make the folder"),
])
def test_values_the_command_cannot_use_are_refused_in_one_line_naming_the_option(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    _one_error_line(result.output)
    assert message in result.output


@pytest.mark.parametrize(("path", "option", "value", "message"), [
    # The policy and the pools are the benchmark's; a bad trspark value would fail each session after datagen.
    (("bench", "tpcds"), "--conf", "spark.trspark.mode=never", "set by --policies"),
    (("bench", "tpcds"), "--conf", "spark.trspark.pool.spot.lifetime=stable", "set by --pool"),
    (("bench", "tpcds"), "--conf", "spark.trspark.gamma=-1", "allowed: a number > 0"),
    (("bench", "tpcds"), "--conf", "spark.trspark.recursion_depth=4", "unknown setting"),
    # /proc is a folder where root passes os.access but can make nothing.
    (("bench", "tpcds"), "--out", "/proc/trspark/results.csv", "nothing can be written in '/proc'"),
    (("bench", "tpcds"), "--spark-log", "/proc/trspark/spark.log", "nothing can be written in '/proc'"),
    (("demo",), "--out-dir", "/proc/trspark-demo", "nothing can be written in '/proc'"),
])
def test_commands_that_start_spark_refuse_settings_they_cannot_use_before_any_work(
        path: tuple[str, ...], option: str, value: str, message: str) -> None:
    command: click.Command = cli
    for part in path:
        command = command.get_command(click.Context(command), part)  # type: ignore[attr-defined]
    with pytest.raises(click.BadParameter, match=re.escape(message)):
        command.make_context(" ".join(path), [option, value])


@pytest.mark.parametrize(("command_line", "message"), [
    # Spark would refuse it only after the data is generated; a bare scheme names no cluster.
    ("bench tpcds --master foo", "allowed: a running cluster's master URL"),
    ("bench tpcds --master spark://", "allowed: a running cluster's master URL"),
    ("bench tpcds --pool spot=20", "20 executors in all; allowed: at most 16"),
    ("bench tpcds --pool ondemand=1@stable", "no spot pool, so nothing would be killed"),
    # A negative seed failed only when the kill schedules were drawn, after the stable runs.
    ("bench tpcds --seed -1", "-1 is not in the range x>=0"),
    ("demo --seed -1", "-1 is not in the range x>=0"),
    ("demo --notice 1e9", "is not in the range 0<=x<240"),
    ("bench tpcds --out ''", "is a folder; allowed: a file's path"),
    ("bench verify --csv /proc/trspark/verdicts.csv", "nothing can be written in '/proc'"),
    # The chart is written after the whole benchmark: a name it cannot take must fail before.
    ("bench tpcds --plot chart.foo", "no picture format named by its extension; allowed: "),
    ("bench tpcds --plot chart", "no picture format named by its extension; allowed: "),
    # Refused as simulate refuses them, not dropped.
    ("bench tpcds --queries q3,,q7", "'q3,,q7' has an empty item"),
    ("bench tpcds --queries q3,3", "'q3,3' names a query twice"),
    ("bench tpcds --policies tr,tr", "'tr,tr' names a policy twice"),
    ("bench tpcds --policies tr,", "'tr,' has an empty item"),
])
def test_bench_and_demo_options_that_would_fail_late_are_refused_before_any_work(command_line: str, message: str) -> None:
    *path, option, value = shlex.split(command_line)
    command: click.Command = cli
    for part in path:
        command = command.get_command(click.Context(command), part)  # type: ignore[attr-defined]
    with pytest.raises(click.BadParameter, match=re.escape(message)):
        command.make_context(" ".join(path), [option, value])


@pytest.mark.parametrize("master", ["spark://h:7077", "spark-tr://h1:7077,h2:7077", "k8s://https://h:6443", "yarn"])
def test_bench_takes_the_master_urls_of_running_clusters(master: str) -> None:
    command = cli.get_command(click.Context(cli), "bench").get_command(click.Context(cli), "tpcds")  # type: ignore[attr-defined]
    assert command.make_context("bench tpcds", ["--master", master]).params["master"] == master


@pytest.mark.parametrize(("path", "option", "message"), [
    (("demo",), "--sf", "is not a finite number"), (("demo",), "--notice", "is not a finite number"),
    (("bench", "tpcds"), "--sf", "is not a scale factor"), (("bench", "tpcds"), "--notice", "is not a finite number"),
    (("bench", "tpcds"), "--time-cap", "is not a finite number"),
])
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_commands_that_start_spark_refuse_nan_and_infinity_before_any_work(
        path: tuple[str, ...], option: str, message: str, value: str) -> None:
    command: click.Command = cli
    for part in path:
        command = command.get_command(click.Context(command), part)  # type: ignore[attr-defined]
    with pytest.raises(click.BadParameter, match=message):
        command.make_context(" ".join(path), [option, value])


def _damaged(data: bytes, how: str, at: float, seed: int) -> bytes:
    cut = int(at * len(data))
    if how == "truncated":
        return data[:cut]
    if how == "garbage line":
        line_end = data.find(b"\n", cut)
        cut = len(data) if line_end < 0 else line_end + 1
        return data[:cut] + random.Random(seed).randbytes(40).replace(b"\n", b" ") + b"\n" + data[cut:]
    flipped = bytearray(data)  # a byte changed
    flipped[min(cut, len(data) - 1)] ^= 0xFF
    return bytes(flipped)


@settings(FIXED, max_examples=12)
@given(hs.sampled_from(["truncated", "garbage line", "byte flipped"]), hs.floats(0.0, 1.0), hs.integers(0, 2**16),
       hs.sampled_from(["report", "whatif"]))
def test_a_damaged_event_log_is_reported_or_refused_in_one_line(tmp_path: Path, how: str, at: float, seed: int,
                                                                  command: str) -> None:
    log = tmp_path / "app-1"
    log.write_bytes(_damaged(LOG.read_bytes(), how, at, seed))
    args = [command, str(log)] + (["--out", str(tmp_path / "out")] if command == "report" else ["--runs", "1"])
    result = CliRunner().invoke(cli, args)
    assert result.exit_code in (0, 2), (how, at, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    if result.exit_code == 2:
        _one_error_line(result.output)


@pytest.mark.parametrize("command", ["report", "whatif"])
def test_a_huge_line_of_garbage_is_refused_in_one_line(tmp_path: Path, command: str) -> None:
    log = tmp_path / "app-1"
    log.write_bytes(b"{" * (64 << 20) + b"\n")
    result = CliRunner().invoke(cli, [command, str(log), "--out" if command == "report" else "--runs",
                                      str(tmp_path / "out") if command == "report" else "1"])
    assert result.exit_code == 2, result.output
    _one_error_line(result.output)
    assert "line 1 is not JSON" in result.output


SWEEP = ["sweep", "--workloads", "bing", "--policies", "never", "--stabilities", "100", "--scale", "0.01",
         "--runs", "1", "--workers", "1"]


def test_an_option_given_before_sweep_is_refused_not_ignored(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["simulate", "--vms", "1", *SWEEP, "--out", str(tmp_path / "s.csv")])
    assert result.exit_code == 2, result.output
    _one_error_line(result.output)
    assert "--vms given before `sweep`" in result.output
    assert not (tmp_path / "s.csv").exists()


def test_a_sweep_into_a_missing_folder_is_refused_before_it_runs(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["simulate", *SWEEP, "--out", str(tmp_path / "missing" / "s.csv")])
    assert result.exit_code == 2, result.output
    _one_error_line(result.output)
    assert "--out=" in result.output and "does not exist" in result.output


def test_whatif_refuses_an_unknown_policy_before_running_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    import simulators.runner

    ran: list[str] = []
    monkeypatch.setattr(simulators.runner, "run_experiment", lambda exp, **_: ran.append(exp.policy))
    result = CliRunner().invoke(cli, ["whatif", str(LOG), "--policy", "never", "--policy", "nevr", "--runs", "1",
                                      "--workers", "1"])
    assert result.exit_code == 2, result.output
    _one_error_line(result.output)
    assert "--policy='nevr' is not a policy" in result.output
    assert ran == []
    # A comma-separated list is read as in `simulate`.
    monkeypatch.undo()
    result = CliRunner().invoke(cli, ["whatif", str(LOG), "--policy", "never,always", "--runs", "1", "--workers", "1",
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    assert [s["policy"] for s in json.loads(result.output)["results"]] == ["never", "always"]


def test_bench_refuses_a_notice_that_would_outlast_the_time_cap_before_any_work() -> None:
    result = CliRunner().invoke(cli, ["bench", "tpcds", "--notice", "700", "--time-cap", "600"])
    assert result.exit_code == 2, result.output
    _one_error_line(result.output)
    assert "Invalid value for '--notice': 700 s is not below --time-cap 600 s" in result.output


@pytest.mark.parametrize(("args", "message"), [
    (["--master", "spark://h:7077", "--max-kills", "2", "--stability", "3"],
     "--max-kills, --stability: no kills are injected on --master's cluster"),
    (["--reclaim-within", "0.3,0.6", "--lifetime", "exponential:mean=60"], "--reclaim-within times the kills instead"),
    (["--no-rewarm", "--rewarm-passes", "3"], "with --no-rewarm no unrecorded pass runs"),
])
def test_bench_refuses_kill_options_it_would_ignore_before_any_work(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["bench", "tpcds", *args])
    assert result.exit_code == 2, result.output
    _one_error_line(result.output)
    assert message in result.output


def test_bench_plot_of_a_csv_without_runs_under_kills_says_so() -> None:
    overhead = Path(__file__).parent.parent / "docs" / "results" / "overhead.csv"
    result = CliRunner().invoke(cli, ["bench", "plot", str(overhead), "--out", "/tmp/trspark-never-written.png"])
    assert result.exit_code == 2, result.output
    _one_error_line(result.output)
    assert "no runs under kills or on a real cluster, so no slowdown to plot" in result.output


@pytest.mark.parametrize(("args", "message"), [
    (["bench", "tpcds", "--out", "r.png", "--plot", "r.png"], "Invalid value for '--plot': 'r.png' is also --out's path"),
    (["bench", "tpcds", "--out", "r.csv", "--spark-log", "./r.csv"], "Invalid value for '--spark-log': 'r.csv' is also --out's path"),
    (["bench", "verify", "--out", "v.md", "--csv", "v.md"], "Invalid value for '--csv': 'v.md' is also --out's path"),
])
def test_bench_refuses_two_outputs_in_one_file_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                args: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and message in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("args", "message"), [
    # Below it Γ(1 + 1/shape) overflows when the stability sets the scale.
    (["--shapes", "exp,0.001"], "--shapes=0.001 is not valid; allowed: a Weibull shape >= 0.006"),
    (["--shape", "0.005"], "--shape=0.005 is not valid; allowed: a Weibull shape >= 0.006"),
])
def test_a_sweep_refuses_a_weibull_shape_whose_mean_is_past_float_range(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["simulate", *SWEEP, *args, "--out", str(tmp_path / "s.csv")])
    assert result.exit_code == 2, result.output
    _one_error_line(result.output)
    assert message in result.output
