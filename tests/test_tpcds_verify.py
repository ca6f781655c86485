"""``trspark bench verify``: verdicts per query, the QUERIES.md table, a wrong answer caught (live Spark)."""

from __future__ import annotations

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
    verify.write_table(doc, first[:1], settings, "trspark bench verify --sf 0.01 --queries q1")
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
    doc = tmp_path / "QUERIES.md"
    result = CliRunner().invoke(cli, ["bench", "verify", "--sf", "0.01", "--queries", f"q7,{WRONG}",
                                      "--executors", "2", "--memory", "1024", "--time-cap", "120",
                                      "--cache", str(tmp_path / "cache"), "--out", str(doc)])
    assert result.exit_code == 1, result.output  # one query fails
    assert "1 of 2 queries pass" in result.output
    text = doc.read_text()
    assert "| q7 | pass | " in text and "equal to DuckDB's |" in text
    assert f"| {WRONG} | fail | answer differs from DuckDB's: " in text
    assert "`trspark bench verify --sf 0.01 --queries q7,q42`" in text


def test_verdicts_stream_to_a_csv_with_their_kind(tmp_path: Path) -> None:
    path = tmp_path / "verify.csv"
    verdicts = [verify.QueryVerdict("q1", True, "3 rows equal to DuckDB's", 2.5),
                verify.QueryVerdict("q2", False, "answer differs from DuckDB's: row 0 column 1", 1.0),
                verify.QueryVerdict("q3", False, "Spark cannot run it: a column is missing"),
                verify.QueryVerdict("q4", False, "Spark cannot run it: exceeded the time cap of 180 s", 180.0)]
    for v in verdicts:
        verify.append_csv(path, v)
    assert [v.kind for v in verdicts] == ["equal", "differs", "unsupported", "timed out"]
    assert path.read_text().splitlines()[0] == "query,verdict,kind,reason,spark_seconds"
    back = verify.read_csv(path)
    assert [(v.query, v.ok, v.reason) for v in back] == [(v.query, v.ok, v.reason) for v in verdicts]
    assert back[0].seconds == 2.5 and back[2].seconds != back[2].seconds  # NaN: it did not run
    verify.append_csv(path, verify.QueryVerdict("q2", True, "1 row equal to DuckDB's", 1.1))  # a re-run
    assert [v.ok for v in verify.read_csv(path)] == [True, True, False, False]
