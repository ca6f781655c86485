"""End to end on a real local-cluster: SF 0.01, one query, vanilla Spark, one executor JVM killed."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.tpcds.results import COLUMNS, read
from jobs.tpcds.runner import BenchSettings, run

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    tmp = tmp_path_factory.mktemp("bench")
    out = tmp / "results.csv"
    # Mean lifetime 1 s per executor: the first kill comes well inside the query; max_kills=1.
    settings = BenchSettings(sf=0.01, queries=("q7",), policies=("never",), out=out, cache=tmp / "cache",
                             lifetime="exponential:mean=1", stability=None, executors=2, memory_mb=1024,
                             seed=3, max_kills=1, time_cap=120.0, rewarm=False)
    return out, run(settings).rows


def test_one_stable_and_one_evicted_row_with_the_schema(bench: tuple[Path, list]) -> None:
    out, rows = bench
    assert out.read_text().splitlines()[0] == ",".join(COLUMNS)
    assert [repr(r) for r in read(out)] == [repr(r) for r in rows]  # repr: NaN fields compare equal
    assert [(r.policy, r.scenario) for r in rows] == [("never", "stable"), ("never", "evicted")]


def test_killed_run_gives_the_stable_answer(bench: tuple[Path, list]) -> None:
    _, rows = bench
    stable, evicted = rows
    assert stable.result_ok and not stable.failed and stable.executors_killed == 0
    assert stable.slowdown == 1.0  # vanilla Spark's stable time is the reference
    assert evicted.executors_killed == 1
    assert not evicted.failed, evicted.error
    assert evicted.result_ok, evicted.error
    assert evicted.capacity_lost_seconds > 0  # the replacement JVM takes seconds to register
    assert evicted.slowdown == pytest.approx(evicted.seconds / stable.seconds)
    assert stable.tasks_recomputed == 0
