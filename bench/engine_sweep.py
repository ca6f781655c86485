"""Simulator experiments for the TR policy engine, CSV + PNG.

Experiments (``--exp``):

* ``stability`` -- slowdown against stability (mean VM lifetime / mean task time) for every
  workload and the policies never, always, stage, tr (indeterministic, remote+local), tr-det
  (deterministic: exact lifetimes via notices), tr-local (local only), oracle. Figure-7 style.
* ``robustness`` -- tr (indeterministic) told a mean lifetime off by -50/-20/0/+20/+50 %, on
  50/100/200 VMs, stability 90 (paper Fig. 12).
* ``belt`` -- tr told VMs are 100x more stable than they are, with and without the safety belt,
  next to always.
* ``ablation`` -- tr with TR-Scheduling on/off, duplication on/off; always and tr over remote
  bandwidth 50/100/200 MB/s (local 4x, cap 10 GB/s) and 50/100/200 VMs.
* ``frontier`` -- what any belief buys the engine's own rule: tr (safety belt off, stall weight
  on and off) told a mean lifetime 0.5x to 1000x the true one, so it copies from more than
  ``always`` to almost nothing; with never and always as the two ends. If no belief brings a
  point under a target (target T2: slowdown <= 1.05 at stability >= 50), no tuning of the
  rule's inputs will: what is left is knowing *which* outputs will be lost (``oracle-backup-driver``).

Job sizes are scaled down (``--scale``, ``--vms``) so the sweeps fit a shared 2-core machine;
the CSV records every setting. Run: ``python bench/engine_sweep.py --exp stability``.
"""

from __future__ import annotations

import argparse
import csv
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from simulators.runner import Experiment, run_experiment, stable_job_time, with_stability
from simulators.workloads import WorkloadParams, make_workload
from simulators.world import WorldSpec
from trspark.engine.settings import TRConfig

WORKLOADS = ("tpcds", "bing", "cortana", "pagerank")
STABILITY_POLICIES = ("never", "always", "stage", "tr", "tr-det", "tr-local", "oracle", "oracle-backup-driver")
FIELDS = (
    "experiment", "workload", "policy", "variant", "stability", "vms", "cores", "tasks", "scale", "runs",
    "remote_bw_mbs", "local_bw_mbs", "believed_factor", "safety_belt", "scheduling", "scheduling_order", "duplication",
    "period", "stall_weight",
    "stable_job_time", "slowdown_mean", "slowdown_p50", "slowdown_p95", "slowdown_ci_lo", "slowdown_ci_hi",
    "failed_runs", "recomputed_tasks_mean", "backups_local_mean", "backups_remote_mean",
    "safety_belt_firings_mean", "evictions_mean", "seconds",
)


def _point(exp_name: str, workload: str, policy: str, stability: float, *, vms: int, scale: float, runs: int,
           variant: str = "", remote_bw: float = 100e6, believed_factor: float = 1.0,
           config: TRConfig | None = None, workers: int = 2, period: float | None = None) -> dict[str, Any]:
    job = make_workload(workload, WorkloadParams(scale=scale), seed=0)
    knowledge = "deterministic" if policy == "tr-det" else "indeterministic"
    world = WorldSpec(vms=vms, cores=4, local_bandwidth=4 * remote_bw, remote_bandwidth=remote_bw,
                      remote_cap=10e9, knowledge=knowledge)
    world = with_stability(world, job, stability)
    true_mean = stability * job.mean_task_seconds()
    config = (config or TRConfig()).with_options(lifetime=f"exponential:mean={true_mean * believed_factor:.17g}")
    if period is not None:
        config = config.with_options(period=period)
    start = time.perf_counter()
    stable = stable_job_time(job, world, config.period)
    summary = run_experiment(Experiment(job, world, policy, config, runs=runs, seed=1), workers=workers,
                             stable_time=stable)
    ci = summary.get("slowdown_ci95", [float("nan"), float("nan")])
    return {
        "experiment": exp_name, "workload": workload, "policy": policy, "variant": variant,
        "stability": stability, "vms": vms, "cores": 4, "tasks": job.num_tasks, "scale": scale, "runs": runs,
        "remote_bw_mbs": remote_bw / 1e6, "local_bw_mbs": 4 * remote_bw / 1e6, "believed_factor": believed_factor,
        "safety_belt": config.safety_belt, "scheduling": config.scheduling,
        "scheduling_order": config.scheduling_order, "duplication": config.duplication,
        "period": config.period, "stall_weight": config.stall_weight,
        "stable_job_time": round(stable, 3),
        "slowdown_mean": summary["slowdown_mean"], "slowdown_p50": summary["slowdown_p50"],
        "slowdown_p95": summary["slowdown_p95"], "slowdown_ci_lo": ci[0], "slowdown_ci_hi": ci[1],
        "failed_runs": summary["failed_runs"], "recomputed_tasks_mean": summary["recomputed_tasks_mean"],
        "backups_local_mean": summary["backups_local_mean"], "backups_remote_mean": summary["backups_remote_mean"],
        "safety_belt_firings_mean": summary["safety_belt_firings_mean"], "evictions_mean": summary["evictions_mean"],
        "seconds": round(time.perf_counter() - start, 1),
    }


