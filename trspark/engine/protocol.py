"""The wire format between the engine and its drivers: events and commands as JSON.

Wire format (live bridge): one JSON object per line, ``{"type": "<ClassName>", ...fields}``;
:func:`to_json` / :func:`from_json` are the only (de)serialisers.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from trspark.engine.commands import (
    Advice,
    Backup,
    CancelBackup,
    Command,
    DropBackup,
    DuplicateTask,
    KillDuplicate,
    ReleaseExecutor,
    SafetyBelt,
    SchedulingHints,
)
from trspark.engine.events import (
    LOSS_REASONS,
    BackupFailed,
    BlockBackedUp,
    BlockLost,
    Event,
    ExecutorAdded,
    ExecutorLost,
    ExecutorNotice,
    ExecutorRebalance,
    JobEnded,
    JobSubmitted,
    ReleaseKept,
    ShuffleConsumed,
    StageCompleted,
    StageSubmitted,
    TaskEnded,
    TaskStarted,
    Tick,
)

_EVENT_TYPES: tuple[type, ...] = (
    ExecutorAdded,
    ExecutorLost,
    ExecutorNotice,
    ExecutorRebalance,
    ReleaseKept,
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
    kind = data.get("type")
    cls = _BY_NAME.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ProtocolError(f"unknown message type {kind!r}")
    kwargs = {k: v for k, v in data.items() if k != "type"}
    for name in _TUPLE_FIELDS & kwargs.keys():
        if kwargs[name] is not None:
            if not isinstance(kwargs[name], list):
                raise ProtocolError(f"{cls.__name__}: {name} must be a list, got {kwargs[name]!r}")
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
    if cls is ExecutorLost and kwargs.get("reason", "evicted") not in LOSS_REASONS:
        raise ProtocolError(f"ExecutorLost: reason {kwargs.get('reason')!r} is not one of {', '.join(LOSS_REASONS)}")
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
