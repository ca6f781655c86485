"""Query texts: found in the wheel, adapted as documented, ordering detected, lists parsed."""

from __future__ import annotations

import duckdb
import pytest

from jobs.demo import DEMO_WORKLOADS
from jobs.tpcds import chain
from jobs.tpcds.queries import (
    DEFAULT_QUERIES,
    EXCLUDED,
    QueryError,
    available,
    has_top_level_order_by,
    load,
    parse_list,
    top_level_order_keys,
)


def test_every_tpcds_query_and_variant_is_found() -> None:
    names = available()
    assert {f"q{i}" for i in range(1, 100)} - {"q14", "q23", "q24", "q39"} <= set(names)
    assert {"q14a", "q14b", "q23a", "q23b", "q39a", "q39b"} <= set(names)
    assert names.index("q2") < names.index("q10")  # natural order, not string order


def test_default_and_demo_queries_are_runnable() -> None:
    for name in DEFAULT_QUERIES + tuple(q for q in DEMO_WORKLOADS if not chain.is_chain(q)):
        assert name in available() and name not in EXCLUDED


def test_order_by_detection_ignores_subqueries_windows_and_strings() -> None:
    assert has_top_level_order_by("select a from t order by a limit 10")
    assert not has_top_level_order_by("select a from (select a from t order by a) x")
    assert not has_top_level_order_by("select rank() over (partition by b order by a) from t")
    assert not has_top_level_order_by("select 'order by' from t")
    assert load("q3").ordered and not load("q9").ordered


def test_order_keys_are_output_columns_or_none() -> None:
    assert top_level_order_keys("select a from t order by s.s_store_name, i_item_desc desc nulls last limit 100") == (
        "s_store_name", "i_item_desc")
    assert top_level_order_keys("select a, b from t order by 2, 1") == (2, 1)
    assert top_level_order_keys("select a from t order by a, f(b, c)") is None  # an expression key
    assert top_level_order_keys("select a, F(b,  c) as x from t order by a, f(b, c) desc") == ("a", 2)  # listed
    assert top_level_order_keys("select a, f(b, c) from t union select a, b from u order by a, f(b, c)") is None
    assert load("q79").order_keys == ("c_last_name", "c_first_name", 3, "profit")  # substr(s_city, 1, 30)
    assert top_level_order_keys("select a from (select a from t order by a) x") is None
    assert top_level_order_keys("select rank() over (order by a) r from t order by r") == ("r",)
    assert load("q65").order_keys == ("s_store_name", "i_item_desc")


def test_spark_text_is_one_statement_without_comments() -> None:
    text = load("q14").spark_sql
    assert not text.rstrip().endswith(";")
    assert "--" not in text


def test_adaptations_apply_to_the_right_copy() -> None:
    q30 = load("q30")
    assert "c_last_review_date_sk" in q30.spark_sql and "c_last_review_date_sk" in q30.duckdb_sql
    q16 = load("q16")
    assert "`" in q16.spark_sql and "`" not in q16.duckdb_sql
    q77 = load("q77")
    assert '"returns"' in q77.duckdb_sql and "store_returns" in q77.duckdb_sql
    assert q77.spark_sql.count("returns") == load("q77").duckdb_sql.count("returns")
    q54 = load("q54")  # Spark's CAST to INT truncates; the DuckDB copy must too
    assert "cast((revenue / 50) AS INT)" in q54.spark_sql and "cast((revenue / 50) AS INT)" not in q54.duckdb_sql
    segment = q54.duckdb_sql.partition(" AS segment")[0].rpartition("SELECT ")[2].strip()
    assert segment == "cast(trunc(revenue / 50) AS INT)"
    assert duckdb.sql(f"SELECT {segment} FROM (SELECT 535749.00::DECIMAL(17,2) AS revenue)").fetchone() == (10714,)


def test_parse_list() -> None:
    assert parse_list("default") == DEFAULT_QUERIES
    assert parse_list("q3, 19") == ("q3", "q19")
    with pytest.raises(QueryError, match="'q3, 19,q3' names a query twice"):
        parse_list("q3, 19,q3")
    with pytest.raises(QueryError, match="'q3,,q19' has an empty item"):
        parse_list("q3,,q19")
    assert len(parse_list("all")) == len(available()) - len(EXCLUDED)
    with pytest.raises(QueryError, match="unknown query 'q999'"):
        parse_list("q3,q999")
    assert parse_list("Q3,Chain4") == ("q3", "chain4") and parse_list("ALL") == parse_list("all")
    with pytest.raises(QueryError, match="unknown query 'ChainX'"):  # quoted as typed
        parse_list("q3,ChainX")
    for empty in (",", "", "  "):  # an empty --queries is a mistake, not the default set
        with pytest.raises(QueryError, match="empty list"):
            parse_list(empty)
    with pytest.raises(QueryError, match="unknown query"):
        load("q1000")
