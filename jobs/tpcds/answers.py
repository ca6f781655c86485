"""Correctness oracle: a query's Spark answer must equal DuckDB's answer on the same Parquet files.

DuckDB is an independent engine (its own parser, optimiser, decimal arithmetic and aggregation), so
agreement on the same input is strong evidence that Spark's answer -- in particular one computed
while executors were being killed and map outputs recomputed or restored from backups -- is right.

Comparison rules (:func:`compare`)
----------------------------------
* **Columns**: the counts must be equal. Names are compared (case-insensitively) only where both
  engines report a plain identifier (an alias or a column); names of unaliased expressions such as
  ``sum(x)`` or ``CAST(...)`` are engine-specific spellings and are ignored.
* **Rows**: if the outermost query has an ``ORDER BY`` the answers are compared as ordered lists
  (row *i* with row *i*); otherwise as multisets (both sides sorted by a normalised key first).
  Rows tied on the sort key may legitimately come in either order: when the ORDER BY keys are
  output columns (``Query.order_keys``; an expression key counts when the select list outputs the
  same expression, e.g. q79's ``substr(s_city, 1, 30)``), the answers agree if the sequence of key values is the
  same and each run of tied rows is the same multiset (q65 at SF 3: two items with one
  ``i_item_desc``). Otherwise, or when a tied run differs, ordered rows that differ while the
  multisets agree fail with an ``order`` verdict rather than a hidden one.
* **NULL order**: the oracle's DuckDB sorts NULLs like Spark (first when ascending, last when
  descending; DuckDB's own default is last for both).
* **Values**: ``Decimal`` and integers are compared as floats (Spark returns ``Decimal`` or
  ``bigint`` where DuckDB returns ``double``/``hugeint`` for the same expression); dates and
  timestamps as ISO strings; ``NULL`` equals ``NULL`` and nothing else; NaN equals NaN.
* **Float tolerance**: ``|a - b| <= max(rel * max(|a|, |b|), abs, half a unit of a decimal's last
  digit)`` with rel = 1e-6, abs = 1e-9. The engines add floating values in different orders
  (partition-dependent partial aggregates; relative error ~1e-15 * number of terms, far below
  1e-6). Spark rounds decimal division and ``avg`` to the result type's scale (6 fractional
  digits for TPC-DS money columns) where DuckDB returns a double: a ``Decimal`` with ``s``
  fractional digits stands for every value within ``0.5 * 10**-s`` of it (q7's ``avg`` 0.193333
  against DuckDB's 0.19333333333333333 at SF 3). Two decimals of one scale differ by a whole unit
  or not at all, so exact answers are still compared exactly; a value changed in its 6th
  significant digit (what a wrong answer looks like) is still caught.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from jobs.tpcds.datagen import TABLES, connect
from jobs.tpcds.queries import Query

REL_TOL = 1e-6
ABS_TOL = 1e-9
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Answer:
    """A query result: column names and rows (tuples of Python values) in the engine's order."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    @classmethod
    def of(cls, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Answer:
        return cls(tuple(columns), tuple(tuple(row) for row in rows))


@dataclass(frozen=True)
class Verdict:
    """Outcome of a comparison: ``ok``, and for a mismatch a one-line ``reason``."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


class Rounded(float):
    """A ``Decimal`` as a float that remembers half a unit of its last digit (``half_unit``): the
    engine rounded the exact value to it, so any value that close is the same answer."""

    half_unit: float

    def __new__(cls, value: Decimal) -> Rounded:
        number = super().__new__(cls, value)
        exponent = value.as_tuple().exponent
        # Engines return a fixed scale >= 0; an exponent above 0 (1E+3) still means whole units.
        number.half_unit = 0.5 * 10.0 ** min(exponent, 0) if isinstance(exponent, int) else 0.0
        return number


def normalise(value: Any) -> Any:
    """Map a result value to a comparable one (numbers -> float, dates -> ISO text, NULL -> None)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, Decimal) and value.is_finite():
        return Rounded(value)
    if isinstance(value, (int, Decimal, float)):
        return float(value)
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    return str(value)


