"""``trspark bench``: TPC-DS on transient executors (``tpcds``), its data (``datagen``), targets and plots of
its results (``targets``, ``plot``); ``overhead`` and ``verify`` come from :mod:`jobs.tpcds.check_commands`."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from jobs.tpcds.check_commands import overhead_command, verify_command
from jobs.tpcds.options import (
    POSITIVE,
    check_confs,
    check_distinct_outputs,
    check_fractions,
    check_lifetime,
    check_master,
    check_policies,
    check_pools,
    check_queries,
    check_sf,
    cluster_options,
    executors_of_pools,
    picture_path,
    writable_path,
)
from jobs.tpcds.session import POLICIES
from jobs.tpcds.settings import KILL_CLOCKS, STABLE_RUNS
from simulators.options import FiniteFloatRange

if TYPE_CHECKING:
    from rich.console import Console

    from jobs.tpcds.settings import BenchResult, BenchSettings, Progress



@click.group("bench")
def bench() -> None:
    """Benchmarks on real Spark: TPC-DS queries while executor JVMs are killed."""


bench.add_command(overhead_command)
bench.add_command(verify_command)


@bench.command("datagen")
@click.option("--sf", type=float, default=1.0, show_default=True, callback=check_sf, help="TPC-DS scale factor.")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Cache root [default: $TRSPARK_TPCDS_CACHE or ~/.cache/trspark/tpcds].")
def datagen_command(sf: float, cache: Path | None) -> None:
    """Generate TPC-DS Parquet data with DuckDB's dsdgen (re-used when present)."""
    from jobs.tpcds.datagen import generate

    click.echo(generate(sf, cache))


@bench.command("tpcds")
@click.option("--sf", type=float, default=1.0, show_default=True, callback=check_sf, help="TPC-DS scale factor.")
@click.option("--queries", "queries", default="default", show_default=True, callback=check_queries,
              help="'default', 'all', 'verified' (those that passed `trspark bench verify`), or a list like q3,q7,q19.")
@click.option("--policies", default="never,always,decommission,tr", show_default=True, callback=check_policies,
              help=f"Comma-separated subset of {', '.join(POLICIES)}.")
@click.option("--lifetime", default=None, callback=check_lifetime,
              help="Executor lifetime model for the kills, e.g. exponential:mean=60 (seconds).")
@click.option("--stability", type=POSITIVE, default=None,
              help="Mean executor lifetime as a multiple of each query's stable time (exponential). [default: 3]")
@cluster_options
@click.option("--repeat", type=click.IntRange(1, 100), default=1, show_default=True,
              help="Runs per (query, policy, scenario). Evicted run r of a query replays the kill schedule "
                   "drawn from (seed, query, r): a different schedule per repeat, the same for every "
                   "policy, so `trspark bench targets` can pair the policies' runs.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the kill schedules (each repeat and query derives its own from it).")
@click.option("--notice", type=FiniteFloatRange(min=0), default=30.0, show_default=True,
              help="Seconds of termination notice (SIGPWR) before each kill, for the decommission and tr policies.")
@click.option("--tr-notices/--no-tr-notices", default=True, show_default=True,
              help="Give tr the kills' notices too (as decommission gets them); without, tr is only killed.")
@click.option("--max-kills", type=click.IntRange(0), default=None, help="Kill at most this many executors per run.")
@click.option("--reclaim-within", default=None, callback=check_fractions,
              help="Reclaim the whole spot pool at once, at a time drawn uniformly from LOW,HIGH x the query's "
                   "stable time (e.g. 0.3,0.6), instead of kills drawn per executor from --lifetime/--stability.")
@click.option("--kill-clock", type=click.Choice(KILL_CLOCKS), default="query", show_default=True,
              help="When a run's kill offsets start counting: when the query is called, or once its first task "
                   "has finished (a query plans for a second or so first, when no executor holds map outputs).")
@click.option("--time-cap", type=POSITIVE, default=600.0, show_default=True,
              help="Seconds after which a run is cancelled and recorded as failed.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), callback=writable_path, default=Path("results.csv"),
              show_default=True, help="CSV to append one row per run to.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), callback=picture_path, default=None,
              help="Also write a slowdown chart from --out (PNG, SVG, PDF, ...: by its extension).")
