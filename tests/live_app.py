"""A running trspark application on ``local-trcluster`` for live tests: its Spark session
builder, its executors (alive, one or all killed), its counters, the driver's log file, the
engine's trace, and a two-stage job with known answers."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jvm_gateway import wait_for

from jobs.harness.executors import driver_pid

TIMEOUT = 120.0  # the shared machine is often heavily loaded


def trcluster_builder(name: str, executors: int, java_options: str) -> Any:
    """A ``SparkSession.Builder`` for ``local-trcluster[executors,1,1024]`` that waits for every executor."""
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(f"local-trcluster[{executors},1,1024]").appName(name)
        .config("spark.driver.extraJavaOptions", java_options)
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
        .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "180s")
    )


@contextmanager
def tr_session(root: Path, name: str, executors: int, lifetime: str) -> Iterator[tuple[Any, Path, Path]]:
    """``(spark, driver log, engine trace)`` of a ``tr``-mode session on ``local-trcluster`` whose
    engine believes ``lifetime``, with its files under ``root``; the session stops on exit."""
    from driver_log import driver_log

    import trspark

    java_options, log = driver_log(root)
    python, trace = traced_python(root)
    builder = trcluster_builder(name, executors, java_options)
    # A generous engine.timeout: a fallback must not come from the loaded machine.
    spark = trspark.configure(builder, mode="tr", lifetime=lifetime, python=str(python), engine_timeout=30,
                              remote_path=(root / "backups").as_uri()).getOrCreate()
    try:
        yield spark, log, trace
    finally:
        spark.stop()


def traced_python(folder: Path) -> tuple[Path, Path]:
    """(an interpreter for ``spark.trspark.python``, the trace file): this interpreter, with
    ``TRSPARK_TRACE`` set so that the engine appends every event and the commands it caused
    (the py4j JVM may predate the test, so its environment cannot carry the setting)."""
    trace = folder / "engine-trace.jsonl"
    python = folder / "python-traced"
    python.write_text(f'#!/bin/sh\nexport TRSPARK_TRACE="{trace}"\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    return python, trace


def read_trace(trace: Path, start: int = 0) -> list[dict[str, Any]]:
    """The engine's trace from byte ``start`` on: events (with ``seq``) and commands, in order."""
    if not trace.exists():
        return []
    with trace.open(encoding="utf-8") as f:
        f.seek(start)
        return [json.loads(line) for line in f.read().splitlines() if line.endswith("}")]


def slow_sums(sc: Any, rows: int, tasks: int, seconds: float) -> Any:
    """Sums by key (``x % 7``) of ``range(rows)`` over ``tasks`` map tasks of ``seconds`` each, 3 reducers.

    The map function is nested so it is pickled by value (executors cannot import tests).
    """

    def slow(index: int, part: Any) -> Any:
        import time

        time.sleep(seconds)  # the workload: a task that takes a while, so that kills land mid-job
        return ((x % 7, x) for x in part)

    return sc.parallelize(range(rows), tasks).mapPartitionsWithIndex(slow).reduceByKey(lambda a, b: a + b, 3)


def expected_sums(rows: int) -> dict[int, int]:
    return {k: sum(range(k, rows, 7)) for k in range(min(rows, 7))}


class LiveApp:
    def __init__(self, spark: Any, log: Path | None = None) -> None:
        self.spark = spark
        self.sc = spark.sparkContext
        self.log = log
        self.status = self.sc._jvm.org.apache.spark.trspark.TRStatus

    def stat(self, name: str) -> int:
        return int(self.status.stat(name))

    def backups_ended(self) -> bool:
        """Whether every backup requested so far has committed, failed or been cancelled."""
        ended = ("backups_done", "backups_failed", "backups_cancelled")
        return self.stat("backups_requested") == sum(self.stat(name) for name in ended)

    def quiet(self) -> None:
        """Wait until every backup requested so far has ended."""
        wait_for(self.backups_ended, what="every requested backup to end", timeout=TIMEOUT)

    def alive(self) -> set[str]:
        ids = self.sc._jsc.sc().getExecutorIds()
        return {str(ids.apply(i)) for i in range(ids.size())}

    def wait_full(self, executors: int) -> None:
        wait_for(lambda: len(self.alive()) >= executors, what=f"{executors} executors registered", timeout=TIMEOUT)

    def driver_pid(self) -> int:
        return driver_pid(self.sc)

    def removed(self, executor_id: str) -> bool:
        """Spark's listeners have seen ``executor_id`` removed, so its loss reached the DAGScheduler.

        Spark drops a lost executor from its backend first, queues the loss for the DAGScheduler
        (which unregisters its map outputs), then tells the listeners. A job planned before the
        DAGScheduler's step would find the outputs still registered and, on one host, read the
        dead executor's shuffle files from its disk. The status store is the listeners' view
        (the REST API's, kept without the UI too).
        """
        summaries = self.sc._jsc.sc().statusStore().executorList(False)
        return any(summaries.apply(i).id() == executor_id and not summaries.apply(i).isActive()
                   for i in range(summaries.size()))

    def kill_executor(self, victim: Any) -> str:
        """SIGKILL ``victim`` (an executor process); return its id once the driver removed it."""
        os.kill(victim.pid, signal.SIGKILL)
        executor_id = str(victim.executor_id)
        wait_for(lambda: self.removed(executor_id), what=f"executor {executor_id} to be removed", timeout=TIMEOUT)
        return executor_id

    def kill_one_executor(self) -> str:
        """SIGKILL the executor with the lowest id; return its id once the driver removed it."""
        from jobs.harness.executors import find_executors

        return self.kill_executor(sorted(find_executors(self.driver_pid()), key=lambda e: e.executor_id)[0])

    def kill_all_executors(self) -> set[str]:
        """SIGKILL every executor at once; return their ids once the driver removed them all."""
        from jobs.harness.executors import find_executors

        victims = find_executors(self.driver_pid())
        for victim in victims:
            os.kill(victim.pid, signal.SIGKILL)
        ids = {str(v.executor_id) for v in victims}
        wait_for(lambda: all(self.removed(i) for i in ids), what="every killed executor removed", timeout=TIMEOUT)
        return ids
