"""Ablations of the TR policy engine in the simulator (paper Figs. 9-11), CSV rows.

Experiments (``--exp``, default all):

* ``mechanisms`` -- tr with TR-Scheduling and duplication both on (``full``), scheduling off,
  duplication off, on lifetimes where the two mechanisms *can* bind: exact lifetimes
  (``exact``: exponential VMs, each VM's death time announced at registration, policy
  ``tr-det``) and a wear-out Weibull (``weibull2``: shape 2, believed exactly, policy ``tr``:
  an older VM has a shorter expected remaining life, so the γ rule and the duplication rate
  differ between executors). Under a memoryless (exponential) belief neither can bind: every
  executor has the same residual life and a copy is never safer than its original.
* ``bandwidth`` -- always vs tr (and tr with the paper's unweighted re-computation costs,
  ``stall_weight`` off), remote bandwidth 50/100/200 MB/s per VM (total cap 10 GB/s,
  local 400 MB/s), exponential lifetimes (paper Fig. 10).
* ``vms`` -- always vs tr (weighted and unweighted) on 50/100/200 VMs, tasks scaled with the VMs (paper Fig. 11).

Every point runs the same seeds for each variant (paired runs). Each row records the settings
and means over runs of slowdown (job time / stable job time; a run past ``max_slowdown`` x the
stable time fails and counts with its capped time), recomputed tasks, backups, duplicates the
engine started, tasks killed (evictions and duplicate losers) and evictions.

Run: ``nice -n 10 python bench/engine_ablation.py --runs 10`` (CSV to
``docs/results/engine_ablation.csv``).
"""

from __future__ import annotations

import argparse
import csv
import math
import multiprocessing
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simulators.core import simulate
from simulators.metrics import describe
from simulators.runner import stable_job_time
from simulators.workloads import WorkloadParams, make_workload
from simulators.world import WorldSpec
from trspark.engine.registry import make_policy
from trspark.engine.settings import TRConfig

FIELDS = (
    "experiment", "workload", "lifetimes", "policy", "variant", "stability", "vms", "tasks", "runs",
    "remote_bw_mbs", "scheduling", "scheduling_order", "duplication", "stall_weight", "stable_job_time",
    "slowdown_mean", "slowdown_ci_lo", "slowdown_ci_hi", "slowdown_p50", "failed_runs",
    "recomputed_tasks_mean", "backups_local_mean", "backups_remote_mean", "duplicates_mean",
    "killed_tasks_mean", "evictions_mean", "seconds",
)
#: variant -> (TR-Scheduling, duplication, stage order); "full" is the engine's default.
MECHANISM_VARIANTS = {
    "full": (True, True, "reduction"), "fifo order": (True, True, "fifo"),
    "scheduling off": (False, True, "reduction"), "duplication off": (True, False, "reduction"),
}


@dataclass(frozen=True)
class Point:
    """One row: a workload, a world, a policy and its switches, ``runs`` paired seeds."""

    experiment: str
    workload: str
    lifetimes: str
    policy: str
    variant: str
    stability: float
    vms: int
    scale: float
    runs: int
    remote_bw: float = 100e6
    scheduling: bool = True
    duplication: bool = True
    scheduling_order: str = "reduction"
    stall_weight: bool = True


def _lifetime_spec(kind: str, mean: float) -> str:
    """Lifetime spec with the given mean (s): exponential, or Weibull shape 2 (wear-out)."""
    if kind == "weibull2":
        return f"weibull:shape=2,scale={mean / math.gamma(1.5):.17g}"
    return f"exponential:mean={mean:.17g}"


_JOB: dict[str, Any] = {}


def _one_run(seed: np.random.SeedSequence) -> dict[str, float]:
    job, world, policy, config, stable = (_JOB[k] for k in ("job", "world", "policy", "config", "stable"))
    result = simulate(job, world, make_policy(policy, config), seed)
    return {
        "slowdown": result.job_time / stable, "succeeded": float(result.succeeded),
        "recomputed_tasks": result.recomputed_tasks, "backups_local": result.backups_local,
        "backups_remote": result.backups_remote, "killed_tasks": result.killed_tasks,
        "evictions": result.evictions,
        "duplicates": float(result.policy_summary.get("duplicates_started", 0)),  # type: ignore[arg-type]
    }


