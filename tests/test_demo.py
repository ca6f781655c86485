"""``trspark demo``: options are validated, skipped policies are named, table and chart are written.

The real run (Spark local-cluster, ~10 min) is what `make demo` does; here the runner is replaced
by a recorded result so the command's own behaviour is tested quickly.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from jobs.tpcds import results, runner
from jobs.tpcds.results import RunRow
from trspark.cli import cli


def fake_run(settings: runner.BenchSettings, console: object) -> runner.BenchResult:
    rows = []
    for policy in ("never", "tr"):
        for scenario, seconds in (("stable", 4.0), ("evicted", 9.0 if policy == "never" else 5.0)):
            row = RunRow(query=settings.queries[0], policy=policy, sf=settings.sf, seed=settings.seed, repeat=0,
                         scenario=scenario, seconds=seconds, stable_seconds=4.0, slowdown=seconds / 4.0,
                         executors_killed=1 if scenario == "evicted" else 0, result_ok=True)
            results.append(settings.out, row)
            rows.append(row)
    return runner.BenchResult(rows, {"always": "the trspark plugin is not usable: jar missing"})


def test_bad_policy_is_one_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo", "--policies", "never,sometimes", "--out-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "Invalid value for '--policies': sometimes; allowed: comma-separated never, always, decommission, efm, pado, tr" \
        in result.output
    assert "Traceback" not in result.output


def test_bad_query_is_one_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo", "--queries", "q3,q1000", "--out-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "unknown query 'q1000'" in result.output


def test_demo_prints_table_names_skipped_policies_and_writes_chart(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import jobs.tpcds.cli as bench_cli

    seen: list[runner.BenchSettings] = []

    def recording_run(settings: runner.BenchSettings, console: object) -> runner.BenchResult:
        seen.append(settings)
        return fake_run(settings, console)

    monkeypatch.setattr(bench_cli, "run_with_progress", recording_run)
    monkeypatch.setenv("COLUMNS", "200")  # rich's table width; narrower terminals abbreviate cells
    result = CliRunner().invoke(cli, ["demo", "--out-dir", str(tmp_path), "--seed", "5"])
    assert result.exit_code == 0, result.output
    (settings,) = seen
    assert settings.policies == ("never", "always", "tr") and settings.seed == 5 and settings.sf == 0.1
    assert "skipped always" in result.output and "jar missing" in result.output
    assert "2.25x" in result.output and "1.25x" in result.output  # evicted slowdowns of never and tr
    assert (tmp_path / "slowdown.png").read_bytes()[:4] == b"\x89PNG"
    assert len(results.read(tmp_path / "results.csv")) == 4
