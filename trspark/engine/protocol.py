"""The policy engine's event interface: what the world tells the engine, and what it asks back.

One engine, two drivers. The simulator (``simulators/``) and the live Spark shim (``jvm-shim/``
via ``python -m trspark.live``) both translate their world into these events and apply these
commands; the engine never imports Spark or the simulator.

Conventions
-----------
* ``time`` is seconds (float) on the driver's clock: simulated time in the simulator, seconds
  since the application started in live Spark. Events arrive in non-decreasing ``time``.
* An executor's age at ``time`` is ``time - ExecutorAdded.time`` (its lifetime clock starts when
  it registers; a driver that knows an earlier VM start passes ``vm_started``).
* A *block* is one map output: all shuffle blocks written by one map task, identified by
  ``(shuffle_id, map_index)`` where ``map_index`` is the partition index of the map task
  (Spark's ``mapIndex``; Spark's unique ``mapId`` travels along as ``map_id`` for the shim).
* A backup ``target`` is either the string ``"remote"`` or an executor id (a peer).

Wire format (live bridge): one JSON object per line, ``{"type": "<ClassName>", ...fields}``;
:func:`to_json` / :func:`from_json` are the only (de)serialisers.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

REMOTE = "remote"

# ----------------------------------------------------------------------------------------------
# Events: world -> engine
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExecutorAdded:
    time: float
    executor_id: str
    host: str = ""
    cores: int = 1
    pool: str = "default"
    """Executor pool / instance type; lifetime history is kept per pool. The live driver sends a
    second ``ExecutorAdded`` (before the executor's first task, ``vm_started`` = the first one's
    time) when the executor names a pool other than ``spark.trspark.pool``."""
    vm_started: float | None = None
    """When the VM itself started, if earlier than registration (its age counts from then)."""


@dataclass(frozen=True, slots=True)
class ExecutorLost:
    time: float
    executor_id: str
    reason: str = "evicted"
    """``evicted`` (transient capacity taken away), ``decommissioned``, ``released`` (the driver let it go
    after a :class:`ReleaseExecutor`), ``killed``, ``app`` (app's fault)."""


@dataclass(frozen=True, slots=True)
class ExecutorNotice:
    """The executor will be gone at ``deadline`` (absolute time).

    ``kind`` says what the driver learnt: ``"notice"`` -- a termination notice (cloud metadata
    service, SIGPWR; the end is near: the executor takes no new tasks, its outputs that are still
    needed are saved); ``"lifetime"`` -- the lifetime was known from the start (a spot block, the
    simulator's exact-lifetime world): it only makes the lifetime exact.
    """

    time: float
    executor_id: str
    deadline: float
    kind: str = "notice"


@dataclass(frozen=True, slots=True)
class ExecutorRebalance:
    """The cloud recommends moving work off the executor (AWS EC2 rebalance recommendation): its
    spot capacity is at elevated risk of interruption, with no deadline yet. ``since`` is when the
    recommendation was posted (engine time; may be before ``time``)."""

    time: float
    executor_id: str
    since: float | None = None


@dataclass(frozen=True, slots=True)
class JobSubmitted:
    """A job's whole stage graph, known when it starts (Spark's ``SparkListenerJobStart.stageInfos``).

    Spark submits a stage only once all its parents' outputs exist, so ``StageSubmitted`` alone
    never says who will read a shuffle that is still being written; this graph does (the need
    horizon, ``trspark.engine.tr.horizon``). Parallel tuples, one entry per stage: its id, task
    count, the shuffle it writes (None: a result stage) and its parent stage ids. Stages of
    earlier jobs that this job reuses (Spark skips them) are listed too.
    """

    time: float
    job_id: int
    stage_ids: tuple[int, ...] = ()
    num_tasks: tuple[int, ...] = ()
    shuffle_ids: tuple[int | None, ...] = ()
    parents: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class StageSubmitted:
    time: float
    stage_id: int
    num_tasks: int
    parent_stage_ids: tuple[int, ...] = ()
    parent_shuffle_ids: tuple[int, ...] = ()
    """Shuffles this stage reads (its inputs)."""
    shuffle_id: int | None = None
    """Shuffle this stage writes (None for a result stage)."""
    attempt: int = 0
    name: str = ""
    pending_partitions: tuple[int, ...] | None = None
    """Partitions this attempt will run (None = all ``num_tasks``); a re-submitted stage runs only the missing ones."""


@dataclass(frozen=True, slots=True)
class StageCompleted:
    time: float
    stage_id: int
    attempt: int = 0
    failed: bool = False


@dataclass(frozen=True, slots=True)
class TaskStarted:
    time: float
    stage_id: int
    partition: int
    executor_id: str
    attempt: int = 0
    speculative: bool = False


@dataclass(frozen=True, slots=True)
class TaskEnded:
    time: float
    stage_id: int
    partition: int
    executor_id: str
    duration: float
    """Run time in seconds."""
    successful: bool = True
    input_bytes: int = 0
    shuffle_read_bytes: int = 0
    shuffle_read_local_bytes: int = 0
    """Part of ``shuffle_read_bytes`` that was read from the executor's own disk."""
    shuffle_write_bytes: int = 0
    shuffle_id: int | None = None
    """Shuffle written by this (map) task; None for a result task."""
    map_id: int | None = None
    """Spark's unique map id of the output (live only; the shim needs it to re-point outputs)."""
    attempt: int = 0
    reason: str = "success"
    """``success``, ``fetch_failed``, ``executor_lost``, ``killed``, ``exception``."""


@dataclass(frozen=True, slots=True)
class BlockBackedUp:
    """A backup finished: the block is now also at ``target`` (checksummed, committed)."""

    time: float
    shuffle_id: int
    map_index: int
    target: str
    bytes: int
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class BackupFailed:
    time: float
    shuffle_id: int
    map_index: int
    target: str
    reason: str = ""
    source: str = ""
    """Executor the copy was read from (``""`` = the driver does not say)."""
    source_missing: bool = False
    """The source no longer holds the block (its files are gone or it was lost): forget that copy."""


@dataclass(frozen=True, slots=True)
class BlockLost:
    """A map output is gone (its executor died) and no backup covered it."""

    time: float
    shuffle_id: int
    map_index: int


@dataclass(frozen=True, slots=True)
class ShuffleConsumed:
    """No stage will read this shuffle again in this job (all consumers finished, or job ended)."""

    time: float
    shuffle_id: int


@dataclass(frozen=True, slots=True)
class Tick:
    """Periodic wake-up (``spark.trspark.period`` seconds) for re-planning."""

    time: float


@dataclass(frozen=True, slots=True)
class JobEnded:
    time: float
    succeeded: bool = True
    job_id: int | None = None
    """The job that ended (None: a driver that does not say; its stage graph is then kept)."""


Event = (
    ExecutorAdded
    | ExecutorLost
    | ExecutorNotice
    | ExecutorRebalance
    | JobSubmitted
    | StageSubmitted
    | StageCompleted
    | TaskStarted
    | TaskEnded
    | BlockBackedUp
    | BackupFailed
    | BlockLost
    | ShuffleConsumed
    | Tick
    | JobEnded
)

# ----------------------------------------------------------------------------------------------
# Commands: engine -> world
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Backup:
    """Copy map output ``(shuffle_id, map_index)`` from ``source`` to ``target`` now.

    The engine keeps the backup stack and releases backups in the order it wants them run; a
    driver starts them in the order received (per source executor, one or more at a time).
    """

    shuffle_id: int
    map_index: int
    source: str
    target: str
    bytes: int = 0
    map_id: int | None = None


@dataclass(frozen=True, slots=True)
class CancelBackup:
    """Abort a released backup that has not finished (its consumers are safe or it was consumed)."""

    shuffle_id: int
    map_index: int


@dataclass(frozen=True, slots=True)
class DropBackup:
    """Delete the copies of a block (its shuffle was consumed); frees peer memory / remote space."""

    shuffle_id: int
    map_index: int


@dataclass(frozen=True, slots=True)
class SchedulingHints:
    """TR-Scheduling as data: where a task of each stage may start (paper Algorithm 1).

    The engine decides everything; a driver applies the hints with
    :func:`trspark.engine.placement.place` (the simulator) or its Scala mirror (the live shim).

    * ``stage_order``: runnable stages, most preferred first (largest data-size reduction rate).
    * ``forbidden``: stage -> executors where a task of the stage must not start (it would not
      end before the executor dies, or its notice deadline) -- unless the stage would starve:
      pending tasks, none running, no other free slot may take one.
    * ``fallback``: stage -> executors that take a task of the stage only after every other
      free slot had its pick (a fresh executor JVM runs its first tasks slowly).
    * ``drain``: executors under a termination notice: they start no new task at all (running
      tasks finish).
    Executors and stages not listed are unrestricted. A driver replaces its previous hints with
    each new ``SchedulingHints``.
    """

    stage_order: tuple[int, ...] = ()
    forbidden: dict[int, tuple[str, ...]] = field(default_factory=dict)
    fallback: dict[int, tuple[str, ...]] = field(default_factory=dict)
    drain: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DuplicateTask:
    """Start a copy of running task ``(stage_id, partition)`` on ``executor_id`` (paper §5)."""

    stage_id: int
    partition: int
    executor_id: str


@dataclass(frozen=True, slots=True)
class KillDuplicate:
    """Kill the copy of ``(stage_id, partition)`` running on ``executor_id`` (core needed elsewhere)."""

    stage_id: int
    partition: int
    executor_id: str


@dataclass(frozen=True, slots=True)
class ReleaseExecutor:
    """Let ``executor_id`` go now, before its termination-notice deadline.

    Sent once, when an executor under a notice runs no task, sends no backup and every output
    it holds is consumed, saved elsewhere or no longer needed: it has nothing left to do, and
    leaving at once lets the cluster manager start its replacement before the deadline (what
    Spark's decommissioning does once its blocks are migrated). Drivers report the loss that
    follows as ``ExecutorLost(reason="released")``.
    """

    executor_id: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class SafetyBelt:
    """The engine switched to always-checkpoint (``on``) and why; drivers log / report it."""

    on: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Advice:
    """Non-binding advice for the user (e.g. split tasks longer than expected lifetimes)."""

    kind: Literal["split", "info"]
    message: str
    stage_id: int | None = None


Command = (
    Backup | CancelBackup | DropBackup | SchedulingHints | DuplicateTask | KillDuplicate | ReleaseExecutor
    | SafetyBelt | Advice
)

_EVENT_TYPES: tuple[type, ...] = (
    ExecutorAdded,
    ExecutorLost,
    ExecutorNotice,
    ExecutorRebalance,
    JobSubmitted,
    StageSubmitted,
    StageCompleted,
    TaskStarted,
    TaskEnded,
    BlockBackedUp,
    BackupFailed,
    BlockLost,
    ShuffleConsumed,
    Tick,
    JobEnded,
)
_COMMAND_TYPES: tuple[type, ...] = (
    Backup,
    CancelBackup,
    DropBackup,
    SchedulingHints,
    DuplicateTask,
    KillDuplicate,
    ReleaseExecutor,
    SafetyBelt,
    Advice,
)
_BY_NAME: dict[str, type] = {t.__name__: t for t in _EVENT_TYPES + _COMMAND_TYPES}
_TUPLE_FIELDS = {"parent_stage_ids", "parent_shuffle_ids", "stage_order", "pending_partitions", "drain"}
_JOB_GRAPH_FIELDS = ("stage_ids", "num_tasks", "shuffle_ids", "parents")


class ProtocolError(ValueError):
    """A message that is not a valid event or command."""


def to_dict(message: Event | Command) -> dict[str, Any]:
    out: dict[str, Any] = {"type": type(message).__name__}
    for f in dataclasses.fields(message):
        value = getattr(message, f.name)
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, dict):
            value = {str(k): v for k, v in value.items()}
        out[f.name] = value
    return out


