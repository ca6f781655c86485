"""Soak: one trspark application runs a stream of RDD jobs while executors are killed.

    python -m jobs.soak --minutes 45 --executors 3 --kill-mean 20

Every job is a two-stage sum by key whose answer is known, over a data size that varies from job
to job; an :class:`jobs.harness.chaos.EvictionInjector` SIGKILLs executors with exponential
lifetimes (mean ``--kill-mean`` seconds) and the cluster starts replacements. After each job
one line: jobs, kills, wrong answers, failed jobs, and the resident memory (MB) of the driver
JVM, the policy engine and the executors. At the end: the totals, the memory trend (last
fifth's mean over the first fifth's, per process kind) and whether the remote store was left
empty. Exit code 1 when an answer was wrong or a job failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil


def rss_mb(driver: psutil.Process) -> dict[str, float]:
    """Resident memory (MB) of the driver JVM, the engine and the executors (summed)."""
    out = {"driver": driver.memory_info().rss / 1e6, "engine": 0.0, "executors": 0.0}
    for child in driver.children(recursive=True):
        try:
            line = " ".join(child.cmdline())
            kind = "engine" if "trspark.live" in line else "executors" if "CoarseGrainedExecutorBackend" in line else ""
            if kind:
                out[kind] += child.memory_info().rss / 1e6
        except psutil.Error:  # exited meanwhile (a killed executor)
            pass
    return {k: round(v, 1) for k, v in out.items()}


def trend(samples: list[dict[str, float]]) -> dict[str, float]:
    """Per process kind: mean of the last fifth of the samples over the mean of the first fifth."""
    n = max(1, len(samples) // 5)
    return {k: round(sum(s[k] for s in samples[-n:]) / max(1e-9, sum(s[k] for s in samples[:n])), 2)
            for k in samples[0]} if samples else {}


def soak(minutes: float, executors: int, kill_mean: float, seed: int) -> dict[str, Any]:
    from pyspark.sql import SparkSession

    import trspark
    from jobs.harness.chaos import EvictionInjector

    store = Path(tempfile.mkdtemp(prefix="trspark-soak-"))
    builder = (SparkSession.builder.master(f"local-trcluster[{executors},1,1024]").appName("trspark-soak")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.scheduler.minRegisteredResourcesRatio", "1.0"))
    spark = trspark.configure(builder, mode="tr", lifetime=f"exponential:mean={kill_mean}",
                              remote_path=store.as_uri()).getOrCreate()
    sc = spark.sparkContext
    driver = psutil.Process(int(sc._jvm.java.lang.ProcessHandle.current().pid()))
    app_id = sc.applicationId
    totals = {"jobs": 0, "wrong": 0, "failed": 0, "kills": 0}
    samples: list[dict[str, float]] = []
    end = time.monotonic() + 60 * minutes
    injector = EvictionInjector(driver.pid, model=f"exponential:mean={kill_mean}", rng=seed, min_alive=1).start()
    try:
        while time.monotonic() < end:
            rows = 20000 + 10000 * (totals["jobs"] % 7)
            rdd = sc.parallelize(range(rows), 6).map(lambda x: (x % 101, x)).reduceByKey(lambda a, b: a + b, 4)
            try:
                answer = dict(rdd.collect())
                totals["wrong"] += answer != {k: sum(range(k, rows, 101)) for k in range(101)}
            except Exception as exc:  # a failed job is what the soak counts; it goes on
                totals["failed"] += 1
                print(f"job failed: {str(exc).splitlines()[0][:200]}", file=sys.stderr)
            totals["jobs"] += 1
            totals["kills"] = injector.victims
            samples.append(rss_mb(driver))
            print(json.dumps({**totals, "rss_mb": samples[-1]}), flush=True)
    finally:
        injector.stop()
        spark.stop()
    left = [p for p in (store / app_id).rglob("*") if p.is_file()] if (store / app_id).exists() else []
    return {**totals, "memory_trend": trend(samples), "store_files_left": len(left)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=45.0)
    parser.add_argument("--executors", type=int, default=3)
    parser.add_argument("--kill-mean", type=float, default=20.0, help="mean executor lifetime, seconds")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    result = soak(args.minutes, args.executors, args.kill_mean, args.seed)
    print("SOAK " + json.dumps(result), flush=True)
    return 1 if result["wrong"] or result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
