"""Spark event-log replay: turn a recorded application into a simulated job.

Reads Spark's JSON-lines event log as Spark writes it -- plain, or compressed with zstd (Spark 4's
default event-log codec), lz4 (Spark's ``LZ4Block`` stream) or gzip -- a single file or a rolling
log directory (``eventlog_v2_*`` holding ``events_*`` files; one of them stands for the whole directory).

What is taken from the log:

* stages that ran tasks, their parents (``Parent IDs`` of the job's stage infos) and whether they
  write a shuffle (``ShuffleMapTask``); a map stage's shuffle id is taken to be its stage id
  (Spark reuses one ``ShuffleMapStage`` per shuffle, so parents point at the stage that wrote it);
* per partition, its last successful task: duration ``Finish - Launch``, input bytes, shuffle
  bytes read and written;
* the Spark jobs' order: the first stages of job ``k`` run after job ``k-1`` ended (``after``);
* the cluster: executors and cores (``ExecutorAdded``, else ``spark.master`` = ``local[N]``,
  else the largest number of tasks seen running at once).

A log with a Spark job that starts but never ends is refused: it was cut off (an application
still running, or one that crashed), and its unfinished job would be replayed in part.

A task's compute time is its recorded duration minus the shuffle read time the simulator will
add back (its read bytes at the local bandwidth). A stage's driver overhead
(``StageSpec.overhead_seconds``) is the time from its submission (or from the last task end
before its first launch, when it waited for a core) to its first task launch, plus from its last
task end to its completion; a job's own overhead (submission to its first stage,
last stage to job end) is added to its first stage. Replaying without evictions thus reproduces
the recorded job times; ``recorded_seconds`` sums the Spark jobs' durations (submission to end).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simulators.dag import JobSpec, StageSpec
from trspark.eventlog import EventLogError, feed, partition_of
from trspark.eventlog import read_events as _read_log

__all__ = ["EventLogError", "Replay", "load_eventlog", "read_events"]


@dataclass(frozen=True)
class Replay:
    """A recorded application as a simulated job, plus what the log says about its run."""

    job: JobSpec
    executors: int
    cores: int
    recorded_seconds: float
    """Sum over Spark jobs of (job end - job submission), seconds."""
    app_name: str = ""


# ---------------------------------------------------------------------------------------- reading
def read_events(path: str | Path) -> Iterator[dict[str, Any]]:
    """The log's events as dicts, in order; raises :class:`EventLogError` if it is not a whole Spark log.

    :func:`trspark.eventlog.read_events` with the checks a replay needs on top: every line is a
    finished Spark listener event (a log still being written is refused, not cut short), and
    the log holds at least one.
    """
    seen_spark = False
    for number, event in enumerate(_read_log(path, unfinished_last_line=False), 1):
        if not str(event["Event"]).startswith(("SparkListener", "org.apache.spark")):
            raise EventLogError(f"{path}: event {number} is not a Spark listener event; not a Spark event log")
        seen_spark = True
        yield event
    if not seen_spark:
        raise EventLogError(f"{path}: the event log is empty; it was cut before its application started, "
                            "or is not a Spark application's log")


# ---------------------------------------------------------------------------------------- parsing
@dataclass
class _Task:
    launch: float
    finish: float
    input_bytes: float
    read_bytes: float
    write_bytes: float


@dataclass
class _Stage:
    stage_id: int
    name: str = ""
    num_tasks: int = 0
    parents: tuple[int, ...] = ()
    job: int = -1
    is_map: bool = False
    rdd: int = -1
    """Id of the stage's own (last) RDD; a skipped stage shares it with the stage that ran."""


def _metrics(event: dict[str, Any]) -> tuple[float, float, float]:
    m = event.get("Task Metrics") or {}
    read = m.get("Shuffle Read Metrics") or {}
    write = m.get("Shuffle Write Metrics") or {}
    inp = m.get("Input Metrics") or {}
    read_bytes = float(read.get("Remote Bytes Read", 0)) + float(read.get("Local Bytes Read", 0))
    return float(inp.get("Bytes Read", 0)), read_bytes, float(write.get("Shuffle Bytes Written", 0))


