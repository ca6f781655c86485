"""The answer oracle: equal answers pass, deliberately wrong ones are caught, with the stated rules."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal

import pytest

from jobs.tpcds.answers import Answer, DuckDBOracle, compare, normalise, values_equal
from jobs.tpcds.datagen import generate
from jobs.tpcds.queries import load

COLUMNS = ("d_year", "brand_id", "brand", "sum_agg")
ROWS = (
    (2000, 1001001, "amalgamalg #1", Decimal("1234.56")),
    (2000, 1001002, None, Decimal("99.10")),
    (2001, 2002001, "importo #2", Decimal("0.00")),
)


def answer(rows=ROWS, columns=COLUMNS) -> Answer:
    return Answer.of(columns, rows)


@pytest.mark.parametrize("ordered", [True, False])
def test_identical_answers_pass(ordered: bool) -> None:
    assert compare(answer(), answer(), ordered=ordered).ok


def test_engine_type_differences_are_normalised() -> None:
    # DuckDB returns double / hugeint where Spark returns decimal / bigint for the same expression.
    duck = answer([(float(a), b, c, float(d)) for a, b, c, d in ROWS])
    assert compare(duck, answer(), ordered=True).ok


def test_one_changed_value_is_caught() -> None:
    wrong = list(ROWS)
    wrong[1] = (2000, 1001002, None, Decimal("99.11"))
    verdict = compare(answer(), answer(wrong), ordered=True)
    assert not verdict.ok
    assert "row 1 column 3 (sum_agg)" in verdict.reason


def test_changed_value_is_caught_when_unordered_too() -> None:
    wrong = [*ROWS[:2], (2001, 2002001, "importo #3", Decimal("0.00"))]
    assert not compare(answer(), answer(wrong), ordered=False).ok


def test_one_dropped_row_is_caught() -> None:
    verdict = compare(answer(), answer(ROWS[:2]), ordered=False)
    assert not verdict.ok
    assert verdict.reason == "row count: expected 3, got 2"


def test_swapped_order_is_caught_only_where_the_query_orders() -> None:
    swapped = (ROWS[1], ROWS[0], ROWS[2])
    verdict = compare(answer(), answer(swapped), ordered=True)
    assert not verdict.ok
    assert verdict.reason.startswith("order: same rows, different order")
    assert compare(answer(), answer(swapped), ordered=False).ok


def test_rows_tied_on_the_order_keys_may_come_in_either_order() -> None:
    # q65 at SF 3: ORDER BY s_store_name, i_item_desc, and two items share a description.
    columns = ("s_store_name", "i_item_desc", "revenue")
    want = [("able", "blue", Decimal("3.50")), ("able", "blue", Decimal("16.14")), ("able", "red", Decimal("1.00"))]
    tied_swapped = [want[1], want[0], want[2]]
    keys = ("s_store_name", "i_item_desc")
    assert compare(Answer.of(columns, want), Answer.of(columns, tied_swapped), ordered=True, order_keys=keys).ok
    assert compare(Answer.of(columns, want), Answer.of(columns, tied_swapped), ordered=True, order_keys=(1, 2)).ok
    # Without the keys the same answer is an order failure, as before.
    assert compare(Answer.of(columns, want), Answer.of(columns, tied_swapped), ordered=True).reason.startswith("order")
    # Rows not tied keep their order: the last row moved to the front is caught ...
    moved = [want[2], want[0], want[1]]
    verdict = compare(Answer.of(columns, want), Answer.of(columns, moved), ordered=True, order_keys=keys)
    assert not verdict.ok and verdict.reason.startswith("order: row 0: sort key")
    # ... and so is a changed value inside a tied run.
    changed = [want[1], ("able", "blue", Decimal("3.51")), want[2]]
    verdict = compare(Answer.of(columns, want), Answer.of(columns, changed), ordered=True, order_keys=keys)
    assert not verdict.ok and "tied on the sort key" in verdict.reason
    # A key that is no output column leaves the strict rule in force.
    assert not compare(Answer.of(columns, want), Answer.of(columns, tied_swapped), ordered=True,
                       order_keys=("s_store_id",)).ok


def test_a_decimal_stands_for_the_values_it_rounds() -> None:
    # q7 at SF 3: Spark's avg rounded to 6 fractional digits, DuckDB's double.
    assert values_equal(0.19333333333333333, normalise(Decimal("0.193333")))
    assert not values_equal(0.19333333333333333, normalise(Decimal("0.193334")))  # one unit off
    assert not values_equal(0.19333333333333333, 0.193333)  # a plain float keeps the 1e-6 rule
    # Two decimals of one scale are compared exactly: a cent apart is a different answer.
    assert not values_equal(normalise(Decimal("0.01")), normalise(Decimal("0.02")))
    assert values_equal(normalise(Decimal("12.50")), normalise(Decimal("12.5")))


def test_null_equals_only_null() -> None:
    assert values_equal(None, None)
    assert not values_equal(None, 0.0)
    assert not values_equal("", None)
    wrong = [ROWS[0], (2000, 1001002, "", Decimal("99.10")), ROWS[2]]
    assert not compare(answer(), answer(wrong), ordered=True).ok


def test_float_tolerance_is_relative_1e6_with_absolute_floor() -> None:
    assert values_equal(1234.56, 1234.56 * (1 + 5e-7))
    assert not values_equal(1234.56, 1234.56 * (1 + 5e-6))
    assert values_equal(0.0, 5e-10)
    assert not values_equal(0.0, 1e-8)
    assert values_equal(float("nan"), float("nan"))


def test_column_rules() -> None:
    assert not compare(answer(), answer([r[:3] for r in ROWS], COLUMNS[:3]), ordered=True).ok
    renamed = compare(answer(), answer(columns=("d_year", "brand_id", "brand", "total")), ordered=True)
    assert renamed.reason == "column name: expected 'sum_agg', got 'total'"
    # Unaliased expressions are spelled differently by each engine: not compared.
    exprs = answer(columns=("d_year", "brand_id", "brand", "sum(ss_ext_sales_price)"))
    assert compare(answer(columns=("d_year", "brand_id", "brand", "sum(\"ss_ext_sales_price\")")), exprs,
                   ordered=True).ok
    assert compare(answer(columns=("D_YEAR", *COLUMNS[1:])), answer(), ordered=True).ok


def test_dates_compare_as_iso_text() -> None:
    a = Answer.of(["d"], [(dt.date(2000, 1, 2),)])
    assert compare(a, Answer.of(["d"], [(dt.date(2000, 1, 2),)]), ordered=False).ok
    assert not compare(a, Answer.of(["d"], [(dt.date(2000, 1, 3),)]), ordered=False).ok


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DuckDBOracle]:
    # SF 0.01 is generated in ~1 s into a private cache (the shared SF 0.1 cache is not touched).
    data = generate(0.01, tmp_path_factory.mktemp("tpcds"), show_progress=False)
    with DuckDBOracle(data) as o:
        yield o


def test_duckdb_answers_agree_with_themselves_and_catch_a_corrupted_copy(oracle: DuckDBOracle) -> None:
    query = load("q7")
    truth = oracle.answer(query)
    assert truth.rows, "q7 has a non-empty answer on dsdgen SF 0.01 data"
    assert oracle.check(query, truth).ok
    first = truth.rows[0]
    corrupted = (tuple(first[:-1]) + (float(first[-1]) * 1.001,), *truth.rows[1:])
    assert not oracle.check(query, Answer(truth.columns, corrupted)).ok


def test_duckdb_sorts_nulls_like_spark(oracle: DuckDBOracle) -> None:
    # q5 orders by channel, id ASC over a ROLLUP: Spark puts the NULL super-aggregate row first.
    rows = oracle.answer(load("q5")).rows
    assert rows[0][0] is None
    assert any(r[0] is not None for r in rows)
