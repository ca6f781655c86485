"""Policies taking turns on real local-clusters: both sessions stay up and their runs alternate.

SF 0.01, one query, vanilla Spark and ``always`` (the plugin's cluster), two rounds of evicted runs
with vanilla Spark's reference measured in each (``stable_runs="rounds"``); every executor JVM
named in the schedule is really killed.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from jobs.tpcds.results import read
from jobs.tpcds.runner import run
from jobs.tpcds.settings import BenchSettings, Progress

pytestmark = pytest.mark.spark


def _round(label: str) -> int | None:
    """The round a progress label's run belongs to (0: the first stable runs); None for other steps."""
    if (found := re.search(r"\(round (\d+)\)", label)) or (found := re.search(r"evicted · .* · run (\d+)/", label)):
        return int(found.group(1))
    return 0 if " · stable · " in label else None


def test_policies_take_turns_and_vanilla_spark_measures_its_reference_in_every_round(tmp_path: Path) -> None:
    out = tmp_path / "results.csv"
    settings = BenchSettings(sf=0.01, queries=("q7",), policies=("never", "always"), out=out,
                             cache=tmp_path / "cache", lifetime="deterministic:at=0.4", stability=None, executors=2,
                             memory_mb=1024, seed=3, max_kills=1, time_cap=120.0, rewarm=False, warmup=1,
                             repeat=2, stable_repeat=1, interleave=True, stable_runs="rounds")
    labels: list[str] = []
    result = run(settings, Progress(step=labels.append))
    assert result.skipped == {}, result.skipped
    # Every run of round 1 (vanilla Spark's stable run and both policies' evicted runs) comes
    # before any of round 2: one policy after the other would give never's rounds 1, 2, then always's.
    rounds = [r for r in map(_round, labels) if r is not None]
    assert rounds == sorted(rounds) and rounds.count(1) == rounds.count(2) == 3, labels
    stable = [r for r in result.rows if r.scenario == "stable"]
    # One stable run first (the kills' reference), then one in each round; only vanilla Spark's.
    assert sorted((r.policy, r.repeat) for r in stable) == [("never", 0), ("never", 1), ("never", 2)]
    evicted = sorted((r.policy, r.repeat, r.executors_killed) for r in result.rows if r.scenario == "evicted")
    assert evicted == [("always", 0, 1), ("always", 1, 1), ("never", 0, 1), ("never", 1, 1)]
    # The reference: the median of the two round runs (the first ran before always's cluster started).
    by_repeat = {r.repeat: r.seconds for r in stable}
    reference = statistics.median([by_repeat[1], by_repeat[2]])
    for row in result.rows:
        assert row.result_ok and not row.failed, (row.policy, row.scenario, row.error)
        assert row.stable_seconds == reference and row.slowdown == row.seconds / reference
    # The plugin's cluster, not a second vanilla one: ``always`` copied its runs' outputs.
    assert all(r.backups_count > 0 for r in result.rows if r.policy == "always")
    # The file holds the same rows with the final reference (rewritten once every run was in).
    assert read(out) == result.rows
