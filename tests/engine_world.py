"""Hand-made event sequences for the engine tests (no simulator involved)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from trspark.engine.commands import Command
from trspark.engine.events import Event, ExecutorAdded, StageSubmitted, TaskEnded, TaskStarted
from trspark.engine.interface import Policy

MB = 1_000_000


def add_executors(ids: Iterable[str], *, time: float = 0.0, cores: int = 1, vm_started: float | None = None) -> list[Event]:
    return [ExecutorAdded(time=time, executor_id=e, cores=cores, vm_started=vm_started) for e in ids]


def map_stage(stage_id: int, num_tasks: int, shuffle_id: int | None, *, time: float = 0.0,
              parents: Sequence[int] = (), parent_shuffles: Sequence[int] = ()) -> StageSubmitted:
    return StageSubmitted(time=time, stage_id=stage_id, num_tasks=num_tasks, parent_stage_ids=tuple(parents),
                          parent_shuffle_ids=tuple(parent_shuffles), shuffle_id=shuffle_id)


def run_task(stage_id: int, partition: int, executor: str, *, start: float, seconds: float,
             write: int = 0, read: int = 0, shuffle_id: int | None = None) -> list[Event]:
    """A task copy that starts at ``start`` and succeeds ``seconds`` later."""
    return [
        TaskStarted(time=start, stage_id=stage_id, partition=partition, executor_id=executor),
        TaskEnded(time=start + seconds, stage_id=stage_id, partition=partition, executor_id=executor,
                  duration=seconds, shuffle_write_bytes=write, shuffle_read_bytes=read, shuffle_id=shuffle_id),
    ]


def feed(policy: Policy, events: Iterable[Event]) -> list[Command]:
    """Feed events in order; return every command the policy gave back."""
    out: list[Command] = []
    for event in events:
        out.extend(policy.handle(event))
    return out
