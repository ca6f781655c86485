"""Elasticity bench: a bursty application under dynamic allocation, ``tr`` against vanilla Spark.

One application per policy, each in a driver JVM of its own: a query, an idle gap, a query, on
``local-cluster`` (vanilla Spark, ``never``) or ``local-trcluster`` (``tr``), both with dynamic
allocation and shuffle tracking, starting with no executor (the first query asks for its own).
With shuffle tracking Spark keeps an idle executor while it holds shuffle data; ``tr`` lets one
go once every output it holds that may still be read is saved elsewhere
(``spark.trspark.release.idle``). From each application's event log:

``executor_seconds``
    :math:`\\sum_e (end_e - start_e)` over its executors (s; the application's end for those
    still there): what the application was billed for.
``executors_started, executors_removed, executors_released, executors_released_idle, evictions``
    Executors registered; removed by the driver (dynamic allocation); released by trspark, and
    of those the idle ones (the driver's metric; 0 for ``never``);
    evicted (always 0 here: nothing is killed, and no removal may count as one).
``stage_resubmissions, map_tasks_rerun``
    Stage attempts after the first, and map tasks run again for a partition that already had an
    output: a release that lost an output still needed would show here.
``engine_fallback``
    ``tr``'s policy engine was not there (it did not connect in time, e.g. on a loaded machine):
    the plugin checkpointed every output and released nothing; such a row measured no release.
``q1_seconds, q2_seconds, answer, answers_equal``
    Each query's wall-clock time (driver side, collect included), a digest of the second
    query's rows, and whether every policy's digests agree within the repeat.
``repeat``
    Which pair of applications the row belongs to. The policies run back to back in each
    repeat, in reversed order every other repeat, so a drift in the machine's load does not
    favour the one that always runs first.

    python -m jobs.elastic --out elastic.csv [--policies never,tr] [--gap 30] [--idle-timeout 5] [--executors 3] [--repeat 3]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trspark

POLICIES = ("never", "tr")


@dataclass(frozen=True)
class ElasticSettings:
    executors: int = 3
    gap: float = 30.0
    """Idle seconds between the two queries."""
    idle_timeout: float = 5.0
    """``spark.dynamicAllocation.executorIdleTimeout`` (s)."""
    rows: int = 1_000_000
    partitions: int = 6
    shuffle_timeout: float | None = None
    """``spark.dynamicAllocation.shuffleTracking.timeout`` (s); None = Spark's default (unbounded)."""
    trspark_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Extra ``spark.trspark.*`` options (TRConfig field names) for ``tr``."""


@dataclass
class ElasticRow:
    policy: str
    repeat: int = 0
    q1_seconds: float = float("nan")
    q2_seconds: float = float("nan")
    gap_seconds: float = 0.0
    app_seconds: float = 0.0
    executor_seconds: float = 0.0
    executors_started: int = 0
    executors_removed: int = 0
    executors_released: int = 0
    executors_released_idle: int = 0
    """Of ``executors_released``, the idle ones: the driver's metric, read before the application stops."""
    evictions: int = 0
    stage_resubmissions: int = 0
    map_tasks_rerun: int = 0
    engine_fallback: bool = False
    answer: str = ""
    answers_equal: bool = False


def dynamic_allocation_conf(s: ElasticSettings, events: Path) -> dict[str, str]:
    """Dynamic allocation with shuffle tracking, none to ``executors`` executors, event log on."""
    conf = {
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.shuffleTracking.enabled": "true",
        "spark.dynamicAllocation.executorIdleTimeout": f"{s.idle_timeout:g}s",
        "spark.dynamicAllocation.minExecutors": "0",
        # No executor before the first query: executors started with the application would idle
        # out (or not) while the driver plans it, a race that decided whether q1 ran on them.
        "spark.dynamicAllocation.initialExecutors": "0",
        "spark.dynamicAllocation.maxExecutors": str(s.executors),
        "spark.dynamicAllocation.schedulerBacklogTimeout": "1s",
        "spark.executor.cores": "1",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": events.as_uri(),
        "spark.sql.adaptive.enabled": "false",  # one job per query: the same stages in every run
        "spark.sql.shuffle.partitions": str(s.partitions),
    }
    if s.shuffle_timeout is not None:
        conf["spark.dynamicAllocation.shuffleTracking.timeout"] = f"{s.shuffle_timeout:g}s"
    return conf


def _queries(spark: Any, s: ElasticSettings) -> tuple[Any, Any]:
    """Two shuffling queries over generated rows (an aggregation; a join of two aggregations)."""
    from pyspark.sql import functions as F

    base = spark.range(0, s.rows, numPartitions=s.partitions).selectExpr("id % 997 AS k", "id AS v")
    first = base.groupBy("k").agg(F.sum("v").alias("s")).orderBy("k")
    counts = base.groupBy((F.col("k") % 13).alias("g")).agg(F.count("*").alias("n"))
    sums = base.groupBy((F.col("k") % 13).alias("g")).agg(F.max("v").alias("m"))
    return first, counts.join(sums, "g").orderBy("g")


def _timed_collect(df: Any) -> tuple[float, list[tuple[Any, ...]]]:
    start = time.perf_counter()
    rows = [tuple(r) for r in df.collect()]
    return time.perf_counter() - start, rows


