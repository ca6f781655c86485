"""The engine's side of trspark's metrics on a real ``local-trcluster[3,1,1024]`` in ``tr`` mode.

The decision latency histogram fills as the engine acknowledges events, its commands reach the
UI tab's decision list, and killing the engine process turns the fallback gauge on and puts a
``TRFallback`` record in the event log.
"""

from __future__ import annotations

import glob
import sys
import urllib.request
from pathlib import Path

import psutil
import pytest
from test_observability_live import prometheus
from test_shim_live import TIMEOUT, wait_for

import trspark
from jobs.harness.executors import driver_pid

pytestmark = pytest.mark.spark


def command_line(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:  # exited, or a zombie not yet reaped
        return ""


def test_engine_latency_decisions_and_fallback_show_in_the_metrics(tmp_path: Path) -> None:
    from pyspark.sql import SparkSession

    from trspark.eventlog import read_events
    from trspark.live.shim import jar_path

    spark = (
        SparkSession.builder.master("local-trcluster[3,1,1024]")
        .appName("trspark-observability-engine")
        .config("spark.jars", jar_path())
        .config("spark.plugins", "org.apache.spark.trspark.TRSparkPlugin")
        .config("spark.trspark.mode", "tr")
        .config("spark.trspark.lifetime", "exponential:mean=30")
        .config("spark.trspark.python", sys.executable)
        .config("spark.trspark.engine.timeout", "30")  # a fallback must not come from the loaded machine
        .config("spark.trspark.remote.path", f"file://{tmp_path / 'backups'}")
        .config("spark.metrics.conf.*.sink.prometheusServlet.class", "org.apache.spark.metrics.sink.PrometheusServlet")
        .config("spark.metrics.conf.*.sink.prometheusServlet.path", "/metrics/prometheus")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", f"file://{tmp_path}")
        .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
        .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "180s")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    try:
        sc = spark.sparkContext
        rdd = sc.parallelize(range(20_000), 6).map(lambda x: (x % 53, x)).reduceByKey(lambda a, b: a + b, 3)
        assert len(rdd.collect()) == 53
        wait_for(lambda: trspark.status(spark)["engine_decisions"] > 0, what="acknowledged engine events")
        metrics = prometheus(sc.uiWebUrl)
        assert metrics["engine_decision_latency_us_count"] > 0
        assert metrics["engine_fallback"] == 0
        page = urllib.request.urlopen(f"{sc.uiWebUrl}/trspark/", timeout=TIMEOUT).read().decode()
        assert 'id="trspark-engine_decisions"' in page and "Engine decision latency" in page

        driver = psutil.Process(driver_pid(sc))
        engines = [p for p in driver.children(recursive=True) if "trspark.live" in command_line(p)]
        assert len(engines) == 1
        engines[0].kill()
        wait_for(lambda: prometheus(sc.uiWebUrl)["engine_fallback"] == 1, what="the fallback gauge")
        assert trspark.status(spark)["engine_fallback"] == 1
    finally:
        spark.stop()
    logs = glob.glob(str(tmp_path / "eventlog_v2_*"))
    assert len(logs) == 1
    fallbacks = [e for e in read_events(logs[0]) if e["Event"].endswith(".TRFallback")]
    assert len(fallbacks) == 1 and "engine" in fallbacks[0]["reason"]
