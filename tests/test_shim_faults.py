"""An exception in trspark's code on each path Spark calls synchronously (scheduler hooks, the
plugin's RPC endpoint, the listener) on a real ``local-trcluster[2,1,1024]`` in ``tr`` mode: the
job still gives the right answer, the driver logs one warning for the path, and the plugin falls
back to always-checkpoint.

First, kill storms on an engine that believes executors live 600 s on average: every executor
SIGKILLed at once, twice within one job; one worker slot's executor killed three times, then the
oldest and the youngest executor; a kill during a stage retry. Every job's answer is right.

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
        wait_for(lambda: not job.is_alive() or (len(app.alive()) >= EXECUTORS and active(
            app, lambda i: i.numCompletedTasks > 0)), what="a running stage with output", timeout=TIMEOUT)
        if not job.is_alive():
            break
        app.kill_all_executors()
        storms += 1
    job.join(timeout=600)
    assert result.get("answer") == EXPECTED
    assert storms == 2


def worker_of(pid: int) -> str:
    """The executor JVM's slot: the ``--worker-url`` of the local-cluster worker that launched it."""
    import psutil

    cmdline = psutil.Process(pid).cmdline()
    return cmdline[cmdline.index("--worker-url") + 1]


def kill(app: App, victim: Any) -> None:
    """SIGKILL ``victim`` and wait until the driver removed it and a replacement registered."""
    app.kill_executor(victim)
    app.wait_full(EXECUTORS)


def active(app: App, predicate: Any) -> bool:
    """Whether a running stage's ``SparkStageInfo`` satisfies ``predicate``."""
    tracker = app.sc.statusTracker()
    return any(info is not None and predicate(info) for info in map(tracker.getStageInfo, tracker.getActiveStageIds()))


def test_repeated_kills_of_one_slot_then_of_the_oldest_and_the_youngest_lose_no_job(app: App, tmp_path: Path) -> None:
    """Within one job, the executor of one worker slot is killed three times (each time its
    replacement on that slot once it has registered); then the oldest executor and the youngest.
    The reduce tasks hold until the last kill, however long replacements take to register."""
    import threading

    from jobs.harness.executors import find_executors

    app.wait_full(EXECUTORS)
    app.status.setBuiltin("never", "both", 0.0)
    result: dict[str, Any] = {}
    release = tmp_path / "release-the-reduce-tasks"
    sums = held(slow_sums(app.sc, 6000, 40, 1.5), release)
    job = threading.Thread(target=lambda: result.update(answer=dict(sums.collect())))
    job.start()
    slot = worker_of(find_executors(app.driver_pid())[0].pid)
    killed, during_job = [], []
    try:
        for _ in range(3):
            victim = next(e for e in find_executors(app.driver_pid()) if worker_of(e.pid) == slot)
            during_job.append(job.is_alive())
            kill(app, victim)
            killed.append(victim.executor_id)
        oldest = find_executors(app.driver_pid())[0]
        during_job.append(job.is_alive())
        kill(app, oldest)
        youngest = find_executors(app.driver_pid())[-1]
        during_job.append(job.is_alive())
        kill(app, youngest)
    finally:
        release.touch()
    job.join(timeout=600)
    assert result.get("answer") == EXPECTED
    assert len(set(killed)) == 3, killed  # three executors, one after another, on the same slot
    assert all(during_job), during_job  # every kill landed while the job ran


def held_reduce_sums(sc: Any, release: Path) -> Any:
    """Sums by key over 8 map tasks of 1 s, then 3 reduce tasks that each hold until the file
    ``release`` exists (at most 300 s). A reduce task re-run after its executor died must read
    the map outputs lost with the executors, so Spark retries the map stage; the test decides
    when the reduce tasks may finish, so no kill can come too late."""
    return held(slow_sums(sc, 6000, 8, 1.0), release)


def held(sums: Any, release: Path) -> Any:
    """``sums`` whose reduce tasks each hold until the file ``release`` exists (at most 300 s)."""
    path = str(release)

    def held_read(rows: Iterator[tuple[int, int]]) -> Iterator[tuple[int, int]]:
        import os
        import time

        deadline = time.monotonic() + 300.0
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)  # polling the test's release file, bounded by the deadline
        return iter(list(rows))

    return sums.mapPartitions(held_read)


def stage_attempts(app: App) -> set[tuple[int, int]]:
    """``(stage id, attempt)`` of every stage attempt Spark's status store has seen, finished ones too."""
    gateway = app.sc._gateway
    stages = app.sc._jsc.sc().statusStore().stageList(None, False, False, gateway.new_array(gateway.jvm.double, 0), None)
    return {(int(stages.apply(i).stageId()), int(stages.apply(i).attemptId())) for i in range(stages.size())}


def test_kills_during_a_stage_retry_lose_no_job(app: App, tmp_path: Path) -> None:
    """Every executor killed while the reduce stage runs makes its re-run reads fail and Spark
    retry the map stage; an executor is killed during that retry. The answer is right.

    Copies are throttled to 1 byte/s for this job, so none commits: the kills lose map outputs
    that have no backup yet, as a kill does before the copies finish. The executors that ran
    them are killed at the end, which ends the throttled copies."""
    import threading

    app.wait_full(EXECUTORS)
    app.status.setBuiltin("never", "both", 1.0)
    before = stage_attempts(app)
    release = tmp_path / "release-the-reduce-tasks"
    result: dict[str, Any] = {}
    job = threading.Thread(target=lambda: result.update(answer=dict(held_reduce_sums(app.sc, release).collect())))
    job.start()
    try:
        wait_for(lambda: active(app, lambda i: i.numTasks == 3 and i.numActiveTasks > 0),
                 what="the reduce stage running", timeout=TIMEOUT)
        # All at once: the engine's hints may have placed every map task on one executor.
        app.kill_all_executors()
        # The held reduce tasks keep a retried stage running until the release, so polling sees it.
        wait_for(lambda: active(app, lambda i: i.currentAttemptId >= 1 and i.numActiveTasks > 0),
                 what="a retried stage running", timeout=TIMEOUT)
        app.kill_one_executor()
    finally:
        release.touch()
        job.join(timeout=600)
        app.status.setBuiltin("never", "both", 0.0)
    app.kill_all_executors()
    app.wait_full(EXECUTORS)
    assert result.get("answer") == EXPECTED
    assert any(attempt >= 1 for _, attempt in stage_attempts(app) - before)


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


def test_after_the_fallback_the_engines_late_commands_are_ignored(app: App) -> None:
    # Answers to events sent before a fallback can arrive after it: they must not release an
    # executor, drain one with hints or start a duplicate that nothing will follow up.
    wait_for(lambda: len(app.alive()) >= EXECUTORS, what="every executor registered", timeout=TIMEOUT)
    victim = sorted(app.alive())[0]
    release = f'{{"type":"ReleaseExecutor","executor_id":"{victim}","reason":"test"}}'
    app.status.setBuiltin("always", "both", 0.0)  # what the fallback switches to
    try:
        released_before = int(app.status.stat("executors_released"))
        app.status.applyCommand(release)  # a release is counted before the kill is sent
        assert int(app.status.stat("executors_released")) == released_before
        assert victim in app.alive()
    finally:
        app.status.setBuiltin("never", "both", 0.0)
