"""Executor pools live on ``local-trcluster``: each executor reads its pool from its own imitated
cloud metadata endpoint (``{executorId}`` in ``spark.trspark.notice.url``) or from
``TRSPARK_POOL``, and the engine's ``ExecutorAdded`` carries that pool before the executor's first
task; ``efm`` then copies the spot executors' map outputs to the on-demand one.

The live case uses AWS's metadata (whose rebalance recommendation it also carries); the watchers
read GCP's and Azure's the same way, and ``test_pool_detection`` runs each cloud's watcher in the
JVM against its imitated endpoint."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from live_app import read_trace

from jobs.harness.notice_endpoints import NoticeServer
from jobs.tpcds.session import forget_local_dirs
from trspark.reporting import summarize

pytestmark = pytest.mark.spark


@contextmanager
def live_cluster(executors: int, settings: dict[str, Any], spark_settings: dict[str, str] | None = None,
                 ) -> Iterator[tuple[Any, Path]]:
    """A SparkSession on ``local-trcluster[executors,1,1024]`` with trspark ``settings`` (options of
    ``trspark.spark_conf``) and further ``spark_settings``, and the file its engine traces events to."""
    from pyspark.sql import SparkSession

    import trspark
    from jobs.tpcds.session import spark_home

    os.environ.setdefault("SPARK_HOME", str(spark_home()))
    with tempfile.TemporaryDirectory(prefix="trspark-live-pools-") as tmp:
        trace = Path(tmp) / "trace.jsonl"
        # The engine's interpreter, wrapped to record its events (TRSPARK_TRACE): the py4j JVM may
        # predate this module, so its environment cannot carry the setting.
        traced = Path(tmp) / "python-traced"
        traced.write_text(f'#!/bin/sh\nexport TRSPARK_TRACE="{trace}"\nexec "{sys.executable}" "$@"\n')
        traced.chmod(0o755)
        # A generous engine.timeout: a fallback must not come from the loaded machine.
        conf = trspark.spark_conf(remote_path=(Path(tmp) / "backups").as_uri(), python=str(traced),
                                  **{"engine_timeout": 30, **settings})
        builder = (SparkSession.builder.master(f"local-trcluster[{executors},1,1024]").appName("trspark-live-pools")
                   .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                   .config("spark.local.dir", str(Path(tmp) / "local"))
                   .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
                   .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "180s"))
        # An earlier session's settings carry over in this py4j JVM: no event log unless asked for.
        for key, value in {**conf, "spark.eventLog.enabled": "false", **(spark_settings or {})}.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        try:
            yield spark, trace
        finally:
            spark.stop()
            forget_local_dirs(spark.sparkContext)


def engine_events(trace: Path) -> list[dict[str, Any]]:
    return [e for e in read_trace(trace) if "seq" in e]


def pools_seen_first(events: list[dict[str, Any]]) -> dict[str, str]:
    """Each executor's pool as the engine knew it when the executor's first task started."""
    pools: dict[str, str] = {}
    first: dict[str, str] = {}
    for event in events:
        if event["type"] == "ExecutorAdded":
            pools[event["executor_id"]] = event["pool"]
        elif event["type"] == "TaskStarted" and event["executor_id"] not in first:
            first[event["executor_id"]] = pools.get(event["executor_id"], "(not announced)")
    return first


def shuffle_job(spark: Any) -> int:
    rdd = spark.sparkContext.parallelize(range(6000), 12).map(lambda x: (x % 97, x))
    return int(rdd.reduceByKey(lambda a, b: a + b).map(lambda kv: kv[1]).sum())


def test_each_executor_takes_its_pool_from_its_own_metadata() -> None:
    from tests.jvm_gateway import wait_for

    with NoticeServer() as server:
        server.set_pool("ondemand", vm="vm-0")  # executor 0 is on-demand, the others spot
        settings = dict(mode="efm", notice_source="aws", notice_url=server.url + "/vm-{executorId}",
                        pool_lifetimes={"ondemand": "stable", "spot": "exponential:mean=600"})
        with tempfile.TemporaryDirectory(prefix="trspark-live-pools-log-") as logs:
            event_log = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": Path(logs).as_uri()}
            with live_cluster(3, settings, event_log) as (spark, trace):
                assert shuffle_job(spark) == sum(range(6000))
                status = spark.sparkContext._jvm.org.apache.spark.trspark.TRStatus
                wait_for(lambda: status.stat("backups_local") > 0, what="efm copies to the on-demand executor", timeout=30)
                first = pools_seen_first(engine_events(trace))
                # A rebalance recommendation for executor 1 reaches the engine.
                server.post_rebalance(vm="vm-1")
                wait_for(lambda: [e["executor_id"] for e in engine_events(trace) if e["type"] == "ExecutorRebalance"] == ["1"],
                         what="ExecutorRebalance for executor 1", timeout=30)
            # `trspark report` bills each executor's hours to the pool it reported.
            report = summarize(next(Path(logs).iterdir()), prices={"ondemand": 1.0, "spot": 0.3})
    assert first == {"0": "ondemand", "1": "spot", "2": "spot"}
    assert {e.executor_id: e.pool for e in report.executors.values()} == first
    assert set(report.vm_hours()) == {"ondemand", "spot"} and report.cost() is not None


@pytest.mark.parametrize("mode", ["always", "never"])
def test_the_modes_without_the_engine_bill_each_executor_to_its_own_pool(mode: str) -> None:
    with NoticeServer() as server:
        server.set_pool("ondemand", vm="vm-0")
        settings = dict(mode=mode, notice_source="aws", notice_url=server.url + "/vm-{executorId}")
        with tempfile.TemporaryDirectory(prefix="trspark-live-pools-log-") as logs:
            event_log = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": Path(logs).as_uri()}
            with live_cluster(2, settings, event_log) as (spark, _trace):
                assert shuffle_job(spark) == sum(range(6000))
            report = summarize(next(Path(logs).iterdir()), prices={"ondemand": 1.0, "spot": 0.3})
    assert {e.executor_id: e.pool for e in report.executors.values()} == {"0": "ondemand", "1": "spot"}
    assert set(report.vm_hours()) == {"ondemand", "spot"} and report.cost() is not None


def test_the_environment_variable_wins_over_the_metadata() -> None:
    from tests.jvm_gateway import wait_for

    with NoticeServer() as server:  # every VM answers spot
        settings = dict(mode="tr", notice_source="gcp", notice_url=server.url + "/vm-{executorId}",
                        pool_lifetimes={"reserved": "stable"})
        with live_cluster(2, settings, {"spark.executorEnv.TRSPARK_POOL": "reserved"}) as (spark, trace):
            assert shuffle_job(spark) == sum(range(6000))
            wait_for(lambda: any(e["type"] == "JobEnded" for e in engine_events(trace)), what="JobEnded", timeout=30)
            first = pools_seen_first(engine_events(trace))
    assert first == {"0": "reserved", "1": "reserved"}


def test_a_byte_price_stops_the_copies_the_same_job_makes_without_one() -> None:
    from tests.jvm_gateway import wait_for

    backups, priced = {}, {}
    for price in (0.0, 1e9):  # 1e9 core-s/GB: even a KB-sized output's copy costs more than any re-run
        with NoticeServer() as server:
            server.set_pool("ondemand", vm="vm-0")
            settings = dict(mode="tr", duplication=False, notice_source="aws", notice_url=server.url + "/vm-{executorId}",
                            pool_lifetimes={"ondemand": "stable", "spot": "exponential:mean=5"}, backup_cost_per_gb=price)
            with live_cluster(3, settings) as (spark, trace):
                assert shuffle_job(spark) == sum(range(6000))
                # The job's end reaches the engine after its task ends, whose commands are traced first.
                wait_for(lambda: any(e["type"] == "JobEnded" for e in engine_events(trace)), what="JobEnded", timeout=30)
                lines = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
        backups[price] = [line for line in lines if line.get("type") == "Backup"]
        priced[price] = [line for line in lines if "backup_cost_per_gb" in json.dumps(line)]
    assert backups[0.0] and {b["source"] for b in backups[0.0]} <= {"1", "2"}  # spot outputs only
    assert backups[1e9] == [] and priced[1e9]  # the engine was told the price
