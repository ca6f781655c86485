"""A termination notice that is not carried out, live: an executor on ``local-trcluster`` gets a
SIGPWR notice and is never killed. With ``notice.release=false`` the engine drains it, and once it
has outlived its notice (``trspark.engine.views.notice_expired``) lifts the drain: Spark gives it
tasks again."""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_chaos import wait_for

from jobs.harness.executors import driver_pid, find_executors
from jobs.tpcds.session import forget_local_dirs

WINDOW = 2.0


@pytest.fixture(scope="module")
def session() -> Iterator[tuple[Any, Path]]:
    from pyspark.sql import SparkSession

    import trspark
    from jobs.tpcds.session import spark_home

    os.environ.setdefault("SPARK_HOME", str(spark_home()))
    with tempfile.TemporaryDirectory(prefix="trspark-notice-expiry-") as tmp:
        trace = Path(tmp) / "trace.jsonl"
        # The engine's interpreter, wrapped to record its events and commands (TRSPARK_TRACE).
        traced = Path(tmp) / "python-traced"
        traced.write_text(f'#!/bin/sh\nexport TRSPARK_TRACE="{trace}"\nexec "{sys.executable}" "$@"\n')
        traced.chmod(0o755)
        settings = trspark.spark_conf(mode="tr", remote_path=(Path(tmp) / "backups").as_uri(), notice_window=WINDOW,
                                      notice_release=False, period=1.0, python=str(traced))
        builder = (SparkSession.builder.master("local-trcluster[2,1,1024]").appName("trspark-notice-expiry")
                   .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                   .config("spark.local.dir", str(Path(tmp) / "local"))
                   .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
                   .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "180s"))
        for key, value in settings.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        try:
            yield spark, trace
        finally:
            spark.stop()
            forget_local_dirs(spark.sparkContext)


def _drains(trace: Path, executor_id: str) -> list[bool]:
    """For each SchedulingHints the engine sent, in order: does it drain ``executor_id``?"""
    if not trace.exists():
        return []
    lines = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [executor_id in line.get("drain", ()) for line in lines if line.get("type") == "SchedulingHints"]


def _executor_pids_of_tasks(sc: Any, tasks: int) -> set[int]:
    """The pids of the executor JVMs that ran the ``tasks`` tasks of one job (each a Python worker's ancestor)."""
    def ancestors(_: Any) -> list[int]:
        import time

        import psutil
        time.sleep(0.2)  # a task of some length, so that both executors get some
        return [p.pid for p in psutil.Process().parents()]

    return {pid for pids in sc.parallelize(range(tasks), tasks).map(ancestors).collect() for pid in pids}


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_an_executor_that_outlives_its_notice_is_drained_then_takes_tasks_again(session: tuple[Any, Path]) -> None:
    spark, trace = session
    sc = spark.sparkContext
    driver = driver_pid(sc)
    wait_for(lambda: len(find_executors(driver)) == 2, timeout=120.0, what="two executors")
    assert _executor_pids_of_tasks(sc, 4)  # every executor's Python worker is up
    victim = find_executors(driver)[0]
    os.kill(victim.pid, signal.SIGPWR)  # a notice WINDOW s ahead; nobody kills it
    wait_for(lambda: any(_drains(trace, victim.executor_id)), timeout=60.0, what="the drain of the noticed executor")
    # Outlived by as long as the notice gave (10 s at least): the engine lifts the drain.
    wait_for(lambda: not _drains(trace, victim.executor_id)[-1], timeout=90.0, what="the drain lifted")
    drains = _drains(trace, victim.executor_id)
    assert drains.index(True) < len(drains) - 1 - drains[::-1].index(False)  # drained first, then lifted
    wait_for(lambda: victim.pid in _executor_pids_of_tasks(sc, 8), timeout=120.0,
             what="a task on the executor that outlived its notice")
    assert victim.executor_id in {e.executor_id for e in find_executors(driver)}  # never released
