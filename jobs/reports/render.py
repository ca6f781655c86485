"""How a result report is made from its CSVs: :class:`Source`, :class:`Report` and the tables."""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
MACHINE = "one VM, 2 vCPU (AMD EPYC), 23 GiB RAM"



def append_row(path: Path, row: Mapping[str, object]) -> None:
    """``row`` as one line at the end of the CSV ``path``, its keys as the header when the file is new."""
    new = not path.exists()
    with path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)

@dataclass(frozen=True)
class Source:
    """One CSV and how it was made."""

    csv: str
    command: str
    date: str
    code: str
    """Commit of the code that wrote the CSV (``unknown`` when it was not recorded)."""
    machine: str
    render: Callable[[Path], str]
    note: str = ""


@dataclass(frozen=True)
class Report:
    name: str
    title: str
    intro: str
    sources: tuple[Source, ...]
    draw: Callable[[Path], None] | None = None
    """Writes the report's figures into the results directory given (not run by ``--check``)."""


def read_rows(path: Path) -> list[dict[str, str]]:
    """The CSV ``path`` as one dict per row, by column name."""
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _num(raw: str, digits: int) -> str:
    try:
        value = float(raw)
    except ValueError:
        return raw or "-"
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def _plain(raw: str) -> str:
    """``1000.0`` as ``1000``; text as it is."""
    try:
        return f"{float(raw):g}"
    except ValueError:
        return raw


def _markdown(head: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines) + "\n"


_SETTINGS = ("stability", "vms", "tasks", "runs", "on_demand_share")
"""Columns that name a setting: shown as given (``50``, not ``50.000``)."""


def columns(*names: str, digits: int = 3) -> Callable[[Path], str]:
    """The CSV's rows with the named columns; measured numbers with ``digits`` decimals."""
    def cell(name: str, raw: str) -> str:
        if name in _SETTINGS:
            return _plain(raw)
        return _num(raw, digits) if "." in raw else (raw or "-")
    return lambda path: _markdown(list(names), [[cell(n, r[n]) for n in names] for r in read_rows(path)])


def pivot(index: tuple[str, ...], column: str, value: str = "slowdown_mean") -> Callable[[Path], str]:
    """One row per ``index`` value, one column per ``column`` value, cells ``value`` (3 decimals)."""
    def render(path: Path) -> str:
        rows = read_rows(path)
        cols = list(dict.fromkeys(r[column] for r in rows))
        cells: dict[tuple[str, ...], dict[str, str]] = {}
        for r in rows:
            cells.setdefault(tuple(r[i] for i in index), {})[r[column]] = _num(r[value], 3)
        keys = sorted(cells, key=lambda k: (k[0], *(-float(x) for x in k[1:])))
        return _markdown([*index, *cols], [[*(_plain(x) for x in k), *(cells[k].get(c, "-") for c in cols)]
                                           for k in keys])
    return render


def tpcds_targets(executors: int, pools: tuple[tuple[str, int], ...] = (), *,
                  paired: bool = False) -> Callable[[Path], str]:
    """The benchmark's own per-query table and targets (``trspark bench targets``); with ``paired``
    (a run with several kill schedules per query) its paired statistics too, and with ``pools`` (a
    two-pool run) the statistics and what each run cost."""
    def render(path: Path) -> str:
        from jobs.tpcds.results import POLICY_ORDER, read
        from jobs.tpcds.targets import markdown
        rows = read(path)
        body = []
        for policy in POLICY_ORDER:
            runs = [r for r in rows if r.policy == policy and r.scenario == "evicted"]
            if runs:
                body.append([policy, f"{sum(r.seconds for r in runs):.1f}", str(sum(r.tasks_recomputed for r in runs)),
                             str(sum(r.backups_count for r in runs)), f"{sum(r.backups_bytes for r in runs) / 1e6:.0f}",
                             str(sum(r.failed for r in runs))])
        totals = _markdown(["policy", "total evicted s", "map tasks re-run", "copies", "MB copied", "failed"], body)
        text = markdown(rows, executors) + "\nOver the evicted runs:\n\n" + totals
        if paired or pools:
            from jobs.tpcds import stats
            text += "\n" + stats.markdown(rows, executors, pools)
        return text
    return render


def overhead(path: Path) -> str:
    """Per-query medians and paired ratios of ``tr`` against vanilla Spark (``trspark bench overhead``)."""
    from jobs.tpcds.overhead import TARGET, summarise
    from jobs.tpcds.results import read
    s = summarise(read(path))
    body = [[q, f"{base:.2f}", f"{tr:.2f}", f"{ratio:.3f}", f"{paired:.3f}"]
            for q, (base, tr, ratio, paired) in s.per_query.items()]
    table = _markdown(["query", "vanilla s (median)", "tr s (median)", "ratio of medians", "median paired ratio"], body)
    ci = s.paired_interval
    interval = f" (95 % interval {ci.low:.3f}-{ci.high:.3f} over {ci.n} pairs)" if math.isfinite(ci.low) else ""
    return (table + f"\nMedian paired ratio over all pairs: **{s.median_paired:.3f}**{interval}; total-time ratio "
            f"{s.total_ratio:.3f} (target <= {TARGET}: {'met' if s.met else 'missed'} by the median"
            + ("; the interval reaches above it, so within noise of the target" if s.met and ci.high > TARGET
               else "; the whole interval is below it" if s.met and ci.high <= TARGET else "")
            + ").\n")


