"""A long-lineage job as one SQL text: iterative score propagation over TPC-DS's store sales.

The customer-item graph of ``store_sales`` (an edge per pair that bought, weighted by the count)
carries a score back and forth ``iterations`` times: each item takes the weighted mean of its
buyers' scores, then each customer the weighted mean of its items' scores,

.. math:: s_i^{(k)} = \\frac{\\sum_c w_{ci} s_c^{(k-1)}}{\\sum_c w_{ci}}, \\qquad
          s_c^{(k)} = \\frac{\\sum_i w_{ci} s_i^{(k)}}{\\sum_i w_{ci}},

starting from :math:`s_c^{(0)} = c \\bmod 97`. Every half-step is a join and an aggregation, so
the job is a chain of about ``2 x iterations`` shuffles, and the edge table's shuffle output is
re-read by every step. An executor killed late therefore takes map outputs that the running
stage and its ancestors need: without backups Spark recomputes back along the chain (the
recomputation TR-Spark's backups save), where a short query loses only capacity.

The answer is one row (customers, sum, min, max of the final scores), so row order plays no part
and DuckDB answers the same text as the oracle (doubles: within the oracle's tolerance).
"""

from __future__ import annotations

import re

PREFIX = "chain"
NAME = re.compile(rf"^{PREFIX}(\d+)$")
MAX_ITERATIONS = 30


def is_chain(name: str) -> bool:
    """Is ``name`` a chain job (``chain4``: four iterations)?"""
    match = NAME.match(name)
    return match is not None and 1 <= int(match.group(1)) <= MAX_ITERATIONS


def sql(iterations: int) -> str:
    """The chain's text (the same for Spark and DuckDB)."""
    if not 1 <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be 1..{MAX_ITERATIONS}, got {iterations}")
    steps = [
        "e AS (SELECT ss_customer_sk AS c, ss_item_sk AS i, CAST(COUNT(*) AS DOUBLE) AS w FROM store_sales"
        " WHERE ss_customer_sk IS NOT NULL AND ss_item_sk IS NOT NULL GROUP BY ss_customer_sk, ss_item_sk)",
        "c0 AS (SELECT c, CAST(c % 97 AS DOUBLE) AS s FROM e GROUP BY c)",
    ]
    for k in range(1, iterations + 1):
        steps.append(f"i{k} AS (SELECT e.i, SUM(e.w * c{k - 1}.s) / SUM(e.w) AS s"
                     f" FROM e JOIN c{k - 1} ON e.c = c{k - 1}.c GROUP BY e.i)")
        steps.append(f"c{k} AS (SELECT e.c, SUM(e.w * i{k}.s) / SUM(e.w) AS s"
                     f" FROM e JOIN i{k} ON e.i = i{k}.i GROUP BY e.c)")
    return ("WITH " + ",\n".join(steps) + f"\nSELECT COUNT(*) AS customers, SUM(s) AS total, MIN(s) AS low,"
            f" MAX(s) AS high FROM c{iterations}")


def text_of(name: str) -> str:
    """The text of the chain job ``name`` (e.g. ``chain4``)."""
    match = NAME.match(name)
    if match is None or not is_chain(name):
        raise ValueError(f"{name!r} is not a chain job; allowed: {PREFIX}1..{PREFIX}{MAX_ITERATIONS}")
    return sql(int(match.group(1)))
