"""Sweeps over workloads x policies x stabilities: a tidy CSV and a Figure-7-style plot.

One CSV row per (workload, policy, stability) with the run summary; plotting reads only the
rows, so a CSV from an earlier sweep can be re-plotted.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulators.dag import JobSpec
from simulators.runner import Experiment, run_experiment, stable_job_time, with_stability
from simulators.world import WorldSpec
from trspark.engine.settings import TRConfig

COLUMNS = (
    "workload", "policy", "stability", "lifetime", "runs", "failed_runs", "stable_job_time",
    "slowdown_mean", "slowdown_p50", "slowdown_p95", "slowdown_ci95_low", "slowdown_ci95_high",
    "job_time_mean", "recomputed_tasks_mean", "backups_local_mean", "backups_remote_mean",
    "backup_bytes_local_mean", "backup_bytes_remote_mean", "evictions_mean", "safety_belt_firings_mean",
)


@dataclass(frozen=True)
class SweepPoint:
    workload: str
    policy: str
    stability: float


def sweep_points(workloads: Sequence[str], policies: Sequence[str], stabilities: Sequence[float]) -> list[SweepPoint]:
    return [SweepPoint(w, p, s) for w in workloads for s in stabilities for p in policies]


def run_sweep(
    jobs: dict[str, JobSpec],
    points: Iterable[SweepPoint],
    world: WorldSpec,
    config: TRConfig,
    runs: int,
    seed: int,
    workers: int | None = None,
    believed_lifetime: str | None = None,
    on_point: Callable[[SweepPoint, dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Simulate every point (``runs`` runs each); the stable time is computed once per workload.

    The policy believes ``believed_lifetime`` if given, else the point's true lifetime model.
    """
    stable: dict[str, float] = {}
    rows = []
    for point in points:
        job = jobs[point.workload]
        if point.workload not in stable:
            stable[point.workload] = stable_job_time(job, world, config.period)
        point_world = with_stability(world, job, point.stability)
        believed = config.with_options(lifetime=believed_lifetime or point_world.lifetime)
        exp = Experiment(job, point_world, point.policy, believed, runs=runs, seed=seed)
        summary = run_experiment(exp, workers=workers, stable_time=stable[point.workload])
        row = {c: summary.get(c) for c in COLUMNS}
        row.update(workload=point.workload, policy=point.policy, stability=point.stability,
                   slowdown_ci95_low=summary["slowdown_ci95"][0], slowdown_ci95_high=summary["slowdown_ci95"][1])
        rows.append(row)
        if on_point is not None:
            on_point(point, row)
    return rows


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def plot(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """Slowdown vs stability (log x), one panel per workload, one line per policy (Figure 7).

    Hollow markers flag points where some runs failed (their slowdown is a lower bound).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = sorted({str(r["workload"]) for r in rows})
    policies = sorted({str(r["policy"]) for r in rows})
    cols = min(2, len(workloads))
    nrows = math.ceil(len(workloads) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(6 * cols, 4.2 * nrows), squeeze=False)
    for ax, workload in zip(axes.flat, workloads, strict=False):
        for policy in policies:
            pts = sorted(
                (float(r["stability"]), float(r["slowdown_mean"]), int(r["failed_runs"]))
                for r in rows if r["workload"] == workload and r["policy"] == policy
            )
            if not pts:
                continue
            xs, ys, failed = zip(*pts, strict=True)
            (line,) = ax.plot(xs, ys, marker="o", label=policy)
            bad = [(x, y) for x, y, f in pts if f > 0]
            if bad:
                ax.scatter(*zip(*bad, strict=True), s=90, facecolors="white", edgecolors=line.get_color(), zorder=3)
        ax.set_xscale("log")
        ax.set_xlabel("VM stability (mean VM lifetime / mean task time)")
        ax.set_ylabel("slowdown vs. stable Spark")
        ax.set_title(workload)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(workloads):]:
        ax.set_visible(False)
    fig.suptitle("Slowdown vs. VM stability (hollow = some runs failed)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
