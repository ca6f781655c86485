"""The ``stage`` (Flint-like) and ``interval`` (Young/Daly) baselines on hand-made jobs."""

from __future__ import annotations

import math

import pytest
from engine_world import MB, add_executors, feed, map_stage, run_task

from cost_model.lifetimes import Exponential
from trspark.engine.baselines import IntervalPolicy, StagePolicy
from trspark.engine.commands import Backup
from trspark.engine.events import REMOTE, Tick
from trspark.engine.registry import make_policy
from trspark.engine.settings import TRConfig


def _map_job(executors: list[str]) -> list:  # type: ignore[type-arg]
    """Stage 0: one 10 s map task per executor (10 MB each), then stage 1 reads shuffle 0."""
    events = add_executors(executors, cores=1) + [map_stage(0, len(executors), 0)]
    for i, e in enumerate(executors):
        events += run_task(0, i, e, start=0.0, seconds=10.0, write=10 * MB, shuffle_id=0)
    return events


def test_registry_builds_stage_and_interval() -> None:
    config = TRConfig(lifetime="exponential:mean=600")
    assert make_policy("stage", config).name == "stage"
    assert make_policy("interval", config).name == "interval"


def test_stage_backs_up_nothing_on_stable_executors() -> None:
    policy = StagePolicy(Exponential(mean=1e9), alpha=1.5, risk=0.05)
    assert feed(policy, _map_job(["a", "b", "c"])) == []


def test_stage_backs_up_the_whole_stage_once_any_executor_is_risky() -> None:
    # Mean lifetime 60 s vs a 10 s horizon: P(fail) ~ 0.15 > 0.05 for every executor.
    policy = StagePolicy(Exponential(mean=60.0), alpha=1.0, risk=0.05)
    commands = feed(policy, _map_job(["a", "b", "c"]))
    backups = [c for c in commands if isinstance(c, Backup)]
    assert sorted((b.map_index, b.source, b.target) for b in backups) == [
        (0, "a", REMOTE), (1, "b", REMOTE), (2, "c", REMOTE)
    ]
    assert policy.flagged == {0}
    # No block is released twice, even on later ticks.
    assert feed(policy, [Tick(time=30.0)]) == []


def test_interval_period_is_young_daly() -> None:
    mttf = 3600.0
    policy = IntervalPolicy(Exponential(mean=mttf), remote_bandwidth=100 * MB, remote_cap=10_000 * MB)
    feed(policy, _map_job(["a", "b"]))
    delta = 10 * MB * 1 / (100 * MB)  # one wave = one 10 MB output per 1-core executor at 100 MB/s
    assert policy.checkpoint_seconds() == pytest.approx(delta)
    assert policy.period == pytest.approx(math.sqrt(2 * delta * mttf))


def test_interval_checkpoints_only_when_a_period_has_passed() -> None:
    policy = IntervalPolicy(Exponential(mean=3600.0), remote_bandwidth=100 * MB, remote_cap=10_000 * MB)
    feed(policy, _map_job(["a", "b"]))  # outputs at t = 10 s; period ~ 26.8 s
    assert feed(policy, [Tick(time=20.0)]) == []
    backups = feed(policy, [Tick(time=30.0)])
    assert {(b.map_index, b.target) for b in backups if isinstance(b, Backup)} == {(0, REMOTE), (1, REMOTE)}
    assert feed(policy, [Tick(time=35.0)]) == []
