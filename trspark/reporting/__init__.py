"""``trspark report``: what trspark did in an application, from its Spark event log.

:func:`summarize` reads a log (plain, zstd, lz4 or rolling) into a :class:`Summary`;
:func:`write_report` also writes ``summary.txt``, ``timeline.png`` and ``report.html`` (the
page holds the picture, so it is one file to share).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from trspark.eventlog import EventLogError, read_events
from trspark.reporting.summary import Summary, summarize_events


def summarize(path: str | Path, prices: Mapping[str, float] | None = None) -> Summary:
    """The summary of the event log at ``path`` (``prices``: pool -> $ per executor-hour)."""
    return summarize_events(read_events(path), prices)


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
