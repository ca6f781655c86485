"""Dynamic allocation live, on ``local-trcluster`` with shuffle tracking: a query, an idle gap, a
query. Executors that dynamic allocation removes, or that trspark releases while idle, never
count as evictions: not in the event log, not in the lifetime history, not in the bench CSV; and
no release makes a map task run again."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.elastic import ElasticSettings, read_csv, run_policy, write_csv
from trspark.live.history import HistoryStore


def _check_no_eviction(row, history: Path, out: Path) -> None:  # type: ignore[no-untyped-def]
    assert row.evictions == 0
    assert row.stage_resubmissions == 0 and row.map_tasks_rerun == 0
    records = HistoryStore(str(history)).load("default")
    assert records and not any(r.observed for r in records), "every lifetime is censored: no eviction"
    write_csv([row], out)
    (written,) = read_csv(out)
    assert written["evictions"] == "0"


@pytest.mark.spark
@pytest.mark.timeout(1800)  # three executor JVM generations start: minutes on a loaded machine
def test_idle_executors_released_early_are_no_evictions(tmp_path: Path) -> None:
    history = tmp_path / "history"
    s = ElasticSettings(executors=2, gap=12.0, idle_timeout=2.0, rows=200_000, partitions=4,
                        trspark_options={"history_url": str(history)})
    row = run_policy("tr", s, tmp_path)
    assert row.executors_released >= 1, "trspark released the idle executors in the gap"
    assert row.executors_started > 2, "dynamic allocation started executors again for the second query"
    _check_no_eviction(row, history, tmp_path / "elastic.csv")


@pytest.mark.spark
@pytest.mark.timeout(1800)
def test_executors_dynamic_allocation_removes_are_no_evictions(tmp_path: Path) -> None:
    # trspark's release off: dynamic allocation removes them itself once shuffleTracking.timeout passed.
    history = tmp_path / "history"
    s = ElasticSettings(executors=2, gap=12.0, idle_timeout=2.0, rows=200_000, partitions=4, shuffle_timeout=2.0,
                        trspark_options={"history_url": str(history), "release_idle": 0.0})
    row = run_policy("tr", s, tmp_path)
    assert row.executors_removed >= 1 and row.executors_released == 0
    _check_no_eviction(row, history, tmp_path / "elastic.csv")
