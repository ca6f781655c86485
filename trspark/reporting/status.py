"""The running application's trspark counters, read from the driver over py4j."""

from __future__ import annotations

import json
from typing import Any


def status(spark: Any) -> dict[str, int]:
    """Every trspark metric of ``spark``'s running application, by its metric name.

    The same numbers as the driver's ``trspark`` metrics source and its UI tab: counters since
    the application started (``engine_decisions`` among them), and the ``engine_fallback`` /
    ``safety_belt`` gauges (1 = on).
    Empty when the trspark plugin is not active in this application.
    """
    from py4j.java_gateway import JavaClass

    context = getattr(spark, "sparkContext", spark)
    if not hasattr(context, "_jvm"):
        raise TypeError(f"trspark.status takes a SparkSession or a SparkContext, got {type(spark).__name__}")
    jvm = context._jvm  # noqa: SLF001 - py4j is the only way into the driver's JVM from PySpark
    if jvm is None:
        return {}  # the context was stopped
    # Without the plugin's jar py4j resolves the name to an empty package, not a class.
    holder = jvm.org.apache.spark.trspark.TRMetricsStatus
    if not isinstance(holder, JavaClass):
        return {}
    return {str(k): int(v) for k, v in json.loads(holder.snapshotJson()).items()}
