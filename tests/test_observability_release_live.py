"""``executors_released`` on a real ``local-trcluster[2,1,1024]``: it counts the executors that left.

The engine's ``ReleaseExecutor`` commands are applied as the engine would send them: one for an
executor Spark does not know (gone before the command came), which Spark refuses, and one for a
live executor, which goes. The counter, the event log's ``TRExecutorRelease`` records and
``trspark report`` must all count the one that went.
"""

from __future__ import annotations

import glob
from pathlib import Path

import pytest
from live_app import LiveApp, trcluster_builder
from test_shim_live import wait_for

import trspark

pytestmark = pytest.mark.spark


def test_a_release_spark_refuses_is_not_counted_and_the_report_agrees(tmp_path: Path) -> None:
    from trspark.eventlog import read_events
    from trspark.reporting import summarize

    builder = (trcluster_builder("trspark-observability-release", 2, "")
               .config("spark.eventLog.enabled", "true").config("spark.eventLog.dir", f"file://{tmp_path}"))
    spark = trspark.configure(builder, mode="always", remote_path=(tmp_path / "backups").as_uri()).getOrCreate()
    try:
        app = LiveApp(spark)
        app.wait_full(2)
        status = spark.sparkContext._jvm.org.apache.spark.trspark.TRStatus  # noqa: SLF001 - py4j test hook
        status.setBuiltin("never", "remote", 0.0)  # engine commands apply only outside always-checkpoint
        status.applyCommand('{"type":"ReleaseExecutor","executor_id":"gone","reason":"test"}')
        victim = sorted(app.alive())[0]
        status.applyCommand(f'{{"type":"ReleaseExecutor","executor_id":"{victim}","reason":"test"}}')
        wait_for(lambda: victim not in app.alive(), what=f"executor {victim} to be released")
        counted = trspark.status(spark)["executors_released"]
    finally:
        spark.stop()
    logs = glob.glob(str(tmp_path / "*-*"))
    assert len(logs) == 1, logs
    released = [e["executorId"] for e in read_events(logs[0]) if e["Event"].endswith(".TRExecutorRelease")]
    assert released == [victim]
    assert counted == summarize(logs[0]).releases == 1
