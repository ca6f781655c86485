"""A termination notice that is not carried out, live: an executor on ``local-trcluster`` gets a
SIGPWR notice and is never killed. With ``notice.release=false`` the engine drains it, and once it
has outlived its notice (``trspark.engine.views.notice_expired``) lifts the drain: Spark gives it
tasks again."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_app import read_trace
from test_chaos import wait_for

from jobs.harness.executors import driver_pid, find_executors
from tests.test_live_pools import live_cluster

WINDOW = 2.0


@pytest.fixture(scope="module")
def session() -> Iterator[tuple[Any, Path]]:
    with live_cluster(2, dict(mode="tr", notice_window=WINDOW, notice_release=False, period=1.0)) as (spark, trace):
        yield spark, trace


def _drains(trace: Path, executor_id: str) -> list[bool]:
    """For each SchedulingHints the engine sent, in order: does it drain ``executor_id``?"""
    return [executor_id in line.get("drain", ()) for line in read_trace(trace) if line.get("type") == "SchedulingHints"]


def _executor_pids_of_tasks(sc: Any, tasks: int) -> set[int]:
    """The pids of the executor JVMs that ran the ``tasks`` tasks of one job (each a Python worker's ancestor)."""
    def ancestors(_: Any) -> list[int]:
        import time

        import psutil
        time.sleep(0.2)  # a task of some length, so that both executors get some
        return [p.pid for p in psutil.Process().parents()]

    return {pid for pids in sc.parallelize(range(tasks), tasks).map(ancestors).collect() for pid in pids}


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_an_executor_that_outlives_its_notice_is_drained_then_takes_tasks_again(session: tuple[Any, Path]) -> None:
    spark, trace = session
    sc = spark.sparkContext
    driver = driver_pid(sc)
    wait_for(lambda: len(find_executors(driver)) == 2, timeout=120.0, what="two executors")
    assert _executor_pids_of_tasks(sc, 4)  # every executor's Python worker is up
    victim = find_executors(driver)[0]
    os.kill(victim.pid, signal.SIGPWR)  # a notice WINDOW s ahead; nobody kills it
    wait_for(lambda: any(_drains(trace, victim.executor_id)), timeout=60.0, what="the drain of the noticed executor")
    # Outlived by as long as the notice gave (10 s at least): the engine lifts the drain.
    wait_for(lambda: not _drains(trace, victim.executor_id)[-1], timeout=90.0, what="the drain lifted")
    drains = _drains(trace, victim.executor_id)
    assert drains.index(True) < len(drains) - 1 - drains[::-1].index(False)  # drained first, then lifted
    wait_for(lambda: victim.pid in _executor_pids_of_tasks(sc, 8), timeout=120.0,
             what="a task on the executor that outlived its notice")
    assert victim.executor_id in {e.executor_id for e in find_executors(driver)}  # never released
