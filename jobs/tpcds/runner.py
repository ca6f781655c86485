"""Run TPC-DS queries per policy with and without executor kills; one CSV row per run.

Plan of a benchmark (``--policies never,always,decommission,tr``)
-------------------------------------------------------------------
1. Generate (or re-use) the Parquet data of the scale factor; DuckDB answers every query once.
2. ``never`` (vanilla Spark) runs first: one session, a warm-up pass, then ``repeat`` *stable*
   runs per query (no kills). Their median is each query's ``stable_seconds``, the reference of
   every slowdown, and -- with ``--stability S`` -- sets the lifetime model of that query:
   exponential with mean ``S x stable_seconds``.
3. One kill schedule per (query, repeat) is drawn from the lifetime model with a seeded generator
   (:mod:`jobs.tpcds.schedules`, by :func:`jobs.harness.kill_schedule.draw_schedule`: ``executors`` renewal processes, a replacement
   ``replacement_delay`` s after each kill), or, with ``reclaim_within``, one reclamation of the
   whole spot pool mid-run. Every policy replays exactly these kills (paired).
   With ``hold_replacements`` the cluster manager replaces a run's killed executors only once the
   run has ended (:func:`jobs.tpcds.session.set_executor_target`), as a spot VM's replacement that
   boots for longer than the run.
4. Each policy gets one session (start-up costs 22-31 s here, so sessions are re-used across
   queries and repeats), a warm-up pass (``warmup``: over the first N queries only), its stable
   runs (``stable_runs="never"``: only vanilla Spark's, the reference; ``"rounds"``: vanilla Spark
   also runs each query once without kills in every round of evicted runs, and the final reference
   is the median of those, so it follows the host's drift over the benchmark), then
   its *evicted* runs: the injector's clock starts with the query (``kill_clock="first-task"``:
   once the run's first task has finished) and it SIGKILLs executor JVMs on the schedule (for the
   policies that can use a termination notice, ``decommission`` and ``tr`` (:data:`NOTICED_POLICIES`), it sends
   SIGPWR ``notice`` s before each SIGKILL: Spark's decommission signal, and the signal trspark's
   executor plugin takes as a notice. A kill due within the window after the start is delayed to
   the window's end by the injector, and notices for kills after the query's end still land
   during it. ``never`` is vanilla Spark and ``always`` copies everything anyway: both are only
   killed). An executor noticed during a run is killed at its deadline even when the query has
   ended by then (a noticed VM goes either way), and so, for the policies without notices, is
   the victim of each kill due within the notice window after the run's end. Before every run all
   executors must be registered again, with live JVMs (the driver lists a departed executor for a
   few seconds more); after a run during or after which an executor was killed, the query is run
   once more unrecorded, so cold replacement JVMs do not slow the next measurement
   (:mod:`jobs.tpcds.recorded_run`).
5. Policies run one after the other, or, with ``interleave``, take turns with every cluster up
   (:mod:`jobs.tpcds.lockstep`): run ``r`` of a query under each policy is then made in one round,
   and a cluster's replacements register before the next policy's turn.

A run that exceeds ``time_cap`` is cancelled and recorded as failed; an aborted job is recorded as
failed with Spark's reason. With ``master`` set (a real cluster, e.g. on spot VMs) nothing is
killed: runs are recorded with scenario ``real`` and whatever evictions the cluster suffers.
"""

from __future__ import annotations

import logging
import multiprocessing
import queue
import statistics
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobs.harness.executors import driver_pid
from jobs.tpcds import datagen, lockstep, metrics, pools, results, schedules, session
from jobs.tpcds.answers import DuckDBOracle
from jobs.tpcds.lockstep import Turns, step_key
from jobs.tpcds.queries import Query, load
from jobs.tpcds.query_run import execute, first_line
from jobs.tpcds.recorded_run import BenchContext, run_once, wait_for_executors
from jobs.tpcds.results import RunRow
from jobs.tpcds.schedules import Schedule
from jobs.tpcds.settings import BenchResult, BenchSettings, Progress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("trspark.bench")


def draw_schedules(ctx: BenchContext) -> None:
    """One kill schedule per (query, repeat) into ``ctx`` (:func:`jobs.tpcds.schedules.draw_all`)."""
    ctx.schedules.update(schedules.draw_all(ctx.settings, ctx.stable))


