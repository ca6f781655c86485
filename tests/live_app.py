"""A running trspark application on ``local-trcluster`` for live tests: its Spark session
builder, its executors (alive, one killed), its counters and the driver's log file."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from jvm_gateway import wait_for

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


class LiveApp:
    def __init__(self, spark: Any, log: Path) -> None:
        self.spark = spark
        self.sc = spark.sparkContext
        self.log = log
        self.status = self.sc._jvm.org.apache.spark.trspark.TRStatus

    def stat(self, name: str) -> int:
        return int(self.status.stat(name))

    def alive(self) -> set[str]:
        ids = self.sc._jsc.sc().getExecutorIds()
        return {str(ids.apply(i)) for i in range(ids.size())}

    def driver_pid(self) -> int:
        return int(self.sc._jvm.java.lang.ProcessHandle.current().pid())

    def kill_one_executor(self) -> str:
        """SIGKILL the executor with the lowest id; return its id once the driver removed it."""
        from jobs.harness.executors import find_executors

        victim = sorted(find_executors(self.driver_pid()), key=lambda e: e.executor_id)[0]
        os.kill(victim.pid, signal.SIGKILL)
        wait_for(lambda: victim.executor_id not in self.alive(), what=f"executor {victim.executor_id} to be removed",
                 timeout=TIMEOUT)
        return str(victim.executor_id)