@click.option("--master", default=None, callback=check_master,
              help="Run on this existing cluster (spark://HOST:PORT, k8s://..., yarn) instead of a local-cluster; no kills are injected.")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None, help="TPC-DS data cache root.")
@click.option("--conf", "spark_conf", multiple=True, callback=check_confs,
              help="Extra Spark setting KEY=VALUE for every session (repeatable), e.g. "
                   "spark.sql.autoBroadcastJoinThreshold=-1 for shuffle joins instead of broadcasts.")
@click.option("--warmup", type=click.IntRange(1), default=None,
              help="Warm each session up with the first N queries only [default: all of them].")
@click.option("--stable-runs", type=click.Choice(STABLE_RUNS), default="all", show_default=True,
              help="Which policies get stable (no-kill) runs: all (shows their overhead), only never "
                   "(the reference every slowdown needs; the overhead is `trspark bench overhead`'s job), or "
                   "rounds: never, also once in every round of --interleave runs; the reference is then the "
                   "median of those round runs (it follows the host's drift, with every cluster up) and --out is "
                   "rewritten with it at the end.")
@click.option("--reference", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Take vanilla Spark's stable times from this results CSV: no stable runs, the policies run "
                   "in the given order under the kill schedules that reference implies (continue a long run).")
@click.option("--pool", "pools", multiple=True, callback=check_pools,
              help="Executor pools, repeatable: --pool ondemand=1@stable --pool spot=3 makes the first "
                   "executor slot (id 0) on-demand (never killed) and the rest spot (killed as --lifetime/--stability say); the counts "
                   "set --executors. Each executor reads its pool from its own imitated AWS instance metadata "
                   "(spark.trspark.notice.url with {executorId}); the plugin gets the pools' lifetimes.")
@click.option("--rewarm/--no-rewarm", default=True, show_default=True,
              help="After a run with kills, run the query once more unrecorded, so cold replacement JVMs do "
                   "not slow the next measurement (a sweep that checks answers and counts kills can skip it).")
@click.option("--rewarm-passes", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --rewarm: at most this many unrecorded passes; past the first, they go on while a pass "
                   "takes over 1.25x the query's stable time (replacement JVMs capped at a fraction of a core "
                   "can stay cold after one pass).")
@click.option("--hold-replacements/--replace-at-once", default=False, show_default=True,
              help="Replace the executors killed during a run only once it has ended, as spot VMs whose "
                   "replacements boot for longer than the run (on one machine a replacement JVM starting "
                   "mid-run takes the survivors' cores).")
@click.option("--interleave/--one-policy-at-a-time", default=False, show_default=True,
              help="Keep every policy's local cluster up and let them take turns, so that run r of a query "
                   "under each policy (the same kills) is made in one round, seconds apart: the host's drift "
                   "over minutes stays out of the comparison. Needs memory for every cluster at once.")
@click.option("--executor-cpus", type=FiniteFloatRange(min=0.05), default=None,
              help="Cap each executor JVM at this many cores (a cgroup CPU quota of its own), as if every "
                   "executor ran on its own VM: an idle executor's share is then lost, and a replacement "
                   "starting up does not slow the others. Local-cluster only; needs a writable cgroup CPU "
                   "controller. [default: executors share the machine's cores]")
@click.option("--spark-log", type=click.Path(dir_okay=False, path_type=Path), callback=writable_path, default=None,
              help="Append what each policy's driver JVM prints (Spark's log, JVM warnings, the trspark "
                   "engine's lines) to this file instead of the console.")