def _max_concurrency(tasks: list[_Task]) -> int:
    edges = sorted([(t.launch, 1) for t in tasks] + [(t.finish, -1) for t in tasks], key=lambda e: (e[0], e[1]))
    best = running = 0
    for _, step in edges:
        running += step
        best = max(best, running)
    return max(best, 1)


@dataclass
class _Parsed:
    """What :func:`load_eventlog` gathers from the events, one event at a time (:meth:`add`)."""

    stages: dict[int, _Stage] = field(default_factory=dict)
    tasks: dict[int, dict[int, _Task]] = field(default_factory=dict)
    all_tasks: list[_Task] = field(default_factory=list)
    job_spans: dict[int, list[float]] = field(default_factory=dict)
    job_order: list[int] = field(default_factory=list)
    stage_span: dict[int, tuple[float, float]] = field(default_factory=dict)
    executors: dict[str, int] = field(default_factory=dict)
    # Replacements of evicted executors are added too: the cluster is the most alive at once.
    alive: set[str] = field(default_factory=set)
    most_alive: int = 0
    master: str = ""
    app_name: str = ""

    def add(self, event: dict[str, Any]) -> None:
        kind = event["Event"]
        if kind == "SparkListenerJobStart":
            _job_start(event, self.stages, self.job_order, self.job_spans)
        elif kind == "SparkListenerJobEnd":
            span = self.job_spans.get(int(event["Job ID"]))
            if span is not None:
                span[1] = float(event.get("Completion Time", 0)) / 1000.0
        elif kind == "SparkListenerTaskEnd":
            _task_end(event, self.stages, self.tasks, self.all_tasks)
        elif kind == "SparkListenerStageCompleted":
            info = event.get("Stage Info") or {}
            if "Submission Time" in info and "Completion Time" in info:
                self.stage_span[int(info["Stage ID"])] = (float(info["Submission Time"]) / 1000.0,
                                                          float(info["Completion Time"]) / 1000.0)
        elif kind == "SparkListenerExecutorAdded":
            self.executors[str(event["Executor ID"])] = int((event.get("Executor Info") or {}).get("Total Cores", 1))
            self.alive.add(str(event["Executor ID"]))
            self.most_alive = max(self.most_alive, len(self.alive - {"driver"}))
        elif kind == "SparkListenerExecutorRemoved":
            self.alive.discard(str(event["Executor ID"]))
        elif kind == "SparkListenerEnvironmentUpdate":
            self.master = str((event.get("Spark Properties") or {}).get("spark.master", ""))
        elif kind == "SparkListenerApplicationStart":
            self.app_name = str(event.get("App Name", ""))


def load_eventlog(path: str | Path, local_bandwidth: float = 400e6) -> Replay:
    """Parse an event log into a :class:`Replay` (see the module docstring for what is used)."""
    parsed = _Parsed()
    feed(read_events(path), parsed.add, path)
    stages, tasks, all_tasks, job_spans = parsed.stages, parsed.tasks, parsed.all_tasks, parsed.job_spans
    if not all_tasks:
        raise EventLogError(f"{path}: the event log has no successful tasks to replay")
    unfinished = [job_id for job_id, (_start, end) in job_spans.items() if math.isnan(end)]
    if unfinished:
        raise EventLogError(f"{path}: Spark job {unfinished[0]} starts but never ends: the log is cut off (its "
                            "application is still running, or it crashed); give a finished application's log")
    overheads = _overheads(stages, tasks, parsed.stage_span, job_spans)
    job = _build_job(Path(path).name, stages, tasks, parsed.job_order, local_bandwidth, overheads)
    n_exec, cores = _cluster(parsed.executors, parsed.most_alive, parsed.master, all_tasks)
    recorded = sum(end - start for start, end in job_spans.values() if end == end)
    return Replay(job=job, executors=n_exec, cores=cores, recorded_seconds=recorded, app_name=parsed.app_name)


