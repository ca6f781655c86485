"""An exception in trspark's code on each path Spark calls synchronously (scheduler hooks, the
plugin's RPC endpoint, the listener) on a real ``local-trcluster[2,1,1024]`` in ``tr`` mode: the
job still gives the right answer, the driver logs one warning for the path, and the plugin falls
back to always-checkpoint.

First, kill storms: every executor SIGKILLed at once, twice within one job, on an engine that
believes executors live 600 s on average; the job's answer is right.

The failure is injected through the driver JVM's ``trspark.test.failIn`` system property (a
test-only hook, see ``Guard.scala``). One application serves every path: between paths the
fallback is undone with the ``TRStatus.setBuiltin`` test hook. The driver's warnings go to a log
file of this test's own log4j2 configuration, read after each path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from driver_log import driver_log, log_lines
from jvm_gateway import wait_for
from live_app import TIMEOUT, LiveApp, expected_sums, slow_sums, trcluster_builder

pytestmark = pytest.mark.spark

EXECUTORS = 2
FAIL_IN = "trspark.test.failIn"


class App(LiveApp):
    def __init__(self, spark: Any, log: Path) -> None:
        super().__init__(spark, log)
        self.system = self.sc._jvm.java.lang.System

    def warnings(self, path: str) -> list[str]:
        return [line for line in log_lines(self.log) if line.startswith("WARN") and f"internal error in {path} " in line]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    import trspark

    root = tmp_path_factory.mktemp("faults")
    java_options, log = driver_log(root)
    builder = trcluster_builder("trspark-faults", EXECUTORS, java_options)
    spark = trspark.configure(builder, mode="tr", lifetime="exponential:mean=600",
                              remote_path=(root / "backups").as_uri()).getOrCreate()
    try:
        yield App(spark, log)
    finally:
        spark.sparkContext._jvm.java.lang.System.clearProperty(FAIL_IN)
        spark.stop()


def run_job(app: App) -> dict[int, int]:
    """Sums by key of a two-stage RDD job whose partition 0 fails its first attempt (a task failure
    Spark retries). The function is nested so it is pickled by value (executors cannot import tests)."""

    def flaky(index: int, rows: Iterator[int]) -> Iterator[tuple[int, int]]:
        from pyspark import TaskContext

        context = TaskContext.get()
        if index == 0 and context is not None and context.attemptNumber() == 0:
            raise RuntimeError("first attempt of partition 0 fails on purpose")
        return ((x % 7, x) for x in rows)

    rdd = app.sc.parallelize(range(6000), 4).mapPartitionsWithIndex(flaky).reduceByKey(lambda a, b: a + b, 3)
    return dict(rdd.collect())


EXPECTED = expected_sums(6000)
PATHS = [
    "TRTaskScheduler.executorLost",
    "TRTaskScheduler.handleFailedTask",
    "HintedScheduling.resourceOffers",
    "HintedScheduling.arrange",
    "TaskDuplication.resourceOffers",
    "TRDriverPlugin.receive",
    "TRListener",
]


def test_kill_storms_lose_no_job(app: App) -> None:
    """Runs first, while the engine still sees every event. The engine believes executors live 600 s on average; here every executor is
    killed at once, twice, within a job, and the job's answer is right."""
    import threading

    wait_for(lambda: len(app.alive()) >= EXECUTORS, what="every executor registered", timeout=TIMEOUT)
    app.status.setBuiltin("never", "both", 0.0)  # the engine decides (a previous test may have fallen back)
    result: dict[str, Any] = {}
    # 16 map tasks of about 2 s each: long enough for two kill storms.
    job = threading.Thread(target=lambda: result.update(answer=dict(slow_sums(app.sc, 6000, 16, 2.0).collect())))
    job.start()
    storms = 0
    for _ in range(2):
        # A storm once the stage has finished some tasks on the current executors (so there is
        # something to lose) and every executor is up.
        wait_for(lambda: not job.is_alive() or (len(app.alive()) >= EXECUTORS and any(
            (info := app.sc.statusTracker().getStageInfo(s)) is not None and info.numCompletedTasks > 0
            for s in app.sc.statusTracker().getActiveStageIds())), what="a running stage with output", timeout=TIMEOUT)
        if not job.is_alive():
            break
        app.kill_all_executors()
        storms += 1
    job.join(timeout=600)
    assert result.get("answer") == EXPECTED
    assert storms == 2


@pytest.mark.parametrize("path", PATHS)
def test_an_exception_on_a_synchronous_path_is_caught_once_and_falls_back(app: App, path: str) -> None:
    wait_for(lambda: len(app.alive()) >= EXECUTORS, what="every executor registered", timeout=TIMEOUT)
    app.status.setBuiltin("never", "both", 0.0)  # undo the previous path's fallback: the engine decides
    assert not app.status.isFallenBack()
    errors_before = int(app.status.stat("internal_errors"))
    app.system.setProperty(FAIL_IN, path)
    try:
        if path == "TRTaskScheduler.executorLost":
            app.kill_one_executor()
        assert run_job(app) == EXPECTED
        wait_for(app.status.isFallenBack, what=f"the fallback after a failure in {path}", timeout=TIMEOUT)
    finally:
        app.system.clearProperty(FAIL_IN)
    assert int(app.status.stat("internal_errors")) > errors_before
    wait_for(lambda: bool(app.warnings(path)), what=f"the warning for {path}")
    warnings = app.warnings(path)
    assert len(warnings) == 1, warnings
    assert re.search(r"falling back to always-checkpoint .* for the rest of this application", warnings[0])
