"""The executors' trspark metrics as live tests read them: written by Spark's ``CsvSink`` into a
directory, one file per executor and metric, a report a second."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

# Spark's CsvSink writes one file per executor metric: <app id>.<executor id>.<source>.<metric>.csv
EXECUTOR_CSV = re.compile(r"^[^.]+\.(\d+)\.plugin\.org\.apache\.spark\.trspark\.TRSparkPlugin\.(\w+)\.csv$")


def with_csv_sink(builder: Any, directory: Path) -> Any:
    """``builder`` (a ``SparkSession.Builder``) with the executors' metrics to CSV files in ``directory``."""
    return (
        builder.config("spark.metrics.conf.executor.sink.csv.class", "org.apache.spark.metrics.sink.CsvSink")
        .config("spark.metrics.conf.executor.sink.csv.period", "1")
        .config("spark.metrics.conf.executor.sink.csv.unit", "seconds")
        .config("spark.metrics.conf.executor.sink.csv.directory", str(directory))
    )


def executor_reports(directory: Path) -> dict[str, dict[str, tuple[float, int]]]:
    """Each executor's trspark metrics from Spark's CsvSink: name -> (time of the last report, value).

    A counter's file has rows ``t,count`` (``t`` in epoch seconds); a timer's ``t,count,max,...``
    (its value here is its count).
    """
    found: dict[str, dict[str, tuple[float, int]]] = {}
    for path in directory.iterdir():
        match = EXECUTOR_CSV.match(path.name)
        rows = path.read_text().splitlines() if match else []
        if match and len(rows) > 1 and rows[-1].count(",") >= 1:  # a header, then whole rows
            t, value = rows[-1].split(",")[:2]
            found.setdefault(match[1], {})[match[2]] = (float(t), int(value))
    return found


def executor_totals(directory: Path) -> dict[str, int]:
    """Every executor's last reported trspark metrics, summed over the executors."""
    totals: dict[str, int] = {}
    for metrics in executor_reports(directory).values():
        for name, (_, value) in metrics.items():
            totals[name] = totals.get(name, 0) + value
    return totals
