"""A Spark SQL query's shuffles on ``local-trcluster``: adaptive execution runs each query stage as
a job of its own, and a later job of the query reads a shuffle again (a reused exchange). The
engine must hear such a shuffle consumed only when the query ends: heard earlier, it took
outputs a later job read as no longer needed, let a noticed executor go with them, and Spark
re-ran their tasks."""

from __future__ import annotations

from typing import Any

import pytest

from tests.test_live_pools import engine_events, live_cluster

pytestmark = pytest.mark.spark

CHAIN = """
WITH e AS (SELECT id % 53 AS c, id % 41 AS i, CAST(1 + id % 3 AS DOUBLE) AS w FROM range(0, 30000, 1, 3)),
c0 AS (SELECT c, CAST(c % 7 AS DOUBLE) AS s FROM e GROUP BY c),
i1 AS (SELECT e.i, SUM(e.w * c0.s) / SUM(e.w) AS s FROM e JOIN c0 ON e.c = c0.c GROUP BY e.i),
c1 AS (SELECT e.c, SUM(e.w * i1.s) / SUM(e.w) AS s FROM e JOIN i1 ON e.i = i1.i GROUP BY e.c),
i2 AS (SELECT e.i, SUM(e.w * c1.s) / SUM(e.w) AS s FROM e JOIN c1 ON e.c = c1.c GROUP BY e.i)
SELECT COUNT(*) AS items FROM i2
"""
"""Score propagation over a small bipartite graph: ``e`` joined on ``c`` twice, so the
exchange of ``e`` by ``c`` is written once and read by two query stages."""


def shuffles_read_after_consumed(events: list[dict[str, Any]]) -> set[int]:
    """Shuffles that a job submitted after their ``ShuffleConsumed`` reads (a stage of it has them as input)."""
    consumed: set[int] = set()
    late: set[int] = set()
    for event in events:
        if event["type"] == "ShuffleConsumed":
            consumed.add(event["shuffle_id"])
        elif event["type"] == "JobSubmitted":
            writes = dict(zip(event["stage_ids"], event["shuffle_ids"], strict=True))
            late |= {writes[p] for parents in event["parents"] for p in parents if writes.get(p) in consumed}
    return late


def shuffles_read_by_several_jobs(events: list[dict[str, Any]]) -> set[int]:
    readers: dict[int, set[int]] = {}
    for event in (e for e in events if e["type"] == "JobSubmitted"):
        writes = dict(zip(event["stage_ids"], event["shuffle_ids"], strict=True))
        for parents in event["parents"]:
            for p in parents:
                if writes.get(p) is not None:
                    readers.setdefault(writes[p], set()).add(event["job_id"])
    return {shuffle for shuffle, jobs in readers.items() if len(jobs) > 1}


def test_a_sql_querys_shuffles_are_consumed_only_when_the_query_ends() -> None:
    from tests.jvm_gateway import wait_for

    spark_settings = {"spark.sql.autoBroadcastJoinThreshold": "-1", "spark.sql.shuffle.partitions": "3"}
    with live_cluster(2, dict(mode="tr", lifetime="exponential:mean=600"), spark_settings) as (spark, trace):
        assert spark.sql(CHAIN).collect()[0]["items"] == 41

        def query_jobs() -> list[dict[str, Any]] | None:
            """The jobs the engine was told of, once it has heard of each one's end (it hears late)."""
            events = engine_events(trace)
            ended = {e["job_id"] for e in events if e["type"] == "JobEnded"}
            submitted = [e for e in events if e["type"] == "JobSubmitted"]
            return submitted if len(submitted) >= 3 and all(job["job_id"] in ended for job in submitted) else None

        jobs = wait_for(query_jobs, what="the query's jobs and their ends", timeout=30)
        written = {s for job in jobs if job["sql_execution"] is not None for s in job["shuffle_ids"] if s is not None}
        # The listener bus is asynchronous: the query's end reaches the engine a moment later.
        wait_for(lambda: written <= {e["shuffle_id"] for e in engine_events(trace) if e["type"] == "ShuffleConsumed"},
                 what="every shuffle of the query reported consumed", timeout=30)
        events = engine_events(trace)
    assert len({job["sql_execution"] for job in jobs} - {None}) == 1 and len(jobs) >= 3
    assert shuffles_read_by_several_jobs(events), "the query should re-read a reused exchange"
    assert not shuffles_read_after_consumed(events)
