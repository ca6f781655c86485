"""The plugin on a real ``local-trcluster[3,1,1024]``: backups, kills, re-pointing, no aborts.

One cluster for the whole module (start-up takes ~30 s here). The built-in policy is switched
between tests through the ``TRStatus.setBuiltin`` test hook (``never`` / ``always``, remote or
peer targets, a bytes/s throttle), so each test sees one policy while sharing the executors.

"Re-runs" are counted from Spark's own REST API (the tasks of the map stage of a second job
over the same shuffle, see :func:`reruns_of`), not from the plugin's counters.
"""

from __future__ import annotations

import glob
import json
import re
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from jvm_gateway import wait_for as wait_until
from live_app import LiveApp

pytestmark = pytest.mark.spark

EXECUTORS = 3
TIMEOUT = 120.0  # the shared machine is often heavily loaded


# The shared wait, with this module's timeout; its conditions ask Spark's REST API, so every 0.2 s.
wait_for = partial(wait_until, timeout=TIMEOUT, every=0.2)


class Cluster(LiveApp):
    """The SparkSession plus helpers to inspect and kill its executors, and Spark's REST API."""

    def __init__(self, spark: Any, root: Path) -> None:
        super().__init__(spark)
        self.root = root
        self.app_id = self.sc.applicationId

    def rest(self, path: str) -> Any:
        url = f"{self.sc.uiWebUrl}/api/v1/applications/{self.app_id}/{path}"
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            return json.load(response)

    def kill(self, executor_id: str) -> None:
        """SIGKILL ``executor_id``'s JVM and wait until the driver removed it (:meth:`LiveApp.removed`)."""
        from jobs.harness.executors import find_executors

        victims = [e for e in find_executors(self.driver_pid()) if e.executor_id == executor_id]
        assert victims, f"no process for executor {executor_id}"
        self.kill_executor(victims[0])

    def full_strength(self) -> None:
        self.wait_full(EXECUTORS)

    def job_stages(self, group: str) -> list[int]:
        tracker = self.sc.statusTracker()
        return sorted(s for j in tracker.getJobIdsForGroup(group) for s in tracker.getJobInfo(j).stageIds)

    def map_tasks(self, stage_id: int) -> list[dict[str, Any]]:
        """Successful tasks of every attempt of ``stage_id``."""
        tasks = []
        for attempt in self.rest(f"stages/{stage_id}"):
            listed = self.rest(f"stages/{stage_id}/{attempt['attemptId']}/taskList?length=10000")
            tasks += [dict(t, stageAttempt=attempt["attemptId"]) for t in listed if t["status"] == "SUCCESS"]
        return tasks


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    from pyspark.sql import SparkSession

    from trspark.live.shim import jar_path

    root = tmp_path_factory.mktemp("backups")
    spark = (
        SparkSession.builder.master(f"local-trcluster[{EXECUTORS},1,1024]")
        .appName("trspark-shim-live")
        .config("spark.jars", jar_path())
        .config("spark.plugins", "org.apache.spark.trspark.TRSparkPlugin")
        .config("spark.trspark.mode", "always")
        .config("spark.trspark.remote.path", f"file://{root}")
        .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
        .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "180s")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    try:
        yield Cluster(spark, root)
    finally:
        spark.stop()


def shuffled(cluster: Cluster, rows: int = 60_000, payload: int = 0) -> Any:
    """A two-stage RDD: 6 map tasks (2 per executor) writing a shuffle of every row, 4 reducers."""

    def row(x: int) -> tuple[int, tuple[int, bytes]]:
        import random

        # Incompressible padding (shuffle files are lz4-compressed): sizes the map outputs.
        return x % 997, (x, random.Random(x).randbytes(payload))

    # partitionBy, not reduceByKey: no map-side combining, so every row (and its padding) is
    # shuffled; the reduceByKey after it keeps the partitioner and adds no shuffle.
    return (
        cluster.sc.parallelize(range(rows), 6)
        .map(row)
        .partitionBy(4)
        .mapValues(lambda v: v[0])
        .reduceByKey(lambda a, b: a + b, numPartitions=4)
    )


