"""trspark: lineage-aware checkpointing and scheduling for Apache Spark on transient executors.

PySpark users: ``trspark.configure(SparkSession.builder)`` or ``trspark.spark_conf(**options)``
add the plugin jar and the ``spark.plugins`` setting (see the README).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def spark_conf(**options: Any) -> dict[str, str]:
    """Spark settings that enable trspark, with ``options`` as ``spark.trspark.*`` values."""
    from trspark.live.sparkconf import spark_conf as _spark_conf

    return _spark_conf(**options)


def configure(builder: Any, **options: Any) -> Any:
    """Apply :func:`spark_conf` to a ``SparkSession.Builder`` (or ``SparkConf``) and return it."""
    from trspark.live.sparkconf import configure as _configure

    return _configure(builder, **options)


def status(spark: Any) -> dict[str, int]:
    """The running application's trspark counters and gauges (the driver's metrics) as a dict."""
    from trspark.reporting.status import status as _status

    return _status(spark)


def report(path: str, **options: Any) -> Any:
    """Summarise a Spark event log with trspark events (see :func:`trspark.reporting.summarize`)."""
    from trspark.reporting import summarize

    return summarize(path, **options)


__all__ = ["__version__", "configure", "report", "spark_conf", "status"]
