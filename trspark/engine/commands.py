"""The engine's commands: what the policy engine asks the world to do.

A driver (the simulator or the live shim) applies them in the order received; see
:mod:`trspark.engine.events` for the time and block conventions they share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


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

    ``idle=True``: dynamic allocation's scale-down instead (:mod:`trspark.engine.tr.elastic`):
    an idle executor whose live outputs are all saved elsewhere. The driver moves its outputs to
    their copies, then removes it as dynamic allocation does -- only if it still runs no task,
    and without asking for a replacement.
    """

    executor_id: str
    reason: str = ""
    idle: bool = False


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
