"""What trspark did in one application, from its Spark event log.

Spark's own events give executors, stages and tasks; trspark's (class names ``...trspark.TR*``)
give pools, notices, backups, restores and releases. Times are seconds since the application
started; task-seconds are sums of task run times (finish - launch).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trspark.eventlog import feed, partition_of

# trspark's executor end reasons that mean the executor was taken away, not let go.
KILL_REASONS = ("evicted", "decommissioned")
# Spark's loss messages for an executor the driver removed itself (dynamic allocation's scale-down,
# or the user's killExecutors), as the plugin reads them (TRListener.RemovedByDriver).
DRIVER_REMOVALS = ("Executor killed by driver.", "Executor decommission: spark scale down")
_EXIT_CODE = re.compile(r"exited with code (\d+)")


def spark_loss_kind(reason: str) -> str:
    """An executor's end reason from Spark's loss message, as the plugin classifies it (``TRListener.lossKind``).

    For the executors trspark recorded nothing of (mode ``never``, vanilla Spark): ``removed``
    by the driver; ``decommissioned``; ``evicted`` when the process died of a signal (exit code
    >= 128) or its connection dropped; else ``""`` (an exit Spark explains otherwise, not a kill).
    """
    exit_code = _EXIT_CODE.search(reason)
    if reason.startswith(DRIVER_REMOVALS):
        return "removed"
    if "decommission" in reason.lower():
        return "decommissioned"
    if (exit_code and int(exit_code.group(1)) >= 128) or "disassociated" in reason or "Remote RPC client" in reason:
        return "evicted"
    return ""


# One successful map task attempt: (what it wrote: shuffle or RDD key, partition, task id, run time in s).
_MapOutput = tuple[tuple[str, int], int, int, float]


@dataclass
class Executor:
    executor_id: str
    start: float
    end: float | None = None
    pool: str = "default"
    reason: str = ""
    removed_reason: str = ""
    """Spark's loss message (``SparkListenerExecutorRemoved``), read when trspark recorded no reason."""


