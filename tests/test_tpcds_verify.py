"""``trspark bench verify``: verdicts per query, the QUERIES.md table, a wrong answer caught (live Spark)."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from jobs.tpcds import verify
from jobs.tpcds.answers import Answer
from jobs.tpcds.queries import load
from tests.test_tpcds_e2e import WRONG, WrongOnQ42
from trspark.cli import cli


def test_judge_names_each_kind_of_failure() -> None:
    q7 = load("q7")
    truth = Answer.of(["a", "b"], [("x", Decimal("1.00")), ("y", Decimal("2.00"))])
    assert verify.judge(q7, truth, truth, "", 1.0) == verify.QueryVerdict("q7", True, "2 rows equal to DuckDB's", 1.0)
    empty = Answer.of(["a"], [])
    assert verify.judge(q7, empty, empty, "", 1.0).reason == "empty answer (a weak check)"
    off = Answer.of(["a", "b"], [("x", Decimal("1.00")), ("y", Decimal("2.50"))])
    wrong = verify.judge(q7, truth, off, "", 1.0)
    assert not wrong.ok and wrong.reason.startswith("answer differs from DuckDB's: ")
    failed = verify.judge(q7, truth, None, "AnalysisException: no such column", 1.0)
    assert not failed.ok and failed.reason == "Spark cannot run it: AnalysisException: no such column"
    duck = verify.judge(q7, "DuckDB cannot run it: syntax error", None, "", float("nan"))
    assert not duck.ok and duck.reason == "DuckDB cannot run it: syntax error"


def test_table_is_rewritten_between_markers_and_the_rest_kept(tmp_path: Path) -> None:
    doc = tmp_path / "QUERIES.md"
    doc.write_text("# Queries\n\nProse stays.\n")
    settings = verify.VerifySettings(sf=0.01, queries=("q1", "q2"))
    first = [verify.QueryVerdict("q1", True, "3 rows equal to DuckDB's"),
             verify.QueryVerdict("q2", False, "Spark cannot run it: a|b")]
    verify.write_table(doc, first, settings, "trspark bench verify --sf 0.01 --queries q1,q2")
    text = doc.read_text()
    assert text.startswith("# Queries\n\nProse stays.\n\n## Verification")
    assert "| q1 | pass | 3 rows equal to DuckDB's |\n| q2 | fail | Spark cannot run it: a\\|b |" in text
    assert "1 of 2 queries pass." in text
    verify.write_table(doc, first[:1], replace(settings, queries=("q1",)), "trspark bench verify --sf 0.01 --queries q1")
    again = doc.read_text()
    assert again.count(verify.BEGIN) == 1 and again.count("## Verification") == 1
    assert "| q2 |" not in again and "1 of 1 queries pass." in again and again.startswith("# Queries\n\nProse stays.")
    verify.write_table(doc, [*first, verify.QueryVerdict("chain4", True, "1 row equal to DuckDB's")], settings, "x")
    assert verify.passed(doc) == ("q1", "chain4")
    with pytest.raises(ValueError, match="no verification table"):
        verify.passed(tmp_path / "none.md")


@pytest.mark.spark
def test_verify_on_spark_with_the_plugin_catches_a_wrong_answer(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verify, "DuckDBOracle", WrongOnQ42)
    doc, rows = tmp_path / "QUERIES.md", tmp_path / "verify.csv"
    args = ["bench", "verify", "--sf", "0.01", "--queries", f"q7,{WRONG}", "--executors", "2", "--memory", "1024",
            "--time-cap", "120", "--cache", str(tmp_path / "cache"), "--out", str(doc), "--csv", str(rows)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output  # one query fails
    assert "1 of 2 queries pass" in result.output
    text = doc.read_text()
    assert "| q7 | pass | " in text and "equal to DuckDB's |" in text
    assert f"| {WRONG} | fail | answer differs from DuckDB's: " in text
    assert "`trspark bench verify --sf 0.01 --queries q7,q42`" in text
    assert [(v.query, v.kind) for v in verify.read_csv(rows, 0.01)] == [("q7", "equal"), (WRONG, "differs")]
    doc.unlink()
    again = CliRunner().invoke(cli, args)  # every query has a verdict: nothing runs, the table comes from the CSV
    assert again.exit_code == 1 and "2 of 2 queries keep the verdict they have; 0 to run" in again.output
    assert "starting Spark" in result.output and "starting Spark" not in again.output
    assert f"| {WRONG} | fail | answer differs from DuckDB's: " in doc.read_text()
    assert len(rows.read_text().splitlines()) == 3  # the header and one row per query: none run twice


def test_verdicts_stream_to_a_csv_with_their_kind(tmp_path: Path) -> None:
    path = tmp_path / "verify.csv"
    verdicts = [verify.QueryVerdict("q1", True, "3 rows equal to DuckDB's", 2.5),
                verify.QueryVerdict("q2", False, "answer differs from DuckDB's: row 0 column 1", 1.0),
                verify.QueryVerdict("q3", False, "Spark cannot run it: a column is missing"),
                verify.QueryVerdict("q4", False, "Spark cannot run it: exceeded the time cap of 180 s", 180.0)]
    for v in verdicts:
        verify.append_csv(path, v, 1.0)
    assert [v.kind for v in verdicts] == ["equal", "differs", "unsupported", "timed out"]
    assert path.read_text().splitlines()[0] == "query,sf,verdict,kind,reason,spark_seconds"
    back = verify.read_csv(path, 1.0)
    assert [(v.query, v.ok, v.reason) for v in back] == [(v.query, v.ok, v.reason) for v in verdicts]
    assert back[0].seconds == 2.5 and back[2].seconds != back[2].seconds  # NaN: it did not run
    verify.append_csv(path, verify.QueryVerdict("q2", True, "1 row equal to DuckDB's", 1.1), 1.0)  # a re-run
    assert [v.ok for v in verify.read_csv(path, 1.0)] == [True, True, False, False]


def test_a_verdict_counts_only_at_the_scale_factor_it_was_reached_at(tmp_path: Path) -> None:
    path = tmp_path / "verify.csv"
    verify.append_csv(path, verify.QueryVerdict("q1", True, "3 rows equal to DuckDB's", 2.5), 1.0)
    verify.append_csv(path, verify.QueryVerdict("q1", False, "answer differs from DuckDB's: row 0", 9.0), 3.0)
    assert [(v.query, v.ok) for v in verify.read_csv(path, 1.0)] == [("q1", True)]
    assert [(v.query, v.ok) for v in verify.read_csv(path, 3.0)] == [("q1", False)]
    assert verify.pending(("q1",), verify.read_csv(path, 10.0)) == ("q1",)  # no verdict at SF 10: it runs


def test_a_csv_without_a_scale_factor_column_is_refused_before_any_work(tmp_path: Path) -> None:
    path = tmp_path / "old.csv"
    path.write_text("query,verdict,kind,reason,spark_seconds\nq1,pass,equal,3 rows equal to DuckDB's,2.50\n")
    result = CliRunner().invoke(cli, ["bench", "verify", "--sf", "3", "--queries", "q1", "--csv", str(path),
                                      "--out", str(tmp_path / "QUERIES.md")])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--csv'" in result.output and "no 'sf' column" in result.output
    assert "starting Spark" not in result.output and not (tmp_path / "QUERIES.md").exists()


def test_pending_skips_verdicts_and_runs_timeouts_last() -> None:
    earlier = [verify.QueryVerdict("q2", True, "1 row equal to DuckDB's", 1.0),
               verify.QueryVerdict("q3", False, "Spark cannot run it: exceeded the time cap of 600 s", 600.0),
               verify.QueryVerdict("q4", False, "answer differs from DuckDB's: row 0"),
               verify.QueryVerdict("q5", False, "DuckDB cannot run it: syntax error")]
    assert verify.pending(("q1", "q2", "q3", "q4", "q5", "q6"), earlier) == ("q1", "q6", "q3")
    assert verify.pending(("q2", "q4"), earlier) == ()
    assert verify.pending(("q2", "q3", "q4", "q5"), earlier, frozenset({"differs"})) == ("q4", "q3")  # an oracle fix
    rerun = verify.QueryVerdict("q3", True, "2 rows equal to DuckDB's", 700.0)
    assert verify.merged(("q3", "q1", "q2"), earlier, [rerun]) == [rerun, earlier[0]]


def test_a_cut_run_resumes_from_its_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each verdict reaches the CSV before the next query runs; the next run does only what is left."""
    ran: list[tuple[str, ...]] = []

    def run_until_cut(settings: verify.VerifySettings, hooks: verify.Hooks) -> list[verify.QueryVerdict]:
        ran.append(settings.queries)
        done = []
        for name in settings.queries:
            if name == "q3" and len(ran) == 1:
                raise KeyboardInterrupt  # the run is cut while q3 runs
            done.append(verify.QueryVerdict(name, True, "1 row equal to DuckDB's", 2.0))
            hooks.verdict(done[-1])
        return done

    monkeypatch.setattr(verify, "verify", run_until_cut)
    rows, said = tmp_path / "verify.csv", []
    settings = verify.VerifySettings(sf=0.01, queries=("q1", "q2", "q3", "q4"))
    with pytest.raises(KeyboardInterrupt):
        verify.resume(settings, rows, verify.progress(said.append, settings, rows))
    assert [v.query for v in verify.read_csv(rows, settings.sf)] == ["q1", "q2"]
    assert said[-1] == "[2/4] q2: equal, 2 s (1 row equal to DuckDB's)"
    said.clear()
    back = verify.resume(settings, rows, verify.progress(said.append, settings, rows))
    assert ran == [("q1", "q2", "q3", "q4"), ("q3", "q4")]
    assert [v.query for v in back] == ["q1", "q2", "q3", "q4"] and all(v.ok for v in back)
    assert said[0] == f"{rows}: 2 of 4 queries keep the verdict they have; 2 to run"
    assert [v.query for v in verify.read_csv(rows, settings.sf)] == ["q1", "q2", "q3", "q4"]
    assert verify.resume(settings, rows) == back and len(ran) == 2  # nothing left: Spark is not started


