"""The demo's table and its plain-words summary, from the runs' rows.

Per workload and policy: the median slowdown over the kill schedules with its spread (min-max),
and per run (median over the schedules) the map tasks re-run, the bytes backed up, the
executor-seconds of capacity lost and the excess over the capacity floor. A difference whose
spreads overlap is "within noise" (:func:`within_noise`), never a finding.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobs.tpcds.results import POLICY_ORDER, RunRow
from jobs.tpcds.stats import excess, finite_median

if TYPE_CHECKING:
    from rich.table import Table


@dataclass(frozen=True)
class Spread:
    """Median and range (min-max) of one policy's evicted slowdowns on one workload (inf: failed)."""

    median: float
    low: float
    high: float
    failed: int = 0

    @classmethod
    def of(cls, runs: list[RunRow]) -> Spread:
        values = [math.inf if r.failed else r.slowdown for r in runs]
        values = [v for v in values if not math.isnan(v)]
        if not values:
            return cls(math.nan, math.nan, math.nan)
        return cls(statistics.median(values), min(values), max(values), sum(r.failed for r in runs))

    def text(self) -> str:
        if math.isnan(self.median):
            return "-"
        return f"{_x(self.median)} ({_x(self.low)}-{_x(self.high)})"


def within_noise(a: Spread, b: Spread) -> bool:
    """Is the difference between ``a`` and ``b`` inside their spread (their min-max ranges overlap)?"""
    return a.low <= b.high and b.low <= a.high


@dataclass(frozen=True)
class DemoLine:
    """One table row: a workload under a policy, its evicted runs summarised (medians per run)."""

    workload: str
    policy: str
    runs: int
    slowdown: Spread
    rerun: float
    backup_bytes: float
    lost_seconds: float
    excess: float


def demo_lines(rows: list[RunRow], executors: float) -> list[DemoLine]:
    """The table's rows, in workload order and then :data:`~jobs.tpcds.results.POLICY_ORDER`."""
    order = {p: i for i, p in enumerate(POLICY_ORDER)}
    groups: dict[tuple[str, str], list[RunRow]] = {}
    for r in rows:
        if r.scenario == "evicted":
            groups.setdefault((r.query, r.policy), []).append(r)
    workloads = list(dict.fromkeys(r.query for r in rows))
    lines = []
    for (workload, policy), runs in sorted(groups.items(), key=lambda kv: (workloads.index(kv[0][0]),
                                                                         order.get(kv[0][1], 99))):
        lines.append(DemoLine(
            workload, policy, len(runs), Spread.of(runs),
            rerun=finite_median([float(r.tasks_recomputed) for r in runs]),
            backup_bytes=finite_median([float(r.backups_bytes) for r in runs]),
            lost_seconds=finite_median([r.capacity_lost_seconds for r in runs]),
            excess=finite_median([excess(r, executors) for r in runs])))
    return lines


HEADERS = ("workload", "policy", "runs", "slowdown (min-max)", "tasks re-run", "backed up", "capacity lost s",
           "excess over floor")
"""The table's columns (:func:`cells` gives a row's)."""


def cells(line: DemoLine) -> list[str]:
    """One row of the table, as text under :data:`HEADERS`."""
    return [line.workload, line.policy, str(line.runs), line.slowdown.text(), _num(line.rerun, 0),
            _mib(line.backup_bytes), _num(line.lost_seconds, 1), _num(line.excess, 2, signed=True)]


def table(lines: list[DemoLine], title: str) -> Table:
    """The demo's rich table."""
    from rich.table import Table

    out = Table(title=title)
    for header in HEADERS:
        out.add_column(header, justify="left" if header in ("workload", "policy") else "right")
    for line in lines:
        out.add_row(*cells(line))
    return out


def summary(lines: list[DemoLine]) -> list[str]:
    """Plain-words lines per workload: what tr saved against never, what it cost against always."""
    by = {(line.workload, line.policy): line for line in lines}
    out = []
    for workload in dict.fromkeys(line.workload for line in lines):
        tr = by.get((workload, "tr"))
        if tr is None:
            continue
        never, always = by.get((workload, "never")), by.get((workload, "always"))
        if never is not None:
            out.append(f"{workload}: " + _versus(tr.slowdown, never.slowdown, "vanilla Spark (never)", "saved"))
        if always is not None:
            line = f"{workload}: " + _versus(tr.slowdown, always.slowdown, "always", "cost")
            if always.backup_bytes > 0 and math.isfinite(tr.backup_bytes):
                share = 1.0 - tr.backup_bytes / always.backup_bytes
                line += (f"; tr backed up {_mib(tr.backup_bytes)} a run against always's "
                         f"{_mib(always.backup_bytes)} ({share:.0%} less)" if share >= 0 else
                         f"; tr backed up {_mib(tr.backup_bytes)} a run, more than always's {_mib(always.backup_bytes)}")
            out.append(line)
    return out


def _versus(tr: Spread, other: Spread, name: str, verb: str) -> str:
    """``tr 1.40x (1.3-1.5) against never 2.60x (2.2-3.1): tr saved 1.20x of the stable time``."""
    head = f"tr {tr.text()} against {name} {other.text()}"
    if math.isnan(tr.median) or math.isnan(other.median):
        return head + ": no comparison (runs missing)"
    if within_noise(tr, other):
        return head + ": the difference is within noise (the spreads overlap)"
    diff = other.median - tr.median
    if math.isinf(diff):
        return head + (": tr finished where it failed" if diff > 0 else ": tr failed where it finished")
    faster = diff > 0
    return head + (f": tr {'saved' if faster else 'lost'} {abs(diff):.2f}x of the stable time"
                   if verb == "saved" else
                   f": tr {'was faster by' if faster else 'cost'} {abs(diff):.2f}x of the stable time")


def _x(value: float) -> str:
    return "failed" if math.isinf(value) else f"{value:.2f}x"


def _num(value: float, digits: int, *, signed: bool = False) -> str:
    if not math.isfinite(value):
        return "-"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _mib(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value / 2**20:.1f} MiB"
