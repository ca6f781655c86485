"""What the engine knows of one executor, stage and map output: the records :class:`JobState` keeps.

Times are seconds on the driver's clock; bytes are bytes. A record changes only through
:meth:`trspark.engine.state.JobState.apply`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from cost_model.lifetimes import LifetimeModel
from trspark.engine.events import REMOTE, ExecutorLost

BlockId = tuple[int, int]
"""``(shuffle_id, map_index)``: one map output."""


@dataclass(frozen=True)
class PlannedStage:
    """A stage of a submitted job's graph (``JobSubmitted``), before or after Spark submits it."""

    stage_id: int
    num_tasks: int
    shuffle_id: int | None
    parent_stage_ids: tuple[int, ...]


@dataclass
class ExecutorView:
    executor_id: str
    added: float
    started: float
    """Start of the lifetime clock (the VM start if the driver knows it, else registration)."""
    host: str = ""
    cores: int = 1
    pool: str = "default"
    notice_deadline: float | None = None
    """Absolute time the executor will be gone (termination notice / spot block), if known."""
    draining: bool = False
    """A termination notice came (``ExecutorNotice.kind == "notice"``): no new tasks go here."""
    noticed_at: float | None = None
    """Time that termination notice came (None without one, or once it expired: :func:`notice_expired`)."""
    rebalance_at: float | None = None
    """Time the cloud recommended moving work off this executor (``ExecutorRebalance``), if it did."""
    lost: float | None = None
    lost_reason: str = ""
    running: set[tuple[int, int]] = field(default_factory=set)
    """Task copies ``(stage_id, partition)`` running here now."""
    tasks_done: int = 0
    """Tasks that ended successfully here (0: a fresh JVM, its first tasks run slow)."""

    @property
    def alive(self) -> bool:
        return self.lost is None

    def age(self, now: float) -> float:
        """Seconds this executor has lived at ``now`` (τ in the paper)."""
        lived = now - self.started
        return lived if lived > 0.0 else 0.0  # max(0, lived), without the builtin's cost on a hot path

    @property
    def free_cores(self) -> int:
        return max(0, self.cores - len(self.running))


@dataclass
class StageView:
    stage_id: int
    num_tasks: int
    parent_stage_ids: tuple[int, ...] = ()
    parent_shuffle_ids: tuple[int, ...] = ()
    shuffle_id: int | None = None
    attempt: int = 0
    submitted: float = 0.0
    active: bool = True
    """Submitted and not completed (its tasks are runnable or running)."""
    finished: set[int] = field(default_factory=set)
    """Partitions whose output currently exists (or, for a result stage, that completed)."""
    ever_finished: set[int] = field(default_factory=set)
    running: dict[int, set[str]] = field(default_factory=dict)
    """partition -> executors running a copy of it."""
    started_at: dict[tuple[int, str], float] = field(default_factory=dict)
    tasks_done: int = 0
    seconds_sum: float = 0.0
    longest_seconds: float = 0.0
    """Run time of the longest finished task of this stage (s)."""
    read_bytes_sum: int = 0
    write_bytes_sum: int = 0

    @property
    def unfinished(self) -> int:
        """``N_i``: tasks of this stage that have not (or no longer) produced their output."""
        left = self.num_tasks - len(self.finished)
        return left if left > 0 else 0  # max(0, left), inlined: read on every decision

    @property
    def pending_count(self) -> int:
        """Tasks neither finished nor running (waiting for a core)."""
        running_unfinished = sum(1 for p in self.running if p not in self.finished)
        return max(0, self.unfinished - running_unfinished)

    def mean_task_seconds(self, default: float) -> float:
        """``T_i``: mean run time of this stage's finished tasks (``default`` before any finished)."""
        return self.seconds_sum / self.tasks_done if self.tasks_done else default

    def mean_read_bytes(self) -> float | None:
        return self.read_bytes_sum / self.tasks_done if self.tasks_done else None

    def mean_write_bytes(self) -> float | None:
        return self.write_bytes_sum / self.tasks_done if self.tasks_done else None


