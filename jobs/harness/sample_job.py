"""A small SQL job with two shuffles and a join, for benchmarks that need Spark busy for a moment."""

from __future__ import annotations

from typing import Any


def two_shuffle_checksum(spark: Any, rows: int, partitions: int) -> int:
    """Sums per key and counts per key of ``rows`` generated rows, joined; a checksum of the answer.

    ``spark`` is a ``SparkSession`` (typed ``Any``: PySpark is not imported here).
    """
    facts = spark.range(0, rows, numPartitions=partitions).selectExpr("id % 5003 AS k", "id * 7 % 1000003 AS v")
    by_key = facts.groupBy("k").agg({"v": "sum"}).withColumnRenamed("sum(v)", "total")
    sizes = facts.groupBy("k").count()
    joined = by_key.join(sizes, "k").selectExpr("sum(total % 1000003 * count) AS checksum")
    return int(joined.collect()[0]["checksum"])
