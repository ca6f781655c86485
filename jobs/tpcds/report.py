"""A rich table summarising benchmark rows: per query and policy, stable and evicted behaviour."""

from __future__ import annotations

import math
from collections import defaultdict

from rich.table import Table

from jobs.tpcds.results import POLICY_ORDER, RunRow
from jobs.tpcds.stats import finite_median


def _fmt(value: float, unit: str = "", digits: int = 2) -> str:
    return "-" if not math.isfinite(value) else f"{value:.{digits}f}{unit}"


def summary_table(rows: list[RunRow], *, title: str = "TPC-DS on transient executors") -> Table:
    """One line per (query, policy): median seconds and slowdowns, kills, capacity lost, checks.

    ``stable x`` is the policy's overhead without kills (its stable time over vanilla Spark's);
    ``evicted x`` the median slowdown under the shared kill schedule; ``ok`` counts answers equal
    to DuckDB's over all runs; ``failed`` counts aborted or timed-out runs.
    """
    groups: dict[tuple[str, str], list[RunRow]] = defaultdict(list)
    for row in rows:
        groups[(row.query, row.policy)].append(row)
    order = {p: i for i, p in enumerate(POLICY_ORDER)}
    table = Table(title=title)
    # Short headers so the table fits 100 columns: "lost s" = executor-seconds of capacity lost,
    # "re-run" = extra task attempts of shuffle-map stages.
    for header in ("query", "policy", "stable s", "stable x", "evicted s", "evicted x", "kills",
                   "lost s", "re-run", "backups", "ok", "failed"):
        table.add_column(header, justify="left" if header in ("query", "policy") else "right")
    for (query, policy) in sorted(groups, key=lambda k: (len(k[0]), k[0], order.get(k[1], 99))):
        runs = groups[(query, policy)]
        stable = [r for r in runs if r.scenario == "stable"]
        evicted = [r for r in runs if r.scenario != "stable"]
        ok = sum(r.result_ok for r in runs)
        failed = sum(r.failed for r in runs)
        table.add_row(
            query, policy,
            _fmt(finite_median([r.seconds for r in stable if not r.failed]), digits=1),
            _fmt(finite_median([r.slowdown for r in stable if not r.failed]), "x"),
            _fmt(finite_median([r.seconds for r in evicted if not r.failed]), digits=1),
            _fmt(finite_median([r.slowdown for r in evicted if not r.failed]), "x"),
            str(sum(r.executors_killed for r in evicted)),
            _fmt(sum(r.capacity_lost_seconds for r in evicted if math.isfinite(r.capacity_lost_seconds)), digits=0),
            str(sum(r.tasks_recomputed for r in evicted)),
            str(sum(r.backups_count for r in runs)),
            f"[{'green' if ok == len(runs) else 'red'}]{ok}/{len(runs)}[/]",
            f"[{'red' if failed else 'green'}]{failed}[/]",
        )
    return table
