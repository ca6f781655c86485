r"""``trspark demo``: the main job, its plan, time budget, table and plain-words summary (:func:`run_demo`).

Plan
----
Two workloads where a kill can cost recomputation, not only capacity: ``q29`` (TPC-DS; three fact
tables joined by shuffles) and ``chain4`` (:mod:`jobs.tpcds.chain`: four iterations of score
propagation, a lineage of about eight shuffles that each re-read the first one). Per policy
(``never`` = vanilla Spark, ``always``, ``tr``) one 3-executor local cluster, warmed up; the
clusters stay up side by side and take turns (:mod:`jobs.tpcds.lockstep`), so that each kill
schedule is replayed for every policy within one round, seconds apart. As on a
real spot cluster, ``on_demand`` executors (1) are on-demand, never killed, and the others spot:
each executor reads its pool from its own imitated AWS instance metadata, and ``tr`` prices the
on-demand one as stable (:mod:`jobs.tpcds.pools`). Then:

* vanilla Spark's **stable reference**: the median of ``stable_runs`` (>= 3) warm runs without kills;
  every policy makes as many runs without kills before its evicted runs, so that each policy's
  JVMs are as warm as vanilla Spark's when the kills start (a JIT still warming up would make
  the later runs look faster);
* **evicted runs** over ``seeds`` (>= 2) kill schedules, schedule ``r`` of a workload drawn from the
  seed ``(seed, workload, r)`` and replayed for every policy (a paired comparison). In each, the
  spot pool is reclaimed at once (``reclaim_within``): both spot executors are killed together,
  at a time drawn uniformly from 0.3-0.6 of the stable time, counted from the run's first
  finished task (a query plans for about a second first, when no executor holds a map output)
  and no earlier than the notice. So the kills land mid-job, where they can take map outputs
  that vanilla Spark must then recompute on the one executor left. ``tr``
  gets the termination notice ``notice`` s ahead (SIGPWR, as a spot VM's notice; 0.5 s here, a
  sixth to a third of these jobs as the clouds' 30-120 s are of jobs of minutes, and short enough
  that the floor rarely overrides the drawn time: a notice above 0.6 of a job's stable time would
  put every kill at the floor, near its end); ``never`` and
  ``always`` meet the same kills unannounced. Killed executors are replaced once the run has
  ended (``hold_replacements``), and warmed by one unrecorded run (``rewarm``) before the next
  schedule. ``always`` backs up every output; ``tr`` never backs up what the
  on-demand executor holds, copies spot outputs to it, and, told that kills come with a notice,
  backs up ahead only what a victim could not save within its window.

Table and summary
-----------------
Per workload and policy: the median slowdown over the seeds with its spread (min-max), and per
run (median over seeds) the map tasks re-run, the bytes backed up, the executor-seconds of
capacity lost and the excess over the capacity floor :math:`1 + L / (U S)`, with :math:`U` the
executors that can run at once (:attr:`DemoPlan.usable_executors`). The summary says what
``tr`` saved against ``never`` and what it cost against ``always``; a difference whose spreads
overlap is "within noise" (:func:`within_noise`), never a finding.

Time budget
-----------
:func:`estimate_seconds`: session starts (17-23 s each) and their cold first passes, warm-up
passes, stable runs, evicted runs at their expected slowdown and the wait for replacements
around each run with kills, and the re-warm run after it. With the stable times the
demo's reference runs measured at SF 0.1 with :data:`DEMO_SPARK_CONF` (q29 1.7-2.0 s, taken as 2.5 s;
``chain4`` 3.5-4.4 s, 1 s an iteration) the default plan comes to about 7 minutes on 2 cores, within
:data:`BUDGET_S` (10 minutes); the banner says so before anything runs, and the run prints its
own elapsed time next to the estimate. The driver's and executors' JVMs run with
:data:`SMALL_HOST_JVM_OPTIONS`, which is what brings the plan within the budget.

Everything runs through the benchmark's code (:mod:`jobs.tpcds.runner`) with small settings, so the
demo and the benchmark cannot disagree; a policy that cannot run here (the plugin jar not built,
the engine missing) is skipped and named with the reason, nothing is estimated or made up.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from jobs.demo_table import DemoLine, demo_lines, summary, table
from jobs.tpcds.options import writable_path
from simulators.options import FiniteFloatRange

if TYPE_CHECKING:
    from rich.console import Console

    from jobs.tpcds.settings import BenchSettings

DEMO_POLICIES = ("never", "always", "tr")
DEMO_WORKLOADS = ("q29", "chain4")
BUDGET_S = 600.0
SESSION_START_S = 20.0
"""A local cluster's start-up with :data:`SMALL_HOST_JVM_OPTIONS` (s, :mod:`jobs.tpcds.session`)."""
COLD_START_S = 15.0
"""What a session's two warm-up rounds take beyond two warm passes (s): its JVMs start cold."""
REPLACEMENT_S = 5.0
"""Waiting for replacements around one run with kills (s): each registers some seconds after its
kill, and only a kill late in a run, or just after it, holds the next run back."""
DATA_S = 30.0
"""SF 0.1 data (generated once, then cached) and DuckDB's answers."""
STABLE_GUESS_S = {"q29": 2.5, "chain5": 5.0}
"""Stable seconds at SF 0.1 used for the budget before anything ran (see the module doc)."""
OTHER_GUESS_S = 5.0
"""Another TPC-DS query at SF 0.1 (s; fact-to-fact joins take more)."""


