"""The results CSV: exact header, one row per run appended, typed round trip, foreign files refused."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from jobs.tpcds.plot import median_slowdowns, plot
from jobs.tpcds.results import COLUMNS, LATER_COLUMNS, RunRow, append, read, write

REQUIRED = ("query", "policy", "sf", "seed", "seconds", "stable_seconds", "slowdown", "executors_killed",
            "tasks_recomputed", "backups_count", "backups_bytes", "backups_local", "backups_remote",
            "result_ok", "failed", "error")


def row(**overrides: object) -> RunRow:
    values: dict[str, object] = dict(query="q3", policy="never", sf=0.1, seed=7, repeat=0, scenario="evicted",
                                      seconds=12.5, stable_seconds=5.0, slowdown=2.5, executors_killed=2,
                                      capacity_lost_seconds=24.0, tasks_recomputed=9, result_ok=True)
    values.update(overrides)
    return RunRow(**values)  # type: ignore[arg-type]


def test_header_has_every_required_column() -> None:
    assert set(REQUIRED) <= set(COLUMNS)
    assert len(set(COLUMNS)) == len(COLUMNS)


def test_append_writes_header_once_and_round_trips(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    first = row()
    second = row(policy="tr", seconds=6.0, slowdown=1.2, error="exceeded the time cap of 600 s\nsecond line",
                 failed=True, result_ok=False, stable_seconds=float("nan"))
    append(out, first)
    append(out, second)
    with out.open() as handle:
        lines = list(csv.reader(handle))
    assert tuple(lines[0]) == COLUMNS
    assert len(lines) == 3
    back = read(out)
    assert back[0] == first
    assert back[1].failed and not back[1].result_ok
    assert back[1].error == "exceeded the time cap of 600 s second line"  # one physical line per run
    assert math.isnan(back[1].stable_seconds)


def test_read_refuses_a_foreign_csv(tmp_path: Path) -> None:
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a trspark TPC-DS results file"):
        read(other)


def test_a_file_without_the_later_columns_reads_and_takes_new_runs_in_its_own_columns(tmp_path: Path) -> None:
    older = tuple(name for name in COLUMNS if name not in LATER_COLUMNS)
    out = tmp_path / "older.csv"
    with out.open("w", newline="") as handle:
        csv.writer(handle).writerow(older)
    append(out, row(notices=3, executors_drained=1))
    append(out, row(policy="tr", backups_count=4))
    with out.open() as handle:
        lines = list(csv.reader(handle))
    assert tuple(lines[0]) == older and {len(line) for line in lines} == {len(older)}
    back = read(out)
    assert [(r.policy, r.backups_count, r.notices, r.executors_drained) for r in back] == [
        ("never", 0, 0, 0), ("tr", 4, 0, 0)]


def test_new_files_keep_the_notice_drain_and_release_counts(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    append(out, row(policy="tr", notices=2, executors_drained=2, executors_released=1))
    (back,) = read(out)
    assert (back.notices, back.executors_drained, back.executors_released) == (2, 2, 1)


def test_a_header_missing_a_column_that_was_always_there_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    out.write_text(",".join(name for name in COLUMNS if name != "seconds") + "\n")
    with pytest.raises(ValueError, match="not a trspark TPC-DS results file"):
        read(out)


def test_write_replaces_a_file_of_older_columns_with_every_row_in_the_current_ones(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    old = [c for c in COLUMNS if c not in LATER_COLUMNS]
    path.write_text(",".join(old) + "\n")
    first = RunRow(query="q3", policy="never", sf=1.0, seed=0, repeat=0, scenario="stable", seconds=4.0,
                   stable_seconds=4.0, slowdown=1.0)  # (NaN, the default, is not equal to itself)
    append(path, first)
    rows = read(path) + [RunRow(query="q3", policy="tr", sf=1.0, seed=0, repeat=0, scenario="evicted",
                                seconds=6.5, stable_seconds=4.0, slowdown=1.625, notices=2, executors_drained=1,
                                result_ok=True)]
    write(path, rows)
    assert path.read_text().splitlines()[0] == ",".join(COLUMNS)
    assert read(path) == rows and not list(tmp_path.glob("*.partial"))


def test_failed_runs_are_kept_but_not_in_the_median(tmp_path: Path) -> None:
    rows = [row(), row(slowdown=3.5, repeat=1), row(policy="tr", slowdown=1.1), row(policy="tr", failed=True,
            slowdown=9.0, repeat=1), row(policy="always", failed=True), row(scenario="stable", slowdown=1.0)]
    medians = median_slowdowns(rows)
    assert medians[("q3", "never")] == pytest.approx(3.0)
    assert medians[("q3", "tr")] == pytest.approx(1.1)
    assert math.isnan(medians[("q3", "always")])  # every run failed: shown as failed, not dropped
    out = tmp_path / "r.csv"
    for r in rows:
        append(out, r)
    png = plot(out, tmp_path / "slowdown.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