def idle_cpu(path: Path) -> str:
    """``bench/idle_cpu.py``: each run's CPU, then per process and configuration the median over rounds
    and what it adds to vanilla Spark's (``none``)."""
    rows = read_rows(path)
    text = columns("round", "config", "executors", "driver_ms_per_s", "executor_median_ms_per_s",
                   "other_ms_per_s", digits=1)(path)
    configs = list(dict.fromkeys(r["config"] for r in rows))
    lines = []
    for measure, label in (("executor_median_ms_per_s", "one executor JVM"), ("driver_ms_per_s", "driver JVM")):
        median = {c: statistics.median(float(r[measure]) for r in rows if r["config"] == c) for c in configs}
        lines += [f"| {label} | {c} | {median[c]:.1f} | "
                  + ("-" if c == "none" or "none" not in median else f"{median[c] - median['none']:+.1f}") + " |"
                  for c in configs]
    return (text + "\nMedians over the rounds, ms of CPU per s idle:\n\n| process | config | median | over `none` |\n"
            "|---|---|---|---|\n" + "\n".join(lines) + "\n")


def verdicts(path: Path) -> str:
    """``trspark bench verify --csv``: the verdicts counted by kind, one row per query (its latest), and
    the query texts still without a verdict: those timed out (no verdict on their answer) and those not run."""
    from jobs.tpcds.queries import runnable
    from jobs.tpcds.verify import read_csv
    rows = read_csv(path, 1.0)  # the report's verdicts are SF 1's (verify_sf1.csv)
    kinds = {k: [r.query for r in rows if r.kind == k] for k in ("equal", "differs", "unsupported", "timed out")}
    judged = len(rows) - len(kinds["timed out"])
    missing = [q for q in runnable() if q not in {r.query for r in rows}]
    total = len(runnable())
    head = (f"**{judged} of {total} query texts have a verdict**: {len(kinds['equal'])} equal, "
            f"{len(kinds['differs'])} differ, {len(kinds['unsupported'])} unsupported. "
            f"**{total - judged} have none yet**: {len(kinds['timed out'])} timed out, {len(missing)} not run.\n")
    body = [[r.query, "pass" if r.ok else "fail", r.kind, r.reason.replace("|", "\\|"),
             "-" if math.isnan(r.seconds) else f"{r.seconds:.2f}"] for r in rows]
    tail = "".join(f"\n{label.capitalize()} ({len(names)}): {', '.join(names)}.\n"
                   for label, names in (("timed out", kinds["timed out"]), ("not run", missing)) if names)
    return head + "\n" + _markdown(["query", "verdict", "kind", "reason", "Spark s"], body) + tail


def elastic(path: Path) -> str:
    """``python -m jobs.elastic``: its rows, then for each policy but ``never`` and per measure the
    paired ratio policy/``never`` over repeats (median, bootstrap 95 % interval, and in how many
    repeats the policy was lower)."""
    names = ("policy", "repeat", "executor_seconds", "q1_seconds", "q2_seconds", "app_seconds",
             "executors_started", "executors_removed", "executors_released", "evictions",
             "stage_resubmissions", "map_tasks_rerun", "engine_fallback", "answers_equal")
    rows = read_rows(path)
    text = columns(*names, digits=1)(path)
    by_repeat: dict[str, dict[str, dict[str, str]]] = {}
    for r in rows:
        by_repeat.setdefault(r["repeat"], {})[r["policy"]] = r
    for policy in dict.fromkeys(r["policy"] for r in rows if r["policy"] != "never"):
        text += _paired_ratios(policy, by_repeat)
    return text


def _paired_ratios(policy: str, by_repeat: dict[str, dict[str, dict[str, str]]]) -> str:
    """The table of ``policy``/``never`` ratios per measure ("" when no repeat has both)."""
    from trspark.stats import median_interval
    lines = []
    for measure in ("executor_seconds", "q1_seconds", "q2_seconds", "app_seconds"):
        ratios = [float(p[policy][measure]) / float(p["never"][measure]) for p in by_repeat.values()
                  if policy in p and "never" in p and float(p["never"][measure]) > 0]
        if ratios:
            lower = sum(x < 1 for x in ratios)
            lines.append(f"| {measure} | {median_interval(ratios).text()} | {lower} of {len(ratios)} |")
    if not lines:
        return ""
    return (f"\nPaired ratio `{policy}`/`never` per repeat:\n\n| measure | median [95 %] | repeats with `{policy}` lower |\n"
            "|---|---|---|\n" + "\n".join(lines) + "\n")


def render(report: Report) -> str:
    out = [f"# {report.title}", "", "Generated by `python -m jobs.reports` from the CSVs named below; "
           "do not edit by hand.", "", report.intro.strip(), ""]
    for src in report.sources:
        out += [f"## `{src.csv}`", "", "```bash", src.command.strip(), "```", "",
                f"- date: {src.date}", f"- code: {src.code}", f"- machine: {src.machine}", ""]
        if src.note:
            out += [src.note.strip(), ""]
        out.append(src.render(RESULTS / src.csv))
    return "\n".join(out).rstrip() + "\n"