def tpcds_command(sf: float, queries: tuple[str, ...], policies: tuple[str, ...], lifetime: str | None,
                  stability: float | None, executors: int, cores: int, memory_mb: int, repeat: int, seed: int,
                  notice: float, max_kills: int | None, reclaim_within: tuple[float, float] | None,
                  kill_clock: str, time_cap: float, out: Path, plot_path: Path | None, master: str | None,
                  cache: Path | None, spark_conf: tuple[tuple[str, str], ...], warmup: int | None,
                  stable_runs: str, reference: Path | None, tr_notices: bool, pools: tuple[tuple[str, int], ...],
                  rewarm: bool, rewarm_passes: int, hold_replacements: bool, interleave: bool,
                  executor_cpus: float | None, spark_log: Path | None) -> None:
    """Run TPC-DS queries per policy, stable and under the same executor kills; one CSV row per run."""
    check_distinct_outputs(**{"--out": out, "--plot": plot_path, "--spark-log": spark_log})
    if lifetime is not None and stability is not None:
        raise click.UsageError("give --lifetime or --stability, not both")
    if notice >= time_cap:  # each noticed run would wait for a deadline past its own cap
        raise click.BadParameter(f"{notice:g} s is not below --time-cap {time_cap:g} s", param_hint="'--notice'")
    if reclaim_within is not None and (lifetime is not None or stability is not None):
        raise click.UsageError("--reclaim-within times the kills instead of --lifetime/--stability; give one of them")
    kill_options = {"--reclaim-within": reclaim_within is not None, "--max-kills": max_kills is not None,
                    "--stability": stability is not None, "--lifetime": lifetime is not None,
                    "--hold-replacements": hold_replacements, "--kill-clock": kill_clock != "query"}
    if master is not None and any(kill_options.values()):
        given = ", ".join(name for name, set_ in kill_options.items() if set_)
        raise click.UsageError(f"{given}: no kills are injected on --master's cluster, so these would be ignored")
    if pools and master is not None:
        raise click.BadParameter("pools are local-cluster slots; not with --master", param_hint="'--pool'")
    if pools:
        executors = executors_of_pools(pools, executors)
    if executor_cpus is not None:
        _check_executor_cpus(master)
    if not rewarm and rewarm_passes > 1:
        raise click.BadParameter("with --no-rewarm no unrecorded pass runs; give one of them", param_hint="'--rewarm-passes'")
    if interleave and master is not None:
        raise click.BadParameter("policies take turns on local clusters, one each; not with --master",
                                 param_hint="'--interleave'")
    if stable_runs == "rounds" and (not interleave or reference is not None):
        raise click.BadParameter("rounds measures vanilla Spark's reference in every round of --interleave "
                                 "runs: it needs --interleave and no --reference", param_hint="'--stable-runs'")
    if out.exists() and out.stat().st_size:  # rows go after those already there: checked before any cluster starts
        from jobs.tpcds import results

        try:
            results.read(out)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--out'") from None
    from rich.console import Console

    from jobs.tpcds.settings import BenchSettings

    settings = BenchSettings(sf=sf, queries=queries, policies=policies, out=out, lifetime=lifetime,
                             stability=None if lifetime else (stability or 3.0), executors=executors,
                             cores=cores, memory_mb=memory_mb, repeat=repeat, seed=seed, time_cap=time_cap,
                             notice=notice, max_kills=max_kills, reclaim_within=reclaim_within,
                             kill_clock=kill_clock, master=master, cache=cache,
                             spark_conf=spark_conf, warmup=warmup, stable_runs=stable_runs,
                             reference=reference, tr_notices=tr_notices, executor_cpus=executor_cpus,
                             pools=pools, rewarm=rewarm, rewarm_passes=rewarm_passes,
                             hold_replacements=hold_replacements, interleave=interleave, console_log=spark_log)
    if reference is not None:
        from jobs.tpcds.runner import reference_times

        try:
            reference_times(reference, queries)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--reference'") from exc
    console = Console(stderr=True)
    result = run_with_progress(settings, console)
    _show(result, sf, out, plot_path, console)


def _check_executor_cpus(master: str | None) -> None:
    """``--executor-cpus`` needs a local-cluster and a writable cgroup CPU controller here."""
    if master is not None:
        raise click.BadParameter("caps executors of a local-cluster only; not with --master",
                                 param_hint="'--executor-cpus'")
    from jobs.harness.cpucap import CpuCapUnavailable, check

    try:
        check()
    except CpuCapUnavailable as exc:
        raise click.BadParameter(f"cannot cap executors here: {exc}", param_hint="'--executor-cpus'") from exc


