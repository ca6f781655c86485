"""``trspark report``: what trspark did in an application, from its Spark event log.

:func:`summarize` reads a log (plain, zstd, lz4, gzip or rolling) into a :class:`Summary`;
:func:`write_report` also writes ``summary.txt``, ``timeline.png`` and ``report.html`` (the
page holds the picture, so it is one file to share).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from trspark.eventlog import EventLogError, read_events
from trspark.reporting.summary import NoApplicationStart, Summary, summarize_events


def summarize(path: str | Path, prices: Mapping[str, float] | None = None) -> Summary:
    """The summary of the event log at ``path`` (``prices``: pool -> $ per executor-hour, finite and >= 0)."""
    prices = checked_prices(prices)
    read = [0]

    def counted() -> Iterator[dict[str, Any]]:
        for event in read_events(path):
            read[0] += 1
            yield event

    try:
        return summarize_events(counted(), prices, path)
    except NoApplicationStart:
        what = "is empty" if not read[0] else f"has no SparkListenerApplicationStart in its {read[0]} event(s)"
        raise EventLogError(f"{path}: the event log {what}; it was cut before its application started, "
                            "or is not a Spark application's log") from None


def checked_prices(prices: Mapping[str, float] | None) -> dict[str, float] | None:
    """``prices`` as floats; ``ValueError`` naming the pool whose price is not a finite number of USD >= 0."""
    if prices is None:
        return None
    if not isinstance(prices, Mapping):
        raise ValueError(f"prices={prices!r} is not valid; allowed: a mapping {{pool: USD per executor-hour}}")
    out = {}
    for pool, price in prices.items():
        number = math.nan if isinstance(price, str | bytes | bool) else _as_float(price)
        if not (isinstance(pool, str) and pool and math.isfinite(number) and number >= 0):
            raise ValueError(f"prices[{pool!r}]={price!r} is not valid; allowed: a pool name and a finite number "
                             "of USD per executor-hour >= 0, e.g. {'default': 0.12}")
        out[pool] = float(number)
    return out


def _as_float(value: Any) -> float:
    """``float(value)`` for any number (numpy's, a ``Decimal``), NaN for what is none."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def write_report(path: str | Path, out_dir: str | Path, prices: Mapping[str, float] | None = None) -> Summary:
    """Summarise ``path`` and write ``summary.txt``, ``timeline.png`` and ``report.html`` to ``out_dir``."""
    from trspark.reporting import html, timeline

    summary = summarize(path, prices)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.txt").write_text(summary.text(), encoding="utf-8")
    png = timeline.draw(summary, out / "timeline.png")
    html.write(summary, png, out / "report.html")
    return summary


__all__ = ["EventLogError", "Summary", "summarize", "write_report"]
