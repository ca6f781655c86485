"""Soak: one trspark application runs a stream of TPC-DS queries and RDD jobs while executors die.

    python -m jobs.soak --minutes 50 --executors 3 --kill-mean 20 --out docs/results/soak.csv

Jobs alternate: a two-stage RDD sum by key whose answer is known, then the next TPC-DS query of
``--queries`` (round robin, scale factor ``--sf``), whose answer is compared with DuckDB's on the
same Parquet files (:mod:`jobs.tpcds.answers`). The same stream is the kill sweep: every query
once under kills (``--queries all --passes 1 --no-rdd``), run per ``--policy``, vanilla Spark's
``never`` included to count the jobs it aborts. An :class:`jobs.harness.chaos.EvictionInjector`
SIGKILLs executors with exponential lifetimes (mean ``--kill-mean`` seconds) and the cluster
starts replacements.

After each job one CSV row and one printed line: the job, its seconds, whether it failed or was
wrong, the kills so far, the resident memory (MB) of the driver JVM, the policy engine and the
executors, and the engine's decision latency as Spark's own ``CsvSink`` last wrote it (median
and 99th percentile of the ``trspark`` source's histogram, whose reservoir favours the last
five minutes). Every ``--heap-every`` seconds, after a job, the driver's live heap: its used heap
right after a full collection (``System.gc()``), which a leak raises and a heap merely grown to
its maximum does not. At the end: the totals, the memory trend (last fifth's mean over the first
fifth's, per process kind, and of the live heap) and the files left in the remote store after
the application ended.
Exit code 1 when an answer was wrong or a job failed.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from jobs.harness.executors import driver_pid
from jobs.reports.render import append_row

SOAK_QUERIES = "q3,q7,q19,q29,q50,q65,q93,q97"
METRICS_PERIOD_S = 10


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


def live_heap_mb(sc: Any) -> float:
    """The driver JVM's used heap (MB) right after a full collection that this call asks for.

    ``System.gc()`` is a full, stop-the-world collection under the JVM's default collectors, so
    what is left is what the driver still references.
    """
    jvm = sc._jvm
    jvm.java.lang.System.gc()
    return round(float(jvm.java.lang.management.ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed()) / 1e6, 1)


class HeapSampler:
    """The driver's live heap (:func:`live_heap_mb`) at most once every ``every`` seconds (0: never)."""

    def __init__(self, sc: Any, every: float) -> None:
        self.sc, self.every = sc, every
        self.due = time.monotonic()
        self.samples: list[dict[str, float]] = []

    def sample(self) -> float | str:
        """A new sample in MB when one is due, else ``""`` (a blank CSV cell)."""
        if not self.every or time.monotonic() < self.due:
            return ""
        self.samples.append({"driver_heap": live_heap_mb(self.sc)})
        self.due = time.monotonic() + self.every
        return self.samples[-1]["driver_heap"]


