"""Dynamic allocation live, on ``local-trcluster`` with shuffle tracking: a query, an idle gap, a
query. Executors that dynamic allocation removes, or that trspark releases while idle, never
count as evictions: not in the event log, not in the lifetime history, not in the bench CSV; and
no release makes a map task run again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jobs.elastic import ElasticSettings, dynamic_allocation_conf, read_csv, run_policy, write_csv
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
                        trspark_options={"history_url": str(history), "engine_timeout": 30})
    row = run_policy("tr", s, tmp_path)
    assert row.executors_released >= 1, "trspark released the idle executors in the gap"
    assert row.executors_released_idle == row.executors_released  # no notices here: every release was an idle one
    assert row.executors_started > 2, "dynamic allocation started executors again for the second query"
    _check_no_eviction(row, history, tmp_path / "elastic.csv")


@pytest.mark.spark
@pytest.mark.timeout(1800)
def test_executors_dynamic_allocation_removes_are_no_evictions(tmp_path: Path) -> None:
    # trspark's release off: dynamic allocation removes them itself once shuffleTracking.timeout passed.
    history = tmp_path / "history"
    s = ElasticSettings(executors=2, gap=12.0, idle_timeout=2.0, rows=200_000, partitions=4, shuffle_timeout=2.0,
                        trspark_options={"history_url": str(history), "release_idle": 0.0, "engine_timeout": 30})
    row = run_policy("tr", s, tmp_path)
    assert row.executors_removed >= 1 and row.executors_released == 0
    _check_no_eviction(row, history, tmp_path / "elastic.csv")


@pytest.mark.spark
@pytest.mark.timeout(1800)
def test_idle_executors_holding_cached_blocks_stay_and_go_once_the_cache_is_dropped(tmp_path: Path) -> None:
    # Dynamic allocation keeps an idle executor with cached blocks (cachedExecutorIdleTimeout,
    # unbounded by default) whatever its shuffle data: an early release would drop the cache.
    # The driver keeps them and tells the engine (ReleaseKept); once the cache is dropped, the
    # engine asks again and the executors, still holding shuffle data, go.
    import trspark
    from jobs.tpcds import session

    s = ElasticSettings(executors=2, idle_timeout=2.0, partitions=4)
    events = tmp_path / "events"
    events.mkdir()
    spec = session.ClusterSpec(executors=2, cores=1, memory_mb=1024, extra_conf=dynamic_allocation_conf(s, events))
    spark, work = session.start(spec, "tr", app_name="trspark-elastic-cache",
                                trspark_options={"lifetime": "exponential:mean=3600", "engine_timeout": 30})
    try:
        cached = spark.range(0, 200_000, numPartitions=4).repartition(4).cache()
        assert cached.count() == 200_000
        time.sleep(12.0)  # idle: past the idle timeout, with the repartition's outputs no longer read
        infos = spark.sparkContext._jsc.sc().getRDDStorageInfo()
        kept = sum(info.numCachedPartitions() for info in infos)
        while_cached = trspark.status(spark)
        cached.unpersist(blocking=True)
        deadline = time.monotonic() + 120.0
        while (released := trspark.status(spark).get("executors_released_idle", 0)) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        session.stop(spark, work)
    assert kept == 4, f"{kept} of 4 cached partitions left after the idle gap"
    assert while_cached.get("executors_released_idle", 0) == 0
    assert while_cached.get("idle_releases_kept", 0) >= 2, "the driver told the engine it kept both"
    assert released == 2, "both executors went once their cache was dropped"
