"""``trspark demo``: the main job -- TPC-DS on a local cluster whose executor JVMs get killed.

It generates TPC-DS SF 0.1 with DuckDB if missing (cached), then for each policy (``never`` =
vanilla Spark, ``always``, ``tr``) starts a 3-executor cluster, runs two short multi-stage queries
once without kills and once under the same seeded kill schedule (exponential lifetimes, mean 3x
each query's stable time), checks every answer against DuckDB, prints a table and writes a PNG.
``never`` runs on vanilla ``local-cluster``; the plugin policies on ``local-trcluster`` (the same
executor JVMs with the plugin's scheduler: lost outputs re-pointed to backups at once, evictions
not counted as task failures).

What makes it fit 10 minutes: one cluster per policy, re-used for its warm-up pass, stable runs and
evicted runs (a cluster starts in 22-31 s here; each policy needs its own driver JVM because the
plugin jar is fixed at JVM start); two queries; the SF 0.1 data is generated once and cached.
A policy that cannot run here (the plugin jar not built, the engine missing) is skipped and named
with the reason; nothing is estimated or made up. Everything is the benchmark's code
(:mod:`jobs.tpcds.runner`) with small settings, so the demo and the benchmark cannot disagree.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

DEMO_POLICIES = ("never", "always", "tr")


@click.command("demo")
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("trspark-demo"),
              show_default=True, help="Where results.csv and slowdown.png are written.")
@click.option("--sf", type=click.FloatRange(min=0, min_open=True), default=0.1, show_default=True,
              help="TPC-DS scale factor.")
@click.option("--queries", default=None, help="Queries to run [default: a few short multi-stage ones].")
@click.option("--policies", default=",".join(DEMO_POLICIES), show_default=True,
              help="Comma-separated subset of never, always, decommission, tr.")
@click.option("--stability", type=click.FloatRange(min=0, min_open=True), default=3.0, show_default=True,
              help="Mean executor lifetime as a multiple of each query's stable time.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the kill schedule.")
def demo(out_dir: Path, sf: float, queries: str | None, policies: str, stability: float, seed: int) -> None:
    """Run the main job: TPC-DS queries on executors that get killed, per policy."""
    from rich.console import Console

    from jobs.tpcds.cli import run_with_progress
    from jobs.tpcds.plot import plot
    from jobs.tpcds.queries import DEMO_QUERIES, QueryError, parse_list
    from jobs.tpcds.report import summary_table
    from jobs.tpcds.session import parse_policies
    from jobs.tpcds.settings import BenchSettings

    try:
        names = parse_list(queries, default=DEMO_QUERIES) if queries else DEMO_QUERIES
    except QueryError as exc:
        raise click.BadParameter(str(exc).removeprefix("--queries: "), param_hint="'--queries'") from exc
    try:
        chosen = parse_policies(policies)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--policies'") from exc
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "results.csv"
    csv_path.unlink(missing_ok=True)  # the demo's table shows this run only
    console = Console() if sys.stdout.isatty() else Console(width=120)  # a log file gets the full table
    console.print(f"[bold]trspark demo[/]: TPC-DS SF {sf:g}, queries {', '.join(names)}, policies "
                  f"{', '.join(chosen)}; 3 executors x 1 core, exponential lifetimes with mean "
                  f"{stability:g}x each query's stable time, seed {seed}")
    # Shuffle joins (no broadcasts): every query then has several shuffle stages whose outputs a
    # kill can take, as in the benchmark; two warm-up passes, because SF 0.1 queries last a few
    # seconds and a second pass still ran 1.5-2x faster than the first (a cold reference made
    # evicted runs look faster than stable ones).
    settings = BenchSettings(sf=sf, queries=names, policies=chosen, out=csv_path, stability=stability,
                             seed=seed, time_cap=240.0, warmup_rounds=2,
                             # Kills without warning, for every policy: the demo shows what backups
                             # save (notices are `trspark bench tpcds`' and docs/notices-and-pools.md's subject).
                             tr_notices=False,
                             spark_conf=(("spark.sql.autoBroadcastJoinThreshold", "-1"),))
    started = time.monotonic()
    result = run_with_progress(settings, Console(stderr=True))
    console.print(summary_table(result.rows, title=f"trspark demo: TPC-DS SF {sf:g} under executor kills"))
    for policy, reason in result.skipped.items():
        console.print(f"[yellow]skipped {policy}[/]: {reason}")
    if result.rows:
        console.print(f"rows: {csv_path}; chart: {plot(csv_path, out_dir / 'slowdown.png')}")
    console.print(f"demo took {(time.monotonic() - started) / 60:.1f} min")
    bad = [r for r in result.rows if not r.result_ok]
    if bad:
        console.print(f"[red]{len(bad)} run(s) did not give DuckDB's answer or failed[/] (see {csv_path})")
