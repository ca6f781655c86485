"""Lifetime history from a live application: executors SIGKILLed at Weibull-drawn lifetimes on
``local-trcluster``, the plugin's engine writing to Azure Blob storage (Azurite). Every kill is an
observed lifetime of the right length, every survivor a censored one. The three-application
experiment (fit within 20 % of the true mean) is ``bench/history_apps.py``."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_chaos import wait_for

from jobs.harness.chaos import EvictionInjector
from jobs.harness.executors import driver_pid
from jobs.tpcds.session import forget_local_dirs
from trspark.live.history import HistoryStore, fit_lifetime

TRUTH = "weibull:shape=3,scale=15"  # mean 13.4 s: several kills in a short application
APP_SECONDS = 40.0
MAX_KILLS = 4
POOL = "live-test"


@pytest.fixture
def azure_history(azurite: str) -> Iterator[str]:
    """``abfs://history/live``, with the connection string in the environment the driver JVM and
    its engine process inherit (set before the module's JVM starts)."""
    from azure.storage.blob import BlobServiceClient

    client = BlobServiceClient.from_connection_string(azurite)
    if not client.get_container_client("history").exists():
        client.create_container("history")
    saved = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    os.environ["AZURE_STORAGE_CONNECTION_STRING"] = azurite
    try:
        yield "abfs://history/live"
    finally:
        if saved is None:
            os.environ.pop("AZURE_STORAGE_CONNECTION_STRING", None)
        else:
            os.environ["AZURE_STORAGE_CONNECTION_STRING"] = saved


def start_session(url: str, local_dir: str) -> Any:
    from pyspark.sql import SparkSession

    import trspark
    from jobs.tpcds.session import spark_home

    os.environ.setdefault("SPARK_HOME", str(spark_home()))
    builder = (SparkSession.builder.master("local-trcluster[3,1,1024]").appName("trspark-live-history")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.local.dir", local_dir)
               .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
               .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "180s"))
    settings = trspark.spark_conf(mode="tr", lifetime="exponential:mean=600", history_url=url, pool=POOL,
                                  remote_path=Path(local_dir, "backups").as_uri(), engine_timeout=30)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


@pytest.mark.spark
@pytest.mark.azurite
def test_live_application_records_each_kill_and_censors_survivors(azure_history: str) -> None:
    with tempfile.TemporaryDirectory(prefix="trspark-live-history-") as tmp:
        spark = start_session(azure_history, tmp)
        try:
            sc = spark.sparkContext
            app_id = sc.applicationId
            born: dict[str, float] = {}
            injector: EvictionInjector | None = None

            def registered(executor_id: str) -> bool:
                listed = executor_id in sc._jsc.sc().getExecutorIds().mkString(",").split(",")
                if listed and injector is not None:
                    born.setdefault(executor_id, injector.elapsed())
                return listed

            # At most MAX_KILLS: on a loaded machine a job outlasts many lifetimes, and unbounded kills
            # would keep the last job from ever finishing.
            injector = EvictionInjector(driver_pid(sc), model=TRUTH, rng=7, min_alive=1, registered=registered,
                                        max_kills=MAX_KILLS)
            # Registered during start-up: the injector counts their lives from its own start.
            first = set(sc._jsc.sc().getExecutorIds().mkString(",").split(",")) - {""}
            with injector:
                while injector.elapsed() < APP_SECONDS:
                    pairs = sc.parallelize(range(600), 6).map(lambda x: (x % 6, x)).reduceByKey(lambda a, b: a + b)
                    assert sorted(pairs.collect()) == [(k, sum(range(k, 600, 6))) for k in range(6)]
            kills = {r.executor_id: r.t for r in injector.records}
            # Without the engine (it must connect within the plugin's 60 s) nothing is recorded.
            assert not sc._jvm.org.apache.spark.trspark.TRStatus.isFallenBack(), "the policy engine never started"
        finally:
            spark.stop()  # the engine censors the survivors and writes them
            forget_local_dirs(sc)
        assert len(kills) >= 2, f"too few kills to test with: {kills}"
        store = HistoryStore(azure_history)
        # The engine appends the survivors (censored) when it sees the end of the application.
        wait_for(lambda: any(r.app_id == app_id and not r.observed for r in store.load(POOL)), timeout=60.0,
                 what="the engine's censored records")
        mine = {r.executor_id: r for r in store.load(POOL) if r.app_id == app_id}
        evicted = {e: r.duration for e, r in mine.items() if r.observed}
        assert set(evicted) == set(kills)
        for executor_id, duration in evicted.items():
            lived = kills[executor_id] - born[executor_id]  # registration to SIGKILL, the injector's clock
            if executor_id in first:  # registered during start-up, counted by the injector from its start
                assert duration > lived - 3.0, (executor_id, duration, lived)
            else:
                assert abs(duration - lived) < 3.0, (executor_id, duration, lived)
        censored = [r for r in mine.values() if not r.observed]
        # A replacement that registers as the application stops is censored at 0 s: still a record.
        assert 1 <= len(censored) <= 3 and all(r.duration >= 0 for r in censored)
        assert fit_lifetime(mine.values(), "exponential:mean=600").events == len(kills)


ENDS_WITHOUT_STOP = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    import trspark

    history, events, local_dir = sys.argv[1:]
    builder = (SparkSession.builder.master("local-trcluster[2,1,1024]").appName("ends-without-stop")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.eventLog.enabled", "true").config("spark.eventLog.dir", events)
               .config("spark.local.dir", local_dir)
               .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
               .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "180s"))
    trspark.configure(builder, mode="tr", history_url=history, pool="ends", remote_path="file://" + local_dir + "/backups",
                  engine_timeout=30)
    sc = builder.getOrCreate().sparkContext
    pairs = sc.parallelize(range(600), 4).map(lambda x: (x % 4, 1)).reduceByKey(lambda a, b: a + b, 2)
    assert sorted(pairs.collect()) == [(k, 150) for k in range(4)]
    assert not sc._jvm.org.apache.spark.trspark.TRStatus.isFallenBack(), "the policy engine never started"
    # no spark.stop(): the JVM's shutdown hooks stop the cluster and then the SparkContext
""")


@pytest.mark.spark
def test_an_application_that_ends_without_stop_censors_its_executors_and_reports_no_kill(tmp_path: Path) -> None:
    from jobs.tpcds.session import spark_home
    from trspark.reporting import summarize

    history, events = tmp_path / "history", tmp_path / "events"
    events.mkdir()
    env = {**os.environ, "SPARK_HOME": str(spark_home())}
    ran = subprocess.run([sys.executable, "-c", ENDS_WITHOUT_STOP, str(history), events.as_uri(), str(tmp_path)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    records = HistoryStore(str(history)).load("ends")
    assert len(records) == 2 and not any(r.observed for r in records), records
    (log,) = events.iterdir()
    summary = summarize(log)
    assert len(summary.executors) == 2 and summary.kills == 0, summary.text()
