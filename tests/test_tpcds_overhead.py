"""The no-kill overhead check: pairing tr with vanilla Spark per (query, round), and its CLI errors."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from jobs.tpcds import results
from jobs.tpcds.overhead import TARGET, first_round, summarise
from jobs.tpcds.results import RunRow
from trspark.cli import cli


def run(query: str, policy: str, k: int, seconds: float, *, ok: bool = True, failed: bool = False) -> RunRow:
    return RunRow(query=query, policy=policy, sf=1.0, seed=0, repeat=k, scenario="stable", seconds=seconds,
                  result_ok=ok, failed=failed)


def test_ratios_pair_runs_of_the_same_round() -> None:
    # Load drifts between rounds (round 1 twice as slow for both): paired ratios stay at 1.02 / 1.10.
    rows = [run("q3", "never", 0, 10.0), run("q3", "tr", 0, 10.2),
            run("q3", "never", 1, 20.0), run("q3", "tr", 1, 20.4),
            run("q3", "never", 2, 11.0), run("q3", "tr", 2, 11.22),
            run("q7", "never", 0, 5.0), run("q7", "tr", 0, 5.5)]
    s = summarise(rows)
    assert s.per_query["q3"][3] == pytest.approx(1.02)
    assert s.per_query["q3"][:2] == (11.0, pytest.approx(11.22))
    assert s.per_query["q7"][2] == pytest.approx(1.1)
    assert s.median_paired == pytest.approx(1.02)  # median of 1.02, 1.02, 1.02, 1.10
    assert s.total_ratio == pytest.approx((11.22 + 5.5) / (11.0 + 5.0))
    assert s.met
    # The interval is the median's over the four pairs: it holds the median and stays within the pairs.
    ci = s.paired_interval
    assert ci.n == 4 and 1.02 <= ci.low <= ci.median <= ci.high <= 1.10


def test_failed_or_wrong_runs_pair_with_nothing() -> None:
    rows = [run("q3", "never", 0, 10.0), run("q3", "tr", 0, 30.0, ok=False),
            run("q3", "never", 1, 10.0, failed=True, ok=False), run("q3", "tr", 1, 10.5),
            run("q3", "never", 2, 10.0), run("q3", "tr", 2, 10.6)]
    s = summarise(rows)
    assert s.per_query["q3"][3] == pytest.approx(1.06)  # only round 2 has two good runs
    assert not s.met and s.median_paired > TARGET


def test_no_pairs_gives_nan_not_a_pass() -> None:
    s = summarise([run("q3", "never", 0, 10.0)])
    assert math.isnan(s.median_paired) and not s.met


def test_bad_option_is_one_clear_error() -> None:
    result = CliRunner().invoke(cli, ["bench", "overhead", "--rounds", "0"])
    assert result.exit_code == 2
    assert "Invalid value for '--rounds'" in result.output and "Traceback" not in result.output


def test_rows_of_two_runs_with_the_same_rounds_are_refused() -> None:
    rows = [run("q3", "never", 0, 10.0), run("q3", "tr", 0, 10.2), run("q3", "never", 0, 20.0)]
    with pytest.raises(ValueError, match="more than once"):
        summarise(rows)


def test_a_second_run_numbers_its_rounds_after_the_first(tmp_path: Path) -> None:
    out = tmp_path / "overhead.csv"
    assert first_round(out) == 0
    for row in [run("q3", "never", 0, 10.0), run("q3", "tr", 0, 10.2), run("q3", "never", 2, 10.0),
                run("q3", "tr", 2, 10.4)]:
        results.append(out, row)
    assert first_round(out) == 3


def test_an_out_that_is_not_a_results_file_is_refused_before_any_cluster_starts(tmp_path: Path) -> None:
    out = tmp_path / "other.csv"
    out.write_text("a,b\n1,2\n")
    result = CliRunner().invoke(cli, ["bench", "overhead", "--out", str(out)])
    assert result.exit_code == 2
    assert "Invalid value for '--out'" in result.output and "not a trspark TPC-DS results file" in result.output