def values_equal(a: Any, b: Any, *, rel: float = REL_TOL, abs_: float = ABS_TOL) -> bool:
    """Equality of two normalised values with the float tolerance above; NULL == NULL, NaN == NaN."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        # Two decimals of one scale are equal or a whole unit apart: half a unit keeps them exact.
        rounding = max(getattr(a, "half_unit", 0.0), getattr(b, "half_unit", 0.0))
        return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_, rounding)
    return type(a) is type(b) and a == b


def _sort_key(row: tuple[Any, ...]) -> tuple[tuple[int, Any], ...]:
    # NULLs first, then by type so mixed columns never compare str with float; floats are rounded to
    # 6 significant digits so values equal within the tolerance sort to the same place.
    key: list[tuple[int, Any]] = []
    for value in row:
        if value is None:
            key.append((0, 0))
        elif isinstance(value, float):
            key.append((1, 0.0 if math.isnan(value) else float(f"{value:.6g}")))
        else:
            key.append((2, str(value)))
    return tuple(key)


def _first_difference(expected: Sequence[tuple[Any, ...]], actual: Sequence[tuple[Any, ...]],
                      columns: Sequence[str]) -> str | None:
    for i, (want, got) in enumerate(zip(expected, actual, strict=True)):
        for j, (a, b) in enumerate(zip(want, got, strict=True)):
            if not values_equal(a, b):
                return f"row {i} column {j} ({columns[j]}): expected {a!r}, got {b!r}"
    return None


def _key_columns(columns: Sequence[str], keys: Sequence[str | int] | None) -> list[int] | None:
    """Indexes of the ORDER BY keys among ``columns`` (names case-insensitive, ordinals 1-based)."""
    if not keys:
        return None
    names = [c.lower() for c in columns]
    indexes = []
    for key in keys:
        if isinstance(key, int):
            if not 1 <= key <= len(columns):
                return None
            indexes.append(key - 1)
        elif names.count(key) == 1:
            indexes.append(names.index(key))
        else:
            return None  # not an output column (or an ambiguous one): ties cannot be told
    return indexes


def _tied_runs_differ(want_rows: list[tuple[Any, ...]], got_rows: list[tuple[Any, ...]], key: list[int],
                      columns: Sequence[str]) -> str | None:
    """Where two ordered answers differ by more than the order of rows tied on ``key``, else None."""
    def key_of(row: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(row[i] for i in key)

    start = 0
    while start < len(want_rows):
        end = start + 1
        while end < len(want_rows) and all(map(values_equal, key_of(want_rows[end]), key_of(want_rows[start]))):
            end += 1
        want_run, got_run = want_rows[start:end], got_rows[start:end]
        for i, got in enumerate(got_run, start):
            if not all(map(values_equal, key_of(want_rows[start]), key_of(got))):
                return f"row {i}: sort key {key_of(got)!r}, expected {key_of(want_rows[start])!r}"
        difference = _first_difference(sorted(want_run, key=_sort_key), sorted(got_run, key=_sort_key), columns)
        if difference is not None:
            return f"rows {start}-{end - 1} (tied on the sort key), sorted {difference}"
        start = end
    return None


def compare(expected: Answer, actual: Answer, *, ordered: bool,
            order_keys: Sequence[str | int] | None = None) -> Verdict:
    """Compare ``actual`` (e.g. Spark's) with ``expected`` (e.g. DuckDB's) by the rules above.

    ``order_keys``: the outermost ORDER BY's keys as output column names or 1-based ordinals
    (``Query.order_keys``); with them, rows tied on the key may come in any order.
    """
    if len(expected.columns) != len(actual.columns):
        return Verdict(False, f"column count: expected {len(expected.columns)}, got {len(actual.columns)}")
    for want, got in zip(expected.columns, actual.columns, strict=True):
        if _IDENTIFIER.fullmatch(want) and _IDENTIFIER.fullmatch(got) and want.lower() != got.lower():
            return Verdict(False, f"column name: expected {want!r}, got {got!r}")
    if len(expected.rows) != len(actual.rows):
        return Verdict(False, f"row count: expected {len(expected.rows)}, got {len(actual.rows)}")
    want_rows = [tuple(normalise(v) for v in row) for row in expected.rows]
    got_rows = [tuple(normalise(v) for v in row) for row in actual.rows]
    if ordered:
        difference = _first_difference(want_rows, got_rows, expected.columns)
        if difference is None:
            return Verdict(True)
        if (key := _key_columns(expected.columns, order_keys)) is not None:
            tied = _tied_runs_differ(want_rows, got_rows, key, expected.columns)
            return Verdict(True) if tied is None else Verdict(False, f"order: {tied}")
        if _first_difference(sorted(want_rows, key=_sort_key), sorted(got_rows, key=_sort_key),
                             expected.columns) is None:
            return Verdict(False, f"order: same rows, different order ({difference})")
        return Verdict(False, difference)
    difference = _first_difference(sorted(want_rows, key=_sort_key), sorted(got_rows, key=_sort_key),
                                   expected.columns)
    return Verdict(True) if difference is None else Verdict(False, f"as multisets, sorted {difference}")


class DuckDBOracle:
    """Answers queries with DuckDB over the Parquet files of one scale factor (memoised per query).

    Parameters
    ----------
    data
        Directory holding ``<table>.parquet`` for every TPC-DS table.
    threads
        DuckDB worker threads (the machine is shared; answers take well under a second at SF 1).
    """

    def __init__(self, data: Path, *, threads: int = 2) -> None:
        self.data = Path(data)
        self._con = connect()
        self._con.execute(f"SET threads = {int(threads)}")
        # Spark sorts NULLs first in ascending and last in descending order; DuckDB's default is
        # NULLS LAST for both. Make DuckDB order like Spark so ordered answers are comparable.
        self._con.execute("SET default_null_order = 'nulls_first_on_asc_last_on_desc'")
        for table in TABLES:
            path = str(self.data / f"{table}.parquet").replace("'", "''")
            self._con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{path}')")
        self._answers: dict[str, Answer] = {}

    def answer(self, query: Query) -> Answer:
        if query.name not in self._answers:
            cursor = self._con.execute(query.duckdb_sql)
            columns = [d[0] for d in cursor.description]
            self._answers[query.name] = Answer.of(columns, cursor.fetchall())
        return self._answers[query.name]

    def check(self, query: Query, actual: Answer) -> Verdict:
        """Compare ``actual`` with DuckDB's answer to ``query``."""
        return compare(self.answer(query), actual, ordered=query.ordered, order_keys=query.order_keys)

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> DuckDBOracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
