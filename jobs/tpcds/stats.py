r"""Paired statistics of a results CSV: medians with bootstrap intervals, paired ratios, capacity floors.

A benchmark with ``--repeat R`` replays, for every policy, the same ``R`` kill schedules per query
(schedule ``r`` is drawn from the seed ``(seed, query, r)``), so two policies' evicted runs of the
same ``(query, seed, repeat)`` met the same kills: a *pair*. From those runs:

* **median slowdown per policy** -- the median over its successful evicted runs (every query and
  repeat), with a percentile bootstrap 95 % interval (:func:`median_interval`);
* **paired ratio** ``a/b`` -- per pair ``seconds_a / seconds_b`` (both finished), the median over
  pairs, with its bootstrap interval. A ratio below 1 means ``a`` was faster under the same kills;
* **capacity floor** of a run on ``N`` executors that lost ``L`` executor-seconds to a query of
  stable time ``S``: :math:`1 + L / (N S)` (see :mod:`jobs.tpcds.targets`), and its **excess**
  ``slowdown - floor``: the part of the slowdown a backup policy controls.

An interval that contains 1 (for a ratio, or a slowdown) is reported as "not significant": the
runs do not tell the two apart. Failed runs (aborted, over the time cap) have no time; they are
left out of the intervals and counted apart.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable
from operator import attrgetter

from jobs.tpcds.results import POLICY_ORDER, RunRow
from jobs.tpcds.session import PLUGIN_POLICIES
from trspark.stats import CONFIDENCE, RESAMPLES, SEED, Interval, median_interval

# The bootstrap lives in trspark.stats (the simulator's sweep uses it too); its names stay importable here.
__all__ = ["CONFIDENCE", "RESAMPLES", "SEED", "Interval", "median_interval"]

PAIRED_RATIOS: tuple[tuple[str, str], ...] = (
    ("tr", "always"), ("tr", "decommission"), ("tr", "efm"), ("tr", "pado"), ("tr", "never"))
NEVER_HURT = 1.5
"""Vanilla Spark counts as hurt on a query at this median slowdown; there ``tr``'s excess is judged."""
EXCESS_BOUND = 0.10
"""``tr``'s median excess over the capacity floor allowed on a query that hurts vanilla Spark."""

PairKey = tuple[str, int, int]
"""(query, seed, repeat): runs with this key met the same kill schedule."""


def _evicted(rows: list[RunRow]) -> list[RunRow]:
    return [r for r in rows if r.scenario == "evicted"]


def policy_intervals(rows: list[RunRow]) -> dict[str, tuple[Interval, int]]:
    """Policy -> (median evicted slowdown with its interval, runs that failed)."""
    values: dict[str, list[float]] = defaultdict(list)
    failed: dict[str, int] = defaultdict(int)
    for r in _evicted(rows):
        if r.failed:
            failed[r.policy] += 1
        elif math.isfinite(r.slowdown):
            values[r.policy].append(r.slowdown)
    policies = _ordered({*values, *failed})
    return {p: (median_interval(values[p]), failed[p]) for p in policies}


def pairs(rows: list[RunRow], a: str, b: str, scenario: str = "evicted",
          value: Callable[[RunRow], float] = attrgetter("seconds")) -> dict[PairKey, float]:
    """(query, seed, repeat) -> ``value_a / value_b`` (seconds by default) where both policies ran it
    and finished."""
    values: dict[tuple[str, PairKey], float] = {}
    for r in rows:
        if r.scenario == scenario and r.policy in (a, b) and not r.failed and (v := value(r)) > 0:
            values[(r.policy, (r.query, r.seed, r.repeat))] = v
    keys = sorted({k for p, k in values if p == a} & {k for p, k in values if p == b})
    return {k: values[(a, k)] / values[(b, k)] for k in keys}