def _show(result: BenchResult, sf: float, out: Path, plot_path: Path | None, console: Console) -> None:
    """The summary table on stdout, skipped policies on stderr, and the chart if asked for."""
    from jobs.tpcds.report import summary_table
    from simulators.report import stdout_console

    stdout_console().print(summary_table(result.rows, title=f"TPC-DS SF {sf:g} on transient executors ({out})"))
    for policy, reason in result.skipped.items():
        console.print(f"[yellow]skipped policy {policy}:[/] {reason}")
    if plot_path is not None:
        from jobs.tpcds.plot import plot

        try:
            click.echo(f"wrote {plot(out, plot_path)}")
        except ValueError as exc:  # the rows are written: say why there is no chart
            console.print(f"[yellow]no chart:[/] {exc}")


def run_with_progress(settings: BenchSettings, console: Console) -> BenchResult:
    """Run the benchmark under a rich progress bar; on a console that is no terminal, one line per step."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from jobs.tpcds import runner
    from jobs.tpcds.settings import Progress as Hooks

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not console.is_terminal:  # a log file or a pipe: a live bar would only show at the end
        return runner.run(settings, _line_hooks(console))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as bar:
        task = bar.add_task("preparing", total=None)
        hooks = Hooks(
            start=lambda total: bar.update(task, total=total),
            step=lambda label: bar.update(task, description=label),
            advance=lambda: bar.advance(task),
        )
        return runner.run(settings, hooks)


def _line_hooks(console: Console) -> Progress:
    """Progress hooks printing ``[elapsed] label (runs done/total)`` for each step."""
    from jobs.tpcds.settings import Progress as Hooks

    started = time.monotonic()
    counts = {"done": 0, "total": 0}

    def step(label: str) -> None:
        minutes, seconds = divmod(int(time.monotonic() - started), 60)
        console.print(f"[{minutes}:{seconds:02d}] {label} ({counts['done']}/{counts['total'] or '?'} done)",
                      highlight=False)

    def advance() -> None:
        counts["done"] += 1

    return Hooks(start=lambda total: counts.update(total=total), step=step, advance=advance)


@bench.command("targets")
@click.argument("csv_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--executors", type=click.IntRange(min=1), default=3, show_default=True,
              help="The runs' executor count (the bench's --executors), for each run's capacity floor "
                   "(the slowdown the executors left alive by the kills allow at best).")
@click.option("--pool", "pools", multiple=True, callback=check_pools,
              help="The runs' pools (the bench's --pool), e.g. --pool ondemand=1@stable --pool spot=3: adds "
                   "what each run cost in USD (on-demand and spot VM prices of the simulator's pricing); "
                   "sets --executors.")
def targets_command(csv_path: Path, executors: int, pools: tuple[tuple[str, int], ...]) -> None:
    """Targets of a results CSV, met or missed, and its paired statistics (Markdown).

    Per policy the median evicted slowdown with a bootstrap 95 % interval; the paired ratios
    tr/always, tr/decommission and tr/never (runs paired by query, seed and repeat: the same
    kills); per run the capacity floor and the excess over it. An interval containing 1 is
    marked "not significant".
    """
    from jobs.tpcds import stats
    from jobs.tpcds.results import read
    from jobs.tpcds.targets import markdown

    try:
        rows = read(csv_path)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="CSV_PATH") from exc
    if pools:
        executors = executors_of_pools(pools, executors)
    click.echo(markdown(rows, executors) + "\n" + stats.markdown(rows, executors, pools), nl=False)


@bench.command("plot")
@click.argument("csv_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), callback=picture_path, default=Path("slowdown.png"), show_default=True,
              help="The chart (PNG, SVG, PDF, ...: by its extension).")
def plot_command(csv_path: Path, out: Path) -> None:
    """Plot median slowdown per query and policy from a results CSV."""
    from jobs.tpcds.plot import plot

    try:
        click.echo(f"wrote {plot(csv_path, out)}")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="CSV_PATH") from exc