def test_report_counts_verdicts_and_names_the_queries_without_one(tmp_path: Path) -> None:
    from jobs.reports.render import verdicts
    from jobs.tpcds.queries import runnable

    path = tmp_path / "verify.csv"
    for v in [verify.QueryVerdict("q1", True, "3 rows equal to DuckDB's", 2.5),
              verify.QueryVerdict("q2", False, "Spark cannot run it: exceeded the time cap of 600 s", 600.0),
              verify.QueryVerdict("q3", False, "answer differs from DuckDB's: row 0 column 1", 1.0),
              verify.QueryVerdict("q4", False, "Spark cannot run it: exceeded the time cap of 600 s", 600.0),
              verify.QueryVerdict("q4", True, "1 row equal to DuckDB's", 700.0)]:  # q4 re-run with a longer cap
        verify.append_csv(path, v, 1.0)
    text = verdicts(path)
    total = len(runnable())
    assert text.startswith(f"**3 of {total} query texts have a verdict**: 2 equal, 1 differ, 0 unsupported. "
                           f"**{total - 3} have none yet**: 1 timed out, {total - 4} not run.")
    assert "| q4 | pass | equal | 1 row equal to DuckDB's | 700.00 |" in text and text.count("| q4 |") == 1
    assert "\nTimed out (1): q2.\n" in text and "\nNot run (" in text and "q5, " in text
