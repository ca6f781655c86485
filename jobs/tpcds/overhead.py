"""The plugin's cost when nothing is killed: ``tr`` against vanilla Spark, interleaved and paired.

Two configurations run the same TPC-DS queries on stable executors:

* ``never`` -- vanilla Spark on ``local-cluster[N,C,M]``, no plugin (the reference);
* ``tr``    -- the trspark plugin, policy ``tr``, on ``local-trcluster[N,C,M]`` (as the benchmark
  runs it), remote backups to a ``file://`` directory of its own.

Each configuration lives in its own worker process (its own driver JVM: the plugin jar is fixed at
JVM start) that starts its cluster once and runs every query once unrecorded (cold JVMs are
1.5-2.3x slower here). The coordinator then runs ``rounds`` rounds; in each round every query runs
once per configuration, one run at a time, the order alternating between rounds and queries (the
idle cluster uses almost no CPU). On a machine whose load drifts, the *paired* ratio -- ``tr`` over
``never`` for the same query in the same round, seconds apart -- is the robust figure:

.. math:: r_{q,k} = t_{tr}(q, k) / t_{never}(q, k), \\qquad
          \\text{overhead} = \\operatorname{median}_{q,k}\\, r_{q,k} - 1

Rows go to the benchmark's CSV schema (:mod:`jobs.tpcds.results`), scenario ``stable``, appended as
they come; here ``stable_seconds`` is the paired vanilla time of the same round and ``slowdown`` the
paired ratio (1.0 on the vanilla rows); the plugin's backup counters and whether it fell back to
always-checkpoint are recorded per run. Every answer is checked against DuckDB.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.tpcds import datagen, metrics, results, session
from jobs.tpcds.answers import Answer, DuckDBOracle, compare
from jobs.tpcds.queries import Query, load
from jobs.tpcds.results import RunRow
from trspark.stats import Interval, median_interval

log = logging.getLogger("trspark.bench")

CONFIGS: tuple[str, ...] = ("never", "tr")
"""Vanilla Spark (no plugin) and the plugin with policy ``tr``."""

TARGET = 1.03
"""Target: ``tr`` within 3 % of the time without the plugin when nothing is killed."""


@dataclass(frozen=True)
class OverheadSettings:
    """What one overhead measurement runs (the CLI's options, validated)."""

    sf: float
    queries: tuple[str, ...]
    out: Path
    rounds: int = 3
    executors: int = 3
    cores: int = 1
    memory_mb: int = 2048
    time_cap: float = 600.0
    cache: Path | None = None
    spark_conf: tuple[tuple[str, str], ...] = ()
    lifetime: str | None = None
    """The lifetime model ``tr`` is told (what it expects of its executors); None: the plugin's default."""


@dataclass(frozen=True)
class Summary:
    """Per-query and overall ratios ``tr / never`` (NaN where no pair completed)."""

    per_query: dict[str, tuple[float, float, float, float]]
    """query -> (median vanilla s, median tr s, ratio of medians, median paired ratio)."""
    total_ratio: float
    """Sum over queries of median ``tr`` time over the same sum for vanilla Spark."""
    paired_interval: Interval
    """Median over every (query, round) pair of ``t_tr / t_never``, with its percentile bootstrap 95 % interval."""

    @property
    def median_paired(self) -> float:
        return self.paired_interval.median

    @property
    def met(self) -> bool:
        return self.median_paired <= TARGET


def summarise(rows: list[RunRow]) -> Summary:
    """Pair each ``tr`` row with the vanilla row of the same query and round; failed runs pair with nothing.

    Raises ValueError when two rows share a (query, policy, round): pairing them would drop one unseen.
    """
    twice = sorted(key for key, n in Counter((r.query, r.policy, r.repeat) for r in rows).items() if n > 1)
    if twice:
        raise ValueError(f"{len(twice)} (query, policy, round) keys appear more than once, e.g. {twice[0]}: "
                         "rows of two runs with overlapping round numbers")
    times: dict[tuple[str, str, int], float] = {
        (r.query, r.policy, r.repeat): r.seconds for r in rows if not r.failed and r.result_ok}
    queries = list(dict.fromkeys(r.query for r in rows))
    per_query: dict[str, tuple[float, float, float, float]] = {}
    all_pairs: list[float] = []
    totals = [0.0, 0.0]
    for q in queries:
        base = [t for (qq, p, _), t in times.items() if qq == q and p == "never"]
        tr = [t for (qq, p, _), t in times.items() if qq == q and p == "tr"]
        pairs = [times[(q, "tr", k)] / times[(q, "never", k)] for (qq, p, k) in times
                 if qq == q and p == "tr" and (q, "never", k) in times]
        all_pairs += pairs
        med_base = statistics.median(base) if base else math.nan
        med_tr = statistics.median(tr) if tr else math.nan
        if base and tr:
            totals[0] += med_base
            totals[1] += med_tr
        per_query[q] = (med_base, med_tr, med_tr / med_base if base and tr else math.nan,
                        statistics.median(pairs) if pairs else math.nan)
    return Summary(per_query, totals[1] / totals[0] if totals[0] else math.nan, median_interval(all_pairs))


def first_round(out: Path) -> int:
    """The round number a new run starts at: one past the last round already in ``out`` (0 for a new file).

    Continuing the numbers keeps the rows of several runs appended to one CSV distinct, so they pool.
    """
    if not out.exists() or out.stat().st_size == 0:
        return 0
    return max((row.repeat + 1 for row in results.read(out) if row.policy in CONFIGS), default=0)


def run(settings: OverheadSettings, on_row: Callable[[RunRow], None] = lambda row: None) -> list[RunRow]:
    """Start both workers, run the interleaved rounds, append every row to ``settings.out``.

    Rounds are numbered on from those already in ``settings.out`` (:func:`first_round`).
    """
    start = first_round(settings.out)
    data = datagen.generate(settings.sf, settings.cache, show_progress=False)
    queries = {name: load(name) for name in settings.queries}
    with DuckDBOracle(data) as oracle:
        answers = {name: oracle.answer(query) for name, query in queries.items()}
    mp = multiprocessing.get_context("spawn")
    workers: dict[str, tuple[Any, Any]] = {}
    rows: list[RunRow] = []
    try:
        for config in CONFIGS:  # started one after the other: two cluster start-ups at once thrash 2 cores
            parent, child = mp.Pipe()
            proc = mp.Process(target=_worker, args=(settings, config, data, queries, child), name=f"overhead-{config}")
            proc.start()
            workers[config] = (proc, parent)
            _expect(parent, proc, "ready", settings.time_cap * len(queries) + 300)
        for k in range(start, start + settings.rounds):
            for qi, name in enumerate(settings.queries):
                order = CONFIGS if (k + qi) % 2 == 0 else CONFIGS[::-1]
                pair: dict[str, RunRow] = {}
                for config in order:
                    proc, conn = workers[config]
                    conn.send(("run", name))
                    seconds, answer, error, counters, fell_back = _expect(conn, proc, "ran", settings.time_cap + 120)
                    row = RunRow(query=name, policy=config, sf=settings.sf, seed=0, repeat=k, scenario="stable",
                                 seconds=seconds, failed=answer is None, error=error, plugin_fallback=fell_back,
                                 **counters)
                    if answer is not None:
                        verdict = compare(answers[name], answer, ordered=queries[name].ordered,
                                          order_keys=queries[name].order_keys)
                        row.result_ok, row.error = verdict.ok, verdict.reason
                    pair[config] = row
                base = pair["never"]
                for config in CONFIGS:
                    row = pair[config]
                    if not base.failed:
                        row.stable_seconds, row.slowdown = base.seconds, row.seconds / base.seconds
                    results.append(settings.out, row)
                    rows.append(row)
                    on_row(row)
    finally:
        for proc, conn in workers.values():
            if proc.is_alive():
                conn.send(("stop", None))
        for proc, _ in workers.values():
            proc.join(120)
            if proc.is_alive():
                proc.kill()
    return rows


def _expect(conn: Any, proc: Any, kind: str, timeout: float) -> Any:
    """The worker's next message, which must be ``kind``; raises if it died or fell silent."""
    deadline = time.monotonic() + timeout
    while not conn.poll(1.0):
        if not proc.is_alive():
            raise RuntimeError(f"{proc.name} died (exit code {proc.exitcode})")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{proc.name} did not answer within {timeout:g} s")
    got, payload = conn.recv()
    if got == "error":
        raise RuntimeError(f"{proc.name}: {payload}")
    if got != kind:
        raise RuntimeError(f"{proc.name}: expected {kind!r}, got {got!r}")
    return payload


def _worker(settings: OverheadSettings, config: str, data: Path, queries: dict[str, Query], conn: Any) -> None:
    """One cluster for ``config``: warm it up, then run queries on request until told to stop."""
    from jobs.tpcds.query_run import execute

    spec = session.ClusterSpec(executors=settings.executors, cores=settings.cores, memory_mb=settings.memory_mb,
                               extra_conf=dict(settings.spark_conf))
    try:
        options = {"lifetime": settings.lifetime} if settings.lifetime and config == "tr" else None
        spark, work_dir = session.start(spec, config, app_name="trspark-tpcds-overhead", trspark_options=options)
    except Exception as exc:  # the plugin is not usable here: say why instead of hanging the parent
        conn.send(("error", str(exc).splitlines()[0]))
        return
    try:
        session.register_tables(spark, data)
        for name, query in queries.items():
            execute(spark, query, f"warmup-{config}-{name}", settings.time_cap)
        conn.send(("ready", None))
        while True:
            command, name = conn.recv()
            if command == "stop":
                return
            before = metrics.plugin_counters(spark.sparkContext)
            outcome = execute(spark, queries[name], f"{config}-{name}-{time.monotonic_ns()}", settings.time_cap)
            after = metrics.plugin_counters(spark.sparkContext)
            answer: Answer | None = outcome.answer
            counters = {column: after[column] - before[column] for column in after}
            conn.send(("ran", (outcome.seconds, answer, outcome.error, counters,
                               metrics.plugin_fell_back(spark.sparkContext))))
    finally:
        session.stop(spark, work_dir)
