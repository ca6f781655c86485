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
  When ordered rows differ but the multisets agree, the verdict says so: rows tied on the sort key
  may legitimately come in either order, which is reported as ``order`` rather than hidden.
* **NULL order**: the oracle's DuckDB sorts NULLs like Spark (first when ascending, last when
  descending; DuckDB's own default is last for both).
* **Values**: ``Decimal`` and integers are compared as floats (Spark returns ``Decimal`` or
  ``bigint`` where DuckDB returns ``double``/``hugeint`` for the same expression); dates and
  timestamps as ISO strings; ``NULL`` equals ``NULL`` and nothing else; NaN equals NaN.
* **Float tolerance**: ``|a - b| <= max(rel * max(|a|, |b|), abs)`` with rel = 1e-6, abs = 1e-9.
  The engines add floating values in different orders (partition-dependent partial aggregates;
  relative error ~1e-15 * number of terms, far below 1e-6), and Spark rounds decimal division and
  ``avg`` to the result type's scale (6 fractional digits for TPC-DS money columns) where DuckDB
  returns a double: that differs by <= 5e-7 absolute, i.e. <= 1e-6 relative for |values| >= 0.5.
  A value changed in its 6th significant digit (what a wrong answer looks like) is still caught.
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


def normalise(value: Any) -> Any:
    """Map a result value to a comparable one (numbers -> float, dates -> ISO text, NULL -> None)."""
    if value is None or isinstance(value, (bool, str)):
        return value
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
        return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_)
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


def compare(expected: Answer, actual: Answer, *, ordered: bool) -> Verdict:
    """Compare ``actual`` (e.g. Spark's) with ``expected`` (e.g. DuckDB's) by the rules above."""
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
        return compare(self.answer(query), actual, ordered=query.ordered)

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> DuckDBOracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