def stable_guess(workload: str) -> float:
    """Expected stable seconds of ``workload`` at SF 0.1: measured-based, a chain by its iterations."""
    from jobs.tpcds import chain

    if workload in STABLE_GUESS_S:
        return STABLE_GUESS_S[workload]
    if chain.is_chain(workload):
        return STABLE_GUESS_S["chain5"] * int(workload.removeprefix(chain.PREFIX)) / 5
    return OTHER_GUESS_S


CONSOLE_LOG = "spark-console.log"
#: Seconds after which a demo run counts as failed; a notice must come within it.
DEMO_TIME_CAP = 240.0
"""In the output directory: what the policies' driver JVMs print (Spark's log, the engine's lines), kept off the demo's screen."""
SMALL_HOST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""The demo's driver and executor JVMs: the C1 compiler only and a single-threaded collector.
Four JVMs share 2 cores here, and C2's compile threads and a parallel collector's threads take
CPU from the queries for minutes while the JVMs warm up: with these options the demo's sessions
start, warm up and run faster. At SF 1 the defaults win once warm (``bench/jvm_warmup.py``
measures both), so the bench keeps them."""
SMALL_HOST_JVM_CONF = (("spark.driver.extraJavaOptions", SMALL_HOST_JVM_OPTIONS),
                       ("spark.executor.extraJavaOptions", SMALL_HOST_JVM_OPTIONS))
"""The Spark settings that give :data:`SMALL_HOST_JVM_OPTIONS` to the driver's and the executors' JVMs."""
DEMO_SPARK_CONF = (("spark.sql.autoBroadcastJoinThreshold", "-1"), ("spark.trspark.duplication", "false"),
                   ("spark.sql.shuffle.partitions", "6"), ("spark.sql.adaptive.coalescePartitions.enabled", "false"),
                   *SMALL_HOST_JVM_CONF)
"""Shuffle joins, so that every join's inputs are map outputs a kill can take. Six partitions per
shuffle, not coalesced: at SF 0.1 adaptive execution would coalesce each shuffle into one partition,
and a chain of one-task stages stays on one executor (the reducer goes where its input is), so a
kill would take nothing; two partitions per executor spread every stage's outputs as larger data
would. No task duplicates:
the demo's executors share 2 cores, so an idle executor is no idle capacity there and a duplicate
would take CPU from the task it copies (on a cluster where each executor has its own cores, keep
it). JVM options for a small shared host (:data:`SMALL_HOST_JVM_OPTIONS`)."""
SLOWDOWN_GUESS = {"never": 2.2, "always": 2.2, "tr": 2.2}
"""Expected evicted slowdowns for the budget, set near the top of the demo's measured medians per job
and kill seed so that the estimate stays above a run's elapsed time."""