def expected_sums(rows: int) -> dict[int, int]:
    sums: dict[int, int] = {}
    for x in range(rows):
        sums[x % 997] = sums.get(x % 997, 0) + x
    return sums


def run_job(cluster: Cluster, rdd: Any, group: str) -> dict[int, int]:
    """Run ``rdd.collect()`` in job group ``group``; return once the REST API shows it finished."""
    cluster.sc.setJobGroup(group, group)
    try:
        answer = dict(rdd.collect())
    finally:
        cluster.sc.setJobGroup("", "")
    # The status store behind the REST API is fed asynchronously by the listener bus.
    wait_for(
        lambda: (jobs := [j for j in cluster.rest("jobs") if j.get("jobGroup") == group])
        and all(j["status"] != "RUNNING" for j in jobs),
        what=f"job group {group} in the REST API",
    )
    return answer


def kill_and_rerun(cluster: Cluster, mode: str, targets: str) -> tuple[dict[int, int], list[int], int]:
    """First job writes the shuffle, wait for its backups, kill a map executor, run again.

    Returns the second job's answer, the map partitions it re-ran, and the partitions the
    victim had written.
    """
    cluster.full_strength()
    cluster.status.setBuiltin(mode, targets, 0.0)
    tag = f"{mode}-{targets}-{time.monotonic_ns()}"
    rdd = shuffled(cluster)
    done_before = cluster.stat("backups_done")
    assert run_job(cluster, rdd, f"first-{tag}") == expected_sums(60_000)
    map_stage = cluster.job_stages(f"first-{tag}")[0]
    first = cluster.map_tasks(map_stage)
    if mode == "always":
        wait_for(lambda: cluster.stat("backups_done") - done_before >= len(first), what="6 backups")
    victim = first[0]["executorId"]
    victim_parts = sorted(t["index"] for t in first if t["executorId"] == victim)
    cluster.kill(victim)
    answer = run_job(cluster, rdd, f"second-{tag}")
    return answer, reruns_of(cluster, f"second-{tag}"), len(victim_parts)


def reruns_of(cluster: Cluster, group: str) -> list[int]:
    """Map partitions a job re-ran: the tasks of its (new) stage for the reused shuffle.

    Spark forgets a job's stages when it ends, so a later job reading the same shuffle gets a
    new map stage: SKIPPED with no tasks when every output is available, else running exactly
    the missing partitions.
    """
    map_stage = cluster.job_stages(group)[0]
    return sorted(t["index"] for t in cluster.map_tasks(map_stage))


def test_results_equal_without_plugin_semantics(cluster: Cluster) -> None:
    """A multi-stage PySpark job and a Spark SQL query give the exact answers."""
    cluster.status.setBuiltin("always", "remote", 0.0)
    assert run_job(cluster, shuffled(cluster), "answers") == expected_sums(60_000)
    spark = cluster.spark
    spark.range(0, 200_000, numPartitions=6).selectExpr("id % 101 AS k", "id AS v").createOrReplaceTempView("t")
    rows = spark.sql("SELECT k, sum(v) AS s, count(*) AS n FROM t GROUP BY k ORDER BY s DESC LIMIT 5").collect()
    ks = {k: sum(range(k, 200_000, 101)) for k in range(101)}
    top = sorted(ks.items(), key=lambda kv: -kv[1])[:5]
    assert [(r.k, r.s) for r in rows] == top
    assert all(r.n in (1980, 1981) for r in rows)


