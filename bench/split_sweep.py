"""Lifetime-aware task splitting against none in the simulator: paired runs, CSV rows.

Per (stability, policy) the same job runs twice on the same seeds (``SeedSequence(seed).spawn(R)``:
run ``i`` of both arms starts from the same VM lifetimes): as generated (``none``), and with
every task longer than the lifetime rule's :math:`L^*` cut into equal pieces (``lifetime``,
:mod:`simulators.splitting`, ``f`` = ``--fraction``, ``--overhead`` s added to each piece).
Both arms' slowdowns are job time / the *unsplit* job's stable time, so they share a
denominator. Columns:

* ``slowdown_none`` / ``slowdown_split`` -- mean slowdown of each arm (a failed run counts with
  its capped time, ``max_slowdown`` x the stable time);
* ``ratio_median``, ``ratio_lo``, ``ratio_hi`` -- per run ``job_time_split / job_time_none``,
  the median over the paired runs with a percentile bootstrap 95 % interval
  (:func:`jobs.tpcds.stats.median_interval`); below 1 = splitting was faster;
* ``stable_none`` / ``stable_split`` -- each job's time without evictions: splitting also
  spreads a stage over more cores, which shortens a job even on stable VMs;
* ``own_slowdown_split`` -- the split arm's mean job time over its *own* stable time: the part
  of its slowdown evictions still cause;
* ``task_sigma`` -- the log-normal spread of task times within a stage (0: equal tasks, so
  splitting cuts no straggler and the stable times stay close);
* ``failed_none`` / ``failed_split``, ``tasks_none`` / ``tasks_split``, ``limit_seconds`` (:math:`L^*`).

Run: ``nice -n 10 python bench/split_sweep.py --runs 50 --task-sigmas 0.5 0 --out docs/results/sizing_split.csv``.
"""

from __future__ import annotations

import argparse
import csv
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jobs.tpcds.stats import median_interval
from simulators.runner import Experiment, run_experiment, stable_job_time, with_stability
from simulators.splitting import apply_split, lifetime_limit
from simulators.workloads import WorkloadParams, make_workload
from simulators.world import WorldSpec
from trspark.engine.settings import TRConfig

FIELDS = (
    "workload", "stability", "policy", "runs", "fraction", "overhead_seconds", "task_seconds", "task_sigma", "limit_seconds",
    "tasks_none", "tasks_split", "stable_none", "stable_split", "slowdown_none", "slowdown_split",
    "ratio_median", "ratio_lo", "ratio_hi", "own_slowdown_split", "failed_none", "failed_split", "seconds",
)


def run_point(args: argparse.Namespace, stability: float, policy: str, sigma: float) -> dict[str, Any]:
    params = WorkloadParams(scale=args.scale, task_seconds=args.task_seconds, task_sigma=sigma)
    job = make_workload(args.workload, params, seed=args.seed)
    world = with_stability(WorldSpec(vms=args.vms, cores=args.cores), job, stability)
    split = apply_split(job, world, "lifetime", args.fraction, args.overhead)
    config = TRConfig(lifetime=world.lifetime or "stable", period=args.period)
    stable = stable_job_time(job, world, config.period)
    started = time.process_time()
    arms = {}
    for name, arm_job in (("none", job), ("split", split)):
        exp = Experiment(arm_job, world, policy, config, runs=args.runs, seed=args.seed)
        arms[name] = run_experiment(exp, workers=args.workers, stable_time=stable)["rows"]
    ratios = [b["job_time"] / a["job_time"] for a, b in zip(arms["none"], arms["split"], strict=True)]
    interval = median_interval(ratios)
    stable_split = stable_job_time(split, world, config.period)
    split_times = np.array([r["job_time"] for r in arms["split"]])
    return {
        "workload": args.workload, "stability": stability, "policy": policy, "runs": args.runs,
        "fraction": args.fraction, "overhead_seconds": args.overhead, "task_seconds": args.task_seconds,
        "task_sigma": sigma,
        "limit_seconds": round(lifetime_limit(world, args.fraction), 3),
        "tasks_none": job.num_tasks, "tasks_split": split.num_tasks,
        "stable_none": round(stable, 3), "stable_split": round(stable_split, 3),
        "slowdown_none": round(float(np.mean([r["slowdown"] for r in arms["none"]])), 4),
        "slowdown_split": round(float(np.mean([r["slowdown"] for r in arms["split"]])), 4),
        "ratio_median": round(interval.median, 4), "ratio_lo": round(interval.low, 4), "ratio_hi": round(interval.high, 4),
        "own_slowdown_split": round(float(split_times.mean() / stable_split), 4),
        "failed_none": sum(not r["succeeded"] for r in arms["none"]),
        "failed_split": sum(not r["succeeded"] for r in arms["split"]),
        "seconds": round(time.process_time() - started, 1),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workload", default="tpcds")
    parser.add_argument("--stabilities", type=float, nargs="+", default=[5.0, 10.0, 20.0])
    parser.add_argument("--policies", nargs="+", default=["never", "tr"])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scale", type=float, default=0.01)
    parser.add_argument("--task-seconds", type=float, default=10.0)
    parser.add_argument("--task-sigmas", type=float, nargs="+", default=[0.5],
                        help="Log-normal spread of task times within a stage (0 = equal tasks: no straggler to split).")
    parser.add_argument("--vms", type=int, default=10)
    parser.add_argument("--cores", type=int, default=4)
    parser.add_argument("--period", type=float, default=1.0)
    parser.add_argument("--fraction", type=float, default=0.05)
    parser.add_argument("--overhead", type=float, default=0.05)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("docs/results/sizing_split.csv"))
    args = parser.parse_args(argv)
    with args.out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        writer.writeheader()
        for sigma in args.task_sigmas:
            for stability in args.stabilities:
                for policy in args.policies:
                    row = run_point(args, stability, policy, sigma)
                    writer.writerow(row)
                    fh.flush()
                    print(", ".join(f"{k}={row[k]}" for k in FIELDS), flush=True)


if __name__ == "__main__":
    main()
