"""The engine's events: what the world tells the policy engine.

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
"""

from __future__ import annotations

from dataclasses import dataclass

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
    """One of :data:`LOSS_REASONS`. Only ``evicted`` is an eviction; every other loss censors the
    executor's lifetime and is no kill."""


LOSS_REASONS = ("evicted", "decommissioned", "released", "removed", "killed", "app")
"""Why an executor left: ``evicted`` (transient capacity taken away), ``decommissioned`` (Spark's
decommissioning, e.g. a cluster manager's notice), ``released`` (the driver let it go after a
:class:`~trspark.engine.commands.ReleaseExecutor`), ``removed`` (dynamic allocation's scale-down or
the user's ``killExecutors``: Spark's "Executor killed by driver." or a "spark scale down"
decommissioning), ``killed`` (another kill by the driver), ``app`` (the application's fault, or its
end: executors stopped while the driver's JVM shuts down)."""


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
class ReleaseKept:
    """The driver kept an executor told to go while idle (``ReleaseExecutor(idle=True)``): Spark did
    not find it idle (a task took it, it holds cached blocks, or dynamic allocation's target counts
    on it)."""

    time: float
    executor_id: str


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
    sql_execution: int | None = None
    """The Spark SQL query this job belongs to, or None. Adaptive execution runs each query stage
    as a job of its own, and a later job of the query can read one of its shuffles again (a
    reused exchange): such a shuffle's readers are known only when the query ends."""


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
    """``success``, ``fetch_failed``, ``executor_lost``, ``killed``, ``exception``; ``ignored``: the
    task succeeded but Spark did not register its map output (a superseded or possibly bogus attempt)."""


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
    | ReleaseKept
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