@dataclass
class Summary:
    """The numbers of ``trspark report`` (times in s since the application start, bytes in bytes)."""

    app_name: str = ""
    app_id: str = ""
    duration: float = 0.0
    ended: bool = True
    """False for a log without ``SparkListenerApplicationEnd``: a running or crashed application's."""
    executors: dict[str, Executor] = field(default_factory=dict)
    stages: list[tuple[int, str, float, float]] = field(default_factory=list)
    """(stage id, name, submitted, completed) of every stage attempt that ran."""
    notices: list[tuple[float, str]] = field(default_factory=list)
    backups: list[tuple[float, str, str, int]] = field(default_factory=list)
    """(time, source executor, target, bytes): ``target`` is an executor id or ``remote``."""
    backups_failed: int = 0
    restores: list[tuple[float, str, int]] = field(default_factory=list)
    """(time, lost executor, outputs re-pointed to a copy)."""
    outputs_lost: int = 0
    outputs_restored_read: int = 0
    """Restored outputs that a job running at the loss, or a later one, reads (its stages list the output's)."""
    outputs_lost_read: int = 0
    """Outputs lost without a copy that such a job reads: the ones Spark had to recompute."""
    rerun_avoided_task_seconds: float = 0.0
    """Run time (task-s) of the restored outputs that were read again and never written again
    (Spark re-runs a running stage's output whose copy is on the lost executor's host anyway)."""
    recomputed_tasks: int = 0
    recomputed_task_seconds: float = 0.0
    releases: int = 0
    """Executors trspark released that did leave (an idle release Spark refused is not one)."""
    stage_resubmissions: int = 0
    """Stage attempts after the first (a stage re-run after a lost map output)."""
    belt_firings: int = 0
    fallbacks: int = 0
    prices: dict[str, float] = field(default_factory=dict)
    """Pool -> $ per executor-hour, when given."""

    @property
    def kills(self) -> int:
        return sum(e.reason in KILL_REASONS for e in self.executors.values())

    @property
    def removed(self) -> int:
        """Executors the driver removed (dynamic allocation, the user): never kills."""
        return sum(e.reason == "removed" for e in self.executors.values())

    @property
    def executor_seconds(self) -> float:
        """Sum over executors of (end, or the application's end) - start (s)."""
        return sum((self.duration if e.end is None else e.end) - e.start for e in self.executors.values())

    @property
    def backup_bytes(self) -> tuple[int, int]:
        """(bytes to peers, bytes to the remote store)."""
        remote = sum(b for _, _, t, b in self.backups if t == "remote")
        return sum(b for *_, b in self.backups) - remote, remote

    @property
    def outputs_restored(self) -> int:
        return sum(n for *_, n in self.restores)

    def vm_hours(self) -> dict[str, float]:
        """Executor-hours by pool: each executor from its start to its end (or the application's)."""
        hours: dict[str, float] = defaultdict(float)
        for e in self.executors.values():
            hours[e.pool] += ((self.duration if e.end is None else e.end) - e.start) / 3600
        return dict(sorted(hours.items()))

    def cost(self) -> float | None:
        """$ = sum over pools of executor-hours x price; None without prices (or a pool without one)."""
        hours = self.vm_hours()
        if not self.prices or any(p not in self.prices for p in hours):
            return None
        return sum(h * self.prices[p] for p, h in hours.items())

    def lines(self) -> list[tuple[str, str]]:
        """(label, value) rows of the text summary, in order."""
        peers, remote = self.backup_bytes
        rows = [
            ("application", f"{self.app_name} ({self.app_id}), {self.duration:.1f} s"
             + ("" if self.ended else " up to its last event (no application end in the log: still running, or crashed)")),
            ("executors", f"{len(self.executors)} started, {self.kills} killed, {self.releases} released early"),
            ("notices", str(len(self.notices))),
            ("map outputs backed up", f"{len(self.backups)} ({self.backups_failed} failed)"),
            ("bytes backed up", f"{peers + remote} ({peers} to peers, {remote} to the remote store)"),
            ("outputs restored from backups", f"{self.outputs_restored} ({self.outputs_restored_read} read again)"),
            ("re-runs avoided", f"{self.rerun_avoided_task_seconds:.2f} task-s"),
            ("outputs lost without a copy", f"{self.outputs_lost} ({self.outputs_lost_read} read again)"),
            ("recomputation", f"{self.recomputed_tasks} map tasks, {self.recomputed_task_seconds:.2f} task-s"),
            ("safety belt firings", str(self.belt_firings)),
            ("engine fallbacks", str(self.fallbacks)),
        ]
        rows += [(f"VM-hours ({pool})", f"{h:.4f}") for pool, h in self.vm_hours().items()]
        if (cost := self.cost()) is not None:
            rows.append(("cost", f"${cost:.4f}" + self._unused_prices()))
        elif self.prices:  # a price was asked for: say which pools it misses rather than print nothing
            missing = ", ".join(p for p in self.vm_hours() if p not in self.prices)
            rows.append(("cost", f"unknown: no --price for pool {missing} (priced: {', '.join(sorted(self.prices))})"
                         + self._unused_prices()))
        return rows

    def _unused_prices(self) -> str:
        """A note naming priced pools that no executor of this log was in (a typo is the likely cause)."""
        unused = sorted(p for p in self.prices if p not in self.vm_hours())
        return f"; no executor was in priced pool {', '.join(unused)}" if unused else ""

    def text(self) -> str:
        width = max(len(label) for label, _ in self.lines())
        return "\n".join(f"{label:<{width}}  {value}" for label, value in self.lines()) + "\n"


class NoApplicationStart(ValueError):
    """The events hold no ``SparkListenerApplicationStart``: an empty log, or one cut before its application started."""


