"""How fast a fresh local cluster's JVMs warm up: the JVMs' defaults against the demo's options.

Each session, in a fresh Python process (PySpark keeps its driver JVM for the life of the
process), starts a ``local-cluster`` of vanilla Spark (no plugin) with ``--executors`` JVMs,
caps each executor at ``--executor-cpus`` cores (:class:`~jobs.harness.cpucap.ExecutorCpuCap`,
as ``trspark bench tpcds --executor-cpus``), registers the TPC-DS tables of ``--sf`` and runs each
query ``--passes`` times in a row. The first pass runs on cold JVMs, as a replacement executor
does after a kill. Sessions alternate between the two option sets, ``--sessions`` of each, so a
busy machine slows both alike.

* ``defaults``: the JVMs' own compilers and collector (tiered C1 + C2, G1).
* ``small-host``: :data:`jobs.demo.SMALL_HOST_JVM_CONF`, the demo's options on the driver and the
  executors (C1 only, the serial collector).

Prints, per option set and query, each pass's seconds (min-max over the sessions) and the
start-up, then per query the ratio ``small-host / defaults`` of the medians of the first and of
the last pass.

Run: ``python bench/jvm_warmup.py [--sf 1] [--queries q29,q65] [--passes 5] [--sessions 2]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

OPTION_SETS = ("defaults", "small-host")


def one_session(options: str, sf: float, queries: Sequence[str], passes: int, executors: int,
                executor_cpus: float, log: Path) -> dict[str, list[float]]:
    """Start-up seconds (key ``start``) and each query's pass seconds, on a fresh cluster."""
    from jobs.demo import SMALL_HOST_JVM_CONF
    from jobs.harness.cpucap import ExecutorCpuCap
    from jobs.harness.executors import driver_pid
    from jobs.tpcds import datagen, session
    from jobs.tpcds.queries import load

    extra = {"spark.sql.autoBroadcastJoinThreshold": "-1"}
    if options == "small-host":
        extra.update(SMALL_HOST_JVM_CONF)
    data = datagen.generate(sf, None, show_progress=False)
    spec = session.ClusterSpec(executors=executors, cores=1, memory_mb=2048, extra_conf=extra)
    began = time.monotonic()
    spark, _ = session.start(spec, "never", console_log=log)
    out: dict[str, list[float]] = {"start": [time.monotonic() - began]}
    cap = ExecutorCpuCap(driver_pid(spark.sparkContext), executor_cpus).start()
    try:
        session.register_tables(spark, data)
        for name in queries:
            text = load(name).spark_sql
            out[name] = []
            for _ in range(passes):
                began = time.monotonic()
                spark.sql(text).collect()
                out[name].append(time.monotonic() - began)
    finally:
        cap.stop()
        spark.stop()
    return out


def spread(values: Sequence[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.1f}" if abs(high - low) < 0.05 else f"{low:.1f}-{high:.1f}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1.0, help="TPC-DS scale factor (data generated once, cached)")
    parser.add_argument("--queries", default="q29,q65", help="comma-separated TPC-DS queries")
    parser.add_argument("--passes", type=int, default=5, help="runs of each query in a row")
    parser.add_argument("--sessions", type=int, default=2, help="fresh sessions per option set")
    parser.add_argument("--executors", type=int, default=3)
    parser.add_argument("--executor-cpus", type=float, default=0.5, help="cores each executor JVM may use")
    parser.add_argument("--log", type=Path, default=Path("jvm_warmup_spark.log"), help="the driver JVM's console output")
    args = parser.parse_args(argv)
    if args.passes < 1 or args.sessions < 1:
        parser.error("--passes and --sessions must be >= 1")
    queries = [q.strip() for q in args.queries.split(",") if q.strip()]
    seen: dict[str, list[dict[str, list[float]]]] = {name: [] for name in OPTION_SETS}
    for round_ in range(args.sessions):
        for options in OPTION_SETS:
            print(f"session {round_ + 1}/{args.sessions}: {options}", flush=True)
            with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as fresh:
                seen[options].append(fresh.submit(one_session, options, args.sf, queries, args.passes,
                                                  args.executors, args.executor_cpus, args.log).result())
    print(f"\nSF {args.sf}, {args.executors} executors at {args.executor_cpus} cores, "
          f"{args.sessions} sessions per option set (seconds, min-max)")
    for options in OPTION_SETS:
        runs = seen[options]
        print(f"{options:>10}  start {spread([r['start'][0] for r in runs])}")
        for name in queries:
            passes = "  ".join(spread([r[name][i] for r in runs]) for i in range(args.passes))
            print(f"{'':>10}  {name}: {passes}")
    for name in queries:
        ratios = []
        for index, label in ((0, "first"), (args.passes - 1, "last")):
            medians = [statistics.median(r[name][index] for r in seen[o]) for o in OPTION_SETS]
            ratios.append(f"{label} pass {medians[1] / medians[0]:.2f}x")
        print(f"small-host / defaults, {name}: " + ", ".join(ratios))


if __name__ == "__main__":
    main()