def to_json(message: Event | Command) -> str:
    """One line of JSON (no newline inside)."""
    return json.dumps(to_dict(message), separators=(",", ":"))


def from_dict(data: dict[str, Any]) -> Event | Command:
    try:
        cls = _BY_NAME[data["type"]]
    except KeyError as exc:
        raise ProtocolError(f"unknown message type {data.get('type')!r}") from exc
    kwargs = {k: v for k, v in data.items() if k != "type"}
    for name in _TUPLE_FIELDS & kwargs.keys():
        if kwargs[name] is not None:
            kwargs[name] = tuple(kwargs[name])
    if cls is JobSubmitted:
        try:
            for name in _JOB_GRAPH_FIELDS[:3]:
                kwargs[name] = tuple(kwargs.get(name) or ())
            kwargs["parents"] = tuple(tuple(p) for p in kwargs.get("parents") or ())
        except TypeError as exc:
            raise ProtocolError(f"JobSubmitted: the stage graph must be lists: {exc}") from exc
        if len({len(kwargs[f]) for f in _JOB_GRAPH_FIELDS}) > 1:
            raise ProtocolError(f"JobSubmitted: stage_ids, num_tasks, shuffle_ids and parents differ in length: {data}")
    if cls is SchedulingHints:
        try:
            for name in ("forbidden", "fallback"):
                kwargs[name] = {int(k): tuple(v) for k, v in (kwargs.get(name) or {}).items()}
        except (TypeError, ValueError, AttributeError) as exc:
            raise ProtocolError(f"SchedulingHints: forbidden/fallback must map stage ids to executor lists: {exc}") from exc
    try:
        return cls(**kwargs)  # type: ignore[no-any-return]
    except TypeError as exc:
        raise ProtocolError(f"bad fields for {cls.__name__}: {exc}") from exc


def from_json(line: str) -> Event | Command:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"not JSON: {line[:80]!r}") from exc
    if not isinstance(data, dict):
        raise ProtocolError(f"not a JSON object: {line[:80]!r}")
    return from_dict(data)