def trend(samples: list[dict[str, float]]) -> dict[str, float]:
    """Per process kind: mean of the last fifth of the samples over the mean of the first fifth."""
    n = max(1, len(samples) // 5)
    return {k: round(sum(s[k] for s in samples[-n:]) / max(1e-9, sum(s[k] for s in samples[:n])), 2)
            for k in samples[0]} if samples else {}


def decision_latency_ms(metrics_dir: Path) -> dict[str, float]:
    """The last line Spark's CsvSink wrote for the engine's decision latency: p50 and p99 in ms.

    The histogram is recorded in microseconds; an empty dict until the sink's first write.
    """
    files = sorted(metrics_dir.glob("*.trspark.engine_decision_latency_us.csv"))
    if not files:
        return {}
    with files[-1].open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        return {}
    last = rows[-1]
    return {"decisions": int(last["count"]), "latency_p50_ms": round(float(last["p50"]) / 1000, 3),
            "latency_p99_ms": round(float(last["p99"]) / 1000, 3)}


def metrics_conf(metrics_dir: Path) -> dict[str, str]:
    """Spark settings that make the driver's CsvSink write every source to ``metrics_dir``."""
    prefix = "spark.metrics.conf.driver.sink.csv"
    return {f"{prefix}.class": "org.apache.spark.metrics.sink.CsvSink",
            f"{prefix}.period": str(METRICS_PERIOD_S), f"{prefix}.unit": "seconds",
            f"{prefix}.directory": str(metrics_dir)}


class Stream:
    """The soak's jobs in order: an RDD job, then the next TPC-DS query, and so on (or the queries alone)."""

    def __init__(self, spark: Any, queries: dict[str, Any], answers: dict[str, Any], time_cap: float,
                 *, rdd_jobs: bool = True) -> None:
        self.spark, self.queries, self.answers, self.time_cap = spark, queries, answers, time_cap
        self.names = sorted(queries)
        self.count = 0
        self.rdd_jobs = rdd_jobs

    def queries_run(self) -> int:
        """Queries started so far (with RDD jobs, every second job is one)."""
        return self.count // 2 if self.rdd_jobs else self.count

    def passes_done(self) -> int:
        """How many times every query has run."""
        return self.queries_run() // len(self.names)

    def run_next(self) -> tuple[str, float, bool, bool]:
        """Run the next job: (name, seconds, failed, wrong)."""
        index, nth_query = self.count, self.queries_run()
        self.count += 1
        if self.rdd_jobs and index % 2 == 0:
            return self._rdd_job(index // 2)
        return self._query(self.names[nth_query % len(self.names)], index)

    def _rdd_job(self, index: int) -> tuple[str, float, bool, bool]:
        rows = 20000 + 10000 * (index % 7)
        started = time.monotonic()
        sc = self.spark.sparkContext
        rdd = sc.parallelize(range(rows), 6).map(lambda x: (x % 101, x)).reduceByKey(lambda a, b: a + b, 4)
        try:
            answer = dict(rdd.collect())
        except Exception as exc:  # a failed job is what the soak counts; it goes on
            print(f"rdd job failed: {str(exc).splitlines()[0][:200]}", file=sys.stderr)
            return "rdd", time.monotonic() - started, True, False
        wrong = answer != {k: sum(range(k, rows, 101)) for k in range(101)}
        return "rdd", time.monotonic() - started, False, wrong

    def _query(self, name: str, index: int) -> tuple[str, float, bool, bool]:
        from jobs.tpcds.query_run import execute
        from jobs.tpcds.verify import judge

        outcome = execute(self.spark, self.queries[name], f"soak-{index}", self.time_cap)
        if outcome.answer is None:
            print(f"{name} failed: {outcome.error[:200]}", file=sys.stderr)
            return name, outcome.seconds, True, False
        verdict = judge(self.queries[name], self.answers[name], outcome.answer, outcome.error, outcome.seconds)
        if not verdict.ok:
            print(f"{name} wrong: {verdict.reason[:200]}", file=sys.stderr)
        return name, outcome.seconds, False, not verdict.ok


def soak(args: argparse.Namespace) -> dict[str, Any]:
    from jobs.harness.chaos import EvictionInjector
    from jobs.tpcds import datagen, session
    from jobs.tpcds.queries import parse_list
    from jobs.tpcds.verify import Hooks, duckdb_answers

    data = datagen.generate(args.sf)
    queries, answers = duckdb_answers(data, parse_list(args.queries), Hooks())
    unanswered = [name for name, answer in answers.items() if isinstance(answer, str)]
    if unanswered:
        raise SystemExit(f"error: --queries: DuckDB has no answer to {', '.join(unanswered)}")
    metrics_dir = Path(args.metrics_dir or tempfile.mkdtemp(prefix="trspark-soak-metrics-"))
    spec = session.ClusterSpec(executors=args.executors, cores=1, memory_mb=1024,
                               extra_conf={**metrics_conf(metrics_dir), **dict(args.conf)})
    spark, work_dir = session.start(spec, args.policy, app_name="trspark-soak",
                                    trspark_options={"lifetime": f"exponential:mean={args.kill_mean}"})
    session.register_tables(spark, data)
    sc = spark.sparkContext
    driver = psutil.Process(driver_pid(sc))
    store = work_dir / "backups" / sc.applicationId
    totals = {"jobs": 0, "wrong": 0, "failed": 0, "kills": 0}
    samples: list[dict[str, float]] = []
    heap = HeapSampler(sc, args.heap_every)
    stream = Stream(spark, queries, answers, args.time_cap, rdd_jobs=args.rdd)
    started = time.monotonic()
    injector = EvictionInjector(driver.pid, model=f"exponential:mean={args.kill_mean}", rng=args.seed, min_alive=1).start()
    try:
        while time.monotonic() < started + 60 * args.minutes and not (args.passes and stream.passes_done() >= args.passes):
            job, seconds, failed, wrong = stream.run_next()
            totals.update(jobs=totals["jobs"] + 1, failed=totals["failed"] + failed,
                          wrong=totals["wrong"] + wrong, kills=injector.victims)
            samples.append(rss_mb(driver))
            row = {"policy": args.policy, "t_s": round(time.monotonic() - started, 1), "job": job, "seconds": round(seconds, 2),
                   "failed": int(failed), "wrong": int(wrong), "kills": totals["kills"],
                   **{f"rss_{k}_mb": v for k, v in samples[-1].items()},
                   "driver_heap_mb": heap.sample(),
                   **{"decisions": "", "latency_p50_ms": "", "latency_p99_ms": "", **decision_latency_ms(metrics_dir)}}
            if args.out:
                append_row(Path(args.out), row)
            print(json.dumps(row), flush=True)
    finally:
        injector.stop()
        spark.stop()
        left = [p for p in store.rglob("*") if p.is_file()] if store.exists() else []
        # Counted above, so only now: the session's shuffle files and backups, and metrics nobody asked to keep.
        shutil.rmtree(work_dir, ignore_errors=True)
        if not args.metrics_dir:
            shutil.rmtree(metrics_dir, ignore_errors=True)
    return {**totals, "memory_trend": {**trend(samples), **trend(heap.samples)}, "store_files_left": len(left)}


def spark_setting(value: str) -> tuple[str, str]:
    """``KEY=VALUE`` with a ``spark.*`` key, as a pair."""
    key, eq, setting = value.partition("=")
    if not eq or not key.strip().startswith("spark."):
        raise argparse.ArgumentTypeError(f"{value!r}; allowed: KEY=VALUE with a spark.* key")
    return key.strip(), setting.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.soak", description=__doc__.splitlines()[0])
    from jobs.tpcds.session import POLICIES

    parser.add_argument("--minutes", type=float, default=50.0, help="stop starting jobs after this long")
    parser.add_argument("--passes", type=int, default=0,
                        help="also stop once every query ran this many times (0: only --minutes stops)")
    parser.add_argument("--policy", default="tr", choices=POLICIES)
    parser.add_argument("--rdd", action=argparse.BooleanOptionalAction, default=True,
                        help="an RDD job before each query (default) or queries only")
    parser.add_argument("--executors", type=int, default=3)
    parser.add_argument("--kill-mean", type=float, default=20.0, help="mean executor lifetime, seconds")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--sf", type=float, default=0.1, help="TPC-DS scale factor")
    parser.add_argument("--queries", default=SOAK_QUERIES, help="TPC-DS queries, run in turn")
    parser.add_argument("--time-cap", type=float, default=600.0, help="seconds a query may take before it counts as failed")
    parser.add_argument("--heap-every", type=float, default=120.0,
                        help="seconds between samples of the driver's live heap, each a full collection (0: none)")
    parser.add_argument("--conf", action="append", default=[], type=spark_setting, metavar="KEY=VALUE",
                        help="a Spark setting for the application (repeatable), e.g. spark.sql.ui.retainedExecutions=100")
    parser.add_argument("--out", default="", help="CSV: one row per job (appended)")
    parser.add_argument("--metrics-dir", default="", help="where the driver's CsvSink writes (default: a new temporary directory)")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.executors < 2 or args.kill_mean <= 0 or args.passes < 0 or not args.heap_every >= 0:
        parser.error("--minutes and --kill-mean must be > 0, --executors >= 2, --passes and --heap-every >= 0")
    result = soak(args)
    print("SOAK " + json.dumps(result), flush=True)
    return 1 if result["wrong"] or result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
