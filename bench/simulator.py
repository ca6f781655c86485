"""Simulator throughput on the paper's default setting: events/s and seconds per run.

    python bench/simulator.py [--policy always] [--stability 100] [--believed-lifetime SPEC] [--runs 50] [--workers 2] [--csv PATH]

Default: TPC-DS-like job (20,100 tasks) on 100 VMs x 4 cores (Table 2), 50 runs on all cores.
The policy believes the world's own lifetime model, as ``trspark simulate`` and its sweeps do;
``--believed-lifetime`` gives it another one (any lifetime spec).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from jobs.reports.render import append_row
from simulators.runner import Experiment, run_experiment, simulate_run, stable_job_time, with_stability
from simulators.workloads import make_workload
from simulators.world import WorldSpec
from trspark.engine.settings import TRConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", default="always")
    parser.add_argument("--workload", default="tpcds")
    parser.add_argument("--stability", type=float, default=100.0)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--believed-lifetime", help="Lifetime spec the policy believes (default: the world's own).")
    parser.add_argument("--cpu-runs", type=int, default=3,
                        help="Runs timed in-process by CPU time, each paired with an always-checkpoint run of its seed.")
    parser.add_argument("--csv", type=Path, help="Append one row of figures to this CSV (written with a header if new).")
    args = parser.parse_args()

    job = make_workload(args.workload, seed=args.seed)
    world = WorldSpec()
    t0 = time.perf_counter()
    stable = stable_job_time(job, world)
    t_stable = time.perf_counter() - t0
    world_at = with_stability(world, job, args.stability)
    belief = args.believed_lifetime or world_at.default_belief()
    exp = Experiment(job, world_at, args.policy, TRConfig().with_options(lifetime=belief), runs=args.runs, seed=args.seed)
    seeds = np.random.SeedSequence(args.seed).spawn(max(args.runs, args.cpu_runs))
    # The same runs under always-checkpoint, in this process: the engine's cost is the difference.
    always = replace(exp, policy="always")
    cpu_times, always_times, cpu_events = _paired_cpu(exp, always, seeds[:args.cpu_runs], stable)
    cpu_per_run, always_per_run = statistics.median(cpu_times), statistics.median(always_times)
    ratios = [mine / theirs for mine, theirs in zip(cpu_times, always_times, strict=True)]
    t0 = time.perf_counter()
    summary = run_experiment(exp, workers=args.workers, stable_time=stable)
    wall = time.perf_counter() - t0
    events = sum(row["events"] for row in summary["rows"])
    print(f"workload {args.workload}: {job.num_tasks} tasks on {world.vms}x{world.cores} cores; policy {args.policy}; "
          f"stability {args.stability:g}; believed lifetime {belief}")
    print(f"stable run: {stable:.2f} s simulated in {t_stable:.2f} s")
    print(f"{args.runs} runs on {args.workers} workers: {wall:.2f} s wall, {wall * args.workers / args.runs:.3f} s per run "
          f"(worker time), {events / wall:,.0f} events/s, {events / args.runs:,.0f} events per run")
    print(f"CPU time: {cpu_per_run:.3f} s per run ({cpu_events / sum(cpu_times):,.0f} events per CPU-second); "
          f"{args.runs} runs on {args.workers} idle cores would take ~{cpu_per_run * args.runs / args.workers:.1f} s")
    print(f"CPU s per run, side by side ({args.cpu_runs} paired run(s) each, interleaved in one process; medians): "
          f"always {always_per_run:.3f}, {args.policy} {cpu_per_run:.3f} (runs {min(cpu_times):.3f}-{max(cpu_times):.3f}), "
          f"ratio {cpu_per_run / always_per_run:.1f}x (pairs {min(ratios):.1f}-{max(ratios):.1f}x)")
    print(f"slowdown mean {summary['slowdown_mean']:.3f}, p95 {summary['slowdown_p95']:.3f}, failed {summary['failed_runs']}")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} (the CPU is shared)")
    if args.csv is not None:
        append_row(args.csv, {
            "policy": args.policy, "believed_lifetime": belief, "runs": args.runs, "wall_seconds": f"{wall:.2f}",
            "cpu_seconds_per_run": f"{cpu_per_run:.3f}", "always_cpu_seconds_per_run": f"{always_per_run:.3f}",
            "cpu_ratio_to_always": f"{cpu_per_run / always_per_run:.1f}", "cpu_runs": len(cpu_times),
            "cpu_seconds_range": f"{min(cpu_times):.3f}-{max(cpu_times):.3f}",
            "cpu_ratio_range": f"{min(ratios):.1f}-{max(ratios):.1f}", "events_per_run": round(events / args.runs),
            "events_per_second": round(events / wall), "slowdown_mean": f"{summary['slowdown_mean']:.3f}",
            "failed_runs": summary["failed_runs"],
        })


def _paired_cpu(exp: Experiment, always: Experiment, seeds: list[np.random.SeedSequence],
                stable: float) -> tuple[list[float], list[float], int]:
    """CPU seconds of each run of ``exp`` and of ``always`` on ``seeds`` (in this process), and ``exp``'s events.

    The two policies alternate seed by seed, so a change in the host's speed (this VM is shared)
    falls on both of a pair. One untimed run of each first: the modules a policy imports on first
    use are a one-time start-up cost, not a run's. With ``exp`` itself always-checkpoint, its
    times stand for both.
    """
    same = exp.policy == always.policy
    for warm in (exp,) if same else (exp, always):
        simulate_run(warm, seeds[0], stable)
    mine: list[float] = []
    theirs: list[float] = []
    events = 0
    for seed in seeds:
        c0 = time.process_time()
        events += simulate_run(exp, seed, stable).events
        mine.append(time.process_time() - c0)
        if not same:
            c0 = time.process_time()
            simulate_run(always, seed, stable)
            theirs.append(time.process_time() - c0)
    return mine, (list(mine) if same else theirs), events


if __name__ == "__main__":
    main()
