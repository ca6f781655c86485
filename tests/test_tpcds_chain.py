"""The long-lineage chain job: its names, its shape (a join and an aggregation per half-step), DuckDB's answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.tpcds import chain
from jobs.tpcds.answers import DuckDBOracle
from jobs.tpcds.datagen import generate
from jobs.tpcds.queries import QueryError, load, parse_list


def test_chain_names_parse_next_to_query_names() -> None:
    assert parse_list("q3,chain4,19") == ("q3", "chain4", "q19")
    for bad in ("chain0", f"chain{chain.MAX_ITERATIONS + 1}", "chainx"):
        with pytest.raises(QueryError, match="unknown query"):
            parse_list(bad)
    with pytest.raises(ValueError, match="iterations must be 1..30"):
        chain.sql(0)


def test_each_iteration_adds_two_joins_and_aggregations() -> None:
    query = load("chain3")
    assert query.spark_sql == query.duckdb_sql == chain.sql(3)
    assert query.spark_sql.count(" JOIN ") == 6 and query.spark_sql.count("GROUP BY") == 2 + 6
    assert not query.ordered  # one row: no order to compare


def test_duckdb_answers_one_row_whose_scores_stay_within_the_seed_range(tmp_path_factory: pytest.TempPathFactory) -> None:
    data: Path = generate(0.01, tmp_path_factory.mktemp("tpcds"), show_progress=False)
    with DuckDBOracle(data) as oracle:
        one, five = oracle.answer(load("chain1")), oracle.answer(load("chain5"))
    assert one.columns == ("customers", "total", "low", "high")
    customers, total, low, high = five.rows[0]
    assert len(five.rows) == 1 and customers == one.rows[0][0] > 0
    # Weighted means of seeds in 0..96 stay in that range and contract with every iteration.
    assert 0 <= low <= high <= 96 and high - low <= one.rows[0][3] - one.rows[0][2]
    assert low * customers <= total <= high * customers
