"""The timeline picture of ``trspark report``: stages above, executor lifetimes per pool below.

Executor rows carry their kills (red x), notices (orange triangle), backups taken from them
(green dots, at the commit time) and restores of their outputs (blue diamonds). x is seconds
since the application started.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trspark.reporting.summary import KILL_REASONS, Summary


def _executor_rows(summary: Summary) -> list[str]:
    """Executor ids grouped by pool, each pool in start order."""
    executors = sorted(summary.executors.values(), key=lambda e: (e.pool, e.start))
    return [e.executor_id for e in executors]


#: Rows (stages and executors) the picture grows for; more share its height, so a long
#: application does not give a picture tens of thousands of pixels high.
MAX_ROWS = 120
#: Labelled ticks per axis at most; with more rows every n-th is labelled.
MAX_LABELS = 60


def draw(summary: Summary, path: str | Path) -> Path:
    """Write the timeline PNG of ``summary`` to ``path`` and return the path."""
    # A Figure of its own, not pyplot's: the caller's backend and figures are left alone.
    import matplotlib
    from matplotlib.figure import Figure

    rows = _executor_rows(summary)
    row_of = {eid: i for i, eid in enumerate(rows)}
    height = 3 + 0.35 * min(len(rows) + len(summary.stages), MAX_ROWS)
    fig = Figure(figsize=(11, height))
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={
        "height_ratios": [max(1, min(len(summary.stages), MAX_ROWS)), max(1, min(len(rows), MAX_ROWS))]})
    for i, (_, _, start, end) in enumerate(summary.stages):
        top.broken_barh([(start, max(end - start, 0.05))], (i - 0.4, 0.8), color="tab:gray")
    _label_rows(top, _stage_labels(summary))
    top.set_title(f"{summary.app_name}: stages")

    pools = sorted({e.pool for e in summary.executors.values()})
    colors = {p: matplotlib.colormaps["tab10"](i % 10) for i, p in enumerate(pools)}
    for eid in rows:
        e = summary.executors[eid]
        end = summary.duration if e.end is None else e.end
        bottom.broken_barh([(e.start, max(end - e.start, 0.05))], (row_of[eid] - 0.35, 0.7),
                           color=colors[e.pool], alpha=0.45)
        if e.reason in KILL_REASONS and e.end is not None:
            bottom.plot(e.end, row_of[eid], "x", color="red", markersize=10, mew=2)
    _marks(bottom, [(t, row_of[x]) for t, x in summary.notices if x in row_of], "v", "orange", "notice")
    _marks(bottom, [(t, row_of[src]) for t, src, _, _ in summary.backups if src in row_of], "o", "green", "backup")
    # Over the kill's cross (a restore is logged at the loss): both stay visible.
    _marks(bottom, [(t, row_of[x]) for t, x, n in summary.restores if x in row_of and n], "D", "tab:blue", "restore",
           size=7, zorder=3)
    bottom.plot([], [], "x", color="red", label="kill")
    for pool in pools:
        bottom.broken_barh([], (0, 0), color=colors[pool], alpha=0.45, label=f"pool {pool}")
    _label_rows(bottom, [f"exec {r}" for r in rows])
    bottom.set_xlabel("seconds since application start")
    bottom.set_title("executors")
    bottom.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=90)
    return out


def _stage_labels(summary: Summary) -> list[str]:
    """``stage N`` per row; a stage's later attempts (a retry after a lost output) are ``stage N retry k``."""
    seen: dict[int, int] = {}
    labels = []
    for stage_id, *_ in summary.stages:
        seen[stage_id] = seen.get(stage_id, -1) + 1
        labels.append(f"stage {stage_id}" + (f" retry {seen[stage_id]}" if seen[stage_id] else ""))
    return labels


def _label_rows(ax: Any, labels: list[str]) -> None:
    """Tick labels for the rows, every n-th one when there are more than :data:`MAX_LABELS`."""
    step = max(1, -(-len(labels) // MAX_LABELS))
    ax.set_yticks(range(0, len(labels), step), labels[::step], fontsize=7)


def _marks(ax: object, points: list[tuple[float, int]], marker: str, color: str, label: str, size: float = 5,
           zorder: float = 2) -> None:
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    ax.plot(xs, ys, marker, color=color, markersize=size, linestyle="none", label=label,  # type: ignore[attr-defined]
            zorder=zorder)