class _Builder:
    """Folds events into a :class:`Summary` (one pass, events in log order)."""

    def __init__(self, prices: Mapping[str, float]) -> None:
        self.s = Summary(prices=dict(prices))
        self.start: float | None = None
        self.end = 0.0
        self.losses: list[tuple[float, list[int], list[int]]] = []
        """(time, restored map ids, lost map ids) of each TRRestore."""
        self.rdd_key: dict[int, int] = {}
        """Stage id -> its highest RDD id (:func:`_rdd_key`)."""
        self.shuffle_of: dict[int, int] = {}
        """Stage id -> the shuffle it writes, from trspark's ``TRMapStage`` (after the job's start)."""
        self.job_stages: dict[int, list[int]] = {}
        """Job id -> the stages it lists, those it skips too."""
        self.job_end: dict[int, float] = {}
        self.map_tasks: list[tuple[int, int, int, float]] = []
        """(stage id, partition, task id, run time in s) of each successful map task attempt."""
        self.written: set[tuple[int, int, int]] = set()
        """(stage id, stage attempt, partition) written by a success Spark kept."""
        self.released_at: dict[str, float] = {}
        self.reported: set[str] = set()
        """Executors whose own pool report was read: it overrides their TRExecutorStarted's pool."""
        self.latest = 0.0
        """Epoch seconds of the latest event with a time: where an unfinished log ends."""

    @staticmethod
    def t(ms: Any) -> float:
        """Epoch seconds (made relative to the application start at the end: executors may
        register, and their events come, before ``SparkListenerApplicationStart``)."""
        return float(ms) / 1000.0

    def add(self, e: dict[str, Any]) -> None:
        kind = e["Event"].rsplit(".", 1)[-1]
        self.latest = max(self.latest, _event_time(e))
        if kind == "SparkListenerApplicationStart":
            self.start = self.t(e["Timestamp"])
            self.s.app_name, self.s.app_id = _text(e, "App Name", ""), _text(e, "App ID", "")
        elif kind == "SparkListenerApplicationEnd":
            self.end = self.t(e["Timestamp"])
        elif (handler := getattr(self, f"_on_{kind}", None)) is not None:
            handler(e)

    def _on_SparkListenerExecutorAdded(self, e: dict[str, Any]) -> None:
        eid = _text(e, "Executor ID")
        self.s.executors[eid] = Executor(eid, self.t(e["Timestamp"]))

    def _on_SparkListenerExecutorRemoved(self, e: dict[str, Any]) -> None:
        if (ex := self.s.executors.get(e["Executor ID"])) is not None:
            ex.end = self.t(e["Timestamp"])
            ex.removed_reason = str(e.get("Removed Reason", ""))

    def _on_TRExecutorStarted(self, e: dict[str, Any]) -> None:
        # A pool report handled while the listener announced the executor is logged before this record.
        if (ex := self.s.executors.get(e["executorId"])) is not None and ex.executor_id not in self.reported:
            ex.pool = _text(e, "pool")

    def _on_TRExecutorPool(self, e: dict[str, Any]) -> None:
        """An executor reports its pool (environment, instance metadata) after Spark announced it."""
        if (ex := self.s.executors.get(e["executorId"])) is not None:
            ex.pool = _text(e, "pool")
            self.reported.add(ex.executor_id)

    def _on_TRExecutorEnded(self, e: dict[str, Any]) -> None:
        if (ex := self.s.executors.get(e["executorId"])) is not None:
            ex.reason = _text(e, "reason")

    def _on_TRNotice(self, e: dict[str, Any]) -> None:
        self.s.notices.append((self.t(e["time"]), _text(e, "executorId")))

    def _on_TRBackup(self, e: dict[str, Any]) -> None:
        self.s.backups.append((self.t(e["time"]), _text(e, "source"), _text(e, "target"), int(e["bytes"])))

    def _on_TRBackupFailed(self, e: dict[str, Any]) -> None:
        self.s.backups_failed += 1

    def _on_TRRestore(self, e: dict[str, Any]) -> None:
        self.s.restores.append((self.t(e["time"]), _text(e, "executorId"), len(e["restoredMapIds"])))
        self.s.outputs_lost += len(e["lostMapIds"])
        self.losses.append((self.t(e["time"]), [int(i) for i in e["restoredMapIds"]], [int(i) for i in e["lostMapIds"]]))

    def _on_TRExecutorRelease(self, e: dict[str, Any]) -> None:
        self.released_at.setdefault(e["executorId"], self.t(e["time"]))

    def _on_TRSafetyBelt(self, e: dict[str, Any]) -> None:
        self.s.belt_firings += bool(e["on"])

    def _on_TRFallback(self, e: dict[str, Any]) -> None:
        self.s.fallbacks += 1

    def _on_TRMapStage(self, e: dict[str, Any]) -> None:
        self.shuffle_of[int(e["stageId"])] = int(e["shuffleId"])

    def _on_SparkListenerJobStart(self, e: dict[str, Any]) -> None:
        # A job lists the stages it skips too: a later job (or a later query stage of the same SQL
        # query, through a reused exchange) that reads an earlier shuffle lists that shuffle's stage.
        infos = e.get("Stage Infos", [])
        self.rdd_key.update((info["Stage ID"], _rdd_key(info)) for info in infos)
        self.job_stages[e["Job ID"]] = [info["Stage ID"] for info in infos]

    def _on_SparkListenerJobEnd(self, e: dict[str, Any]) -> None:
        self.job_end[e["Job ID"]] = self.t(e["Completion Time"])

    def _on_SparkListenerStageSubmitted(self, e: dict[str, Any]) -> None:
        info = e["Stage Info"]
        self.s.stage_resubmissions += info.get("Stage Attempt ID", 0) > 0
        self.rdd_key[info["Stage ID"]] = _rdd_key(info)

    def _on_SparkListenerStageCompleted(self, e: dict[str, Any]) -> None:
        info = e["Stage Info"]
        if info.get("Submission Time") and info.get("Completion Time"):
            self.s.stages.append((info["Stage ID"], info.get("Stage Name", ""),
                                  self.t(info["Submission Time"]), self.t(info["Completion Time"])))

    def _on_SparkListenerTaskEnd(self, e: dict[str, Any]) -> None:
        info = e["Task Info"]
        if e.get("Task Type") != "ShuffleMapTask":
            return
        reason = e["Task End Reason"].get("Reason")
        written = (e["Stage ID"], e.get("Stage Attempt ID", 0), partition_of(info))
        if reason == "Resubmitted":  # its executor was lost: the stage runs the partition again
            self.written.discard(written)
            return
        if reason != "Success":
            return
        if written in self.written:
            # Both attempts of a duplicated (speculative) task succeeded: Spark keeps the first
            # output and ignores this one. Wasted work, but no output was written again.
            return
        self.written.add(written)
        seconds = (info["Finish Time"] - info["Launch Time"]) / 1000.0
        self.map_tasks.append((e["Stage ID"], partition_of(info), int(info["Task ID"]), seconds))

    def _output_key(self, stage_id: int) -> tuple[str, int]:
        """What a map stage writes, the same for every stage that writes it again: its shuffle
        where trspark named it, else its highest RDD id (two shuffles of one RDD share that)."""
        if stage_id in self.shuffle_of:
            return "shuffle", self.shuffle_of[stage_id]
        if stage_id in self.rdd_key:
            return "rdd", self.rdd_key[stage_id]
        return "stage", stage_id

    def finish(self) -> Summary:
        if self.start is None:
            raise NoApplicationStart("the event log has no SparkListenerApplicationStart")
        s, t0 = self.s, self.start
        work_end = self._work_end()
        for ex in s.executors.values():
            if not ex.reason and ex.end is not None:  # no trspark record: Spark's message says what it can
                ex.reason = spark_loss_kind(ex.removed_reason)
                if ex.reason in KILL_REASONS and ex.end > work_end:
                    ex.reason = ""  # the application's end: Spark stops its executors with a signal too
            # A released executor's process is gone at its release; Spark may list it for a few
            # seconds more (standalone waits before it reports an executor lost that disconnected).
            # An idle release Spark refused (the executor took a task) ends it later, not "released".
            if ex.reason == "released" and ex.executor_id in self.released_at:
                s.releases += 1
                if ex.end is not None:
                    ex.end = min(ex.end, self.released_at[ex.executor_id])
            ex.start -= t0
            ex.end = None if ex.end is None else ex.end - t0
        s.stages = [(i, name, a - t0, b - t0) for i, name, a, b in s.stages]
        s.notices = [(t - t0, x) for t, x in s.notices]
        s.backups = [(t - t0, src, target, n) for t, src, target, n in s.backups]
        s.restores = [(t - t0, x, n) for t, x, n in s.restores]
        # An unfinished log (no ApplicationEnd) lasts until the last thing it saw.
        s.duration = self.end - t0 if self.end else max(self.latest - t0, 0.0)
        s.ended = bool(self.end)
        outputs = [(self._output_key(stage_id), partition, task_id, seconds)
                   for stage_id, partition, task_id, seconds in self.map_tasks]
        self._count_recomputed(outputs)
        self._count_reads(outputs)
        return self.s

    def _work_end(self) -> float:
        """Epoch seconds at which the application's last job ended (inf while one runs; -inf with none)."""
        if any(job_id not in self.job_end for job_id in self.job_stages):
            return float("inf")
        return max(self.job_end.values(), default=float("-inf"))

    def _count_recomputed(self, outputs: list[_MapOutput]) -> None:
        """Map tasks that wrote an output some earlier attempt had written: recomputation."""
        done: set[tuple[tuple[str, int], int]] = set()
        for key, partition, _, seconds in outputs:
            output = (key, partition)
            if output in done:
                self.s.recomputed_tasks += 1
                self.s.recomputed_task_seconds += seconds
            done.add(output)

    def _count_reads(self, outputs: list[_MapOutput]) -> None:
        """Which restored and lost outputs were read again: a job listing their stage ended after
        the loss, or never ended.

        An output of a finished query or job that no later job reads cost nothing when it was
        lost, and its restore saved nothing; the plugin's counters cannot tell (they count at the
        loss), the whole log can.
        """
        last_read: dict[tuple[str, int], float] = {}
        for job_id, stages in self.job_stages.items():
            end = self.job_end.get(job_id, float("inf"))  # a job that never ended reads to the last
            for key in {self._output_key(stage_id) for stage_id in stages}:
                last_read[key] = max(last_read.get(key, float("-inf")), end)
        key_of_task = {task_id: key for key, _, task_id, _ in outputs}

        def read_again(map_id: int, at: float) -> bool:
            key = key_of_task.get(map_id)
            if key is None:  # unknown writer: assume read
                return True
            return last_read.get(key, float("-inf")) > at

        restored: set[int] = set()
        for at, restored_ids, lost_ids in self.losses:
            restored.update(i for i in restored_ids if read_again(i, at))
            self.s.outputs_lost_read += sum(read_again(i, at) for i in lost_ids)
        self.s.outputs_restored_read = len(restored)
        seconds_of_task = {task_id: seconds for _, _, task_id, seconds in outputs}
        self.s.rerun_avoided_task_seconds = sum(seconds_of_task.get(i, 0.0) for i in restored - _written_again(outputs))