@dataclass(frozen=True)
class DemoPlan:
    """What the demo runs (the defaults are estimated at about 7 minutes on a 2-core machine, see :func:`estimate_seconds`)."""

    sf: float = 0.1
    workloads: tuple[str, ...] = DEMO_WORKLOADS
    policies: tuple[str, ...] = DEMO_POLICIES
    stable_runs: int = 3
    seeds: int = 2
    seed: int = 0
    stability: float = 1.5
    max_kills: int = 2
    warmup_rounds: int = 2
    """Two warm-up passes, then the stable runs, for every policy: each policy's evicted runs
    start after as many passes as vanilla Spark's. With fewer passes the JVMs are still compiling
    during the stable runs, so the reference (their median) comes out slower than warm evicted runs."""
    first_kill_within: float = 0.5
    """Without ``reclaim_within``: a kill schedule is redrawn until its first kill comes within this
    fraction of the stable time (a run the kills miss shows nothing of what they cost)."""
    reclaim_within: tuple[float, float] | None = (0.3, 0.6)
    """The spot pool is reclaimed at once, every spot executor killed together, at a time drawn
    uniformly from this range of the stable time after the run's first task has finished (and no
    earlier than ``notice``): mid-job, when the map outputs a kill takes exist. None: each spot
    executor's kills drawn from exponential lifetimes of mean ``stability`` x the stable time."""
    rewarm: bool = True
    """One unrecorded run after each run with kills (but the last), so that the next schedule's kills
    meet warm executors. Without it, the two replacement JVMs are so cold that the one warm executor
    runs nearly every task of the next run: its kills take no
    map output, and every policy's run measures a cold start, not what a kill costs."""
    executors: int = 3
    on_demand: int = 1
    """Executors in the on-demand pool: never killed, and known to the plugin as stable (the rest are spot)."""
    notice: float = 0.5
    """Seconds of termination notice ``tr`` gets before each kill (0: none, killed like the others)."""
    hold_replacements: bool = True
    """Killed executors are replaced only after the run, as spot VMs whose replacements boot for
    longer than the run: a replacement JVM starting mid-run would take the survivors' cores here,
    a cost of this one machine that no policy controls."""

    def __post_init__(self) -> None:
        if self.stable_runs < 3 or self.seeds < 2:
            raise ValueError(f"need >= 3 stable runs and >= 2 kill seeds, got {self.stable_runs} and {self.seeds}")
        if self.notice < 0:
            raise ValueError(f"notice must be >= 0 seconds, got {self.notice}")
        if not 0 <= self.on_demand < self.executors:
            raise ValueError(f"on-demand executors must be 0..{self.executors - 1} (at least one spot), "
                             f"got {self.on_demand}")

    @property
    def usable_executors(self) -> float:
        """Executors that can run at once: the 1-core executors share this machine's cores.

        With 3 executors on 2 cores, losing one of them takes no capacity and losing two takes
        half of it; the capacity floor counts it so.
        """
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return float(min(self.executors, cores))

    @property
    def pools(self) -> tuple[tuple[str, int], ...]:
        """The bench's pools: ``on_demand`` on-demand executors first, then spot (none: all spot)."""
        if self.on_demand == 0:
            return ()
        return (("ondemand", self.on_demand), ("spot", self.executors - self.on_demand))

    def settings(self, out: Path) -> BenchSettings:
        """The benchmark settings that carry the plan out (rows appended to ``out``)."""
        from jobs.tpcds.settings import BenchSettings

        return BenchSettings(sf=self.sf, queries=self.workloads, policies=self.policies, out=out,
                             stability=self.stability, executors=self.executors, repeat=self.seeds,
                             stable_repeat=self.stable_runs, seed=self.seed, max_kills=self.max_kills,
                             first_kill_within=self.first_kill_within, reclaim_within=self.reclaim_within,
                             kill_clock="first-task",
                             time_cap=DEMO_TIME_CAP, warmup_rounds=self.warmup_rounds, stable_runs="all",
                             rewarm=self.rewarm, pools=self.pools, hold_replacements=self.hold_replacements,
                             usable_executors=self.usable_executors,
                             tr_notices=self.notice > 0, notice=self.notice, spark_conf=DEMO_SPARK_CONF,
                             console_log=out.parent / CONSOLE_LOG, interleave=True)


def estimate_seconds(plan: DemoPlan, stable: dict[str, float] | None = None,
                     slowdown: dict[str, float] | None = None) -> float:
    r"""Expected wall-clock seconds of ``plan``.

    .. math:: D + \sum_p \Big[ T_0 + C + (w + n) \Sigma S
              + k \sum_q \big( (x_p + u) S_q + R \big) \Big]

    with ``D`` data and answers, ``T_0`` a session start, ``C`` its cold first pass, ``w`` warm-up rounds, ``n`` stable
    runs, ``k`` seeds, ``x_p`` the policy's slowdown, ``R`` a replacement's registration and the
    ``u`` 1 with a re-warm run after each run with kills, else 0 (seconds).
    """
    stable = stable or {}
    slowdown = {**SLOWDOWN_GUESS, **(slowdown or {})}
    times = [stable.get(q, stable_guess(q)) for q in plan.workloads]
    total = DATA_S
    for policy in plan.policies:
        total += SESSION_START_S + COLD_START_S + (plan.warmup_rounds + plan.stable_runs) * sum(times)
        total += plan.seeds * sum((slowdown[policy] + plan.rewarm) * s + REPLACEMENT_S for s in times)
    return total


