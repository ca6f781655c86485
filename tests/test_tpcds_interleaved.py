"""Policies taking turns on real local-clusters: both sessions stay up and their runs alternate.

SF 0.01, one query, vanilla Spark and ``always`` (the plugin's cluster), one stable and one
evicted run each; every executor JVM named in the schedule is really killed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.tpcds.results import read
from jobs.tpcds.runner import run
from jobs.tpcds.settings import BenchSettings

pytestmark = pytest.mark.spark


def test_policies_take_turns_and_each_meets_the_same_kill(tmp_path: Path) -> None:
    out = tmp_path / "results.csv"
    settings = BenchSettings(sf=0.01, queries=("q7",), policies=("never", "always"), out=out,
                             cache=tmp_path / "cache", lifetime="deterministic:at=0.4", stability=None, executors=2,
                             memory_mb=1024, seed=3, max_kills=1, time_cap=120.0, rewarm=False, warmup=1,
                             interleave=True)
    result = run(settings)
    assert result.skipped == {}, result.skipped
    order = [(r.policy, r.scenario) for r in read(out)]
    # Rows are written when a run ends: vanilla Spark's reference first, then the two evicted
    # runs back to back (one after the other, sequential policies would put never's before always's stable run).
    assert order[0] == ("never", "stable") and order[1] == ("always", "stable")
    assert sorted(order[2:]) == [("always", "evicted"), ("never", "evicted")]
    for row in result.rows:
        assert row.result_ok and not row.failed, (row.policy, row.scenario, row.error)
        assert row.stable_seconds == result.rows[0].seconds  # every slowdown is against vanilla Spark's run
        assert row.executors_killed == (1 if row.scenario == "evicted" else 0), (row.policy, row.scenario)
    # The plugin's cluster, not a second vanilla one: ``always`` copied its run's outputs (the
    # counters wait for copies still open when the query ended).
    always_stable = next(r for r in result.rows if r.policy == "always" and r.scenario == "stable")
    assert always_stable.backups_count > 0


def test_rounds_measure_vanilla_sparks_reference_in_every_round_and_rewrite_the_file(tmp_path: Path) -> None:
    out = tmp_path / "results.csv"
    settings = BenchSettings(sf=0.01, queries=("q7",), policies=("never", "always"), out=out,
                             cache=tmp_path / "cache", lifetime="deterministic:at=0.4", stability=None, executors=2,
                             memory_mb=1024, seed=3, max_kills=1, time_cap=120.0, rewarm=False, warmup=1,
                             repeat=2, stable_repeat=1, interleave=True, stable_runs="rounds")
    result = run(settings)
    assert result.skipped == {}, result.skipped
    stable = [r for r in result.rows if r.scenario == "stable"]
    # One stable run first (the kills' reference), then one in each of the two rounds; only vanilla Spark's.
    assert sorted((r.policy, r.repeat) for r in stable) == [("never", 0), ("never", 1), ("never", 2)]
    evicted = sorted((r.policy, r.repeat, r.executors_killed) for r in result.rows if r.scenario == "evicted")
    assert evicted == [("always", 0, 1), ("always", 1, 1), ("never", 0, 1), ("never", 1, 1)]
    reference = sorted(r.seconds for r in stable)[1]
    for row in result.rows:
        assert row.result_ok and not row.failed, (row.policy, row.scenario, row.error)
        assert row.stable_seconds == reference and row.slowdown == row.seconds / reference
    # The file holds the same rows with the final reference (rewritten once every run was in).
    assert read(out) == result.rows
