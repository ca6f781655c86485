"""``trspark bench verify``: every query text on Spark with the plugin, each answer against DuckDB's.

One session in mode ``tr`` on ``local-trcluster`` (the plugin's scheduler and executor plugin,
no kills) runs each query once, after DuckDB has answered all of them; :func:`compare` (the
oracle's rules) gives the verdict. A query passes when Spark's answer equals DuckDB's; it fails
when either engine cannot run it, Spark answers differently, or it exceeds the time cap. An empty
answer passes but is named: it checks little. The verdicts become a Markdown table in
``QUERIES.md`` (:func:`write_table`), between markers, so the rest of the file stays as written.

A run over every text at SF 1 takes hours, so :func:`resume` appends each verdict to a CSV as
soon as it is known and, given a CSV that already has verdicts, runs only the queries without one:
a cut run keeps what finished, and the same command continues it.

The queries that pass (:func:`passed`) are what ``--queries verified`` selects, e.g. for a kill
sweep: ``trspark bench tpcds --queries verified --policies never,tr --stable-runs never`` runs
them under executor kills, and ``trspark bench targets`` totals kills, wrong answers and failed
jobs per policy.
"""

from __future__ import annotations

import csv
import datetime
import math
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from jobs.tpcds import datagen, metrics, session
from jobs.tpcds.answers import Answer, DuckDBOracle, compare
from jobs.tpcds.queries import Query, QueryError, load
from jobs.tpcds.query_run import execute, first_line

BEGIN = "<!-- verify:begin (written by `trspark bench verify`) -->"
END = "<!-- verify:end -->"


@dataclass(frozen=True)
class QueryVerdict:
    """One query's verdict: ``ok`` when Spark's answer equals DuckDB's; ``reason`` says why not (or what)."""

    query: str
    ok: bool
    reason: str
    seconds: float = float("nan")
    """Spark's wall-clock time for the query (NaN when it did not run)."""

    @property
    def kind(self) -> str:
        """``equal``, ``differs`` (both engines answered, differently), ``timed out`` (Spark had not
        answered within the time cap: no verdict on the answer) or ``unsupported`` (an engine could not run it)."""
        if self.ok:
            return "equal"
        if self.reason.startswith("not run"):
            return "not run"
        if self.reason.startswith("answer differs"):
            return "differs"
        return "timed out" if "exceeded the time cap" in self.reason else "unsupported"


@dataclass(frozen=True)
class VerifySettings:
    sf: float
    queries: tuple[str, ...]
    executors: int = 3
    cores: int = 1
    memory_mb: int = 2048
    time_cap: float = 600.0
    cache: Path | None = None
    rerun: frozenset[str] = frozenset()
    """Verdict kinds (``differs``, ``unsupported``, ``equal``) that :func:`resume` runs again, e.g. after
    a fix of the oracle; a query without a verdict (not run, timed out) always runs."""


@dataclass
class Hooks:
    """Progress callbacks: a phase with its number of steps, then one call per finished step."""

    phase: Callable[[str, int], None] = lambda label, total: None
    done: Callable[[str], None] = lambda name: None
    verdict: Callable[[QueryVerdict], None] = lambda verdict: None
    """Called with each verdict as soon as it is known (a CSV then survives an interrupted run)."""


def duckdb_answers(data: Path, names: tuple[str, ...], hooks: Hooks) -> tuple[dict[str, Query], dict[str, Answer | str]]:
    """Load every query and DuckDB's answer to it; a query DuckDB cannot answer maps to the reason."""
    queries: dict[str, Query] = {}
    answers: dict[str, Answer | str] = {}
    hooks.phase("DuckDB answers", len(names))
    with DuckDBOracle(data) as oracle:
        for name in names:
            try:
                queries[name] = load(name)
                answers[name] = oracle.answer(queries[name])
            except QueryError as exc:
                answers[name] = f"query text: {exc}"
            except Exception as exc:  # DuckDB's parser, binder or executor
                answers[name] = f"DuckDB cannot run it: {first_line(exc)}"
            hooks.done(name)
    return queries, answers


def judge(query: Query, expected: Answer | str, actual: Answer | None, error: str, seconds: float) -> QueryVerdict:
    """The verdict on one query from DuckDB's answer (or its failure) and Spark's (or its error)."""
    if isinstance(expected, str):
        return QueryVerdict(query.name, False, expected, seconds)
    if actual is None:
        return QueryVerdict(query.name, False, f"Spark cannot run it: {error or 'no answer'}", seconds)
    verdict = compare(expected, actual, ordered=query.ordered, order_keys=query.order_keys)
    if not verdict.ok:
        return QueryVerdict(query.name, False, f"answer differs from DuckDB's: {verdict.reason}", seconds)
    rows = len(expected.rows)
    what = "empty answer (a weak check)" if rows == 0 else f"{rows} row{'s' * (rows != 1)} equal to DuckDB's"
    return QueryVerdict(query.name, True, what, seconds)


