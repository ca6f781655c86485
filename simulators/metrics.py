"""Per-run metrics and their aggregation over R runs (mean, p50, p95, 95 % confidence interval).

Slowdown of a run = job time / stable job time (the same job on the same cluster without
evictions, under ``never``, i.e. vanilla Spark on stable resources as in the paper). A failed run
contributes the job time at which it was declared failed: the job time cap for a run past it or
without progress, else (too many stage attempts) a lower bound.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

from simulators.core import RunResult

#: RunResult fields aggregated as ``<name>_mean`` / ``_p50`` / ``_p95`` / ``_ci95``.
AGGREGATED = (
    "slowdown",
    "job_time",
    "recomputed_tasks",
    "killed_tasks",
    "backups_local",
    "backups_remote",
    "backup_bytes_local",
    "backup_bytes_remote",
    "backups_failed",
    "blocks_lost",
    "evictions",
    "stage_resubmissions",
    "safety_belt_firings",
)


def run_row(result: RunResult, stable_time: float) -> dict[str, Any]:
    """The flat, JSON-ready record of one run."""
    return {
        "job_time": result.job_time,
        "stable_job_time": stable_time,
        "slowdown": result.job_time / stable_time if stable_time > 0 else math.nan,
        "succeeded": result.succeeded,
        "fail_reason": result.fail_reason,
        "tasks_run": result.tasks_run,
        "recomputed_tasks": result.recomputed_tasks,
        "killed_tasks": result.killed_tasks,
        "evictions": result.evictions,
        "releases": result.releases,
        "backups_local": result.backups_local,
        "backups_remote": result.backups_remote,
        "backup_bytes_local": result.backup_bytes_local,
        "backup_bytes_remote": result.backup_bytes_remote,
        "backups_failed": result.backups_failed,
        "blocks_lost": result.blocks_lost,
        "stage_resubmissions": result.stage_resubmissions,
        "safety_belt_firings": result.safety_belt_firings,
        "advice": len(result.advice),
        "vm_seconds": dict(result.vm_seconds),
        "events": result.events,
    }


def describe(values: Sequence[float]) -> dict[str, float | list[float]]:
    """Mean, median, 95th percentile and the 95 % Student-t confidence interval of the mean.

    .. math:: \\bar x \\pm t_{0.975,\\,R-1}\\, s / \\sqrt{R}

    (the interval collapses to the mean for a single run).
    """
    x = np.asarray(values, dtype=np.float64)
    mean = float(x.mean())
    half = float(stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else 0.0
    return {
        "mean": mean,
        "p50": float(np.percentile(x, 50)),
        "p95": float(np.percentile(x, 95)),
        "ci95": [mean - half, mean + half],
    }


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Aggregate run rows: ``<metric>_{mean,p50,p95,ci95}``, ``failed_runs``, ``runs``."""
    if not rows:
        raise ValueError("no runs to summarise")
    out: dict[str, Any] = {"runs": len(rows), "stable_job_time": rows[0]["stable_job_time"]}
    for name in AGGREGATED:
        for stat, value in describe([row[name] for row in rows]).items():
            out[f"{name}_{stat}"] = value
    out["failed_runs"] = sum(1 for row in rows if not row["succeeded"])
    out["fail_reasons"] = dict(sorted(Counter(_reason_kind(r["fail_reason"]) for r in rows if not r["succeeded"]).items()))
    return out


def _reason_kind(reason: str) -> str:
    """Group failure reasons without their numbers (``stage 4 failed 4 ...`` -> ``stage failed``)."""
    if reason.startswith("stage"):
        return "stage attempts exhausted"
    if reason.startswith("job time"):
        return "time cap"
    if reason.startswith("no task"):
        return "no progress"
    return reason