def _job_start(event: dict[str, Any], stages: dict[int, _Stage], job_order: list[int],
               job_spans: dict[int, list[float]]) -> None:
    """A ``SparkListenerJobStart``: the job's submission time (s) and its stage graph."""
    job_id = int(event["Job ID"])
    job_order.append(job_id)
    job_spans[job_id] = [float(event.get("Submission Time", 0)) / 1000.0, float("nan")]
    for info in event.get("Stage Infos", []):
        sid = int(info["Stage ID"])
        stage = stages.setdefault(sid, _Stage(sid))
        stage.name = str(info.get("Stage Name", ""))
        stage.num_tasks = int(info.get("Number of Tasks", 0))
        stage.parents = tuple(int(p) for p in info.get("Parent IDs", []))
        stage.rdd = max((int(r["RDD ID"]) for r in info.get("RDD Info", []) if "RDD ID" in r), default=-1)
        if stage.job < 0:
            stage.job = job_id


def _task_end(event: dict[str, Any], stages: dict[int, _Stage], tasks: dict[int, dict[int, _Task]],
              all_tasks: list[_Task]) -> None:
    """A ``SparkListenerTaskEnd``: a successful task's times (s) and bytes; failed or killed ones are skipped."""
    info = event.get("Task Info") or {}
    if info.get("Failed") or info.get("Killed") or (event.get("Task End Reason") or {}).get("Reason", "Success") != "Success":
        return
    sid = int(event["Stage ID"])
    inp, read, write = _metrics(event)
    task = _Task(float(info["Launch Time"]) / 1000.0, float(info["Finish Time"]) / 1000.0, inp, read, write)
    tasks.setdefault(sid, {})[partition_of(info)] = task
    all_tasks.append(task)
    if event.get("Task Type") == "ShuffleMapTask":
        stages.setdefault(sid, _Stage(sid)).is_map = True


def _cluster(executors: dict[str, int], most_alive: int, master: str, tasks: list[_Task]) -> tuple[int, int]:
    """(executors, cores each): the most executors alive at once and the most cores one had."""
    workers = {k: v for k, v in executors.items() if k != "driver"}
    if workers:
        return most_alive, max(workers.values())
    match = re.fullmatch(r"local\[(\d+)(?:,\d+)?\]", master.strip())
    if match:
        return 1, int(match.group(1))
    match = re.fullmatch(r"local-cluster\[(\d+),\s*(\d+),\s*\d+\]", master.strip())
    if match:
        return int(match.group(1)), int(match.group(2))
    return 1, _max_concurrency(tasks)


def _overheads(stages: dict[int, _Stage], tasks: dict[int, dict[int, _Task]],
               stage_span: dict[int, tuple[float, float]], job_spans: dict[int, list[float]]) -> dict[int, float]:
    """Driver overhead per stage that ran (s); see the module docstring."""
    out: dict[int, float] = {}
    finishes = np.sort([t.finish for parts in tasks.values() for t in parts.values()])
    for sid, parts in tasks.items():
        if sid not in stage_span:
            out[sid] = 0.0
            continue
        submitted, completed = stage_span[sid]
        first = min(t.launch for t in parts.values())
        last = max(t.finish for t in parts.values())
        # a launch right after some task ended was waiting for a core, not for the driver
        before = finishes[: np.searchsorted(finishes, first, side="right")]
        ready = max(submitted, float(before[-1])) if before.size else submitted
        out[sid] = max(0.0, first - ready) + max(0.0, completed - last)
    for job_id, (start, end) in job_spans.items():
        ran = [sid for sid in tasks if sid in stage_span and stages.get(sid, _Stage(sid)).job == job_id]
        if not ran or end != end:
            continue
        first_stage = min(ran, key=lambda s: stage_span[s][0])
        out[first_stage] += max(0.0, stage_span[first_stage][0] - start) + max(0.0, end - max(stage_span[s][1] for s in ran))
    return out


