"""One recorded run of a benchmark: a query on a policy's session, under its kill schedule.

:func:`run_once` waits for every executor, replays the run's kills
(:class:`jobs.harness.chaos.EvictionInjector`), measures the run and the capacity it lost, takes
the plugin's counters, checks the answer against DuckDB's and, after kills, re-warms the
replacement executors (:func:`rewarm`) before the next run.
"""

from __future__ import annotations

import logging
import math
import signal
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobs.tpcds import metrics, pools, session
from jobs.tpcds.answers import Answer, compare
from jobs.tpcds.queries import Query
from jobs.tpcds.query_run import execute
from jobs.tpcds.results import RunRow
from jobs.tpcds.schedules import Schedule
from jobs.tpcds.settings import BenchSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("trspark.bench")

#: A rewarm pass within this factor of the query's stable time ends the rewarm (warm enough).
REWARM_WITHIN = 1.25


@dataclass
class BenchContext:
    """State shared across policies of one benchmark (picklable: it goes to each policy's process)."""

    settings: BenchSettings
    queries: dict[str, Query]
    answers: dict[str, Answer]
    """DuckDB's answer per query (the oracle), computed once in the parent."""
    stable: dict[str, float] = field(default_factory=dict)
    schedules: dict[tuple[str, int], Schedule] = field(default_factory=dict)


def wait_for_executors(count: metrics.ExecutorCount, expected: int, timeout: float = 180.0) -> bool:
    """Block until ``expected`` executors are registered (replacements take 7-17 s here) and ``count`` is settled."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if count() >= expected and count.settled():
            return True
        time.sleep(0.25)
    return False


def run_once(ctx: BenchContext, spark: SparkSession, api: metrics.StatusApi, count: metrics.ExecutorCount,
             policy: str, scenario: str, query: Query, r: int, *, last: bool = False) -> RunRow:
    """One recorded run; ``last``: the session's final run (no re-warming after it, nothing follows)."""
    s = ctx.settings
    if s.master is None and not wait_for_executors(count, s.executors):
        log.warning("only %d of %d executors registered (or a gone one still listed) before %s", count(),
                    s.executors, query.name)
    group = f"{policy}-{scenario}-{query.name}-{r}-{time.monotonic_ns()}"
    injector = _injector(ctx, spark, policy, query.name, r, group) if scenario == "evicted" else None
    before = metrics.plugin_counters(spark.sparkContext)
    hold = injector is not None and s.hold_replacements
    if hold:
        session.set_executor_target(spark, 0)
    with metrics.CapacityMeter(count, s.executors, usable=s.usable_executors) as meter, injector or nullcontext():
        outcome = execute(spark, query, group, s.time_cap)
    after = metrics.plugin_counters(spark.sparkContext)
    # Kills due while the query ran: for the noticed policies a notice for a kill after its end
    # does not count, as that kill is not met by the policies that are only killed either.
    kills = injector.kills_by(injector.elapsed()) if injector is not None else 0
    killed_after = 0
    if injector is not None and not last:
        # A VM goes at its kill time whether or not the query still runs: the kills whose notice
        # came during the run are made now for every policy, so all leave the same executors dead.
        killed_after = injector.finish(s.notice if s.any_noticed() else 0.0)
    if hold:
        session.set_executor_target(spark, s.executors)
    row = RunRow(query=query.name, policy=policy, sf=s.sf, seed=s.seed, repeat=r, scenario=scenario,
                 seconds=outcome.seconds, executors_killed=kills,
                 capacity_lost_seconds=meter.lost_seconds if s.master is None else float("nan"),
                 failed=outcome.answer is None, error=outcome.error)
    for column in after:  # counters are cumulative per application: the run's share is the difference
        setattr(row, column, after[column] - before[column])
    row.plugin_fallback = metrics.plugin_fell_back(spark.sparkContext)
    stable = ctx.stable.get(query.name)
    if stable:
        row.stable_seconds, row.slowdown = stable, outcome.seconds / stable
    if outcome.answer is not None:
        verdict = compare(ctx.answers[query.name], outcome.answer, ordered=query.ordered,
                          order_keys=query.order_keys)
        row.result_ok = verdict.ok
        row.error = verdict.reason
    try:
        row.tasks_recomputed = api.tasks_recomputed(group)
    except Exception as exc:  # the status API is an observer: never lose the run over it
        log.warning("could not read task attempts of %s: %s", group, exc)
    if (kills or killed_after) and s.rewarm and s.master is None and not last:
        # Replacements are cold JVMs (a first pass takes several times the stable time): warm them
        # before measuring on, those of the kills past the run's end too.
        wait_for_executors(count, s.executors)
        rewarm(spark, query, f"rewarm-{group}", s.time_cap, s.rewarm_passes, ctx.stable.get(query.name))
    return row


def rewarm(spark: SparkSession, query: Query, group: str, time_cap: float, passes: int,
           stable: float | None) -> int:
    """Run ``query`` unrecorded until a pass takes at most ``REWARM_WITHIN`` x ``stable`` s; at most ``passes``.

    Without a stable time (none measured yet) every pass runs. Returns the passes run. When
    several passes were allowed and the last is still slower than that, says so: the runs that
    follow start on executors that are still cold.
    """
    seconds = math.nan
    for done in range(1, passes + 1):
        outcome = execute(spark, query, group, time_cap)
        seconds = outcome.seconds
        if stable and outcome.error == "" and seconds <= REWARM_WITHIN * stable:
            log.debug("%s: re-warmed in %d pass(es), the last %.1fx the stable time", group, done, seconds / stable)
            return done
    if stable and passes > 1:
        log.warning("%s: the last of %d re-warm passes still took %.1fx the stable time (> %.2fx); the next "
                    "runs start on cold executors", group, passes, seconds / stable, REWARM_WITHIN)
    return passes


def _injector(ctx: BenchContext, spark: SparkSession, policy: str, name: str, r: int, group: str) -> Any:
    if ctx.settings.master is not None:
        return None
    from jobs.harness.chaos import EvictionInjector

    gateway: Any = spark.sparkContext._gateway
    notice = ctx.settings.notice if ctx.settings.noticed(policy) else None
    registered_ids = metrics.executor_ids(spark.sparkContext)
    # Victims are ranked among registered executors only, the clock draw_schedule keeps: a JVM
    # still starting is no victim (a notice would kill it at once, a kill only at its time).
    return EvictionInjector(gateway.proc.pid, schedule=ctx.schedules[(name, r)], notice=notice,
                            signal=signal.SIGKILL, min_alive=ctx.settings.min_alive,
                            max_kills=ctx.settings.max_kills,
                            begin=(metrics.first_task_finished(spark.sparkContext, group)
                                   if ctx.settings.kill_clock == "first-task" else None),
                            registered=lambda executor_id: executor_id in registered_ids(),
                            spare=pools.spare(ctx.settings.pools))
