"""Overhead of the trspark plugin on stable executors: the same job with and without it.

Three configurations run the same multi-stage job on their own ``local-cluster``:

* ``none``  -- vanilla Spark, no plugin (the reference);
* ``never`` -- the plugin and its engine, policy ``never`` (events flow, nothing is backed up);
  target: time ratio to ``none`` <= 1.03;
* ``tr``    -- the plugin with policy ``tr`` (``always`` if ``tr`` is not registered yet), remote
  backups to a local ``file://`` directory.

Each configuration lives in its own worker process that starts its session once and warms it up
(cold JVMs are 1.5-2.3x slower here), so start-up is not timed. The coordinator then runs the
job *interleaved*: round r runs every configuration once, in a rotated order, one at a time (the
idle sessions use almost no CPU). It prints each run, the median time per configuration and its
ratio to ``none`` (of medians, and the median of per-round ratios), and checks that every
configuration computed the same answer.

Usage::

    python bench/live_overhead.py --rounds 5 --rows 20000000 [--csv results.csv]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from jobs.harness.sample_job import two_shuffle_checksum
from jobs.reports.render import append_row

CONFIGS = ("none", "never", "tr")
TARGET_NEVER = 1.03


# ---- worker: one SparkSession, runs the job on request ------------------------------------------


def worker_conf(config: str, backup_dir: Path) -> dict[str, str]:
    """Spark settings of one configuration (``none`` adds nothing)."""
    if config == "none":
        return {}
    import trspark
    from trspark.engine.registry import policy_names

    mode = config if config == "never" or config in policy_names() else "always"
    return trspark.spark_conf(mode=mode, remote_path=backup_dir.as_uri())


def serve_worker(config: str, executors: int, memory_mb: int, rows: int, partitions: int, warmup: int) -> None:
    """Serve ``run`` lines on stdin with one JSON line each on stdout; ``quit`` ends."""
    from pyspark.sql import SparkSession

    try:
        from jobs.tpcds.session import spark_home

        os.environ.setdefault("SPARK_HOME", str(spark_home()))  # executor logs out of site-packages
    except ImportError:
        pass
    with tempfile.TemporaryDirectory(prefix=f"trspark-overhead-{config}-") as tmp:
        builder = (
            SparkSession.builder.master(f"local-cluster[{executors},1,{memory_mb}]")
            .appName(f"trspark-overhead-{config}")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
            .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "300s")
            .config("spark.sql.shuffle.partitions", str(partitions))
            .config("spark.sql.adaptive.enabled", "false")  # same plan every run
        )
        for key, value in worker_conf(config, Path(tmp) / "backups").items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        try:
            for _ in range(warmup):
                two_shuffle_checksum(spark, rows, partitions)
            print(json.dumps({"ready": config, "mode": spark.conf.get("spark.trspark.mode", "none")}), flush=True)
            for line in sys.stdin:
                if line.strip() != "run":
                    break
                start = time.perf_counter()
                checksum = two_shuffle_checksum(spark, rows, partitions)
                print(json.dumps({"seconds": time.perf_counter() - start, "checksum": checksum}), flush=True)
        finally:
            spark.stop()


# ---- coordinator ---------------------------------------------------------------------------------


@dataclass
class Worker:
    config: str
    proc: subprocess.Popen[str]
    mode: str = ""

    def request(self, line: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if line:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        while True:
            out = self.proc.stdout.readline()
            if not out:
                raise RuntimeError(f"worker {self.config!r} exited (code {self.proc.wait()}); see its stderr above")
            if out.startswith("{"):
                return json.loads(out)  # type: ignore[no-any-return]


def start_worker(config: str, options: dict[str, Any]) -> Worker:
    args = [sys.executable, __file__, "--worker", config]
    for name in ("executors", "memory_mb", "rows", "partitions", "warmup"):
        args += [f"--{name.replace('_', '-')}", str(options[name])]
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parent.parent)
    return Worker(config, proc)


def coordinate(configs: tuple[str, ...], rounds: int, options: dict[str, Any], csv_path: Path | None) -> dict[str, float]:
    times: dict[str, list[float]] = {c: [] for c in configs}
    checksums: dict[str, set[int]] = {c: set() for c in configs}
    workers: dict[str, Worker] = {}
    try:
        for config in configs:  # one at a time: start-ups do not compete for the CPU
            workers[config] = start_worker(config, options)
            workers[config].mode = workers[config].request("")["mode"]
            click.echo(f"{config}: session ready (spark.trspark.mode={workers[config].mode})")
        for r in range(rounds):
            order = configs[r % len(configs):] + configs[: r % len(configs)]  # rotate: no fixed position
            for config in order:
                result = workers[config].request("run")
                times[config].append(result["seconds"])
                checksums[config].add(result["checksum"])
                click.echo(f"round {r + 1} {config:>5}: {result['seconds']:.2f} s")
                if csv_path is not None:
                    append_row(csv_path, {"round": r + 1, "config": config, "mode": workers[config].mode,
                                          "seconds": round(result["seconds"], 4), **options})
    finally:
        for w in workers.values():
            if w.proc.poll() is None:
                assert w.proc.stdin is not None
                w.proc.stdin.write("quit\n")
                w.proc.stdin.close()
                w.proc.wait(120)
    return report(times, checksums, {c: w.mode for c, w in workers.items()})


def report(times: dict[str, list[float]], checksums: dict[str, set[int]], modes: dict[str, str]) -> dict[str, float]:
    """Print times and ratios to ``none``; return the paired ratios.

    ``ratio`` = median(config) / median(none). ``paired`` = median over rounds of
    t(config, round r) / t(none, round r): runs of one round are minutes apart at most, so this
    one is less sensitive to load that drifts during the benchmark (the machine is shared).
    """
    answers = set().union(*checksums.values())
    click.echo(f"answers equal across configurations: {'yes' if len(answers) == 1 else 'NO: ' + str(checksums)}")
    base = times["none"]
    paired_ratios = {}
    click.echo(f"{'config':>6} {'mode':>7} {'median s':>9} {'min s':>7} {'max s':>7} {'ratio':>6} {'paired':>6}")
    for config, values in times.items():
        ratio = statistics.median(values) / statistics.median(base)
        paired = statistics.median(t / b for t, b in zip(values, base, strict=True))
        paired_ratios[config] = paired
        click.echo(f"{config:>6} {modes.get(config, ''):>7} {statistics.median(values):9.2f} {min(values):7.2f} "
                   f"{max(values):7.2f} {ratio:6.3f} {paired:6.3f}")
    if "never" in paired_ratios:
        verdict = "met" if paired_ratios["never"] <= TARGET_NEVER else "NOT met"
        click.echo(f"target never/none <= {TARGET_NEVER} (paired): {verdict} ({paired_ratios['never']:.3f})")
    return paired_ratios


@click.command()
@click.option("--rounds", default=5, show_default=True, type=click.IntRange(1), help="Timed runs per configuration.")
@click.option("--configs", default=",".join(CONFIGS), show_default=True,
              help="Comma-separated subset of none, never, tr (none is the reference).")
@click.option("--executors", default=2, show_default=True, type=click.IntRange(1), help="Executors per local-cluster.")
@click.option("--memory-mb", default=1024, show_default=True, type=click.IntRange(512), help="Memory per executor (MB).")
@click.option("--rows", default=20_000_000, show_default=True, type=click.IntRange(1), help="Rows of the job's input.")
@click.option("--partitions", default=16, show_default=True, type=click.IntRange(1), help="Map and reduce partitions.")
@click.option("--warmup", default=2, show_default=True, type=click.IntRange(0), help="Untimed runs per session first.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path), help="Append one row per run here.")
@click.option("--worker", type=click.Choice(CONFIGS), hidden=True)
def main(rounds: int, configs: str, executors: int, memory_mb: int, rows: int, partitions: int, warmup: int,
         csv_path: Path | None, worker: str | None) -> None:
    """Job time with the trspark plugin (never, tr) relative to no plugin, interleaved runs."""
    options = {"executors": executors, "memory_mb": memory_mb, "rows": rows, "partitions": partitions, "warmup": warmup}
    if worker is not None:
        serve_worker(worker, **options)
        return
    chosen = tuple(c.strip() for c in configs.split(",") if c.strip())
    unknown = [c for c in chosen if c not in CONFIGS]
    if unknown or "none" not in chosen:
        raise click.BadParameter(f"{','.join(chosen)!r}: allowed are none, never, tr and none must be included",
                                 param_hint="--configs")
    coordinate(chosen, rounds, options, csv_path)


if __name__ == "__main__":
    main()