def test_backup_counters_split_peer_and_remote_copies_and_count_their_bytes(cluster: Cluster) -> None:
    """``backups_local`` / ``backups_remote`` count committed copies, ``backups_bytes`` their index+data.

    Expected bytes come from Spark's own task metrics: a map output is its data file
    (``bytesWritten``) plus an index of 8 bytes per reduce partition + 8.
    """
    counters = ("backups_done", "backups_local", "backups_remote", "backups_bytes")
    # Start from a quiet plugin: every backup requested so far has ended.
    cluster.quiet()
    for targets, counter in (("remote", "backups_remote"), ("local", "backups_local")):
        cluster.full_strength()
        cluster.status.setBuiltin("always", targets, 0.0)
        before = {name: cluster.stat(name) for name in counters}
        group = f"counters-{targets}"
        assert run_job(cluster, shuffled(cluster), group) == expected_sums(60_000)
        maps = cluster.map_tasks(cluster.job_stages(group)[0])
        goal = before[counter] + len(maps)
        wait_for(lambda c=counter, g=goal: cluster.stat(c) >= g, what=f"{len(maps)} {targets} backups")
        delta = {name: cluster.stat(name) - before[name] for name in counters}
        output_bytes = sum(t["taskMetrics"]["shuffleWriteMetrics"]["bytesWritten"] + 8 * (4 + 1) for t in maps)
        assert delta == {
            "backups_done": len(maps),
            "backups_local": len(maps) if targets == "local" else 0,
            "backups_remote": len(maps) if targets == "remote" else 0,
            "backups_bytes": output_bytes,
        }
    cluster.status.setBuiltin("always", "remote", 0.0)


def test_remote_backups_prevent_recomputation(cluster: Cluster) -> None:
    repointed = cluster.stat("outputs_repointed")
    answer, reruns, victim_outputs = kill_and_rerun(cluster, "always", "remote")
    assert answer == expected_sums(60_000)
    assert victim_outputs >= 1
    assert reruns == [], f"map partitions re-run despite remote backups: {reruns}"
    assert cluster.stat("outputs_repointed") - repointed >= victim_outputs


def test_peer_backups_prevent_recomputation(cluster: Cluster) -> None:
    answer, reruns, victim_outputs = kill_and_rerun(cluster, "always", "local")
    assert answer == expected_sums(60_000)
    assert victim_outputs >= 1
    assert reruns == [], f"map partitions re-run despite peer backups: {reruns}"


def test_without_backups_the_kill_costs_recomputation(cluster: Cluster) -> None:
    answer, reruns, victim_outputs = kill_and_rerun(cluster, "never", "remote")
    assert answer == expected_sums(60_000)
    assert len(reruns) == victim_outputs >= 1, stages_of_last_job(cluster)


def stages_of_last_job(cluster: Cluster) -> str:
    """Every attempt of every stage of the newest job, as the REST API lists it: what a failed
    count of re-runs is read against."""
    job = max(cluster.rest("jobs"), key=lambda j: j["jobId"])
    return "; ".join(f"stage {a['stageId']} attempt {a['attemptId']} {a['status']}: {a['numCompleteTasks']}/{a['numTasks']} tasks"
                     for stage_id in job["stageIds"] for a in cluster.rest(f"stages/{stage_id}"))