def run_demo(plan: DemoPlan, out_dir: Path, console: Console) -> list[DemoLine]:
    """Run ``plan`` (rows to ``out_dir/results.csv``), print the table and the summary, write the chart."""
    from rich.console import Console as RichConsole

    from jobs.tpcds.cli import run_with_progress
    from jobs.tpcds.plot import plot

    started = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "results.csv"
    # The demo's table shows this run only; what an earlier run (or a benchmark) left is kept aside.
    for earlier in (csv_path, out_dir / CONSOLE_LOG):
        if earlier.exists():
            kept = earlier.with_name(f"{earlier.stem}.{time.strftime('%Y%m%d-%H%M%S')}{earlier.suffix}")
            earlier.rename(kept)
            console.print(f"kept the earlier {earlier.name} as {kept}")
    console.print(f"[bold]trspark demo[/]: {', '.join(plan.workloads)} at SF {plan.sf:g}; policies "
                  f"{', '.join(plan.policies)}; reference = median of {plan.stable_runs} warm runs of vanilla Spark; "
                  f"{plan.seeds} kill schedules (seed {plan.seed}), the same for every policy"
                  + (f", tr noticed {plan.notice:g} s ahead" if plan.notice > 0 else "")
                  + (f"; {plan.on_demand} of {plan.executors} executors on-demand (never killed); "
                     if plan.on_demand else "; every executor spot; ")
                  + f"about {estimate_seconds(plan) / 60:.0f} min on 2 cores"
                  + ("" if plan.sf == 0.1 else " at SF 0.1 (the estimate's scale)"))
    settings = plan.settings(csv_path)
    result = run_with_progress(settings, RichConsole(stderr=True))
    # The floor divides by the executors the capacity meter counted (None: all of them).
    lines = demo_lines(result.rows, settings.usable_executors or settings.executors)
    console.print(table(lines, f"trspark demo: SF {plan.sf:g}, {plan.seeds} kill schedules per workload"))
    for text in summary(lines):
        console.print(text)
    for policy, reason in result.skipped.items():
        console.print(f"[yellow]skipped {policy}[/]: {reason}")
    if result.rows:
        try:
            chart = str(plot(csv_path, out_dir / "slowdown.png"))
        except ValueError as exc:  # no run under kills finished: the rows say why
            chart = f"none ({exc})"
        console.print(f"rows: {csv_path}; chart: {chart}; Spark's console output: {out_dir / CONSOLE_LOG}")
    bad = [r for r in result.rows if not r.result_ok]
    if bad:
        console.print(f"[red]{len(bad)} run(s) did not give DuckDB's answer or failed[/] (see {csv_path})")
    console.print(f"demo took {(time.monotonic() - started) / 60:.1f} min "
                  f"(estimated {estimate_seconds(plan) / 60:.1f} min, budget {BUDGET_S / 60:.0f} min)")
    return lines


@click.command("demo")
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("trspark-demo"),
              callback=writable_path,
              show_default=True, help=f"Where results.csv, slowdown.png and {CONSOLE_LOG} are written.")
@click.option("--sf", type=FiniteFloatRange(min=0, min_open=True), default=0.1, show_default=True,
              help="TPC-DS scale factor.")
@click.option("--workloads", default=",".join(DEMO_WORKLOADS), show_default=True,
              help="TPC-DS queries and chain jobs (chainN: N iterations), comma-separated.")
@click.option("--seeds", type=click.IntRange(2, 20), default=2, show_default=True,
              help="Kill schedules per workload (each replayed for every policy).")
@click.option("--stable-runs", type=click.IntRange(3, 20), default=3, show_default=True,
              help="Warm runs of vanilla Spark without kills; their median is the reference.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the kill schedules (schedule r of a workload is drawn from seed, workload, r).")
@click.option("--notice", type=FiniteFloatRange(min=0, max=DEMO_TIME_CAP, max_open=True), default=DemoPlan.notice, show_default=True,
              help="Seconds of termination notice tr gets before each kill (0: none).")
@click.option("--on-demand", type=click.IntRange(0, DemoPlan.executors - 1), default=DemoPlan.on_demand,
              show_default=True, help=f"On-demand executors (never killed) of the {DemoPlan.executors}; 0: all spot.")
def demo(out_dir: Path, sf: float, workloads: str, seeds: int, stable_runs: int, seed: int, notice: float,
         on_demand: int) -> None:
    """Run the main job: TPC-DS and a long-lineage job on executors that get killed, per policy."""
    from jobs.tpcds.queries import QueryError, parse_list
    from simulators.report import stdout_console

    try:
        names = parse_list(workloads, default=DEMO_WORKLOADS)
    except QueryError as exc:
        raise click.BadParameter(str(exc).removeprefix("--queries: "), param_hint="'--workloads'") from exc
    plan = DemoPlan(sf=sf, workloads=names, seeds=seeds, stable_runs=stable_runs, seed=seed, notice=notice,
                    on_demand=on_demand)
    run_demo(plan, out_dir, stdout_console())