def run_point(point: Point, workers: int) -> dict[str, Any]:
    """Simulate ``point.runs`` paired runs of one point; the CSV row."""
    start = time.perf_counter()
    job = make_workload(point.workload, WorkloadParams(scale=point.scale), seed=0)
    mean = point.stability * job.mean_task_seconds()
    lifetime = _lifetime_spec(point.lifetimes, mean)
    world = WorldSpec(vms=point.vms, cores=4, remote_bandwidth=point.remote_bw, remote_cap=10e9,
                      lifetime=lifetime, knowledge="deterministic" if point.policy == "tr-det" else "indeterministic")
    config = TRConfig(lifetime=lifetime, scheduling=point.scheduling, duplication=point.duplication,
                      remote_bandwidth=point.remote_bw, scheduling_order=point.scheduling_order,
                      stall_weight=point.stall_weight)
    stable = stable_job_time(job, world, config.period)
    _JOB.update(job=job, world=world, policy=point.policy, config=config, stable=stable)
    seeds = np.random.SeedSequence(1).spawn(point.runs)
    if workers > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            rows = pool.map(_one_run, seeds, chunksize=1)
    else:
        rows = [_one_run(s) for s in seeds]
    slowdown = describe([r["slowdown"] for r in rows])
    ci = slowdown.get("ci95", [float("nan"), float("nan")])
    assert isinstance(ci, list)
    means = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
    return {
        "experiment": point.experiment, "workload": point.workload, "lifetimes": point.lifetimes,
        "policy": point.policy, "variant": point.variant, "stability": point.stability, "vms": point.vms,
        "tasks": job.num_tasks, "runs": point.runs, "remote_bw_mbs": point.remote_bw / 1e6,
        "scheduling": point.scheduling, "scheduling_order": point.scheduling_order,
        "duplication": point.duplication, "stall_weight": point.stall_weight, "stable_job_time": round(stable, 3),
        "slowdown_mean": round(means["slowdown"], 4), "slowdown_ci_lo": round(ci[0], 4),
        "slowdown_ci_hi": round(ci[1], 4), "slowdown_p50": round(float(slowdown["p50"]), 4),  # type: ignore[arg-type]
        "failed_runs": int(sum(1 for r in rows if not r["succeeded"])),
        "recomputed_tasks_mean": round(means["recomputed_tasks"], 2),
        "backups_local_mean": round(means["backups_local"], 2), "backups_remote_mean": round(means["backups_remote"], 2),
        "duplicates_mean": round(means["duplicates"], 2), "killed_tasks_mean": round(means["killed_tasks"], 2),
        "evictions_mean": round(means["evictions"], 2), "seconds": round(time.perf_counter() - start, 1),
    }


def mechanism_points(args: argparse.Namespace) -> Iterator[Point]:
    for workload in args.workloads:
        for lifetimes, policy in (("exact", "tr-det"), ("weibull2", "tr")):
            for stability in args.stabilities:
                for variant, (scheduling, duplication, order) in MECHANISM_VARIANTS.items():
                    yield Point("mechanisms", workload, lifetimes, policy, variant, stability, args.vms, args.scale,
                                args.runs, scheduling=scheduling, duplication=duplication, scheduling_order=order)


#: (policy, stall weight): always, tr, and tr with the paper's unweighted re-computation costs.
SCALE_POLICIES = (("always", True), ("tr", True), ("tr", False))


def bandwidth_points(args: argparse.Namespace) -> Iterator[Point]:
    for remote_bw in (50e6, 100e6, 200e6):
        for policy, stall in SCALE_POLICIES:
            yield Point("bandwidth", "tpcds", "exponential", policy, f"remote {remote_bw / 1e6:g} MB/s", 20.0,
                        args.vms, args.scale, args.runs, remote_bw=remote_bw, stall_weight=stall)


def vms_points(args: argparse.Namespace) -> Iterator[Point]:
    for vms in (50, 100, 200):
        for policy, stall in SCALE_POLICIES:
            yield Point("vms", "tpcds", "exponential", policy, f"{vms} VMs", 20.0, vms,
                        args.vms_scale * vms / args.vms, args.runs, stall_weight=stall)


EXPERIMENTS = {"mechanisms": mechanism_points, "bandwidth": bandwidth_points, "vms": vms_points}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exp", nargs="+", choices=sorted(EXPERIMENTS), default=list(EXPERIMENTS))
    parser.add_argument("--workloads", nargs="+", default=["tpcds", "cortana"])
    parser.add_argument("--stabilities", nargs="+", type=float, default=[5.0, 10.0, 20.0])
    parser.add_argument("--vms", type=int, default=20, help="VMs of the mechanisms/bandwidth points")
    parser.add_argument("--scale", type=float, default=0.02, help="task-count scale at --vms VMs")
    parser.add_argument("--vms-scale", type=float, default=0.01,
                        help="task-count scale per --vms VMs in the vms experiment (grows with the VMs)")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("docs/results/engine_ablation.csv"))
    args = parser.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        writer.writeheader()
        for exp in args.exp:
            for point in EXPERIMENTS[exp](args):
                row = run_point(point, args.workers)
                writer.writerow(row)
                fh.flush()
                print(f"{row['experiment']:10s} {row['workload']:8s} {row['lifetimes']:11s} {row['policy']:7s} "
                      f"{'' if row['stall_weight'] else 'unweighted '}"
                      f"{row['variant']:16s} stab={row['stability']:<4g} vms={row['vms']:<3d} "
                      f"slowdown={row['slowdown_mean']:.3f} [{row['slowdown_ci_lo']:.3f}, {row['slowdown_ci_hi']:.3f}] "
                      f"failed={row['failed_runs']} recomp={row['recomputed_tasks_mean']:.1f} "
                      f"bl={row['backups_local_mean']:.0f} br={row['backups_remote_mean']:.0f} "
                      f"dup={row['duplicates_mean']:.1f} killed={row['killed_tasks_mean']:.1f} ({row['seconds']} s)",
                      flush=True)


if __name__ == "__main__":
    main()
