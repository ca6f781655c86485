"""``trspark bench tpcds`` turns its options into BenchSettings; bad options are one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from jobs.tpcds import runner
from trspark.cli import cli


def test_options_reach_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import jobs.tpcds.cli as bench_cli

    seen: list[runner.BenchSettings] = []

    def recording_run(settings: runner.BenchSettings, console: object) -> runner.BenchResult:
        seen.append(settings)
        return runner.BenchResult([], {})

    monkeypatch.setattr(bench_cli, "run_with_progress", recording_run)
    out = tmp_path / "r.csv"
    result = CliRunner().invoke(cli, ["bench", "tpcds", "--sf", "1", "--queries", "q3,q7", "--warmup", "1",
                                      "--stable-runs", "never", "--notice", "5", "--out", str(out),
                                      "--conf", "spark.sql.autoBroadcastJoinThreshold=-1"])
    assert result.exit_code == 0, result.output
    (s,) = seen
    assert (s.queries, s.warmup, s.stable_runs, s.notice, s.stability) == (("q3", "q7"), 1, "never", 5.0, 3.0)
    assert s.spark_conf == (("spark.sql.autoBroadcastJoinThreshold", "-1"),)
    assert runner.BenchSettings(sf=1, queries=(), policies=(), out=out).warmup is None  # default: warm up all


@pytest.mark.parametrize(("args", "message"), [
    (["--stable-runs", "some"], "Invalid value for '--stable-runs'"),
    (["--warmup", "0"], "Invalid value for '--warmup'"),
    (["--conf", "autoBroadcast=-1"], "allowed: KEY=VALUE with a spark.* key"),
])
def test_bad_option_is_one_clear_error(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["bench", "tpcds", *args])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
