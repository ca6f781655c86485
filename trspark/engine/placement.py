"""Apply :class:`~trspark.engine.protocol.SchedulingHints` to task placement (TR-Scheduling, Algorithm 1).

Pure functions used by the simulator's scheduler; the live scheduler hook (Scala) applies the
same two rules and must stay in step with this file:

1. Stage order: runnable stages listed in ``hints.stage_order`` come first, in that order;
   the others follow in the driver's own order (Spark FIFO: by stage id).
2. The γ rule: a task of stage ``s`` may start on executor ``e`` only if
   ``expected_task_seconds[s] <= max_task_seconds[e]`` (missing entries = no restriction).
   The driver may still place it there when no allowed executor is free and waiting would be
   worse (the engine sets ``max_task_seconds`` only while a safer executor exists).
3. Drain: an executor in ``hints.drain`` (termination notice) starts no new task, without that
   exception (the engine drains only while some executor is not draining).
"""

from __future__ import annotations

from collections.abc import Iterable

from trspark.engine.protocol import SchedulingHints


def order_stages(runnable: Iterable[int], hints: SchedulingHints | None) -> list[int]:
    """Runnable stage ids in the order tasks should be taken from them."""
    stages = sorted(runnable)
    if hints is None or not hints.stage_order:
        return stages
    rank = {stage: i for i, stage in enumerate(hints.stage_order)}
    return sorted(stages, key=lambda s: (rank.get(s, len(rank)), s))


def allowed(executor_id: str, stage_id: int, hints: SchedulingHints | None) -> bool:
    """May a task of ``stage_id`` start on ``executor_id`` under the γ rule?"""
    if hints is None:
        return True
    if executor_id in hints.drain:
        return False
    limit = hints.max_task_seconds.get(executor_id)
    if limit is None:
        return True
    expected = hints.expected_task_seconds.get(stage_id)
    return expected is None or expected <= limit


def may_start_now(executor_id: str, stage_id: int, with_free_slot: Iterable[str], hints: SchedulingHints | None) -> bool:
    """The live form of the γ rule: a forbidden executor may still take a task of ``stage_id`` when
    no other executor with a free slot allows it (waiting would be worse) -- unless it is draining."""
    if allowed(executor_id, stage_id, hints):
        return True
    if hints is not None and executor_id in hints.drain:
        return False
    return not any(e != executor_id and allowed(e, stage_id, hints) for e in with_free_slot)