def _build_job(name: str, stages: dict[int, _Stage], tasks: dict[int, dict[int, _Task]], job_order: list[int],
               local_bandwidth: float, overheads: dict[int, float]) -> JobSpec:
    ran = sorted(tasks)
    for sid in ran:
        stages.setdefault(sid, _Stage(sid))
    writes_total = {sid: sum(t.write_bytes for t in tasks[sid].values()) for sid in ran}
    _resolve_skipped_parents(stages, set(ran))
    specs: list[StageSpec] = []
    shuffles: set[int] = set()  # stages replayed as shuffle writers
    last_of_job: dict[int, int] = {}
    order = {job: i for i, job in enumerate(job_order)}
    for sid in _topological(ran, stages):
        stage = stages[sid]
        parents = tuple(p for p in stage.parents if p in shuffles)
        n = max(tasks[sid]) + 1
        parts = tasks[sid]
        # partitions without a recorded success (should not happen) get the stage's mean
        mean = float(np.mean([t.finish - t.launch for t in parts.values()]))
        per_task_read = sum(writes_total[p] for p in parents) / n
        read_seconds = per_task_read / local_bandwidth
        seconds = np.array([max(0.0, (parts[i].finish - parts[i].launch if i in parts else mean) - read_seconds) for i in range(n)])
        write = np.array([parts[i].write_bytes if i in parts else 0.0 for i in range(n)])
        inputs = np.array([parts[i].input_bytes if i in parts else 0.0 for i in range(n)])
        after: tuple[int, ...] = ()
        rank = order.get(stage.job, -1)
        if rank > 0 and not any(stages[p].job == stage.job for p in parents):
            previous = [last_of_job[j] for j in job_order[:rank] if j in last_of_job]
            after = (previous[-1],) if previous else ()
        # A map stage that wrote nothing (a filter that matched no row) still orders its readers.
        is_map = stage.is_map
        specs.append(StageSpec(stage_id=sid, task_seconds=seconds, shuffle_write_bytes=write if is_map else np.zeros(n),
                               parents=parents, shuffle_id=sid if is_map else None, after=after,
                               name=stage.name, input_bytes=inputs, overhead_seconds=overheads.get(sid, 0.0)))
        if is_map:
            shuffles.add(sid)
        if stage.job >= 0:
            last_of_job[stage.job] = sid
    return JobSpec(name=name, stages=tuple(specs))


def _resolve_skipped_parents(stages: dict[int, _Stage], ran: set[int]) -> None:
    """Point parents that were skipped (their shuffle already existed) at the stage that wrote it.

    Spark may plan a new stage id for an existing shuffle in a later job (e.g. SQL re-planning);
    such a stage runs no task. It shares its output RDD with the stage that did write the shuffle.
    """
    writer_by_rdd = {stages[s].rdd: s for s in sorted(ran) if stages[s].rdd >= 0}
    for sid in ran:
        stage = stages[sid]
        resolved = []
        for parent in stage.parents:
            if parent in ran:
                resolved.append(parent)
            elif parent in stages and stages[parent].rdd in writer_by_rdd:
                resolved.append(writer_by_rdd[stages[parent].rdd])
        stage.parents = tuple(dict.fromkeys(resolved))
    for sid in ran:
        for parent in stages[sid].parents:
            stages[parent].is_map = True


def _topological(ran: list[int], stages: dict[int, _Stage]) -> list[int]:
    """Stage ids parents-first (Spark's ids already are, except across skipped stages)."""
    ran_set = set(ran)
    out: list[int] = []
    seen: set[int] = set()

    def visit(sid: int) -> None:
        if sid in seen:
            return
        seen.add(sid)
        for parent in stages[sid].parents:
            if parent in ran_set:
                visit(parent)
        out.append(sid)

    for sid in sorted(ran):
        visit(sid)
    return out
