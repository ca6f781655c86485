"""The benchmark's targets judged from rows: hurt queries and their floors, medians, failures, verification."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from jobs.tpcds.results import RunRow, append
from jobs.tpcds.targets import capacity_floors, judge, markdown
from trspark.cli import cli


def evicted(query: str, policy: str, slowdown: float, *, failed: bool = False, ok: bool = True) -> RunRow:
    return RunRow(query=query, policy=policy, sf=1.0, seed=0, repeat=0, scenario="evicted",
                  seconds=10.0 * slowdown, stable_seconds=10.0, slowdown=slowdown, executors_killed=2,
                  failed=failed, result_ok=ok and not failed)


ROWS = [
    # q3: vanilla hurt (2.5x), tr fastest.
    evicted("q3", "never", 2.5), evicted("q3", "always", 1.4), evicted("q3", "decommission", 1.6),
    evicted("q3", "tr", 1.2),
    # q7: vanilla fails (aborted).
    evicted("q7", "never", 4.0, failed=True), evicted("q7", "always", 1.5), evicted("q7", "decommission", 1.3),
    evicted("q7", "tr", 1.35),
    # q19: vanilla not hurt; tr slower than always here; tr's answer wrong.
    evicted("q19", "never", 1.1), evicted("q19", "always", 1.2), evicted("q19", "decommission", 1.25),
    evicted("q19", "tr", 1.25, ok=False),
]


def test_judge_finds_hurt_queries_and_medians() -> None:
    v = judge(ROWS)
    assert v.hurt == ["q3", "q7"]  # 2.5x, and a failure counts as hurt
    assert math.isinf(v.slowdowns[("q7", "never")])
    assert v.medians["tr"] == 1.25 and v.medians["always"] == 1.4 and v.medians["decommission"] == 1.3
    assert v.verified == (10, 11, 1)  # the wrong answer among 11 finished runs; the failed run apart


def test_markdown_states_each_target_met_or_missed(tmp_path: Path) -> None:
    text = markdown(ROWS)
    assert "| q7 (never hurt) | 10.0 | failed | 1.50x | 1.30x | 1.35x | 2/2/2/2 | yes | no |" in text
    assert "tr <=" not in text and "capacity floors" not in text  # floors need the executor count
    assert "tr faster than always on the median query: 1.25x vs 1.40x -> **met**" in text
    assert "tr faster than decommission on the median query: 1.25x vs 1.30x -> **met**" in text
    assert "10 of 11 runs that finished -> **missed** (see the CSV's error column); 1 run(s) failed" in text
    out = tmp_path / "r.csv"
    for row in ROWS:
        append(out, row)
    result = CliRunner().invoke(cli, ["bench", "targets", str(out)])
    assert result.exit_code == 0 and result.output.startswith(markdown(ROWS, 3))


def test_foreign_csv_is_one_clear_error(tmp_path: Path) -> None:
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    result = CliRunner().invoke(cli, ["bench", "targets", str(other)])
    assert result.exit_code == 2 and "not a trspark TPC-DS results file" in result.output
    assert "Traceback" not in result.output


def test_capacity_floor_is_the_slowdown_the_surviving_executors_allow() -> None:
    # 3 executors, stable 10 s: 15 lost executor-seconds leave 3 T - 15 >= 30, so T >= 15 s (1.5x).
    rows = [RunRow(query="q7", policy=p, sf=1.0, seed=0, repeat=0, scenario="evicted", seconds=20.0,
                   stable_seconds=10.0, slowdown=2.0 if p == "never" else 1.6, executors_killed=3,
                   capacity_lost_seconds=lost, result_ok=True)
            for p, lost in (("never", 15.0), ("tr", 6.0))]
    rows.append(RunRow(query="q7", policy="tr", sf=1.0, seed=0, repeat=0, scenario="stable", seconds=10.0,
                       stable_seconds=10.0, slowdown=1.0, capacity_lost_seconds=99.0, result_ok=True))
    floors = capacity_floors(rows, 3)
    assert floors == {("q7", "never"): pytest.approx(1.5), ("q7", "tr"): pytest.approx(1.2)}  # stable rows ignored
    text = markdown(rows, executors=3)
    assert ("* capacity floors (1 + lost executor-seconds / (3 x stable s)) where never >= 2x or fails:\n"
            "  * q7: never 1.50x, tr 1.20x") in text
    assert "capacity floor" not in markdown(rows)
    with pytest.raises(ValueError, match="executors must be >= 1"):
        capacity_floors(rows, 0)
