"""Plot slowdown per query and policy from a results CSV (a separate step from running).

Bars are the median slowdown over the ``evicted`` runs (``real`` runs for an external master) of
each (query, policy), with whiskers at its bootstrap 95 % interval where there are two or more
runs (:mod:`jobs.tpcds.stats`); a failed run counts as missing, and the bar shows an ``x`` where
every run of that pair failed, so failures are visible instead of silently dropped. Where the
runs pair up (the same kills for several policies), a second panel shows the paired ratios
``tr/always``, ``tr/decommission`` and ``tr/never`` with their intervals against 1.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.tpcds.results import POLICY_ORDER, RunRow, read

if TYPE_CHECKING:
    from matplotlib.axes import Axes



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
    if not medians:  # only stable runs (an overhead CSV): there is no slowdown under kills to draw
        raise ValueError(f"{csv_path}: no runs under kills or on a real cluster, so no slowdown to plot")
    queries = sorted({q for q, _ in medians}, key=lambda q: (len(q), q))
    policies = [p for p in POLICY_ORDER if any(pp == p for _, pp in medians)]
    policies += sorted({p for _, p in medians} - set(policies))
    ratios = _ratios(rows) if scenario == "evicted" else {}
    width_in = max(7.0, 0.45 * len(queries) * max(len(policies), 1))
    if ratios:
        fig, (ax, rax) = plt.subplots(1, 2, figsize=(width_in + 3.0, 4.0), width_ratios=(width_in, 3.0))
        _plot_ratios(rax, ratios)
    else:
        fig, ax = plt.subplots(figsize=(width_in, 4.0))
    width = 0.8 / max(len(policies), 1)
    for i, policy in enumerate(policies):
        xs = [q_index + (i - (len(policies) - 1) / 2) * width for q_index in range(len(queries))]
        ys = [medians.get((q, policy), float("nan")) for q in queries]
        ax.bar(xs, [0.0 if math.isnan(y) else y for y in ys], width, label=policy)
        low, high = _whiskers(rows, scenario, queries, policy, ys)
        ax.errorbar(xs, [0.0 if math.isnan(y) else y for y in ys], yerr=[low, high], fmt="none",
                    ecolor="black", elinewidth=0.8, capsize=2)
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


def _whiskers(rows: list[RunRow], scenario: str, queries: list[str], policy: str,
              medians: list[float]) -> tuple[list[float], list[float]]:
    """Distances from each bar's median down and up to its bootstrap interval (0 without one)."""
    from jobs.tpcds.stats import median_interval

    low, high = [], []
    for q, median in zip(queries, medians, strict=True):
        values = [r.slowdown for r in rows if r.scenario == scenario and r.query == q and r.policy == policy
                  and not r.failed]
        interval = median_interval(values)
        ok = math.isfinite(interval.low) and math.isfinite(median)
        low.append(max(median - interval.low, 0.0) if ok else 0.0)
        high.append(max(interval.high - median, 0.0) if ok else 0.0)
    return low, high


def _ratios(rows: list[RunRow]) -> dict[str, tuple[float, float, float]]:
    """``a/b`` -> (median paired ratio, interval low, high), for the pairs with an interval."""
    from jobs.tpcds.stats import PAIRED_RATIOS, paired_ratio

    out = {}
    for a, b in PAIRED_RATIOS:
        interval = paired_ratio(rows, a, b)
        if math.isfinite(interval.low):
            out[f"{a}/{b}"] = (interval.median, interval.low, interval.high)
    return out


def _plot_ratios(ax: Axes, ratios: dict[str, tuple[float, float, float]]) -> None:
    """Paired ratios as points with 95 % interval whiskers, against the line of no difference."""
    names = list(ratios)
    ys = [ratios[n][0] for n in names]
    lows = [ratios[n][0] - ratios[n][1] for n in names]
    highs = [ratios[n][2] - ratios[n][0] for n in names]
    ax.errorbar(range(len(names)), ys, yerr=[lows, highs], fmt="o", capsize=4)
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set_xlim(-0.5, len(names) - 0.5)
    ax.set_ylabel("paired time ratio (median, 95 % interval)")
    ax.set_title("same kills, paired runs", fontsize=10)
