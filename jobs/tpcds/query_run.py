"""One TPC-DS query run on Spark under a wall-clock cap, and the one line that names a failure."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.tpcds import session
from jobs.tpcds.answers import Answer
from jobs.tpcds.queries import Query

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass
class Outcome:
    """What one query run produced, before it becomes a CSV row."""

    seconds: float
    answer: Answer | None = None
    error: str = ""
    timed_out: bool = False


def execute(spark: SparkSession, query: Query, group: str, time_cap: float) -> Outcome:
    """Run ``query`` with a wall-clock cap; a run over the cap is cancelled (its jobs killed)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["answer"] = session.run_query(spark, query, job_group=group)
        except Exception as exc:  # py4j / Spark errors: the job aborted
            box["error"] = first_line(exc)

    started = time.monotonic()
    worker = threading.Thread(target=target, name=f"query-{group}", daemon=True)
    worker.start()
    worker.join(time_cap)
    if worker.is_alive():
        spark.sparkContext.cancelJobGroup(group)
        worker.join(60)
        return Outcome(time_cap, error=f"exceeded the time cap of {time_cap:g} s", timed_out=True)
    return Outcome(time.monotonic() - started, box.get("answer"), box.get("error", ""))


def first_line(exc: BaseException) -> str:
    """The line of an exception's text that names it (py4j puts the Java exception on its own line)."""
    text = str(exc).strip() or type(exc).__name__
    for line in text.splitlines():  # py4j puts the Java exception's message on its own line
        if "Exception" in line or "Error" in line:
            return line.strip()[:300]
    return text.splitlines()[0][:300]