@dataclass
class MapOutput:
    shuffle_id: int
    map_index: int
    stage_id: int
    executor_id: str
    """Where the original copy lives (the executor that wrote it)."""
    bytes: int
    seconds: float
    """Run time of the map task that produced it (its re-computation cost ``C_k``)."""
    created: float
    map_id: int | None = None
    backups: set[str] = field(default_factory=set)
    """Finished backups: ``"remote"`` and/or peer executor ids."""
    source_lost: bool = False
    """The writing executor died; the block lives on only in ``backups``."""
    last_peer: str | None = None
    """The peer that received the latest peer copy (a driver may keep only that one)."""
    consumed: bool = False
    block_id: BlockId = field(init=False, repr=False, compare=False)
    """``(shuffle_id, map_index)``, read on every decision: built once."""

    def __post_init__(self) -> None:
        self.block_id = (self.shuffle_id, self.map_index)

    @property
    def on_remote(self) -> bool:
        return REMOTE in self.backups

    def backup_source(self, avoid: Collection[str] = ()) -> str | None:
        """Where to copy from: the writer while it lives, else the newest peer copy.

        A holder in ``avoid`` (told to go, its loss not reported yet) is the source only when no
        other holder is left: a copy read from an executor being killed would fail with it.
        """
        if not self.source_lost and not avoid:
            return self.executor_id
        holders = self.holders()
        candidates = ([h for h in holders if h not in avoid] or holders) if avoid else holders
        if not self.source_lost and self.executor_id in candidates:
            return self.executor_id
        if self.last_peer in candidates:
            return self.last_peer
        return candidates[0] if candidates else None

    def holders(self) -> list[str]:
        """Executors holding a copy (the writer unless lost, then peer backups)."""
        backups = self.backups
        if not backups:  # most outputs: no copy yet
            return [] if self.source_lost else [self.executor_id]
        peers = sorted(backups)
        if REMOTE in backups:
            peers.remove(REMOTE)
        return peers if self.source_lost else [self.executor_id, *peers]


LifetimeOf = Callable[[ExecutorView], LifetimeModel]
"""An executor's lifetime law, from what the state knows of it (start, pool, termination notice)."""

#: Horizon (s) standing for "ever" in :func:`never_evicted`; ~3 years.
EVER = 1e8


def never_evicted(model: LifetimeModel) -> bool:
    """:math:`P(T > \text{EVER}) = 1`: capacity that is never taken away (``stable``, on-demand)."""
    return float(model.cond_sf(0.0, EVER)) >= 1.0


NOTICE_EXPIRY_MIN_SECONDS = 10.0
"""Shortest wait (s) past a notice's deadline before it counts as withdrawn: a driver learns of
an executor's end a few seconds after it."""


def notice_expired(noticed_at: float, deadline: float, now: float) -> bool:
    """Has an executor outlived its termination notice, so that no eviction is coming after all?

    True once ``now >= deadline + max(deadline - noticed_at, NOTICE_EXPIRY_MIN_SECONDS)``
    (all in s): it outlived its deadline by as long as the notice gave, which a cloud's notice
    that was carried out does not allow (a withdrawn notice, a VM kept after all).
    """
    return now >= deadline + max(deadline - noticed_at, NOTICE_EXPIRY_MIN_SECONDS)


def observed_lifetime(executor: ExecutorView, lost: ExecutorLost) -> tuple[float, bool]:
    """``(lifetime s, evicted?)`` of an executor that is gone, for lifetime fits.

    An executor that left early under a termination notice (released, decommissioned) would
    have been evicted at the deadline: its lifetime is the deadline's age, an observed eviction.
    Without a notice only an eviction is observed; any other loss censors the lifetime there.
    """
    deadline = executor.notice_deadline
    if executor.draining and deadline is not None and lost.reason != "evicted":
        return max(deadline, lost.time) - executor.started, True
    return executor.age(lost.time), lost.reason == "evicted"