def paired_ratio(rows: list[RunRow], a: str, b: str, scenario: str = "evicted",
                 value: Callable[[RunRow], float] = attrgetter("seconds")) -> Interval:
    """Median over pairs of ``value_a / value_b`` (seconds by default), with its bootstrap interval."""
    return median_interval(list(pairs(rows, a, b, scenario, value).values()))


def finite_median(values: list[float]) -> float:
    """The median of the finite ``values`` (NaN when there is none)."""
    finite = [v for v in values if math.isfinite(v)]
    return statistics.median(finite) if finite else math.nan


def capacity_floor(row: RunRow, executors: float) -> float:
    """``1 + L / (N S)`` for one run (NaN without a stable time or a measured capacity loss).

    ``N``: the executors that can run at once (fewer than the cluster's when they share fewer cores).
    """
    if executors < 1:
        raise ValueError(f"executors must be >= 1, got {executors}")
    if not (math.isfinite(row.capacity_lost_seconds) and math.isfinite(row.stable_seconds) and row.stable_seconds > 0):
        return math.nan
    return 1.0 + row.capacity_lost_seconds / (executors * row.stable_seconds)


def excess(row: RunRow, executors: float) -> float:
    """``slowdown - floor`` of one finished run: what the policy controls (NaN for a failed run)."""
    return math.nan if row.failed else row.slowdown - capacity_floor(row, executors)


def excess_target(rows: list[RunRow], executors: float) -> dict[str, tuple[float, float]]:
    """Hurt query -> (never's median slowdown, tr's median excess over its floor), for the bound."""
    by_query: dict[tuple[str, str], list[RunRow]] = defaultdict(list)
    for r in _evicted(rows):
        by_query[(r.query, r.policy)].append(r)
    out = {}
    for (query, policy), runs in sorted(by_query.items(), key=lambda kv: (len(kv[0][0]), kv[0])):
        if policy != "never":
            continue
        never = [r.slowdown for r in runs if not r.failed and math.isfinite(r.slowdown)]
        never_median = statistics.median(never) if never else math.inf  # every run failed: hurt
        if never_median < NEVER_HURT:
            continue
        tr = [e for e in (excess(r, executors) for r in by_query.get((query, "tr"), [])) if math.isfinite(e)]
        out[query] = (never_median, statistics.median(tr) if tr else math.nan)
    return out


def excess_by_kills(rows: list[RunRow], executors: float) -> dict[str, tuple[Interval, Interval]]:
    """Policy -> median excess over the floor (with its interval) of its evicted runs that met a kill, and of those that met none.

    A run that met no kill has a floor of about 1, so its excess is what no handling of a kill can
    explain: replacement JVMs of an earlier schedule still cold, and run-to-run noise. Where the
    two medians are alike, the excess of the runs with kills is that baseline, not lost outputs.
    """
    split: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for r in _evicted(rows):
        value = excess(r, executors)
        if math.isfinite(value):
            split[r.policy][0 if r.executors_killed else 1].append(value)
    return {p: (median_interval(split[p][0]), median_interval(split[p][1])) for p in _ordered(set(split))}


def _excess_text(interval: Interval) -> str:
    """``+0.37 [+0.20, +0.52]``: an excess is a difference, so no "not significant" against 1."""
    if not interval.n:
        return "-"
    if not (math.isfinite(interval.low) and math.isfinite(interval.high)):
        return f"{interval.median:+.2f} (no interval)"
    return f"{interval.median:+.2f} [{interval.low:+.2f}, {interval.high:+.2f}]"


def _ordered(policies: set[str]) -> list[str]:
    return [p for p in POLICY_ORDER if p in policies] + sorted(policies - set(POLICY_ORDER))


def _copied(rows: list[RunRow], policy: str) -> float:
    """Bytes the plugin backed up over ``policy``'s evicted runs."""
    return sum(r.backups_bytes for r in _evicted(rows) if r.policy == policy)


def _bytes(rows: list[RunRow], policy: str) -> str:
    if policy == "never":
        return "none"
    if policy not in PLUGIN_POLICIES:
        return "not measured"  # decommission's migrations are Spark's, not the plugin's counters
    return f"{_copied(rows, policy) / 2**20:.1f} MiB"