def run_policy(policy: str, s: ElasticSettings, work: Path) -> ElasticRow:
    """One application of ``policy`` (query, idle gap, query) in this process's driver JVM."""
    from jobs.tpcds import session

    events = work / f"events-{policy}"
    events.mkdir(parents=True, exist_ok=True)
    spec = session.ClusterSpec(executors=s.executors, cores=1, memory_mb=1024,
                               extra_conf=dynamic_allocation_conf(s, events))
    options = {"lifetime": "exponential:mean=3600", **s.trspark_options} if policy == "tr" else None
    spark, work_dir = session.start(spec, policy, app_name="trspark-elastic", trspark_options=options)
    row = ElasticRow(policy=policy)
    try:
        first, second = _queries(spark, s)
        row.q1_seconds, _ = _timed_collect(first)
        gap_start = time.perf_counter()
        time.sleep(s.gap)  # the workload's idle gap: dynamic allocation and trspark act in it
        row.gap_seconds = time.perf_counter() - gap_start
        row.q2_seconds, rows = _timed_collect(second)
        row.answer = hashlib.sha256(repr(rows).encode()).hexdigest()[:16]
        row.executors_released_idle = trspark.status(spark).get("executors_released_idle", 0)
    finally:
        session.stop(spark, work_dir)
    (log,) = [p for p in events.iterdir() if not p.name.startswith(".")]
    return from_event_log(row, log)


def from_event_log(row: ElasticRow, log: Path) -> ElasticRow:
    """Fill ``row``'s executor, release and re-run columns from the application's event log."""
    from trspark.reporting import summarize

    summary = summarize(log)
    row.app_seconds = summary.duration
    row.executor_seconds = summary.executor_seconds
    row.executors_started = len(summary.executors)
    row.executors_removed = summary.removed
    row.executors_released = sum(e.reason == "released" for e in summary.executors.values())
    row.evictions = summary.kills
    row.stage_resubmissions = summary.stage_resubmissions
    row.map_tasks_rerun = summary.recomputed_tasks
    row.engine_fallback = summary.fallbacks > 0
    return row


def write_csv(rows: list[ElasticRow], out: Path) -> None:
    fields = [f.name for f in dataclasses.fields(ElasticRow)]
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(dataclasses.asdict(r) for r in rows)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _child(policy: str, s: ElasticSettings, work: Path) -> ElasticRow:
    """Run ``policy`` in a fresh Python process (a driver JVM of its own: the plugin's class path)."""
    out = work / f"{policy}.json"
    args = [sys.executable, "-m", "jobs.elastic", "--one", policy, "--json", str(out), "--work", str(work),
            "--settings", json.dumps(dataclasses.asdict(s))]
    subprocess.run(args, check=True)
    return ElasticRow(**json.loads(out.read_text()))


def run(s: ElasticSettings, out: Path, policies: tuple[str, ...] = POLICIES, repeats: int = 1) -> list[ElasticRow]:
    """Every policy's application ``repeats`` times, then the CSV at ``out``."""
    rows: list[ElasticRow] = []
    for repeat in range(repeats):
        order = policies if repeat % 2 == 0 else tuple(reversed(policies))
        with tempfile.TemporaryDirectory(prefix="trspark-elastic-") as work:  # event logs, read by then
            pair = sorted((_child(p, s, Path(work)) for p in order), key=lambda r: policies.index(r.policy))
        equal = len({r.answer for r in pair}) == 1 and all(r.answer for r in pair)
        for r in pair:
            r.repeat, r.answers_equal = repeat, equal
        rows += pair
        print(f"repeat {repeat + 1} of {repeats} done", flush=True)
    write_csv(rows, out)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jobs.elastic", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("elastic.csv"))
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--executors", type=int, default=ElasticSettings.executors)
    parser.add_argument("--gap", type=float, default=ElasticSettings.gap)
    parser.add_argument("--idle-timeout", type=float, default=ElasticSettings.idle_timeout)
    parser.add_argument("--rows", type=int, default=ElasticSettings.rows)
    parser.add_argument("--repeat", type=int, default=1, help="applications per policy (paired, order alternating)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--settings", help=argparse.SUPPRESS)
    a = parser.parse_args(argv)
    if a.one:
        row = run_policy(a.one, ElasticSettings(**json.loads(a.settings)), a.work)
        a.json.write_text(json.dumps(dataclasses.asdict(row)))
        return
    s = ElasticSettings(executors=a.executors, gap=a.gap, idle_timeout=a.idle_timeout, rows=a.rows)
    if a.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {a.repeat}")
    rows = run(s, a.out, tuple(p.strip() for p in a.policies.split(",") if p.strip()), a.repeat)
    for r in rows:
        print(f"{r.repeat} {r.policy:6} executor-s {r.executor_seconds:7.1f}  q1 {r.q1_seconds:6.1f} s  q2 {r.q2_seconds:6.1f} s  "
              f"removed {r.executors_removed} released {r.executors_released} evictions {r.evictions}  "
              f"resubmitted stages {r.stage_resubmissions} map re-runs {r.map_tasks_rerun}  "
              f"answers equal {r.answers_equal}")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
