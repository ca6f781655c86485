"""What ``trspark simulate`` and ``whatif`` print: the summary table, JSON, and the money options.

Kept apart from :mod:`simulators.cli` (the commands) and :mod:`simulators.options` (their input checks) so each stays short.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console

F = Callable[..., Any]

# Columns of stdout when it is neither a terminal nor given $COLUMNS: wider than any table printed,
# which rich then draws at its natural width.
UNWRAPPED_WIDTH = 10_000


_LONG_DECIMAL = re.compile(r"(?<![\w.])\d+\.\d{4,}(?:e[+-]?\d+)?(?![\w.])")


def stdout_console() -> Console:
    """The console the commands print their tables on: a terminal's width; $COLUMNS when set;
    else (a pipe or a file) :data:`UNWRAPPED_WIDTH`.

    Rich falls back to 80 columns when stdout is no terminal and would wrap every wider table
    over several lines, which a log or a ``grep`` cannot read back.
    """
    from rich.console import Console

    console = Console()
    if console.is_terminal or os.environ.get("COLUMNS", "").isdigit():
        return console
    return Console(width=UNWRAPPED_WIDTH)


def money_options(f: F) -> F:
    """Prices for the VM-hours and $ per job columns (defaults and sources: simulators.pricing)."""
    from simulators import pricing

    options = [
        click.option("--price", "prices", multiple=True, metavar="POOL=USD_PER_VM_HOUR",
                     help=f"Price of a pool's VM-hour, repeatable (defaults: {pricing.ON_DEMAND_USD_PER_HOUR} for a "
                          f"pool that is never evicted, AWS m5.xlarge on-demand; {pricing.SPOT_USD_PER_HOUR} for "
                          "any other pool, a typical spot price of the same VM; the homogeneous world's pool is "
                          "'default')."),
        click.option("--remote-gb-price", type=float, default=pricing.REMOTE_USD_PER_GB, show_default=True,
                     help="USD per GB written to the remote store (S3 charges no ingress)."),
        click.option("--remote-request-price", type=float, default=pricing.REMOTE_USD_PER_1K_REQUESTS,
                     show_default=True, help="USD per 1,000 requests to the remote store (S3 Standard PUT)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


_TABLE = (
    ("slowdown (mean)", "slowdown_mean", "{:.3f}"),
    ("slowdown p50", "slowdown_p50", "{:.3f}"),
    ("slowdown p95", "slowdown_p95", "{:.3f}"),
    ("slowdown 95% CI", "slowdown_ci95", "[{0[0]:.3f}, {0[1]:.3f}]"),
    ("job time (s, mean)", "job_time_mean", "{:.2f}"),
    ("stable job time (s)", "stable_job_time", "{:.2f}"),
    ("recomputed tasks", "recomputed_tasks_mean", "{:.1f}"),
    ("backups local", "backups_local_mean", "{:.1f}"),
    ("backups remote", "backups_remote_mean", "{:.1f}"),
    ("backup GB local", "backup_bytes_local_mean", "{:.3g}"),
    ("backup GB remote", "backup_bytes_remote_mean", "{:.3g}"),
    ("evictions", "evictions_mean", "{:.1f}"),
    ("VM-hours", "vm_hours_mean", "{:.3f}"),
    ("GB copied", "bytes_copied_mean", "{:.3g}"),
    ("$ per job", "cost_usd_mean", "{:.4f}"),
    ("safety-belt firings", "safety_belt_firings_mean", "{:.2f}"),
    ("failed runs", "failed_runs", "{}"),
    ("runs", "runs", "{}"),
)


def print_table(summaries: list[dict[str, Any]], title: str) -> None:
    """The summaries side by side; bytes in the GB that ``--remote-gb-price`` is charged per (2^30 bytes)."""
    from rich.table import Table

    from simulators.pricing import GB

    table = Table(title=readable_numbers(title))
    table.add_column("metric")
    for s in summaries:
        table.add_column(str(s["policy"]), justify="right")
    for label, key, fmt in _TABLE:
        cells = []
        for s in summaries:
            value = s[key]
            if key.startswith("backup_bytes") or key == "bytes_copied_mean":
                value = value / GB
            cells.append(fmt.format(value))
        table.add_row(label, *cells)
    stdout_console().print(table)


def readable_numbers(text: str) -> str:
    """``text`` with each decimal of four or more digits after the point shown to 4 significant digits.

    Lifetime specs keep full precision (they round-trip in JSON); a title only needs to be read.
    """
    return _LONG_DECIMAL.sub(lambda m: f"{float(m.group()):.4g}", text)


def public_summary(summary: dict[str, Any], rows: bool) -> dict[str, Any]:
    return summary if rows else {k: v for k, v in summary.items() if k != "rows"}


def with_money(summary: dict[str, Any], world: Any, prices: Any) -> dict[str, Any]:
    """``summary`` plus VM-hours, bytes copied and USD per job (:mod:`simulators.pricing`)."""
    from simulators.pricing import money_summary

    return {**summary, **money_summary(summary["rows"], world, prices)}
