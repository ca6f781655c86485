"""``tr`` at several byte prices (``--conf backup.costPerGb=P``) beside the pools sweep, as a report.

Each row is a cell of the pools sweep with an on-demand share of at least 10 %. Per price, ``tr``'s
mean slowdown and its bytes copied as a share of ``always``'s; price 0 is the pools sweep's own
``tr`` (the same seeds, so run ``i`` meets the same world at every price). The summary counts, per
price, the cells where ``tr`` copies at most half of ``always``'s bytes, those where its mean
slowdown lies above the bootstrap 95 % interval of its mean at price 0 (a slowdown beyond that
interval is more than run-to-run noise of the mean; not a paired test), and those where its mean
slowdown exceeds the mean of ``always`` or ``efm`` (point estimates).
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Callable
from pathlib import Path

from jobs.reports.pools import (
    BYTES_SHARE,
    MIN_SHARE,
    Cell,
    cell_head,
    cell_of,
    copied,
    markdown,
    number,
    read,
)

PREFIX = "backup.costPerGb="


def _priced(path: Path) -> dict[float, dict[Cell, dict[str, str]]]:
    """price -> cell -> ``tr``'s row, from the rows whose settings name a byte price."""
    out: dict[float, dict[Cell, dict[str, str]]] = {}
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            settings = row.get("settings") or ""
            price = next((item.removeprefix(PREFIX) for item in settings.split() if item.startswith(PREFIX)), None)
            if row["policy"] == "tr" and price is not None:
                out.setdefault(float(price), {})[cell_of(row)] = row
    return out


def _entry(row: dict[str, str], always: dict[str, str]) -> str:
    return f"{number(row, 'slowdown_mean'):.3f} / {copied(row) / copied(always):.0%}"


def _summary(price: float, at_price: dict[Cell, dict[str, str]], base: dict[Cell, dict[str, dict[str, str]]]) -> str:
    """One line: how ``tr``'s rows at ``price`` compare with ``always``'s bytes and ``tr``'s slowdown at price 0."""
    cells = [c for c in base if c in at_price]
    mean = {c: number(at_price[c], "slowdown_mean") for c in cells}
    halved = sum(copied(at_price[c]) / copied(base[c]["always"]) <= BYTES_SHARE for c in cells)
    slower = sum(mean[c] > number(base[c]["tr"], "slowdown_boot_high") for c in cells)
    behind = sum(mean[c] > min(number(base[c][p], "slowdown_mean") for p in ("always", "efm") if p in base[c])
                 for c in cells)
    change = statistics.median(mean[c] / number(base[c]["tr"], "slowdown_mean") - 1 for c in cells) if cells else math.nan
    return (f"- {price:g} core-s/GB: bytes <= {BYTES_SHARE:.0%} of always's in {halved} of {len(cells)} cells; mean "
            f"slowdown above price 0's interval in {slower}, above always's or efm's mean in {behind}; median change "
            f"of the mean slowdown {change:+.1%}")


def byte_price(sweep: Path) -> Callable[[Path], str]:
    """Render this CSV's priced ``tr`` rows against ``sweep`` (the pools sweep: price 0 and the baselines)."""
    def render(path: Path) -> str:
        base = {cell: by for cell, by in read(sweep).items() if cell[2] >= MIN_SHARE and {"tr", "always"} <= set(by)}
        rows_at = {0.0: {cell: by["tr"] for cell, by in base.items()}, **_priced(path)}
        prices = sorted(rows_at)
        body = []
        for cell, by in base.items():
            entries = [_entry(rows_at[p][cell], by["always"]) if cell in rows_at[p] else "-" for p in prices]
            baselines = [f"{number(by[p], 'slowdown_mean'):.3f}" if p in by else "-" for p in ("always", "efm")]
            oracle = f"{copied(by['oracle']) / copied(by['always']):.0%}" if "oracle" in by else "-"
            body.append(cell_head(cell, by) + entries + baselines + [oracle])
        head = ["workload", "spot lifetimes", "on-demand %", "stability",
                *(f"tr at {p:g}: slowdown / bytes" for p in prices), "always", "efm", "oracle bytes"]
        summary = [_summary(p, rows_at[p], base) for p in prices]
        return "\n".join(summary) + "\n\n" + markdown(head, body)
    return render