def run(settings: BenchSettings, progress: Progress | None = None) -> BenchResult:
    """Run the whole benchmark, appending each row to ``settings.out`` as soon as it exists."""
    progress = progress or Progress()
    progress.step("TPC-DS data")
    data = datagen.generate(settings.sf, settings.cache, show_progress=False)
    progress.step("DuckDB answers (the oracle)")
    queries = {name: load(name) for name in settings.queries}
    with DuckDBOracle(data) as oracle:
        answers = {name: oracle.answer(query) for name, query in queries.items()}
    ctx = BenchContext(settings, queries, answers)
    runs = len(settings.queries) * settings.repeat
    stable_runs = len(settings.queries) * settings.runs("stable")
    if settings.reference is not None:
        ctx.stable.update(reference_times(settings.reference, settings.queries))
        policies = list(settings.policies)
        planned = dict.fromkeys(policies, runs)
    else:
        policies = ["never", *(p for p in settings.policies if p != "never")]
        planned = {p: runs + (0 if settings.master or (settings.stable_runs != "all" and p != "never")
                              else stable_runs)
                   for p in policies}
        if settings.stable_runs == "rounds":
            planned["never"] += runs
    progress.start(sum(planned.values()))
    rows: list[RunRow] = []
    skipped: dict[str, str] = {}
    if settings.interleave:
        # Rounds rewrite --out at the end: the rows it held before this benchmark are kept as they are.
        rounds = settings.stable_runs == "rounds"
        earlier = results.read(settings.out) if rounds and settings.out.exists() and settings.out.stat().st_size else []
        skipped = lockstep.run_interleaved(ctx, policies, data, progress, rows, planned, target=_policy_turns_process)
        if rounds:
            rereference(rows, first=settings.runs("stable"))
            results.write(settings.out, earlier + rows)
        return BenchResult(rows, skipped)
    for policy in policies:
        mine: list[RunRow] = []
        done = _run_isolated(ctx, policy, data, progress, mine)
        rows.extend(mine)
        if done.skipped:
            skipped[policy] = done.skipped
            for _ in range(planned[policy] - len(mine)):
                progress.advance()
        ctx.stable.update(done.stable)
        ctx.schedules.update(done.schedules)
    return BenchResult(rows, skipped)


def reference_times(path: Path, queries: tuple[str, ...]) -> dict[str, float]:
    """Vanilla Spark's median stable seconds per query from a results CSV (each query must have one)."""
    medians = never_stable_medians(results.read(path))
    missing = [q for q in queries if q not in medians]
    if missing:
        raise ValueError(f"{path} has no successful stable run of never for {', '.join(missing)}")
    return {q: medians[q] for q in queries}


def never_stable_medians(rows: list[RunRow]) -> dict[str, float]:
    """Median seconds (s) per query of vanilla Spark's successful stable runs among ``rows``."""
    times: dict[str, list[float]] = {}
    for row in rows:
        if row.policy == "never" and row.scenario == "stable" and not row.failed:
            times.setdefault(row.query, []).append(row.seconds)
    return {q: statistics.median(t) for q, t in times.items()}


@dataclass
class _PolicyDone:
    stable: dict[str, float]
    schedules: dict[tuple[str, int], Schedule]
    skipped: str = ""


def _run_isolated(ctx: BenchContext, policy: str, data: Path, progress: Progress,
                  rows: list[RunRow]) -> _PolicyDone:
    """Run one policy in its own Python process, so it gets its own driver JVM.

    A driver JVM cannot load a plugin jar given to a second SparkContext (``spark.jars`` reaches
    the driver's class path only at JVM start: ClassNotFoundException for the plugin class), and
    a fresh JVM per policy keeps one policy's JIT and caches from helping the next.
    """
    mp = multiprocessing.get_context("spawn")
    channel = mp.Queue()
    child = mp.Process(target=_policy_process, args=(ctx, policy, data, channel), name=f"bench-{policy}")
    child.start()
    try:
        while True:
            try:
                message = channel.get(timeout=1.0)
            except queue.Empty:
                if not child.is_alive():
                    return _PolicyDone({}, {}, f"its worker process died (exit code {child.exitcode})")
                continue
            kind, payload = message
            if not lockstep.forward(kind, payload, progress, rows):
                return payload  # type: ignore[no-any-return]
    except BaseException:
        lockstep.stop_processes([child], channel)
        raise
    finally:
        child.join()


def _policy_turns_process(ctx: BenchContext, policy: str, data: Path, turns: lockstep.ChildTurns) -> None:
    """One policy's process when policies take turns: its messages and its turns go through ``turns``."""
    _policy_process(ctx, policy, data, turns, turns)


