"""``trspark bench``: TPC-DS on transient executors (``tpcds``), its data (``datagen``), plots (``plot``)."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from jobs.tpcds.options import (
    POSITIVE,
    check_confs,
    check_fractions,
    check_lifetime,
    check_master,
    check_policies,
    check_pools,
    check_queries,
    check_sf,
    cluster_options,
    executors_of_pools,
    writable_path,
)
from jobs.tpcds.session import POLICIES
from jobs.tpcds.settings import KILL_CLOCKS, STABLE_RUNS
from simulators.options import FiniteFloatRange

if TYPE_CHECKING:
    from rich.console import Console

    from jobs.tpcds.results import RunRow as BenchRow
    from jobs.tpcds.settings import BenchResult, BenchSettings, Progress



@click.group("bench")
def bench() -> None:
    """Benchmarks on real Spark: TPC-DS queries while executor JVMs are killed."""


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
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), callback=writable_path, default=None,
              help="Also write a slowdown chart (PNG) from --out.")
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


@bench.command("overhead")
@click.option("--sf", type=float, default=1.0, show_default=True, callback=check_sf, help="TPC-DS scale factor.")
@click.option("--queries", "queries", default="default", show_default=True, callback=check_queries,
              help="'default', 'all', or a list like q3,q7,q19.")
@click.option("--rounds", type=click.IntRange(1, 100), default=3, show_default=True,
              help="Interleaved rounds: each query once per configuration per round.")
@click.option("--lifetime", default=None, callback=check_lifetime,
              help="Lifetime model the tr policy is told, e.g. exponential:mean=60 [default: the plugin's].")
@cluster_options
@click.option("--time-cap", type=POSITIVE, default=600.0, show_default=True,
              help="Seconds after which a run is cancelled and recorded as failed.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), callback=writable_path, default=Path("overhead.csv"),
              show_default=True, help="CSV to append one row per run to.")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None, help="TPC-DS data cache root.")
@click.option("--conf", "spark_conf", multiple=True, callback=check_confs,
              help="Extra Spark setting KEY=VALUE for both sessions (repeatable).")
def overhead_command(sf: float, queries: tuple[str, ...], rounds: int, lifetime: str | None, executors: int,
                     cores: int, memory_mb: int, time_cap: float, out: Path, cache: Path | None,
                     spark_conf: tuple[tuple[str, str], ...]) -> None:
    """tr vs vanilla Spark with no kills: interleaved runs, paired ratios (target <= 1.03).

    Appending to an existing --out numbers the new rounds after its last one, so the runs pool.
    """
    from rich.console import Console

    from jobs.tpcds.overhead import CONFIGS, TARGET, OverheadSettings, first_round, run, summarise

    try:  # an --out that is not a results CSV fails here, before any cluster starts
        start = first_round(out)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--out'") from None
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    settings = OverheadSettings(sf=sf, queries=queries, out=out, rounds=rounds, executors=executors, cores=cores,
                                memory_mb=memory_mb, time_cap=time_cap, cache=cache, spark_conf=spark_conf,
                                lifetime=lifetime)
    console = Console(stderr=True)

    def show(row: BenchRow) -> None:
        console.print(f"round {row.repeat + 1}/{start + rounds} {row.query:>5} {row.policy:>5}: {row.seconds:7.2f} s"
                      f" {'ok' if row.result_ok else 'WRONG/FAILED ' + row.error}")

    try:
        rows = run(settings, show)
    except RuntimeError as exc:  # a worker could not start its session or died: say why in one line
        raise click.ClickException(str(exc).splitlines()[0]) from None
    summary = summarise(rows)
    for q, (base, tr, ratio, paired) in summary.per_query.items():
        click.echo(f"{q:>5}: vanilla {base:7.2f} s, tr {tr:7.2f} s, ratio of medians {ratio:.3f}, "
                   f"median paired ratio {paired:.3f}")
    verdict = "met" if summary.met else "NOT met"
    click.echo(f"all: median paired ratio {summary.median_paired:.3f}, total-time ratio {summary.total_ratio:.3f}; "
               f"target <= {TARGET:.2f} {verdict}; rows in {out}")
    if start:
        from jobs.tpcds.results import read

        try:
            pooled = summarise([row for row in read(out) if row.policy in CONFIGS])
        except ValueError as exc:  # rows from another tool share keys: this run's summary above still holds
            click.echo(f"{out} cannot be pooled: {exc}")
            return
        click.echo(f"with the {start} earlier round(s) in {out}: median paired ratio {pooled.median_paired:.3f} "
                   f"[{pooled.paired_interval.low:.3f}, {pooled.paired_interval.high:.3f}], "
                   f"total-time ratio {pooled.total_ratio:.3f}")


@bench.command("verify")
@click.option("--sf", type=float, default=1.0, show_default=True, callback=check_sf, help="TPC-DS scale factor.")
@click.option("--queries", "queries", default="all", show_default=True, callback=check_queries,
              help="'all', 'default', or a list like q3,q7,q19.")
@cluster_options
@click.option("--time-cap", type=POSITIVE, default=600.0, show_default=True,
              help="Seconds after which a query is cancelled and fails.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), callback=writable_path,
              default=Path(__file__).with_name("QUERIES.md"), show_default="jobs/tpcds/QUERIES.md",
              help="Markdown file whose verification table is (re)written.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path), callback=writable_path, default=None,
              help="Append each verdict to this CSV as soon as it is known (query, verdict, kind, reason, "
                   "seconds); queries it already has a verdict for are skipped, so a cut run resumes.")
@click.option("--rerun", multiple=True, type=click.Choice(["differs", "unsupported", "equal"]),
              help="Run the queries whose verdict in the CSV is of this kind again (e.g. after a fix of the "
                   "oracle); the new row replaces the old one. Repeatable.")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None, help="TPC-DS data cache root.")
def verify_command(sf: float, queries: tuple[str, ...], executors: int, cores: int, memory_mb: int,
                   time_cap: float, out: Path, csv_path: Path | None, rerun: tuple[str, ...],
                   cache: Path | None) -> None:
    """Run every query on Spark with the plugin (tr, no kills) and compare each answer with DuckDB's.

    With --csv, the queries the CSV already has a verdict for are not run again (a timed-out one
    is: it has no verdict), and the table is written from the CSV, also when the run is interrupted.
    """
    from rich.console import Console

    from jobs.tpcds import verify
    from jobs.tpcds.queries import DEFAULT_QUERIES, runnable
    from jobs.tpcds.session import PolicyUnavailable

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    settings = verify.VerifySettings(sf=sf, queries=queries, executors=executors, cores=cores,
                                     memory_mb=memory_mb, time_cap=time_cap, cache=cache, rerun=frozenset(rerun))
    console = Console(stderr=True)
    if csv_path is not None and csv_path.exists():
        try:  # a CSV whose verdicts cannot be matched to this SF is refused before any work
            verify.read_csv(csv_path, sf)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--csv'") from None

    def say(text: str) -> None:  # a reason may hold brackets that are not markup; a log wants whole lines
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    try:
        verdicts = verify.resume(settings, csv_path, verify.progress(say, settings, csv_path))
    except PolicyUnavailable as exc:
        raise click.ClickException(f"the plugin cannot run here: {exc}") from None
    except KeyboardInterrupt:  # the CSV keeps what finished; the table is written from it
        if csv_path is None or not csv_path.exists():
            # Nothing of this run was kept: the table of an earlier run stays as it was.
            console.print(f"[yellow]interrupted[/]: no verdict was kept (give --csv to keep them); {out} unchanged")
            sys.exit(130)
        console.print("[yellow]interrupted[/]: the table shows the verdicts written so far")
        verdicts = verify.merged(queries, verify.read_csv(csv_path, sf), [])
    for v in verdicts:
        if not v.ok:
            console.print(f"[red]{v.query} fails[/]: {v.reason}")
    named = {runnable(): "all", DEFAULT_QUERIES: "default"}.get(queries, ",".join(queries))
    command = f"trspark bench verify --sf {sf:g} --queries {named}"
    verify.write_table(out, verdicts, settings, command)
    passed = sum(v.ok for v in verdicts)
    click.echo(f"{passed} of {len(verdicts)} queries pass (Spark with the plugin vs DuckDB, SF {sf:g}); table in {out}")
    if passed < len(queries):
        sys.exit(1)


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
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), callback=writable_path, default=Path("slowdown.png"), show_default=True)
def plot_command(csv_path: Path, out: Path) -> None:
    """Plot median slowdown per query and policy from a results CSV."""
    from jobs.tpcds.plot import plot

    try:
        click.echo(f"wrote {plot(csv_path, out)}")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="CSV_PATH") from exc
