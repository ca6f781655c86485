"""``tr`` at several byte prices (``--conf backup.costPerGb=P``) beside the pools sweep, as a report.

Each row is a cell of the pools sweep with an on-demand share of at least 10 %. A priced sweep runs
``tr`` at one price with the baselines it is judged against, on the pools sweep's worlds (the same
seeds, so run ``i`` meets the same world at every price); price 0 is the pools sweep itself. Per
price, ``tr``'s mean slowdown and its bytes copied as a share of ``always``'s.

A price :math:`c` (core-seconds per GB) makes ``tr`` copy an output only when its expected saving
exceeds :math:`c \\cdot \\text{size}` on top of the copy's own cost: it spends bytes where they save
the most time per byte, the rule a byte budget calls for, :math:`c` being its Lagrange multiplier.
So the prices trace how much time each share of ``always``'s bytes costs ``tr``.

The summary counts, per price, the cells where ``tr`` copies at most half of ``always``'s bytes,
those where its mean slowdown lies above the bootstrap 95 % interval of its mean at price 0 (more
than run-to-run noise of the mean; not a paired test), and those where its mean slowdown exceeds
the mean of ``always`` or ``efm`` (point estimates). The last column looks for a price at which
``tr`` meets the pools report's three targets at once (:mod:`jobs.reports.pools`): the bytes, the
baselines (paired, against that price's own sweep), and the clairvoyant bound (the ratio of means
against the pools sweep's ``oracle`` or ``oracle-backup``, which do not read the price).
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
    Verdict,
    cell_head,
    cell_of,
    copied,
    judge_baselines,
    judge_bytes,
    judge_clairvoyant,
    markdown,
    number,
    read,
)

PREFIX = "backup.costPerGb="

Swept = dict[Cell, dict[str, dict[str, str]]]
"""Cell -> policy -> CSV row, as :func:`jobs.reports.pools.read` gives them."""


def _world(row: dict[str, str]) -> tuple[str, str, str, float]:
    """What makes two sweeps' rows the same worlds: the workload, the shape, the VMs and their
    lifetimes as simulated (a sweep may record the share asked for or the one run), the stability."""
    return row["workload"], row.get("shape", ""), row.get("lifetime") or row["on_demand_share"], float(row["stability"])


def _priced(path: Path, base: Swept) -> dict[float, Swept]:
    """price -> cell of ``base`` -> policy -> row, from the rows whose settings name a byte price."""
    cells = {_world(next(iter(by.values()))): cell for cell, by in base.items()}
    out: dict[float, Swept] = {}
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            settings = row.get("settings") or ""
            price = next((item.removeprefix(PREFIX) for item in settings.split() if item.startswith(PREFIX)), None)
            if price is not None:
                cell = cells.get(_world(row), cell_of(row))
                out.setdefault(float(price), {}).setdefault(cell, {})[row["policy"]] = row
    return out


def _entry(row: dict[str, str], always: dict[str, str]) -> str:
    return f"{number(row, 'slowdown_mean'):.3f} / {copied(row) / copied(always):.0%}"


def _summary(price: float, at_price: Swept, base: Swept) -> str:
    """One line: how ``tr``'s rows at ``price`` compare with ``always``'s bytes and ``tr``'s slowdown at price 0,
    and in how many cells they meet the three targets."""
    cells = [c for c in base if "tr" in at_price.get(c, {})]
    met = sum(all(ok for _, ok, _ in _targets(c, at_price[c], base[c])) for c in cells)
    mean = {c: number(at_price[c]["tr"], "slowdown_mean") for c in cells}
    halved = sum(copied(at_price[c]["tr"]) / copied(base[c]["always"]) <= BYTES_SHARE for c in cells)
    slower = sum(mean[c] > number(base[c]["tr"], "slowdown_boot_high") for c in cells)
    behind = sum(mean[c] > min(number(base[c][p], "slowdown_mean") for p in ("always", "efm") if p in base[c])
                 for c in cells)
    change = statistics.median(mean[c] / number(base[c]["tr"], "slowdown_mean") - 1 for c in cells) if cells else math.nan
    return (f"- {price:g} core-s/GB: bytes <= {BYTES_SHARE:.0%} of always's in {halved} of {len(cells)} cells; mean "
            f"slowdown above price 0's interval in {slower}, above always's or efm's mean in {behind}; median change "
            f"of the mean slowdown {change:+.1%}; all three targets met in {met}")


def _targets(cell: Cell, by: dict[str, dict[str, str]], base: dict[str, dict[str, str]]) -> list[Verdict]:
    """Bytes, baselines and clairvoyant verdicts of ``tr`` in ``by`` (one price's sweep; ``base``: the pools sweep's cell)."""
    if by is base:
        return [judge_bytes(by), judge_baselines(by), judge_clairvoyant(cell[3], by)]
    if "tr" not in by:
        return [("bytes", None, "no tr"), ("baselines", None, "no tr"), ("clairvoyant", None, "no tr")]
    # always copies the same at every price: the pools sweep's row stands in where a priced sweep lacks it
    bytes_verdict = judge_bytes(by if "always" in by else {**by, "always": base["always"]})
    return [bytes_verdict, judge_baselines(by), judge_clairvoyant(cell[3], base, by["tr"])]


def all_three(cell: Cell, at: dict[float, Swept], base: dict[str, dict[str, str]]) -> tuple[str, str]:
    """(kind, text): the lowest price at which ``tr`` meets the three targets, or why none does.

    kind is ``"price 0"``, ``"priced"``, ``"slower"`` (the bytes are halved only at a price that
    misses a speed target; the text names them at the lowest such price) or ``"bytes"`` (above half
    at every price).
    """
    judged = {price: _targets(cell, at[price][cell], base) for price in sorted(at) if cell in at[price]}
    for price, verdicts in judged.items():
        if all(met for _, met, _ in verdicts):
            return ("price 0" if price == 0 else "priced"), f"{price:g}"
    halved = [price for price, verdicts in judged.items() if verdicts[0][1]]
    if not halved:
        return "bytes", f"none: bytes above half up to {max(judged):g}"
    missed = [f"{name} ({detail})" for name, met, detail in judged[halved[0]][1:] if not met]
    return "slower", f"none: at {halved[0]:g}, " + "; ".join(missed)


def _reconciled(kinds: dict[Cell, tuple[str, str]], base: Swept) -> str:
    """One line counting the cells of each kind of :func:`all_three`."""
    count = {kind: sum(k == kind for k, _ in kinds.values()) for kind in ("price 0", "priced", "slower", "bytes")}
    lowest = statistics.multimode(float(text) for k, text in kinds.values() if k == "priced")
    beyond = sum(k in ("slower", "bytes") and "oracle" in base[c]
                 and copied(base[c]["oracle"]) / copied(base[c]["always"]) > BYTES_SHARE for c, (k, _) in kinds.items())
    return (f"- all three targets at one price: at price 0 in {count['price 0']} of {len(kinds)} cells, at a higher "
            f"price in {count['priced']}" + (f" (most often {lowest[0]:g})" if lowest else "")
            + f"; the bytes halved only by missing a speed target in {count['slower']}; the bytes above half at "
            f"every price in {count['bytes']}. In {beyond} of these {count['slower'] + count['bytes']} cells the "
            f"clairvoyant `oracle` copies more than half of `always`'s bytes.")


def byte_price(sweep: Path) -> Callable[[Path], str]:
    """Render this CSV's priced sweeps against ``sweep`` (the pools sweep: price 0 and the bounds)."""
    def render(path: Path) -> str:
        base = {cell: by for cell, by in read(sweep).items() if cell[2] >= MIN_SHARE and {"tr", "always"} <= set(by)}
        at: dict[float, Swept] = {0.0: base, **_priced(path, base)}
        prices = sorted(at)
        body, kinds = [], {}
        for cell, by in base.items():
            entries = [_entry(at[p][cell]["tr"], by["always"]) if "tr" in at[p].get(cell, {}) else "-" for p in prices]
            baselines = [f"{number(by[p], 'slowdown_mean'):.3f}" if p in by else "-" for p in ("always", "efm")]
            oracle = f"{copied(by['oracle']) / copied(by['always']):.0%}" if "oracle" in by else "-"
            kinds[cell] = all_three(cell, at, by)
            body.append(cell_head(cell, by) + entries + baselines + [oracle, kinds[cell][1]])
        head = ["workload", "spot lifetimes", "on-demand %", "stability",
                *(f"tr at {p:g}: slowdown / bytes" for p in prices), "always", "efm", "oracle bytes",
                "all three targets at"]
        summary = [_summary(p, at[p], base) for p in prices] + [_reconciled(kinds, base)]
        return "\n".join(summary) + "\n\n" + markdown(head, body)
    return render