def test_backup_cut_off_by_a_kill_is_never_used(cluster: Cluster) -> None:
    """Throttled backups; kill a source mid-copy: its partial copy is not committed nor read."""
    cluster.full_strength()
    cluster.status.setBuiltin("always", "remote", 150_000.0)  # ~2 MB outputs take ~14 s each
    rows = 30_000
    rdd = shuffled(cluster, rows=rows, payload=400)
    try:
        assert run_job(cluster, rdd, "cutoff-first") == expected_sums(rows)
        in_progress = wait_for(
            lambda: glob.glob(f"{cluster.root}/{cluster.app_id}/*/*/.shuffle_*.data.*.trspark-tmp"),
            what="a backup in progress",
        )
        match = re.search(r"\.shuffle_(\d+)_(\d+)_0\.data\.", in_progress[0])
        assert match
        shuffle_id, map_id = match.groups()
        map_stage = cluster.job_stages("cutoff-first")[0]
        first = cluster.map_tasks(map_stage)
        victim = next(t["executorId"] for t in first if str(t["taskId"]) == map_id)
        cluster.kill(victim)
    finally:
        cluster.status.setBuiltin("never", "remote", 0.0)
    # The victim's copy never got its commit marker, so nothing points at it ...
    assert not glob.glob(f"{cluster.root}/{cluster.app_id}/{shuffle_id}/*/shuffle_{shuffle_id}_{map_id}_0.trspark-ok")
    # ... and the second job recomputes that partition instead of reading a partial file.
    assert run_job(cluster, rdd, "cutoff-second") == expected_sums(rows)
    reruns = reruns_of(cluster, "cutoff-second")
    victim_index = next(t["index"] for t in first if str(t["taskId"]) == map_id)
    assert victim_index in reruns
    # The other throttled copies run on after the test: they finish here, while ``rdd`` still holds
    # the shuffle, so the next test starts from a quiet plugin with every copy committed.
    wait_for(lambda: rdd is not None and cluster.backups_ended(), what="the throttled copies to end")


def test_a_backed_up_output_of_a_running_stage_is_not_re_run_when_its_executor_dies(cluster: Cluster) -> None:
    """Kill an executor while its map stage still runs, after its finished output was copied.

    Spark's ``TaskSetManager.executorLost`` re-runs every finished map task of the running stage
    that ran on a lost executor unless the loss is a decommissioning; the task scheduler tells
    it so for an eviction, so it finds the output re-pointed to its copy and leaves it.
    """
    import threading

    cluster.full_strength()
    cluster.status.setBuiltin("always", "remote", 0.0)
    sc = cluster.sc

    def slow(rows: Any) -> Any:
        time.sleep(3.0)
        return ((x % 5, x) for x in rows)

    rdd = sc.parallelize(range(90), 9).mapPartitions(slow).partitionBy(3).mapValues(lambda v: v)
    group = f"running-stage-{time.monotonic_ns()}"
    cluster.quiet()

    def committed(task: dict[str, Any]) -> bool:
        return bool(glob.glob(f"{cluster.root}/{cluster.app_id}/*/*/shuffle_*_{task['taskId']}_0.trspark-ok"))

    answer: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: answer.update(rows=run_job_rows(cluster, rdd, group)))
    worker.start()
    try:
        # A task of the first wave has ended and its output is on the store; the stage runs on.
        first = wait_for(lambda: (stages := cluster.job_stages(group))
                         and [t for t in cluster.map_tasks(stages[0]) if committed(t)], what="a copied output")
        victim = first[0]["executorId"]
        saved = sorted(t["index"] for t in cluster.map_tasks(cluster.job_stages(group)[0])
                       if t["executorId"] == victim and committed(t))
        cluster.kill(victim)
    finally:
        worker.join(timeout=TIMEOUT)
    assert sorted(answer["rows"]) == sorted((x % 5, x) for x in range(90))
    successes = [t["index"] for t in cluster.map_tasks(cluster.job_stages(group)[0])]
    assert saved and all(successes.count(p) == 1 for p in saved), f"copied {saved}, re-run: {sorted(successes)}"


def run_job_rows(cluster: Cluster, rdd: Any, group: str) -> list[Any]:
    """``rdd.collect()`` in job group ``group`` (rows, not a dict)."""
    cluster.sc.setJobGroup(group, group)
    try:
        return list(rdd.collect())
    finally:
        cluster.sc.setJobGroup("", "")


