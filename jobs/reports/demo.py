"""The demo's report: ``make demo`` on a fresh clone, its rows as the demo prints them."""

from __future__ import annotations

from pathlib import Path

from jobs.reports.pools import markdown
from jobs.reports.render import MACHINE, Report, Source

DEMO_RUNS = (  # seed, date, code of each run
    (0, "2026-12-06 02:46 - 02:50 UTC", "48f3dda"),
    (1, "2026-12-06 02:50 - 02:55 UTC", "48f3dda"),
    (2, "2026-12-06 02:55 - 02:59 UTC", "48f3dda"),
)
DEMO_LOAD = ", nothing else running; a fresh clone and an empty TPC-DS cache, so the run generated the data and DuckDB's answers"
USABLE_EXECUTORS = 2.0
"""Executors that can run at once on this machine: the demo's three 1-core executors share 2 cores."""


def runs(path: Path) -> str:
    """The demo's table (per workload and policy, medians per run over the kill schedules), its
    plain-words summary, and how many answers equal DuckDB's."""
    from jobs.demo_table import HEADERS, cells, demo_lines, summary
    from jobs.tpcds.results import read

    rows = read(path)
    lines = demo_lines(rows, USABLE_EXECUTORS)
    table = markdown(list(HEADERS), [cells(line) for line in lines])
    right = sum(r.result_ok for r in rows)
    return (table + "\n" + "".join(f"- {text}\n" for text in summary(lines))
            + f"\n{right} of {len(rows)} runs (with and without kills) answered as DuckDB does.\n")


def report() -> Report:
    """The demo's report (its CSV's provenance is stated here, as for every other report)."""
    return Report("demo", "The demo: `make demo` on a fresh clone", """
`make demo` (`trspark demo`, method in `jobs/demo.py` and [benchmark.md](../benchmark.md)): TPC-DS
q29 and the four-iteration `chain4` at SF 0.1 on 3 one-core executors (1 on-demand, 2 spot) that
share 2 cores; both spot executors are reclaimed at once, mid-job, under 2 kill schedules per
workload replayed for `never`, `always` and `tr` (`tr` gets a 0.5 s notice). Slowdown = a run's
time over vanilla Spark's stable median; medians per run over the schedules, min-max in brackets.
The capacity floor `1 + lost / (U x stable s)` counts the executor-seconds the kills took (`U` = 2
executors can run at once here); the excess is the slowdown above it. Spreads that overlap are
within noise.
""", (
        *(Source(f"demo_seed{seed}.csv",
                 "git clone <repo> fresh && cd fresh && export TRSPARK_TPCDS_CACHE=<an empty folder>\n"
                 + ("make demo" if seed == 0 else f"make demo DEMO_ARGS='--seed {seed}'")
                 + f"\ncp trspark-demo/results.csv docs/results/demo_seed{seed}.csv",
                 date, code, MACHINE + DEMO_LOAD, runs)
          for seed, date, code in DEMO_RUNS),
    ))