def _written_again(outputs: list[_MapOutput]) -> set[int]:
    """Task ids of map outputs that a later attempt wrote again (outputs in the order they ended)."""
    last_writer: dict[tuple[tuple[str, int], int], int] = {}
    earlier = set()
    for key, partition, task_id, _ in outputs:
        if (previous := last_writer.get((key, partition))) is not None:
            earlier.add(previous)
        last_writer[(key, partition)] = task_id
    return earlier


def _event_time(e: dict[str, Any]) -> float:
    """Epoch seconds an event happened at, by the fields Spark's and trspark's events carry; 0 if none."""
    times = [e.get(key) for key in ("Timestamp", "Completion Time", "Submission Time", "time")]
    task, stage = e.get("Task Info") or {}, e.get("Stage Info") or {}
    times += [task.get("Launch Time"), task.get("Finish Time"), stage.get("Submission Time"), stage.get("Completion Time")]
    return max((float(t) / 1000.0 for t in times if isinstance(t, (int, float)) and not isinstance(t, bool)), default=0.0)


def _text(e: dict[str, Any], key: str, default: str | None = None) -> str:
    """Field ``key`` of event ``e``, which must be text (``default`` when absent, if given)."""
    value = e[key] if default is None else e.get(key, default)
    if not isinstance(value, str):
        raise TypeError(f"field {key!r} is {value!r}, not text")
    return value


def _rdd_key(info: dict[str, Any]) -> int:
    """A stage's own RDD id, the highest of its RDDs: a later stage over the same shuffle (a re-run
    after a loss, or a stage a later job skips) has the same one."""
    return int(max((r["RDD ID"] for r in info.get("RDD Info", [])), default=-info["Stage ID"]))


def summarize_events(events: Iterable[dict[str, Any]], prices: Mapping[str, float] | None = None,
                     path: object = "events") -> Summary:
    """The :class:`Summary` of an application's events (``prices``: pool -> $ per executor-hour).

    Raises :class:`~trspark.eventlog.EventLogError` naming the event (and ``path``) that lacks a
    field the summary reads or has one of the wrong type.
    """
    builder = _Builder(prices or {})
    feed(events, builder.add, path)
    return builder.finish()
