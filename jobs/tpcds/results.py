"""The benchmark's tidy CSV: one row per (query, policy, scenario, repeat) run.

Columns (units in the names where they have one):

``query, policy, sf, seed, repeat, scenario``
    What ran. ``scenario`` is ``stable`` (no kills: the reference time and the policy's overhead),
    ``evicted`` (the drawn kill schedule, the same for every policy: a paired comparison) or
    ``real`` (an existing cluster given with ``--master``, no injected kills).
``seconds``
    Wall-clock time of the query (collect included), or the time cap when it timed out.
``stable_seconds, slowdown``
    Median stable time of vanilla Spark (``never``) on this query; ``slowdown = seconds /
    stable_seconds`` (so a policy's own overhead shows in its stable rows' slowdown).
``executors_killed, capacity_lost_seconds``
    Kills due while the query ran (for a policy given notices: the kills whose deadline fell
    within the run), and executor-seconds without a registered executor in the slot (each kill
    costs 6-12 s of one executor here before the replacement registers).
``tasks_recomputed``
    Task attempts of shuffle-map stages beyond one per partition (re-runs after lost outputs,
    resubmitted stages, tasks that died with their executor).
``backups_count, backups_bytes, backups_local, backups_remote``
    Map outputs backed up by the plugin (0 for policies without it).
``notices, executors_drained, executors_released``
    Termination notices the plugin received, executors its engine stopped giving tasks to, and
    executors it released before their deadline (0 for policies without the plugin). A file
    without these columns reads back with 0 in them.
``plugin_fallback``
    The plugin had fallen back to always-checkpoint by the end of the run (its policy engine did
    not connect within ``spark.trspark.engine.startTimeout`` or lagged behind): such a ``tr`` run
    measured always-checkpoint.
``result_ok, failed, error``
    Answer equal to DuckDB's (the oracle); the run failed (aborted job, time cap); why.
"""

from __future__ import annotations

import csv
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The order policies are shown in: vanilla Spark first, trspark last.
POLICY_ORDER = ("never", "always", "decommission", "efm", "pado", "tr")


@dataclass
class RunRow:
    query: str
    policy: str
    sf: float
    seed: int
    repeat: int
    scenario: str
    seconds: float
    stable_seconds: float = float("nan")
    slowdown: float = float("nan")
    executors_killed: int = 0
    capacity_lost_seconds: float = 0.0
    tasks_recomputed: int = 0
    backups_count: int = 0
    backups_bytes: int = 0
    backups_local: int = 0
    backups_remote: int = 0
    notices: int = 0
    executors_drained: int = 0
    executors_released: int = 0
    plugin_fallback: bool = False
    result_ok: bool = False
    failed: bool = False
    error: str = ""


COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RunRow))
_TYPES: dict[str, Any] = {f.name: f.type for f in dataclasses.fields(RunRow)}

#: Columns a results file may lack; they read back as their defaults.
LATER_COLUMNS = ("notices", "executors_drained", "executors_released")


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "" if value != value else repr(value)  # shortest text that reads back exactly
    return str(value).replace("\n", " ")


def append(path: Path, row: RunRow) -> None:
    """Append ``row`` to the CSV at ``path`` (writing the header first if the file is new).

    A file from an older version keeps its header: the row is written in its columns, so runs
    appended to it still pool with its earlier rows (the :data:`LATER_COLUMNS` are left out).
    """
    path = Path(path)
    new = not path.exists() or path.stat().st_size == 0
    if new:
        columns = COLUMNS
    else:
        with path.open(newline="") as handle:
            columns = _columns(path, next(csv.reader(handle), []))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as handle:
        writer = csv.writer(handle)
        if new:
            writer.writerow(COLUMNS)
        writer.writerow(_cells(row, columns))


def write(path: Path, rows: list[RunRow]) -> None:
    """Write ``rows`` to the CSV at ``path`` in :data:`COLUMNS`, replacing the file (a new one, then renamed)."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    path.parent.mkdir(parents=True, exist_ok=True)
    with partial.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        writer.writerows(_cells(row, COLUMNS) for row in rows)
    partial.replace(path)


def _cells(row: RunRow, columns: tuple[str, ...]) -> list[str]:
    """``row``'s values as CSV text, in ``columns``."""
    return [_format(getattr(row, name)) for name in columns]


def _parse(name: str, raw: str) -> Any:
    kind = _TYPES[name]
    if kind == "bool":
        if raw not in ("true", "false"):
            raise ValueError(f"column {name}: expected true/false, got {raw!r}")
        return raw == "true"
    if kind == "float":
        return float(raw) if raw else float("nan")
    if kind == "int":
        return int(raw)
    return raw


def read(path: Path) -> list[RunRow]:
    """Read a results CSV back, checking that its header is :data:`COLUMNS` (or an older one)."""
    with Path(path).open(newline="") as handle:
        reader = csv.reader(handle)
        columns = _columns(path, next(reader, []))
        return [RunRow(**{name: _parse(name, raw) for name, raw in zip(columns, line, strict=True)})
                for line in reader if line]


def _columns(path: Path, header: list[str]) -> tuple[str, ...]:
    """``header`` of the results file at ``path`` if it is :data:`COLUMNS`, or those less some :data:`LATER_COLUMNS`."""
    columns = tuple(header)
    known = tuple(name for name in COLUMNS if name in columns)
    if columns != known or not set(COLUMNS) - set(columns) <= set(LATER_COLUMNS):
        raise ValueError(f"{path}: not a trspark TPC-DS results file; expected columns {','.join(COLUMNS)}")
    return columns