def test_evictions_do_not_abort_the_job(cluster: Cluster) -> None:
    """8 SIGKILLs in 41 s (the pattern that aborted a vanilla query here) and the job completes.

    With ``spark.task.maxFailures=4`` a task killed 4 times with its executor aborts vanilla
    Spark's job; the trcluster scheduler reports a signal-killed executor as not caused by the
    application, so such failures do not count.
    """
    from jobs.harness.chaos import EvictionInjector

    cluster.full_strength()
    cluster.status.setBuiltin("always", "remote", 0.0)
    sc = cluster.sc
    # ~60 s of 1-core tasks in three stages, so kills land on running tasks.
    rdd = (
        sc.parallelize(range(48), 12)
        .map(lambda x: (time.sleep(2.5), (x % 7, x))[1])
        .reduceByKey(lambda a, b: a + b, numPartitions=6)
        .map(lambda kv: (time.sleep(2.5), (kv[0] % 3, kv[1]))[1])
        .reduceByKey(lambda a, b: a + b, numPartitions=3)
    )
    schedule = [(t, 0) for t in (3.0, 8.0, 13.0, 19.0, 24.0, 30.0, 35.0, 41.0)]
    injector = EvictionInjector(cluster.driver_pid(), schedule=schedule, min_alive=1)
    sc.setJobGroup("evictions", "evictions")
    with injector:
        answer = dict(rdd.collect())
    sc.setJobGroup("", "")
    expected: dict[int, int] = {}
    for x in range(48):
        expected[(x % 7) % 3] = expected.get((x % 7) % 3, 0) + x
    assert answer == expected
    assert len(injector.records) >= 6
    failures = [
        t for s in cluster.job_stages("evictions") for a in cluster.rest(f"stages/{s}")
        for t in cluster.rest(f"stages/{s}/{a['attemptId']}/taskList?length=10000") if t["status"] == "FAILED"
    ]
    lost = [t for t in failures if "ExecutorLostFailure" in t.get("errorMessage", "")]
    assert lost, failures  # the kills did hit running tasks, so the check below is about something
    assert all("unrelated to the running tasks" in t["errorMessage"] for t in lost), lost[:1]


def rest_epoch_seconds(stamp: str) -> float:
    """A date of Spark's REST API (``2026-01-31T12:00:00.000GMT``, UTC) as epoch seconds."""
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fGMT").replace(tzinfo=UTC).timestamp()


def test_a_task_evicted_four_times_still_completes(cluster: Cluster) -> None:
    """Kill the executor running the job's only task 4 times (= ``spark.task.maxFailures``).

    Vanilla Spark on ``local-cluster[3,1,1024]`` aborts this job ("Task 0 in stage 0.0 failed 4
    times ... ExecutorLostFailure (executor 3 exited caused by one of the running tasks)",
    measured); on ``local-trcluster`` the evictions do not count and the fifth attempt finishes.
    """
    cluster.full_strength()
    cluster.status.setBuiltin("always", "remote", 0.0)
    kills: list[str] = []
    group = "evicted-four-times"

    def running_executor() -> str | None:
        """The executor of a task attempt that has run 2 s (by Spark's launch time) on an executor not killed yet."""
        for stage in cluster.rest("stages?status=active"):
            path = f"stages/{stage['stageId']}/{stage['attemptId']}/taskList?status=running"
            for task in cluster.rest(path):
                if task["executorId"] not in kills and time.time() - rest_epoch_seconds(task["launchTime"]) >= 2.0:
                    return str(task["executorId"])
        return None

    def killer() -> None:
        while len(kills) < 4:
            victim = wait_for(running_executor, what="the task to run 2 s on a fresh executor")
            kills.append(victim)
            cluster.kill(victim)

    import threading

    thread = threading.Thread(target=killer, daemon=True)
    cluster.sc.setJobGroup(group, group)
    thread.start()
    try:
        answer = cluster.sc.parallelize([0], 1).map(lambda x: (time.sleep(15), x + 42)[1]).collect()
    finally:
        cluster.sc.setJobGroup("", "")
    thread.join(timeout=TIMEOUT)
    assert answer == [42]
    assert len(kills) == 4
