"""The ``trspark report EVENTLOG`` command."""

from __future__ import annotations

import math
from pathlib import Path

import click

from trspark.reporting import EventLogError, write_report


def _prices(values: tuple[str, ...]) -> dict[str, float]:
    prices = {}
    for value in values:
        pool, sep, price = value.partition("=")
        if pool in prices:
            raise click.BadParameter(f"{value!r}: pool {pool!r} is priced twice; give one --price per pool",
                                     param_hint="--price")
        try:
            prices[pool] = float(price)
        except ValueError:
            raise click.BadParameter(f"{value!r}: expected POOL=USD_PER_HOUR, e.g. default=0.12",
                                     param_hint="--price") from None
        if not sep or not pool or not (math.isfinite(prices[pool]) and prices[pool] >= 0):
            raise click.BadParameter(f"{value!r}: expected POOL=USD_PER_HOUR with a finite price >= 0, "
                                     "e.g. default=0.12", param_hint="--price")
    return prices


@click.command("report")
@click.argument("eventlog", type=click.Path(exists=True))
@click.option("--out", "out_dir", default="trspark-report", show_default=True, type=click.Path(file_okay=False),
              help="Directory for summary.txt, timeline.png and report.html.")
@click.option("--price", "prices", multiple=True, metavar="POOL=USD_PER_HOUR",
              help="Executor price of a pool (repeat per pool); adds the cost to the summary.")
def report(eventlog: str, out_dir: str, prices: tuple[str, ...]) -> None:
    """Summarise what trspark did in the application of EVENTLOG (a Spark event log: a file, or a
    rolling log's directory or any of its parts, which stands for the whole; plain, zstd, lz4 or gzip)."""
    parsed = _prices(prices)
    try:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise click.BadParameter(f"cannot make the folder {out_dir!r} ({exc.strerror or exc})", param_hint="--out") from None
    try:
        summary = write_report(eventlog, out_dir, parsed)
    except (EventLogError, ValueError, OSError) as exc:
        raise click.UsageError(str(exc)) from exc
    click.echo(summary.text(), nl=False)
    click.echo(f"wrote {out_dir}/summary.txt, timeline.png, report.html")
