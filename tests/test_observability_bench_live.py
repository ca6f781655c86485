"""One benchmark application with kills: its counters agree across every place a user reads them.

The TPC-DS bench's own code (:func:`jobs.tpcds.recorded_run.run_once`, the function behind every CSV
row) runs TPC-DS q7 (shuffle joins) three times in one ``local-trcluster`` application with mode
``tr``, each run losing one executor to a SIGKILL, with the event log and Spark's
``PrometheusServlet`` on. Then the rows of the bench CSV, ``/metrics/prometheus``, the "trspark"
UI tab (its HTML, whose value cells carry ``id="trspark-<metric>"``), ``trspark.status`` and
``trspark report`` of the event log must give the same backups, bytes, kills and restores.
"""

from __future__ import annotations

import glob
import re
import time
import urllib.request
from pathlib import Path

import pytest
from test_observability_live import prometheus

import trspark
from jobs.harness.executors import driver_pid
from jobs.tpcds import datagen, metrics, recorded_run, results, runner, session
from jobs.tpcds.answers import DuckDBOracle
from jobs.tpcds.queries import load
from jobs.tpcds.settings import BenchSettings

# Three runs with a replacement executor's registration after each: a minute or two on
# a quiet machine, 20x that when the machine is shared by many (a Spark query then runs 20x slower).
pytestmark = [pytest.mark.spark, pytest.mark.timeout(2400)]

RUNS = 3  # one kill each: the application meets three
JOB = "q7"
TAB_CELL = re.compile(r'<td id="trspark-(\w+)">(\d+)</td>')


def tab(ui_url: str) -> dict[str, int]:
    """The counters the driver's "trspark" UI tab shows."""
    with urllib.request.urlopen(f"{ui_url}/trspark/", timeout=120) as response:
        page = response.read().decode()
    return {name: int(value) for name, value in TAB_CELL.findall(page)}


def settled(spark: object) -> dict[str, int]:
    """``trspark.status`` once two reads a second apart agree (backups finish after their job)."""
    last: dict[str, int] = {}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        now = trspark.status(spark)
        if now == last:
            return now
        last = now
        time.sleep(1.0)
    raise AssertionError(f"trspark's counters did not settle: {last}")


def without_decisions(counters: dict[str, int]) -> dict[str, int]:
    """The counters but ``engine_decisions``, which grows with the engine's clock ticks after the job."""
    return {k: v for k, v in counters.items() if k != "engine_decisions"}


def test_bench_csv_metrics_ui_tab_and_report_agree_on_a_job_with_kills(tmp_path: Path) -> None:
    log_dir = tmp_path / "eventlog"
    log_dir.mkdir()
    out = tmp_path / "results.csv"
    # Each run's one kill lands 0.5 s in, inside a query of a few seconds.
    settings = BenchSettings(
        sf=0.01, queries=(JOB,), policies=("tr",), out=out, cache=tmp_path / "cache",
        lifetime="deterministic:at=0.5", stability=None, executors=3, memory_mb=1024, repeat=RUNS,
        max_kills=1, time_cap=300.0, rewarm=False, tr_notices=False,
        spark_conf=(("spark.eventLog.enabled", "true"), ("spark.eventLog.dir", f"file://{log_dir}"),
                    ("spark.sql.autoBroadcastJoinThreshold", "-1"), ("spark.ui.prometheus.enabled", "true"),
                    ("spark.metrics.conf.*.sink.prometheusServlet.class",
                     "org.apache.spark.metrics.sink.PrometheusServlet"),
                    ("spark.metrics.conf.*.sink.prometheusServlet.path", "/metrics/prometheus")))
    data = datagen.generate(settings.sf, settings.cache, show_progress=False)
    query = load(JOB)
    with DuckDBOracle(data) as oracle:
        ctx = recorded_run.BenchContext(settings, {JOB: query}, {JOB: oracle.answer(query)})
    runner.draw_schedules(ctx)
    spec = session.ClusterSpec(executors=3, cores=1, memory_mb=1024, extra_conf=dict(settings.spark_conf))
    # A generous engine.timeout: a fallback must not come from the loaded machine.
    spark, work_dir = session.start(spec, "tr", trspark_options={**runner._plugin_options(ctx, "tr"), "engine_timeout": 30})
    try:
        sc = spark.sparkContext
        session.register_tables(spark, data)
        count = metrics.executor_count(sc, driver_pid(sc))
        api = metrics.StatusApi.of(sc)
        for r in range(RUNS):
            row = recorded_run.run_once(ctx, spark, api, count, "tr", "evicted", query, r, last=r == RUNS - 1)
            results.append(out, row)
        # Spark's cleaner forgets outputs whenever the driver next collects its garbage, which may
        # fall between the reads: they count only if the counters were the same after them.
        for _ in range(3):
            counters = settled(spark)
            scraped, shown = prometheus(sc.uiWebUrl), tab(sc.uiWebUrl)
            if without_decisions(trspark.status(spark)) == without_decisions(counters):
                break
    finally:
        session.stop(spark, work_dir)
    rows = results.read(out)
    (log,) = glob.glob(str(log_dir / "*"))
    report = trspark.report(log)
    print("bench CSV:", [(r.executors_killed, r.backups_count, r.backups_bytes, r.tasks_recomputed) for r in rows])
    print("trspark.status:", counters)
    print("report:", report.text())

    assert all(r.result_ok for r in rows), [r.error for r in rows]
    assert not any(r.plugin_fallback for r in rows)
    # Prometheus, the UI tab and trspark.status: one set of numbers. The engine's decisions go on
    # with its clock ticks after the job, so the tab, read later, may show more, never fewer.
    settled_counts = without_decisions(counters)
    assert {k: int(scraped[k]) for k in counters if k != "engine_decisions"} == settled_counts
    assert {k: v for k, v in shown.items() if k != "engine_decisions"} == settled_counts
    assert shown["engine_decisions"] >= counters["engine_decisions"]
    # The bench CSV: one kill a run, its backups and bytes summing to the application's.
    kills = sum(r.executors_killed for r in rows)
    assert kills == RUNS
    assert sum(r.backups_count for r in rows) == counters["backups_finished"] == len(report.backups)
    assert sum(r.backups_local for r in rows) == counters["backups_to_peers"]
    assert sum(r.backups_remote for r in rows) == counters["backups_to_remote"]
    assert sum(r.backups_bytes for r in rows) == counters["bytes_to_peers"] + counters["bytes_to_remote"] \
        == sum(report.backup_bytes)
    for column in ("notices", "executors_drained", "executors_released"):
        assert sum(getattr(r, column) for r in rows) == counters[column]
    # The event log's report: the same kills, restores, losses and re-runs.
    assert report.kills == kills
    assert report.outputs_restored == counters["outputs_restored"]
    assert report.outputs_lost == counters["outputs_lost"]
    assert report.recomputed_tasks == counters["map_tasks_rerun"]