def _common(args: argparse.Namespace) -> dict[str, Any]:
    """Cluster size, job scale, runs, workers and tick period shared by every point of a sweep."""
    return {"vms": args.vms, "scale": args.scale, "runs": args.runs, "workers": args.workers, "period": args.period}


def stability_points(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    for workload in args.workloads:
        for stability in args.stabilities:
            for policy in args.policies:
                common = _common(args)
                common["runs"] = args.policy_runs.get(policy, args.runs)
                common["config"] = TRConfig(duplication=args.duplication, scheduling_order=args.scheduling_order,
                                            stall_weight=args.stall_weight)
                variants = []  # settings that differ from the engine's defaults name the rows
                if args.scheduling_order != TRConfig.scheduling_order:
                    variants.append(f"{args.scheduling_order} order")
                if args.stall_weight != TRConfig.stall_weight:
                    variants.append("weighted" if args.stall_weight else "unweighted")
                yield _point("stability", workload, policy, stability, **common, variant=", ".join(variants))


def robustness_points(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    for vms in (50, 100, 200):
        for factor in (0.5, 0.8, 1.0, 1.2, 1.5):
            yield _point("robustness", "tpcds", "tr", 90.0, vms=vms, scale=args.scale * vms / args.vms,
                         runs=args.runs, believed_factor=factor, variant=f"mean x{factor:g}",
                         config=TRConfig(duplication=args.duplication),
                         workers=args.workers, period=args.period)


def belt_points(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    for stability in args.stabilities:
        yield _point("belt", "tpcds", "always", stability, **_common(args))
        for belt in (True, False):
            yield _point("belt", "tpcds", "tr", stability, **_common(args),
                         believed_factor=100.0, config=TRConfig(safety_belt=belt, duplication=args.duplication),
                         variant=f"told 100x stable, belt {'on' if belt else 'off'}")


def ablation_points(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    for stability in args.stabilities:
        for scheduling in (True, False):
            yield _point("ablation", "bing", "tr", stability, **_common(args),
                         config=TRConfig(scheduling=scheduling), variant=f"scheduling {'on' if scheduling else 'off'}")
        for duplication in (True, False):
            yield _point("ablation", "tpcds", "tr", stability, **_common(args),
                         config=TRConfig(duplication=duplication),
                         variant=f"duplication {'on' if duplication else 'off'}")
    for remote_bw in (50e6, 100e6, 200e6):
        for policy in ("always", "tr"):
            yield _point("ablation", "tpcds", policy, 20.0, **_common(args),
                         remote_bw=remote_bw, variant=f"remote {remote_bw / 1e6:g} MB/s")
    for vms in (50, 100, 200):
        for policy in ("always", "tr"):
            yield _point("ablation", "tpcds", policy, 20.0, vms=vms, scale=args.scale * vms / args.vms,
                         runs=args.runs, variant=f"{vms} VMs", workers=args.workers, period=args.period)


FRONTIER_FACTORS = (0.5, 1.0, 2.0, 4.0, 10.0, 30.0, 100.0, 1000.0)


def frontier_points(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    for workload in args.workloads:
        for stability in args.stabilities:
            for policy in ("never", "always"):
                yield _point("frontier", workload, policy, stability, **_common(args))
            for weighted in (True, False):
                for factor in FRONTIER_FACTORS:
                    config = TRConfig(safety_belt=False, duplication=args.duplication, stall_weight=weighted)
                    yield _point("frontier", workload, "tr", stability, **_common(args), believed_factor=factor,
                                 config=config, variant=f"mean x{factor:g}, {'weighted' if weighted else 'unweighted'}")


EXPERIMENTS = {"stability": stability_points, "robustness": robustness_points, "belt": belt_points,
               "ablation": ablation_points, "frontier": frontier_points}


def plot_stability(csv_path: Path, png_path: Path) -> None:
    """Figure-7 style: slowdown against stability per workload, one line per policy (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with csv_path.open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["experiment"] == "stability"]
    workloads = [w for w in WORKLOADS if any(r["workload"] == w for r in rows)]
    fig, axes = plt.subplots(1, max(1, len(workloads)), figsize=(4.2 * max(1, len(workloads)), 3.6), squeeze=False)
    for ax, workload in zip(axes[0], workloads, strict=False):
        for policy in STABILITY_POLICIES:
            pts = sorted((float(r["stability"]), float(r["slowdown_mean"])) for r in rows
                         if r["workload"] == workload and r["policy"] == policy)
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", ms=3, label=policy)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.invert_xaxis()
        ax.set_title(workload)
        ax.set_xlabel("stability (mean VM lifetime / mean task time)")
        ax.set_ylabel("slowdown vs. stable Spark")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)


def plot_robustness(csv_path: Path, png_path: Path) -> None:
    """Paper Fig. 12 style: tr's slowdown against the error of the believed mean lifetime, per #VMs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with csv_path.open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["experiment"] == "robustness"]
    fig, ax = plt.subplots(figsize=(4.8, 3.6))
    for vms in sorted({int(r["vms"]) for r in rows}):
        pts = sorted((100 * (float(r["believed_factor"]) - 1), float(r["slowdown_mean"])) for r in rows
                     if int(r["vms"]) == vms)
        ax.plot(*zip(*pts, strict=True), marker="o", label=f"{vms} VMs")
    ax.set_xlabel("error of the believed mean lifetime (%)")
    ax.set_ylabel("slowdown vs. stable Spark")
    ax.set_title("tr (indeterministic), stability 90")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exp", choices=sorted(EXPERIMENTS), required=True)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS))
    parser.add_argument("--policies", nargs="+", default=list(STABILITY_POLICIES))
    parser.add_argument("--stabilities", nargs="+", type=float, default=[1000, 200, 50, 20, 10, 5])
    parser.add_argument("--vms", type=int, default=20)
    parser.add_argument("--scale", type=float, default=0.02)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2, help="processes per point (the machine is shared)")
    parser.add_argument("--period", type=float, default=None,
                        help="spark.trspark.period for every policy (s); default: the engine's")
    parser.add_argument("--duplication", action=argparse.BooleanOptionalAction, default=True,
                        help="spark.trspark.duplication for tr (stability sweep)")
    parser.add_argument("--scheduling-order", choices=("reduction", "fifo"), default=TRConfig.scheduling_order,
                        help="spark.trspark.scheduling.order for the engine's policies (stability sweep)")
    parser.add_argument("--stall-weight", action=argparse.BooleanOptionalAction, default=TRConfig.stall_weight,
                        help="spark.trspark.stallWeight for the engine's policies (stability sweep)")
    parser.add_argument("--policy-runs", nargs="*", default=[], metavar="POLICY=N",
                        help="runs per point for some policies (stability sweep), e.g. tr-det=20")
    parser.add_argument("--out", type=Path, default=Path("docs/results"))
    parser.add_argument("--csv", type=Path, default=None,
                        help="write the rows here instead of OUT/engine_EXP.csv (and skip the figure), "
                             "e.g. to re-run some policies or points without overwriting the sweep")
    args = parser.parse_args(argv)
    try:
        args.policy_runs = {k: int(v) for k, v in (item.split("=", 1) for item in args.policy_runs)}
    except ValueError:
        parser.error("--policy-runs: expected POLICY=N with an integer N, e.g. tr-det=20")
    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.csv if args.csv is not None else args.out / f"engine_{args.exp}.csv"
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        writer.writeheader()
        for row in EXPERIMENTS[args.exp](args):
            writer.writerow(row)
            fh.flush()
            print(f"{row['workload']:8s} {row['policy']:8s} {row['variant']:32s} stab={row['stability']:<6g} "
                  f"vms={row['vms']:<3d} slowdown={row['slowdown_mean']:.3f} failed={row['failed_runs']} "
                  f"bl={row['backups_local_mean']:.0f} br={row['backups_remote_mean']:.0f} "
                  f"recomp={row['recomputed_tasks_mean']:.0f} ({row['seconds']} s)", flush=True)
    if args.csv is not None:
        return
    if args.exp == "stability":
        plot_stability(csv_path, args.out / "engine_stability.png")
    elif args.exp == "robustness":
        plot_robustness(csv_path, args.out / "engine_robustness.png")


if __name__ == "__main__":
    main()