def sweep_totals(rows: list[RunRow]) -> dict[str, tuple[int, int, int, int]]:
    """Policy -> (evicted runs, executors killed, wrong answers, failed jobs) over its evicted runs."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for r in _evicted(rows):
        t = totals[r.policy]
        t[0] += 1
        t[1] += r.executors_killed
        t[2] += not r.failed and not r.result_ok
        t[3] += r.failed
    return {p: (t[0], t[1], t[2], t[3]) for p, t in ((p, totals[p]) for p in _ordered(set(totals)))}


def cost_section(rows: list[RunRow], pools: tuple[tuple[str, int], ...]) -> list[str]:
    """Markdown lines: per policy the median USD of an evicted run (:func:`jobs.tpcds.pools.run_cost_usd`)
    with its interval, and the paired cost ratios ``tr/b``."""
    from jobs.tpcds.pools import run_cost_usd

    done = [r for r in _evicted(rows) if not r.failed]
    sizes = ", ".join(f"{count} {name}" for name, count in pools)
    out = ["", f"Cost ({sizes} executors, each priced as one VM of its pool; USD per 1,000 evicted runs):", "",
           "| policy | runs | median USD per 1,000 runs [95 % interval] |", "|---|---|---|"]
    for policy in _ordered({r.policy for r in done}):
        interval = median_interval([1000 * run_cost_usd(r, pools) for r in done if r.policy == policy])
        # An amount, not a ratio: no "not significant" against 1.
        out.append(f"| {policy} | {interval.n} | {interval.median:.2f} [{interval.low:.2f}, {interval.high:.2f}] |")
    out += ["", "| paired cost ratio | pairs | median [95 % interval] |", "|---|---|---|"]
    for a, b in PAIRED_RATIOS:
        interval = paired_ratio(rows, a, b, value=lambda r: run_cost_usd(r, pools))
        if interval.n:
            out.append(f"| {a}/{b} | {interval.n} | {interval.text()} |")
    return out


def lowest_median_target(rows: list[RunRow], intervals: dict[str, tuple[Interval, int]]) -> str:
    """One Markdown line: is ``tr``'s median evicted slowdown the lowest, or within the paired interval
    of the lowest (``tr/lowest`` not above 1), with fewer bytes copied than ``always`` and ``efm``?
    ``intervals``: :func:`policy_intervals` of ``rows``."""
    medians = {p: interval.median for p, (interval, _) in intervals.items()
               if interval.n and math.isfinite(interval.median)}
    if "tr" not in medians:
        return "* tr's median the lowest, or within the paired interval: tr did not run (target not exercised)"
    lowest = min(medians, key=lambda p: (medians[p], p != "tr"))
    if lowest == "tr":
        speed, fast = f"tr's median {medians['tr']:.2f}x is the lowest", True
    else:
        ratio = paired_ratio(rows, "tr", lowest)
        fast = ratio.n > 0 and ratio.low <= 1.0
        speed = (f"tr's median {medians['tr']:.2f}x, the lowest {lowest}'s {medians[lowest]:.2f}x, "
                 f"tr/{lowest} {ratio.text()}")
    others = [p for p in ("always", "efm") if p in medians]
    fewer = all(_copied(rows, "tr") < _copied(rows, p) for p in others)
    listed = ", ".join(f"{p} {_bytes(rows, p)}" for p in others)
    return (f"* tr's median the lowest or within the paired interval, with fewer bytes than always and efm: "
            f"{speed}; tr copied {_bytes(rows, 'tr')}" + (f" ({listed})" if listed else "")
            + (" -> **met**" if fast and fewer else " -> **missed**"))


def markdown(rows: list[RunRow], executors: int, pools: tuple[tuple[str, int], ...] = ()) -> str:
    """The paired-statistics section of ``trspark bench targets``: intervals, ratios, per-run floors
    and, for a two-pool cluster, what each run cost."""
    out = [f"## Paired statistics (bootstrap {CONFIDENCE * 100:g} % intervals of the median)", "",
           "| policy | runs | failed | median slowdown [95 % interval] | kills | wrong answers |",
           "|---|---|---|---|---|---|"]
    totals = sweep_totals(rows)
    intervals = policy_intervals(rows)
    for policy, (interval, failed) in intervals.items():
        _, kills, wrong, _ = totals[policy]
        out.append(f"| {policy} | {interval.n} | {failed} | {interval.text()} | {kills} | {wrong} |")
    present = {r.policy for r in rows}
    out += ["", "| paired ratio | pairs | median [95 % interval] | backup bytes (a / b) |", "|---|---|---|---|"]
    for a, b in PAIRED_RATIOS:
        if a in present and b in present:
            interval = paired_ratio(rows, a, b)
            out.append(f"| {a}/{b} | {interval.n} | {interval.text()} | {_bytes(rows, a)} / {_bytes(rows, b)} |")
    if any(r.scenario == "stable" and r.policy == "tr" for r in rows):
        overhead = paired_ratio(rows, "tr", "never", scenario="stable")
        out.append(f"| tr/never without kills | {overhead.n} | {overhead.text()} | |")
    if pools:
        out += ["", lowest_median_target(rows, intervals)]
        out += cost_section(rows, pools)
    out += ["", f"Per run ({executors} executors): capacity floor = 1 + lost executor-seconds / "
            f"({executors} x stable s); excess = slowdown - floor.", "",
            "| query | seed | repeat | policy | kills | slowdown | floor | excess |", "|---|---|---|---|---|---|---|---|"]
    order = {p: i for i, p in enumerate(POLICY_ORDER)}
    for r in sorted(_evicted(rows), key=lambda r: ((len(r.query), r.query), r.seed, r.repeat, order.get(r.policy, 9))):
        slow = "failed" if r.failed else f"{r.slowdown:.2f}x"
        floor, extra = capacity_floor(r, executors), excess(r, executors)
        out.append(f"| {r.query} | {r.seed} | {r.repeat} | {r.policy} | {r.executors_killed} | {slow} | "
                   f"{_num(floor, 'x')} | {_num(extra, '', signed=True)} |")
    out += ["", "Excess over the floor by whether the run met a kill (a run that met none has a floor of about 1: "
            "its excess is what the kills do not explain, such as replacements of an earlier schedule still "
            "cold, and noise):", "",
            "| policy | runs with kills | median excess [95 % interval] | runs without | median excess [95 % interval] |",
            "|---|---|---|---|---|"]
    for policy, (killed, spared) in excess_by_kills(rows, executors).items():
        out.append(f"| {policy} | {killed.n} | {_excess_text(killed)} | {spared.n} | {_excess_text(spared)} |")
    out.append("")
    out += excess_verdicts(rows, executors)
    return "\n".join(out) + "\n"


def excess_verdicts(rows: list[RunRow], executors: float) -> list[str]:
    """One line per query that hurt vanilla Spark: tr's median excess over the floor against the bound."""
    hurt = excess_target(rows, executors)
    if not hurt:
        return [f"* tr's excess over the floor <= {EXCESS_BOUND:.2f} where never >= {NEVER_HURT:g}x: "
                "no query hurt vanilla Spark that much (target not exercised)"]
    return [f"* {query} (never {_num(never, 'x')}): tr's median excess over the floor "
            f"{_num(tr_excess, '', signed=True)} (bound {EXCESS_BOUND:.2f}) -> "
            + ("**met**" if tr_excess <= EXCESS_BOUND else "**missed**")
            for query, (never, tr_excess) in hurt.items()]


def _num(value: float, unit: str, *, signed: bool = False) -> str:
    if math.isnan(value):
        return "-"
    if math.isinf(value):
        return "failed"
    return f"{value:+.2f}{unit}" if signed else f"{value:.2f}{unit}"
