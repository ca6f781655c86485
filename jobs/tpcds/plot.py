"""Plot slowdown per query and policy from a results CSV (a separate step from running).

Bars are the median slowdown over the ``evicted`` runs (``real`` runs for an external master) of
each (query, policy); a failed run counts as missing, and the bar shows an ``x`` where every run
of that pair failed, so failures are visible instead of silently dropped.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from pathlib import Path

from jobs.tpcds.results import RunRow, read

POLICY_ORDER = ("never", "always", "decommission", "tr")


def median_slowdowns(rows: list[RunRow], scenario: str = "evicted") -> dict[tuple[str, str], float]:
    """Median slowdown per (query, policy) over successful runs of ``scenario``; NaN if all failed."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    seen: set[tuple[str, str]] = set()
    for row in rows:
        if row.scenario != scenario:
            continue
        seen.add((row.query, row.policy))
        if not row.failed and math.isfinite(row.slowdown):
            groups[(row.query, row.policy)].append(row.slowdown)
    return {key: statistics.median(groups[key]) if groups[key] else float("nan") for key in seen}


def plot(csv_path: Path, png_path: Path, *, title: str | None = None) -> Path:
    """Write a grouped bar chart of slowdowns (queries on x, one bar per policy) to ``png_path``."""
    import matplotlib

    matplotlib.use("Agg")  # files only; no display on a server
    import matplotlib.pyplot as plt

    rows = read(csv_path)
    scenario = "evicted" if any(r.scenario == "evicted" for r in rows) else "real"
    medians = median_slowdowns(rows, scenario)
    queries = sorted({q for q, _ in medians}, key=lambda q: (len(q), q))
    policies = [p for p in POLICY_ORDER if any(pp == p for _, pp in medians)]
    policies += sorted({p for _, p in medians} - set(policies))
    fig, ax = plt.subplots(figsize=(max(7.0, 0.45 * len(queries) * max(len(policies), 1)), 4.0))
    width = 0.8 / max(len(policies), 1)
    for i, policy in enumerate(policies):
        xs = [q_index + (i - (len(policies) - 1) / 2) * width for q_index in range(len(queries))]
        ys = [medians.get((q, policy), float("nan")) for q in queries]
        ax.bar(xs, [0.0 if math.isnan(y) else y for y in ys], width, label=policy)
        for x, y in zip(xs, ys, strict=True):
            if math.isnan(y) and any((q, policy) in medians for q in queries):
                ax.text(x, 0.05, "x", ha="center", va="bottom", color="red", fontsize=9)
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(queries)), queries)
    ax.set_ylabel("slowdown (x stable time of vanilla Spark)")
    sf = rows[0].sf if rows else float("nan")
    any_failed = any(math.isnan(v) for v in medians.values())
    ax.set_title(title or f"TPC-DS SF {sf:g}: median slowdown under executor kills"
                 + (" (x: every run failed)" if any_failed else ""), fontsize=10)
    ax.legend(ncols=len(policies), fontsize=8)
    fig.tight_layout()
    png_path = Path(png_path)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=120)
    plt.close(fig)
    return png_path