def _policy_process(ctx: BenchContext, policy: str, data: Path, channel: Any,
                    turns: Turns | None = None) -> None:
    hooks = Progress(step=lambda label: channel.put(("step", label)), advance=lambda: channel.put(("advance", None)),
                     row=lambda row: channel.put(("row", row)))
    try:
        _run_policy(ctx, policy, data, hooks, turns)
        channel.put(("done", _PolicyDone(ctx.stable, ctx.schedules)))
    except session.PolicyUnavailable as exc:
        channel.put(("done", _PolicyDone({}, {}, str(exc))))
    except Exception as exc:  # report, do not hang the parent
        log.exception("policy %s failed", policy)
        channel.put(("done", _PolicyDone({}, {}, f"it failed: {first_line(exc)}")))


def _run_policy(ctx: BenchContext, policy: str, data: Path, progress: Progress,
                turns: Turns | None = None) -> list[RunRow]:
    """All runs of one policy on one session (raises PolicyUnavailable if it cannot start)."""
    with pools.metadata_server(ctx.settings.pools) as metadata_url:
        return _run_session(ctx, policy, data, progress, metadata_url, turns or Turns())


def _run_session(ctx: BenchContext, policy: str, data: Path, progress: Progress, metadata_url: str | None,
                 turns: Turns) -> list[RunRow]:
    s = ctx.settings
    spec = session.ClusterSpec(executors=s.executors, cores=s.cores, memory_mb=s.memory_mb, master=s.master,
                               extra_conf=dict(s.spark_conf))
    ctx.stable.update(turns.wait(step_key(policy, "start")))  # the plugin's lifetime model needs the reference
    progress.step(f"{policy}: starting Spark ({spec.master_for(policy)})")
    options = _plugin_options(ctx, policy)
    options.update(pools.plugin_options(metadata_url, options.get("lifetime")))
    spark, work_dir = session.start(spec, policy, trspark_options=options, console_log=s.console_log)
    cap = None
    # A local-cluster's executor JVMs descend from the driver's: the process tree says which are alive.
    local_driver = None if s.master else driver_pid(spark.sparkContext)
    try:
        if s.executor_cpus is not None and local_driver is not None:
            from jobs.harness.cpucap import ExecutorCpuCap

            # Before the warm-up: the JIT warms up at the speed the measured runs will have.
            cap = ExecutorCpuCap(local_driver, s.executor_cpus).start()
        api = metrics.StatusApi.of(spark.sparkContext)
        # The UI's REST stack initialises lazily on its first request (17 s seen here): let that
        # happen during the warm-up pass instead of before it.
        api_ready = threading.Thread(target=_warm_up, args=(api,), name="status-api-warm-up", daemon=True)
        api_ready.start()
        session.register_tables(spark, data)
        count = metrics.executor_count(spark.sparkContext, local_driver)
        turns.wait(step_key(policy, "warm-up"))
        progress.step(f"{policy}: warm-up")
        _warm_up_queries(ctx, spark, policy)
        api_ready.join()
        return _measured_runs(ctx, spark, api, count, policy, turns, progress)
    finally:
        session.stop(spark, work_dir)
        if cap is not None:
            cap.stop()


def _measured_runs(ctx: BenchContext, spark: SparkSession, api: metrics.StatusApi, count: metrics.ExecutorCount,
                   policy: str, turns: Turns, progress: Progress) -> list[RunRow]:
    """Every measured run of ``policy`` on its session, scenario by scenario and query by query."""
    s = ctx.settings
    rows: list[RunRow] = []
    scenarios = _scenarios(s, policy)
    names = list(ctx.queries)
    for scenario in scenarios:
        for qi, (name, query) in enumerate(ctx.queries.items()):
            batch: list[RunRow] = []
            # Vanilla Spark's stable runs set the query's reference, their own slowdowns included:
            # they are written once all of them ran. Every other row is written as soon as it exists.
            holds_reference = scenario == "stable" and policy == "never"
            runs = s.runs(scenario)
            for r in range(runs):
                if scenario == "evicted" and policy == "never" and s.stable_runs == "rounds":
                    batch.append(_round_reference(ctx, spark, api, count, turns, progress, qi, query, r))
                    _write_row(s.out, progress, batch[-1])
                ctx.stable.update(turns.wait(step_key(policy, scenario, qi, r)))
                if scenario == "evicted" and not ctx.schedules:
                    draw_schedules(ctx)
                progress.step(f"{policy} · {scenario} · {name} · run {r + 1}/{runs}")
                last = scenario == scenarios[-1] and name == names[-1] and r == runs - 1
                batch.append(run_once(ctx, spark, api, count, policy, scenario, query, r, last=last))
                if not holds_reference:
                    _write_row(s.out, progress, batch[-1])
                if turns.interleaved:  # (local clusters only: BenchSettings refuses a master)
                    # The next turn is another cluster's: its run must not meet this one's replacements booting.
                    wait_for_executors(count, s.executors)
                progress.advance()
            if holds_reference:
                _set_reference(ctx, name, batch)
                for row in batch:
                    _write_row(s.out, progress, row)
            rows.extend(batch)
    return rows


