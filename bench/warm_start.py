"""Replacement executors with and without the warm-start class archive, side by side.

    python bench/warm_start.py [--rounds 2] [--kills 3]

One executor on a ``local-cluster``: warm it with three runs of a shuffle job, then SIGKILL it
``--kills`` times. After each kill: the seconds until the replacement registered, then the job
on the fresh replacement and once more warm. Applications alternate between no archive and the
archive that a first application wrote at exit (:mod:`trspark.live.warmstart`), ``--rounds``
times each; medians per variant and their ratio are printed.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from jobs.harness.executors import driver_pid, find_executors
from trspark.live.warmstart import executor_java_options, version_tag


def run_app(java_options: str, kills: int) -> tuple[list[float], list[float], list[float]]:
    """(registration seconds after each kill, first job on each replacement, the next job) in one application."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (SparkSession.builder.master("local-cluster[1,1,1024]").appName("warm-start-bench")
             .config("spark.executor.extraJavaOptions", java_options)
             .config("spark.sql.autoBroadcastJoinThreshold", "-1").config("spark.sql.shuffle.partitions", "3")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    sc = spark.sparkContext
    sc.setLogLevel("FATAL")  # the kills' "Lost executor" errors are the point here

    def executors() -> int:
        return int(sc._jsc.sc().getExecutorMemoryStatus().size()) - 1

    def job() -> float:
        started = time.perf_counter()
        left = spark.range(0, 300000).withColumn("k", F.col("id") % 1000).withColumn(
            "s", F.sha2(F.col("id").cast("string"), 256))
        right = spark.range(0, 100000).withColumn("k", F.col("id") % 1000)
        left.join(right, "k").groupBy("k").agg(F.count("*"), F.max("s")).orderBy("k").limit(5).collect()
        return time.perf_counter() - started

    registered, cold, warm = [], [], []
    try:
        wait(lambda: executors() == 1)
        for _ in range(3):
            job()
        for _ in range(kills):
            (executor,) = find_executors(driver_pid(sc))
            killed = time.perf_counter()
            os.kill(executor.pid, signal.SIGKILL)
            wait(lambda: executors() == 0)
            wait(lambda: executors() == 1)
            registered.append(time.perf_counter() - killed)
            cold.append(job())
            warm.append(job())
    finally:
        spark.stop()
    return registered, cold, warm


def wait(condition: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the executor did not come or go in time")
        time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--kills", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory, tag = Path(tmp), version_tag()
        run_app(executor_java_options(directory, tag), kills=0)  # writes the dump at exit
        # The dump is adopted once no executor has written to it for SETTLE_S seconds.
        wait(lambda: executor_java_options(directory, tag).startswith("-XX:SharedArchiveFile="))
        with_archive = executor_java_options(directory, tag)
        results: dict[str, list[list[float]]] = {"none": [[], [], []], "archive": [[], [], []]}
        for round_ in range(args.rounds):
            for name, options in (("none", ""), ("archive", with_archive)):
                for column, values in zip(results[name], run_app(options, args.kills), strict=True):
                    column.extend(values)
                print(f"round {round_ + 1}/{args.rounds} {name}: done", flush=True)
    print(f"{args.rounds} applications per variant, {args.kills} kills each; medians (s):")
    print(f"{'':28}{'no archive':>12}{'archive':>10}{'ratio':>8}")
    for i, label in enumerate(("replacement registered", "first job on it", "next job (warm)")):
        none, archive = statistics.median(results["none"][i]), statistics.median(results["archive"][i])
        print(f"{label:28}{none:12.2f}{archive:10.2f}{archive / none:8.2f}")


if __name__ == "__main__":
    main()
