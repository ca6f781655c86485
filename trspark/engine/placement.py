"""Task placement under :class:`~trspark.engine.protocol.SchedulingHints` (TR-Scheduling, Algorithm 1).

The one placement rule of trspark. The engine decides the hints (``tr/scheduling.py``); the
simulator applies them with :func:`place`, the live shim with its line-for-line Scala mirror
(``HintPlacement.place``), and a parity test runs random states through both.

1. Stage order: runnable stages listed in ``hints.stage_order`` come first, in that order;
   the others follow by stage id (Spark FIFO).
2. Free slots (one per free core, in the driver's order) are offered in three passes; in each,
   a slot takes one task of the first stage in that order with a pending task that its
   executor's *tier* for the stage admits:

   * pass :data:`ALLOWED`: only unrestricted executors;
   * pass :data:`FALLBACK`: also ``hints.fallback`` executors, so they get what the others left;
   * pass :data:`STARVING`: also ``hints.forbidden`` executors, for a stage with pending tasks
     and none running (the γ rule may delay a stage, never starve it).

   A ``hints.drain`` executor (:data:`NEVER`) takes nothing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from trspark.engine.protocol import SchedulingHints

ALLOWED, FALLBACK, STARVING, NEVER = 0, 1, 2, 3
"""Tiers of an (executor, stage) pair: the first pass in which a slot of the executor may take a task of the stage."""

Slot = TypeVar("Slot")
SlotIn = TypeVar("SlotIn", contravariant=True)


def order_stages(runnable: Iterable[int], hints: SchedulingHints | None) -> list[int]:
    """Runnable stage ids in the order tasks should be taken from them."""
    stages = sorted(runnable)
    if hints is None or not hints.stage_order:
        return stages
    rank = {stage: i for i, stage in enumerate(hints.stage_order)}
    return sorted(stages, key=lambda s: (rank.get(s, len(rank)), s))


def tier(executor_id: str, stage_id: int, hints: SchedulingHints | None) -> int:
    """The pass from which ``executor_id`` may take a task of ``stage_id`` (:data:`NEVER`: drained)."""
    if hints is None:
        return ALLOWED
    if executor_id in hints.drain:
        return NEVER
    if executor_id in hints.forbidden.get(stage_id, ()):
        return STARVING
    if executor_id in hints.fallback.get(stage_id, ()):
        return FALLBACK
    return ALLOWED


def allowed(executor_id: str, stage_id: int, hints: SchedulingHints | None) -> bool:
    """May a task of ``stage_id`` start on ``executor_id`` without any exception?"""
    return tier(executor_id, stage_id, hints) == ALLOWED


def gamma_hints(
    stage_order: tuple[int, ...], max_task_seconds: Mapping[str, float], expected_task_seconds: Mapping[int, float],
    drain: tuple[str, ...] = (), fallback: Iterable[str] = (),
) -> SchedulingHints:
    """Hints from the γ rule's numbers: ``e`` is forbidden for stage ``s`` unless ``ET_s <= max_task_seconds[e]``.

    ``expected_task_seconds``: stage -> ET (s); ``max_task_seconds``: executor -> longest ET (s)
    allowed to start there. ``fallback`` executors take a stage they are not forbidden for
    (with ``ET_s > 0``) only after the others. Stages without ET are unrestricted.
    """
    forbidden: dict[int, tuple[str, ...]] = {}
    later: dict[int, tuple[str, ...]] = {}
    slow = sorted(set(fallback))
    for stage, seconds in expected_task_seconds.items():
        out = tuple(sorted(e for e, limit in max_task_seconds.items() if not seconds <= limit))
        if out:
            forbidden[stage] = out
        rest = tuple(e for e in slow if e not in out) if seconds > 0.0 else ()
        if rest:
            later[stage] = rest
    return SchedulingHints(stage_order=stage_order, forbidden=forbidden, fallback=later, drain=drain)


class Driver(Protocol[SlotIn]):
    """What :func:`place` needs from the driver that runs the tasks."""

    def executor(self, slot: SlotIn) -> str:
        """The executor id of a free slot."""

    def usable(self, slot: SlotIn) -> bool:
        """Is the slot still free (its executor alive with a free core)? Unusable slots are dropped."""

    def pending(self, stage_id: int) -> bool:
        """Has the stage a task waiting to start?"""

    def running(self, stage_id: int) -> bool:
        """Has the stage a task running?"""

    def start(self, slot: SlotIn, stages: Sequence[int]) -> bool:
        """Start one task on ``slot`` from the first of ``stages`` that takes it; False: none did."""


def place(free: deque[Slot], order: Sequence[int], hints: SchedulingHints | None, driver: Driver[Slot]) -> None:
    """Start tasks on the ``free`` slots from the stages in ``order`` (the passes of the module docstring).

    ``free`` is consumed from the left and left holding the slots still free, in the order to offer
    them next time (draining executors' slots last once the starving pass ran). A slot the driver
    frees while a task starts (appended to ``free``) is offered in the same pass.
    """
    skipped = _pass(free, order, driver, lambda e: lambda s: tier(e, s, hints) == ALLOWED)
    if hints is None or not skipped:
        return
    if hints.fallback:
        _pass(free, order, driver, lambda e: lambda s: tier(e, s, hints) <= FALLBACK)
    drained = [slot for slot in free if driver.executor(slot) in hints.drain]
    if drained:
        kept = [slot for slot in free if driver.executor(slot) not in hints.drain]
        free.clear()
        free.extend(kept)
    _starving_pass(free, order, hints, driver)
    free.extend(drained)


def _pass(free: deque[Slot], order: Sequence[int], driver: Driver[Slot],
          admits: Callable[[str], Callable[[int], bool]]) -> bool:
    """Each usable slot takes a task of the first pending stage ``admits(executor)`` accepts.

    Stops at the first slot left with no task pending at all. Returns whether a slot was left
    while a task was pending; unusable slots are dropped.
    """
    skipped: list[Slot] = []
    while free:
        slot = free.popleft()
        if not driver.usable(slot):
            continue
        take = admits(driver.executor(slot))
        stages = [s for s in order if driver.pending(s) and take(s)]
        if stages and driver.start(slot, stages):
            continue
        if not any(driver.pending(s) for s in order):
            free.appendleft(slot)
            break
        skipped.append(slot)
    free.extendleft(reversed(skipped))
    return bool(skipped)


def _starving_pass(free: deque[Slot], order: Sequence[int], hints: SchedulingHints, driver: Driver[Slot]) -> None:
    """One task for each stage with pending tasks and none running, on the next usable slots in order."""
    kept: list[Slot] = []
    while free:
        starving = [s for s in order if driver.pending(s) and not driver.running(s)]
        if not starving:
            break
        slot = free.popleft()
        if not driver.usable(slot):
            continue
        executor = driver.executor(slot)
        stages = [s for s in starving if tier(executor, s, hints) <= STARVING]
        if not (stages and driver.start(slot, stages)):
            kept.append(slot)
    free.extendleft(reversed(kept))


class Counts:
    """A driver over task counts: the rule on its own, for checks and for the parity test with Scala.

    ``pending`` / ``running``: stage -> number of tasks; a start moves one task of the first
    offered stage from pending to running and records ``(executor, stage)`` in ``placed``.
    """

    def __init__(self, pending: Mapping[int, int], running: Mapping[int, int]) -> None:
        self.waiting = dict(pending)
        self.started = dict(running)
        self.placed: list[tuple[str, int]] = []

    def executor(self, slot: str) -> str:
        return slot

    def usable(self, slot: str) -> bool:
        return True

    def pending(self, stage_id: int) -> bool:
        return self.waiting.get(stage_id, 0) > 0

    def running(self, stage_id: int) -> bool:
        return self.started.get(stage_id, 0) > 0

    def start(self, slot: str, stages: Sequence[int]) -> bool:
        stage = stages[0]
        self.waiting[stage] -= 1
        self.started[stage] = self.started.get(stage, 0) + 1
        self.placed.append((slot, stage))
        return True


def plan(slots: Sequence[str], pending: Mapping[int, int], running: Mapping[int, int],
         hints: SchedulingHints | None) -> list[tuple[str, int]]:
    """``(executor, stage)`` of each task :func:`place` starts on ``slots`` (executor ids, one per free core)."""
    counts = Counts(pending, running)
    place(deque(slots), order_stages(set(pending) | set(running), hints), hints, counts)
    return counts.placed