def _write_row(out: Path, progress: Progress, row: RunRow) -> None:
    """Append ``row`` to the results CSV now (a run cut short keeps it) and show it."""
    results.append(out, row)
    progress.row(row)


def _round_reference(ctx: BenchContext, spark: SparkSession, api: metrics.StatusApi, count: metrics.ExecutorCount,
                     turns: Turns, progress: Progress, qi: int, query: Query, r: int) -> RunRow:
    """Vanilla Spark's stable run in round ``r`` of a query (``stable_runs="rounds"``), numbered after the first ones.

    It does not move ``ctx.stable``: the kill schedules and the plugin's lifetime model keep the
    reference measured first, so every policy meets the same kills; :func:`rereference` sets the
    rows' final reference once all runs are in.
    """
    s = ctx.settings
    turns.wait(step_key("never", "evicted", qi, r))
    progress.step(f"never · stable (round {r + 1}) · {query.name}")
    row = run_once(ctx, spark, api, count, "never", "stable", query, s.runs("stable") + r)
    wait_for_executors(count, s.executors)  # (interleaved only: settings refuse rounds otherwise)
    progress.advance()
    return row


def rereference(rows: list[RunRow], first: int) -> None:
    """Each query's reference becomes the median of vanilla Spark's stable runs in the rounds, in ``rows``.

    ``stable_seconds`` = median over the successful ``never`` stable rows of the query numbered
    ``first`` or later (s), and ``slowdown = seconds / stable_seconds``; a query without such rows
    keeps its reference. The ``first`` stable runs are left out: they ran before the other
    policies' clusters started, on a quieter host than every run under kills.
    """
    medians = never_stable_medians([row for row in rows if row.repeat >= first])
    for row in rows:
        if row.query in medians:
            row.stable_seconds = medians[row.query]
            row.slowdown = row.seconds / row.stable_seconds


def _warm_up_queries(ctx: BenchContext, spark: SparkSession, policy: str) -> None:
    """The session's warm-up pass(es): the first ``warmup`` queries, ``warmup_rounds`` times, unrecorded."""
    s = ctx.settings
    for _ in range(s.warmup_rounds):
        for query in list(ctx.queries.values())[:s.warmup]:
            execute(spark, query, f"warmup-{policy}-{query.name}", s.time_cap)


def _scenarios(s: BenchSettings, policy: str) -> tuple[str, ...]:
    """The scenarios ``policy`` runs: ``real`` on an existing cluster, else stable and/or evicted."""
    scenarios: tuple[str, ...] = ("real",) if s.master else ("stable", "evicted")
    if not s.master and (s.reference is not None or (s.stable_runs != "all" and policy != "never")):
        scenarios = ("evicted",)
    return scenarios


def _warm_up(api: metrics.StatusApi) -> None:
    try:
        api.warm_up()
    except Exception as exc:  # the status API is an observer: a slow UI costs the re-run column only
        log.warning("the Spark UI's REST API did not answer its first request: %s", exc)


def _set_reference(ctx: BenchContext, name: str, batch: list[RunRow]) -> None:
    """Vanilla Spark's median stable time becomes the query's reference, its own rows included."""
    times = [row.seconds for row in batch if not row.failed]
    ctx.stable[name] = statistics.median(times) if times else float("nan")
    for row in batch:
        row.stable_seconds, row.slowdown = ctx.stable[name], row.seconds / ctx.stable[name]


def _plugin_options(ctx: BenchContext, policy: str) -> dict[str, Any]:
    """What the plugin is told about the kills: the lifetime model (median over queries' models).

    One session serves every query, so with ``--stability`` (a model per query) the plugin gets
    the exponential model of the median query; ``--lifetime`` is passed as given. ``tr`` gets the
    kills' notices (SIGPWR ``notice`` s ahead, the window it is told) and uses their deadlines
    (knowledge ``deterministic``: a noticed executor dies at its deadline, the others follow the
    model), and is told that every kill comes with one (``notice.expected``): it backs up before a
    notice only what an executor could not save within the window.
    """
    s = ctx.settings
    options: dict[str, Any] = {}
    if s.noticed(policy):
        options.update(notice_window=s.notice, knowledge="deterministic", notice_expected=True)
    if s.lifetime:
        return {**options, "lifetime": s.lifetime}
    stable = [t for t in ctx.stable.values() if t == t]
    if not stable or s.stability is None:
        return options
    return {**options, "lifetime": f"exponential:mean={s.stability * statistics.median(stable):.6g}"}