def verify(settings: VerifySettings, hooks: Hooks | None = None) -> list[QueryVerdict]:
    """Run every query of ``settings`` on Spark (mode ``tr``, no kills) and judge it against DuckDB."""
    hooks = hooks or Hooks()
    hooks.phase("TPC-DS data", 1)
    data = datagen.generate(settings.sf, settings.cache, show_progress=False)
    hooks.done("data")
    queries, answers = duckdb_answers(data, settings.queries, hooks)
    spec = session.ClusterSpec(executors=settings.executors, cores=settings.cores, memory_mb=settings.memory_mb)
    hooks.phase(f"starting Spark ({spec.master_for('tr')})", 1)
    spark, work_dir = session.start(spec, "tr", app_name="trspark-verify")
    verdicts = []
    try:
        session.register_tables(spark, data)
        hooks.done("spark")
        hooks.phase("Spark with the plugin (tr)", len(settings.queries))
        for name in settings.queries:
            expected = answers[name]
            if name not in queries or isinstance(expected, str):
                verdict = QueryVerdict(name, False, str(expected))
            else:
                outcome = execute(spark, queries[name], f"verify-{name}", settings.time_cap)
                verdict = judge(queries[name], expected, outcome.answer, outcome.error, outcome.seconds)
                if metrics.plugin_fell_back(spark.sparkContext):
                    # Answers are still Spark's, but the plugin ran as always-checkpoint, not as tr.
                    verdict = replace(verdict, reason=verdict.reason + "; the plugin had fallen back to always")
            verdicts.append(verdict)
            hooks.verdict(verdict)
            hooks.done(name)
    finally:
        session.stop(spark, work_dir)
    return verdicts


def resume(settings: VerifySettings, csv_path: Path | None, hooks: Hooks | None = None) -> list[QueryVerdict]:
    """Run the queries of ``settings`` that ``csv_path`` has no verdict for, appending each verdict to it.

    Returns the latest verdict of every query of ``settings`` that has one, earlier and new. Without
    a CSV every query runs; with one, a run that is cut keeps every verdict written so far, and the
    same command continues where it stopped (:func:`pending`).
    """
    hooks = hooks or Hooks()
    earlier = read_csv(csv_path, settings.sf) if csv_path is not None and csv_path.exists() else []
    todo = pending(settings.queries, earlier, settings.rerun)
    if not todo:
        return merged(settings.queries, earlier, [])
    shown = hooks.verdict

    def record(verdict: QueryVerdict) -> None:
        if csv_path is not None:
            append_csv(csv_path, verdict, settings.sf)
        shown(verdict)

    new = verify(replace(settings, queries=todo), replace(hooks, verdict=record))
    return merged(settings.queries, earlier, new)


def progress(say: Callable[[str], None], settings: VerifySettings, csv_path: Path | None) -> Hooks:
    """Progress of :func:`resume` through ``say``: each phase, every 20th step, one line per verdict."""
    earlier = read_csv(csv_path, settings.sf) if csv_path is not None and csv_path.exists() else []
    todo = len(pending(settings.queries, earlier, settings.rerun))
    if csv_path is not None:
        say(f"{csv_path}: {len(settings.queries) - todo} of {len(settings.queries)} queries keep the verdict "
            f"they have; {todo} to run")
    steps = {"done": 0, "total": 0, "verdicts": 0}

    def phase(label: str, total: int) -> None:
        steps.update(done=0, total=total)
        say(f"{label} ({total} step{'s' * (total != 1)})")

    def done(name: str) -> None:
        steps["done"] += 1
        if steps["total"] > 1 and steps["done"] % 20 == 0:
            say(f"  {steps['done']}/{steps['total']} ({name})")

    def verdict(v: QueryVerdict) -> None:
        steps["verdicts"] += 1
        seconds = "" if math.isnan(v.seconds) else f", {v.seconds:.0f} s"
        say(f"[{steps['verdicts']}/{todo}] {v.query}: {v.kind}{seconds} ({v.reason})")

    return Hooks(phase=phase, done=done, verdict=verdict)


CSV_FIELDS = ("query", "sf", "verdict", "kind", "reason", "spark_seconds")


def append_csv(path: Path, verdict: QueryVerdict, sf: float) -> None:
    """Append one verdict at scale factor ``sf`` to ``path`` (:data:`CSV_FIELDS`; the header first)."""
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="") as fh:
        out = csv.writer(fh)
        if new:
            out.writerow(CSV_FIELDS)
        seconds = "" if math.isnan(verdict.seconds) else f"{verdict.seconds:.2f}"
        out.writerow([verdict.query, f"{sf:g}", "pass" if verdict.ok else "fail", verdict.kind, verdict.reason, seconds])


