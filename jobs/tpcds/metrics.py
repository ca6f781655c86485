"""What a query run cost, read from Spark's own status REST API and from the executor count.

``tasks_recomputed``
    For every shuffle the query's jobs wrote: map task attempts launched over all the stages that
    wrote it, minus the number of distinct partitions. One attempt per partition is the work a
    run without failures does; the rest is re-computation (lost map outputs re-run, resubmitted
    stages, tasks that died with their executor). A shuffle is known by its map side's RDD ids
    (``rddIds``), not by its stage id: adaptive execution runs each query stage as a job of its
    own, and when a later job finds that stage's outputs lost, Spark re-runs them in a new stage
    with a new id over the same RDDs. Counted per stage id, that cascade would not show.
    Speculative attempts (Spark's speculation, ``tr``'s task duplicates) are extra copies of
    running work, not re-runs, and are not counted. Read from
    ``/api/v1/applications/<app>/stages/<id>?details=true`` of the driver UI.
``capacity_lost_seconds``
    :math:`\\int (N - n(t))\\,dt` over the run, where ``N`` is the configured executor count and
    ``n(t)`` the executors registered with the driver, sampled every ``poll`` seconds.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark import SparkContext

log = logging.getLogger(__name__)


def _get(url: str, timeout: float = 60.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback driver UI
        return json.load(response)


class StatusApi:
    """The driver UI's REST API for one application (``sc.uiWebUrl``, ``sc.applicationId``)."""

    def __init__(self, ui_url: str, app_id: str) -> None:
        self.base = f"{ui_url.rstrip('/')}/api/v1/applications/{app_id}"

    @classmethod
    def of(cls, sc: SparkContext) -> StatusApi:
        if not sc.uiWebUrl:
            raise RuntimeError("the Spark UI is disabled (spark.ui.enabled=false); the benchmark needs its REST API")
        return cls(sc.uiWebUrl, sc.applicationId)

    def warm_up(self, timeout: float = 120.0) -> None:
        """Make the first request now: the UI's JAX-RS stack initialises lazily (17 s seen here)."""
        _get(self.base, timeout=timeout)

    def jobs_of_group(self, group: str) -> list[dict[str, Any]]:
        return [job for job in _get(f"{self.base}/jobs") if job.get("jobGroup") == group]

    def stage_attempts(self, stage_id: int) -> list[dict[str, Any]]:
        try:
            return list(_get(f"{self.base}/stages/{stage_id}?details=true"))
        except urllib.error.HTTPError as exc:
            if exc.code == 404:  # a skipped stage (its output was re-used) has no attempts
                return []
            raise

    def wait_settled(self, group: str, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The group's jobs once none is RUNNING (the listener bus delivers events asynchronously)."""
        deadline = time.monotonic() + timeout
        while True:
            jobs = self.jobs_of_group(group)
            if all(job.get("status") != "RUNNING" for job in jobs) or time.monotonic() > deadline:
                return jobs
            time.sleep(0.2)

    def tasks_recomputed(self, group: str) -> int:
        """Map task attempts of the group's shuffles beyond one per partition (see module doc)."""
        stage_ids = sorted({sid for job in self.wait_settled(group) for sid in job.get("stageIds", ())})
        return recomputed_in_shuffles([attempt for sid in stage_ids for attempt in self.stage_attempts(sid)])


def recomputed_in_shuffles(attempts: list[dict[str, Any]]) -> int:
    """Extra map task attempts given the REST ``StageData`` attempts of any stages, grouped by shuffle (``rddIds``)."""
    by_shuffle: dict[tuple[object, ...], list[dict[str, Any]]] = {}
    for attempt in attempts:
        rdds = attempt.get("rddIds")
        key = ("rdds", *sorted(rdds)) if rdds else ("stage", attempt.get("stageId"))
        by_shuffle.setdefault(key, []).append(attempt)
    return sum(recomputed_in_stage(group) for group in by_shuffle.values())


def recomputed_in_stage(attempts: list[dict[str, Any]]) -> int:
    """Extra task attempts over the attempts of one stage, or of the stages writing one shuffle (0 for result stages)."""
    if not any(a.get("shuffleWriteBytes", 0) > 0 or a.get("shuffleWriteRecords", 0) > 0 for a in attempts):
        return 0
    tasks = [task for attempt in attempts for task in (attempt.get("tasks") or {}).values()
             if not task.get("speculative", False)]
    partitions = {task.get("partitionId", task.get("index")) for task in tasks}
    return len(tasks) - len(partitions)


class CapacityMeter:
    r"""Integrates missing executors over time: executor-seconds of capacity lost to evictions.

    With ``n`` executors registered, :math:`\min(N, U) - \min(n, U)` executors are missing:
    where only ``U`` executors can run at once (executors sharing fewer cores than they have),
    losing one of the others takes no capacity.

    Parameters
    ----------
    count
        Returns the number of executors currently registered with the driver.
    expected
        Executors the cluster should have (``N``).
    usable
        Executors that can run at once (``U``, > 0); None: all ``N``.
    poll
        Sampling period in seconds: each sample counts the executors missing then for the time
        since the previous sample.
    clock
        Seconds, monotonic (tests give their own).
    """

    def __init__(self, count: Callable[[], int], expected: int, *, usable: float | None = None,
                 poll: float = 0.25, clock: Callable[[], float] = time.monotonic) -> None:
        if usable is not None and not usable > 0:
            raise ValueError(f"usable executors must be > 0, got {usable}")
        self._count = count
        self.expected = expected
        self.usable = float(expected) if usable is None else min(float(expected), usable)
        self.poll = poll
        self.lost_seconds = 0.0
        self.samples = 0
        self._clock = clock
        self._last: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        """Add the executors missing now times the seconds since the last sample (the first one
        only starts the clock)."""
        now = self._clock()
        try:
            missing = self.usable - min(self._count(), self.usable)
        except Exception:  # the driver is busy or shutting down: skip this sample
            missing = 0
        if self._last is not None:
            self.lost_seconds += missing * (now - self._last)
            self.samples += 1
        self._last = now

    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            self.sample()

    def __enter__(self) -> CapacityMeter:
        self._last = self._clock()
        self._thread = threading.Thread(target=self._run, name="trspark-capacity-meter", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def executor_ids(sc: SparkContext) -> Callable[[], set[str]]:
    """A callable giving the ids of the executors registered with the driver (driver excluded)."""
    backend = sc._jsc.sc()

    def ids() -> set[str]:
        # A Scala Seq over py4j: joined on the JVM side rather than iterated element by element.
        return {i for i in str(backend.getExecutorIds().mkString(",")).split(",") if i}

    return ids


def first_task_finished(sc: SparkContext, group: str) -> Callable[[], bool]:
    """A callable: has a task of job group ``group`` finished (Spark's status tracker)?"""
    tracker = sc.statusTracker()

    def finished() -> bool:
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else ():
                stage = tracker.getStageInfo(stage_id)
                if stage is not None and stage.numCompletedTasks > 0:
                    return True
        return False

    return finished


class ExecutorCount:
    """A callable giving the executors registered with the driver (the driver itself excluded).

    With ``driver_pid`` (a local-cluster whose executor JVMs descend from the driver), only the
    registered executors whose JVM is alive count. The driver keeps listing an executor for up to
    ``spark.standalone.executorRemoveDelayOnDisconnection`` (5 s) after its JVM has gone -- e.g.
    one released or decommissioned on a notice --, and a run must not start on that count: its
    replacement would still be starting, exposed to the next kill before it ever registered.
    """

    def __init__(self, sc: SparkContext, driver_pid: int | None = None) -> None:
        self._registered = executor_ids(sc)
        self._driver_pid = driver_pid

    def _alive(self) -> set[str]:
        from jobs.harness.executors import find_executors

        assert self._driver_pid is not None
        return {e.executor_id for e in find_executors(self._driver_pid)}

    def __call__(self) -> int:
        registered = self._registered()
        if self._driver_pid is None:
            return len(registered)
        return len(registered & self._alive())

    def settled(self) -> bool:
        """No executor the driver still lists has a JVM that has gone (always True without ``driver_pid``).

        Until the driver drops such an executor its core still counts in Spark's default
        parallelism, so a query started then is split into more tasks than on a settled
        cluster: a run after a release would not meet the same plan as one after a kill.
        """
        if self._driver_pid is None:
            return True
        return self._registered() <= self._alive()


def executor_count(sc: SparkContext, driver_pid: int | None = None) -> ExecutorCount:
    """:class:`ExecutorCount` of ``sc`` (with ``driver_pid``: only executors whose JVM is alive)."""
    return ExecutorCount(sc, driver_pid)


#: trspark's counters (the driver's ``trspark`` metrics source, read with ``trspark.status``) -> CSV
#: columns; ``backups_bytes`` is the sum of the two byte metrics.
PLUGIN_COUNTERS: dict[str, str] = {
    "backups_finished": "backups_count",
    "backups_to_peers": "backups_local",
    "backups_to_remote": "backups_remote",
    "notices": "notices",
    "executors_drained": "executors_drained",
    "executors_released": "executors_released",
}
BYTE_METRICS = ("bytes_to_peers", "bytes_to_remote")


#: The backup counters whose sum is every backup the policy asked for that has ended.
ENDED_BACKUPS = ("backups_finished", "backups_failed", "backups_cancelled")


def _open_backups(status: dict[str, int]) -> int:
    """Backups asked for that have not ended (planned minus finished, failed and cancelled)."""
    return status.get("backups_planned", 0) - sum(status.get(name, 0) for name in ENDED_BACKUPS)


def _status(sc: SparkContext) -> dict[str, int]:
    import trspark

    try:
        return trspark.status(sc)
    except Exception:  # class not on the classpath (never, decommission): py4j raises on the call
        return {}


def _settled_status(sc: SparkContext, timeout: float) -> dict[str, int]:
    """The plugin's status once every planned backup has ended, or after ``timeout`` s.

    Copies run after the task that wrote the output: the last stage can read its input and end
    the query while the copy of that input is still being written. Read at once, such a copy
    would count in the next run.
    """
    deadline = time.monotonic() + timeout
    status = _status(sc)
    while _open_backups(status) > 0:
        if time.monotonic() >= deadline:
            log.warning("%d backups still open after %.0f s: they count in the next run", _open_backups(status), timeout)
            break
        time.sleep(0.1)
        status = _status(sc)
    return status


def plugin_counters(sc: SparkContext, settle: float = 30.0) -> dict[str, int]:
    """The plugin's backup, notice, drain and release counters (CSV column -> value); zeros without the plugin.

    Waits up to ``settle`` s for the backups already asked for to end, so that a run's counters
    hold the copies of its own outputs.
    """
    status = _settled_status(sc, settle)
    values = {column: status.get(name, 0) for name, column in PLUGIN_COUNTERS.items()}
    values["backups_bytes"] = sum(status.get(name, 0) for name in BYTE_METRICS)
    return values


def plugin_fell_back(sc: SparkContext) -> bool:
    """Whether the plugin has fallen back to always-checkpoint (its engine did not start or lagged).

    A ``tr`` run with this set measured always-checkpoint, not the TR policy. False without the plugin.
    """
    return _status(sc).get("engine_fallback", 0) == 1
