"""``trspark bench overhead`` and ``trspark bench verify``: the plugin on TPC-DS without kills, its
cost in time against vanilla Spark and its answers against DuckDB's.

:mod:`jobs.tpcds.cli` adds both to the ``bench`` group.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from jobs.tpcds.options import (
    POSITIVE,
    check_confs,
    check_distinct_outputs,
    check_lifetime,
    check_queries,
    check_sf,
    cluster_options,
    writable_path,
)

if TYPE_CHECKING:
    from jobs.tpcds.results import RunRow as BenchRow


@click.command("overhead")
@click.option("--sf", type=float, default=1.0, show_default=True, callback=check_sf, help="TPC-DS scale factor.")
@click.option("--queries", "queries", default="default", show_default=True, callback=check_queries,
              help="'default', 'all', 'verified' (those that passed `trspark bench verify`), or a list like q3,q7,q19.")
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


@click.command("verify")
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
    check_distinct_outputs(**{"--out": out, "--csv": csv_path})
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