def read_csv(path: Path, sf: float) -> list[QueryVerdict]:
    """The verdicts at scale factor ``sf`` that :func:`append_csv` wrote, in file order (a later row of a
    query replaces an earlier one).

    A verdict at one scale factor says nothing of another, so their rows are left out. A row cut
    short (a run killed while it wrote it) has no verdict: that query runs again. ValueError when
    the file has no ``sf`` column: its verdicts cannot be matched to a scale factor.
    """
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames is not None and "sf" not in reader.fieldnames:
            raise ValueError(f"{path} has no 'sf' column, so its verdicts cannot be matched to a scale factor; "
                             "give --csv a new file (or add the column)")
        rows = {r["query"]: QueryVerdict(r["query"], r["verdict"] == "pass", r["reason"],
                                         float(r["spark_seconds"]) if r["spark_seconds"] else math.nan)
                for r in reader if None not in (r.get(field) for field in CSV_FIELDS) and _same_sf(r["sf"], sf)}
    return list(rows.values())


def _same_sf(text: str, sf: float) -> bool:
    try:
        return float(text) == float(f"{sf:g}")
    except ValueError:  # a damaged cell: no verdict, as for a row cut short
        return False


def pending(names: tuple[str, ...], earlier: list[QueryVerdict], rerun: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The queries of ``names`` still without a verdict in ``earlier`` (a CSV of a cut run), or with
    one of a kind in ``rerun``.

    Those never run (or to run again) come first, then those that timed out (no verdict on their
    answer, and the slowest, so a resumed run spends its time on new verdicts first); ``names``'
    order within each.
    """
    kinds = {v.query: v.kind for v in earlier}
    fresh = tuple(n for n in names if kinds.get(n, "not run") in rerun | {"not run"})
    return fresh + tuple(n for n in names if kinds.get(n) == "timed out")


def merged(names: tuple[str, ...], earlier: list[QueryVerdict], new: list[QueryVerdict]) -> list[QueryVerdict]:
    """The latest verdict of each query of ``names`` that has one, in ``names``' order."""
    latest = {v.query: v for v in [*earlier, *new]}
    return [latest[n] for n in names if n in latest]


def table(verdicts: list[QueryVerdict]) -> str:
    """``| qN | pass/fail | reason |``, one row per query, in the order given."""
    lines = ["| query | verdict | reason |", "|---|---|---|"]
    for v in verdicts:
        reason = v.reason.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {v.query} | {'pass' if v.ok else 'fail'} | {reason} |")
    return "\n".join(lines)


def code_version() -> str:
    """``git describe`` of the tree this runs from (``unknown`` outside a git checkout)."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                             check=True, cwd=Path(__file__).parent, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def write_table(path: Path, verdicts: list[QueryVerdict], settings: VerifySettings, command: str) -> None:
    """Put the verdict table into ``path`` between the markers (appended as a section the first time).

    The summary counts the queries of ``settings`` that have no verdict yet (not run, or timed out).
    """
    passed = sum(v.ok for v in verdicts)
    judged = {v.query for v in verdicts if v.kind not in ("timed out", "not run")}
    missing = sum(q not in judged for q in settings.queries)
    section = "\n".join([
        BEGIN,
        f"Command: `{command}` -- {datetime.date.today().isoformat()}, code {code_version()}, Spark in mode "
        f"`tr` on `local-trcluster[{settings.executors},{settings.cores},{settings.memory_mb}]`, no kills, "
        f"SF {settings.sf:g}. {passed} of {len(verdicts)} queries pass"
        + (f"; {missing} of {len(settings.queries)} have no verdict yet (not run or timed out)." if missing else "."),
        "",
        table(verdicts),
        END,
    ])
    text = path.read_text() if path.exists() else ""
    if BEGIN in text and END in text:
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END)
        text = head + section + tail
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + "## Verification: Spark with the plugin vs DuckDB\n\n" + section + "\n"
    path.write_text(text)


def passed(path: Path) -> tuple[str, ...]:
    """The queries whose verdict in ``path``'s table is ``pass`` (ValueError when it has no table)."""
    text = Path(path).read_text() if Path(path).exists() else ""
    if BEGIN not in text or END not in text:
        raise ValueError(f"{path} has no verification table; run `trspark bench verify` first")
    body = text.partition(BEGIN)[2].partition(END)[0]
    names = []
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[1] == "pass":
            names.append(cells[0])
    if not names:
        raise ValueError(f"no query passed in {path}'s verification table")
    return tuple(names)
