"""The self-contained HTML page of ``trspark report``: the summary table and the timeline inlined."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from trspark.reporting.summary import Summary

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>trspark report: {title}</title>
<style>body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse}}
td{{border:1px solid #ccc;padding:4px 10px}} td:first-child{{font-weight:bold}} img{{max-width:100%}}</style>
</head><body>
<h1>trspark report: {title}</h1>
<table id="summary">{rows}</table>
<h2>Timeline</h2>
<img alt="timeline: stages, executor lifetimes per pool, kills, notices, backups and restores" src="data:image/png;base64,{png}">
</body></html>
"""


def write(summary: Summary, png: Path, path: str | Path) -> Path:
    """Write the page for ``summary`` with the PNG at ``png`` embedded (no external files)."""
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in summary.lines())
    encoded = base64.b64encode(png.read_bytes()).decode("ascii")
    out = Path(path)
    out.write_text(PAGE.format(title=html.escape(summary.app_name or summary.app_id), rows=rows, png=encoded),
                   encoding="utf-8")
    return out
