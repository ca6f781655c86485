r"""The benchmark's acceptance targets, judged from a results CSV, as a Markdown table.

Per query, the evicted slowdown of each policy is the median over its successful ``evicted`` runs
(slowdown = seconds / vanilla Spark's median stable time); a (query, policy) whose every run failed
counts as ``inf`` (it did not finish). The targets:

* **tr faster than always and than decommission on the median query** -- the median over queries
  of each policy's slowdown; per-query wins are shown too.
* **every result verified** -- each finished run's answer equal to DuckDB's (``result_ok``); failed
  runs (aborted, over the time cap) have no answer and are counted apart.

(A third target, ``tr`` within 3 % of vanilla Spark without kills, is measured by
:mod:`jobs.tpcds.overhead`.)

With the executor count given, the report adds the **capacity floor** per policy of each query
that hurt vanilla Spark (``never`` >= 2x or failed): a run on ``N`` executors that lost ``L``
executor-seconds of capacity (``capacity_lost_seconds``: executors killed and not yet replaced)
to a query of stable time ``S`` has at most
``N T - L`` executor-seconds for ``N S`` of work, so

.. math:: \frac{T}{S} \ge 1 + \frac{L}{N S},

whatever the policy does about lost outputs (a floor: it assumes perfectly parallel work and
no re-computation). What a policy controls is the excess over it, which :mod:`jobs.tpcds.stats`
judges per run with the paired statistics.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from jobs.tpcds.plot import median_slowdowns
from jobs.tpcds.results import POLICY_ORDER, RunRow
from jobs.tpcds.stats import capacity_floor

NEVER_HURT = 2.0
"""Vanilla Spark counts as hurt at this slowdown (or when it fails)."""


@dataclass(frozen=True)
class Verdicts:
    """The targets' outcomes over a set of rows."""

    slowdowns: dict[tuple[str, str], float]
    """(query, policy) -> median evicted slowdown; ``inf`` where every run failed."""
    hurt: list[str]
    """Queries where ``never`` is >= 2x or fails."""
    medians: dict[str, float]
    """Policy -> median over queries of its slowdown."""
    verified: tuple[int, int, int]
    """(runs whose answer equals DuckDB's, runs that gave an answer, runs that failed: no answer)."""


def judge(rows: list[RunRow]) -> Verdicts:
    """Evaluate the targets over ``rows`` (any mix of queries, policies and scenarios)."""
    slow = {key: (value if math.isfinite(value) else math.inf) for key, value in median_slowdowns(rows).items()}
    queries = sorted({q for q, _ in slow}, key=lambda q: (len(q), q))
    hurt = [q for q in queries if slow.get((q, "never"), math.nan) >= NEVER_HURT]
    medians = {}
    for policy in POLICY_ORDER:
        values = [slow[(q, policy)] for q in queries if (q, policy) in slow]
        if values:
            medians[policy] = statistics.median(values)
    answered = [r for r in rows if not r.failed]
    return Verdicts(slow, hurt, medians,
                    (sum(r.result_ok for r in answered), len(answered), len(rows) - len(answered)))


def capacity_floors(rows: list[RunRow], executors: int) -> dict[tuple[str, str], float]:
    """(query, policy) -> median over its evicted runs of ``1 + L / (N S)`` (see the module doc)."""
    if executors < 1:
        raise ValueError(f"executors must be >= 1, got {executors}")
    floors: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        floor = capacity_floor(r, executors)
        if r.scenario == "evicted" and math.isfinite(floor):
            floors.setdefault((r.query, r.policy), []).append(floor)
    return {key: statistics.median(values) for key, values in floors.items()}


def _cell(value: float) -> str:
    if math.isnan(value):
        return "-"
    return "failed" if math.isinf(value) else f"{value:.2f}x"


def markdown(rows: list[RunRow], executors: int | None = None) -> str:
    """The per-query slowdown table and the targets, met or missed, as Markdown.

    With ``executors`` (the runs' executor count) the hurt queries' capacity floors follow.
    """
    v = judge(rows)
    policies = [p for p in POLICY_ORDER if p in v.medians]
    queries = sorted({q for q, _ in v.slowdowns}, key=lambda q: (len(q), q))
    # Every row of a query carries vanilla Spark's median stable time (the slowdowns' reference).
    stable = {r.query: r.stable_seconds for r in rows if math.isfinite(r.stable_seconds)}
    kills: dict[tuple[str, str], int] = {}
    for r in rows:
        if r.scenario == "evicted":
            kills[(r.query, r.policy)] = kills.get((r.query, r.policy), 0) + r.executors_killed
    head = ["query", "stable s", *policies, "kills (" + "/".join(p[0] for p in policies) + ")",
            "tr < always", "tr < decommission"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for q in queries:
        tr = v.slowdowns.get((q, "tr"), math.nan)
        wins = [("yes" if tr < v.slowdowns[(q, other)] else "no") if (q, other) in v.slowdowns else "-"
                for other in ("always", "decommission")]
        mark = " (never hurt)" if q in v.hurt else ""
        lines.append("| " + " | ".join([
            q + mark, f"{stable.get(q, math.nan):.1f}",
            *(_cell(v.slowdowns.get((q, p), math.nan)) for p in policies),
            "/".join(str(kills.get((q, p), 0)) for p in policies), *wins]) + " |")
    lines.append("| median | | " + " | ".join(_cell(v.medians[p]) for p in policies) + " | | | |")
    ok, answered, failed = v.verified
    tr_median = v.medians.get("tr", math.nan)
    out = ["\n".join(lines), ""]
    if executors is not None and v.hurt:
        floors = capacity_floors(rows, executors)
        out.append(f"* capacity floors (1 + lost executor-seconds / ({executors} x stable s)) where never >= "
                   f"{NEVER_HURT:g}x or fails:")
        for q in v.hurt:
            cells = [f"{p} {floors[(q, p)]:.2f}x" for p in policies if (q, p) in floors]
            if cells:
                out.append(f"  * {q}: " + ", ".join(cells))
    for other in ("always", "decommission"):
        if other in v.medians and "tr" in v.medians:
            verdict = "**met**" if tr_median < v.medians[other] else "**missed**"
            out.append(f"* tr faster than {other} on the median query: {_cell(tr_median)} vs "
                       f"{_cell(v.medians[other])} -> {verdict}")
    out.append(f"* answers equal to DuckDB's: {ok} of {answered} runs that finished"
               + (" -> **met**" if ok == answered else " -> **missed** (see the CSV's error column)")
               + (f"; {failed} run(s) failed (aborted or over the time cap), no answer to check" if failed else ""))
    return "\n".join(out) + "\n"
