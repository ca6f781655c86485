"""The engine's task-size advice and the suggestion from the configured lifetimes."""

from __future__ import annotations

import math

import pytest
from engine_world import MB, add_executors, feed, map_stage, run_task

from cost_model.lifetimes import Exponential
from cost_model.task_size import largest_task_seconds
from trspark.engine.commands import Advice
from trspark.engine.events import ExecutorAdded, ExecutorLost, ExecutorNotice, StageCompleted, Tick
from trspark.engine.registry import make_policy
from trspark.engine.settings import TRConfig
from trspark.engine.tr import sizing
from trspark.engine.tr.sizing import REFRESH_SECONDS, configured_limit, suggested_partition_bytes


def _advice(config: TRConfig, events: list) -> list[Advice]:
    return [c for c in feed(make_policy("tr", config), events) if isinstance(c, Advice)]


def test_long_tasks_get_one_line_with_the_partition_size_at_the_measured_rate() -> None:
    config = TRConfig(lifetime="exponential:mean=600", duplication=False)
    events = add_executors(["a", "b"]) + [map_stage(0, 4, 0)]
    events += run_task(0, 0, "a", start=0.0, seconds=100.0, read=1000 * MB, write=MB, shuffle_id=0)
    events += [Tick(time=101.0), Tick(time=106.0)]
    advice = _advice(config, events)
    limit = largest_task_seconds(Exponential(mean=600.0), 0.05)  # about 2 f x 600 s = 60 s
    assert len(advice) == 1 and advice[0].kind == "split" and advice[0].stage_id == 0
    assert f"{limit:.1f} s" in advice[0].message and "at least 2x" in advice[0].message
    assert f"advisoryPartitionSizeInBytes={round(limit * 10 * MB)}" in advice[0].message  # 1000 MB / 100 s


@pytest.mark.parametrize(("rate", "size", "least"), [
    (1e30, sizing.JAVA_LONG_MAX, None),  # a size Spark can read, not 6.4e31
    (1e3, 64432, 12886),  # under 1 MiB: AQE would coalesce up to its 1 MiB minimum unless it is lowered
])
def test_the_advice_names_partition_settings_spark_applies(rate: float, size: int, least: int | None) -> None:
    config = TRConfig(lifetime="exponential:mean=600", sizing_rate=rate, duplication=False)
    events = add_executors(["a", "b"]) + [map_stage(0, 4, 0)]
    events += run_task(0, 0, "a", start=0.0, seconds=100.0, write=MB, shuffle_id=0) + [Tick(time=101.0)]
    (advice,) = _advice(config, events)
    assert f"advisoryPartitionSizeInBytes={size}" in advice.message
    assert (f"minPartitionSize={least}" in advice.message) == (least is not None)


def test_the_advice_states_a_small_loss_fraction_as_configured() -> None:
    config = TRConfig(lifetime="exponential:mean=60000", sizing_fraction=0.001, duplication=False)
    events = add_executors(["a", "b"]) + [map_stage(0, 4, 0)]
    events += run_task(0, 0, "a", start=0.0, seconds=1000.0, write=MB, shuffle_id=0) + [Tick(time=1001.0)]
    advice = _advice(config, events)
    assert len(advice) == 1 and "loses more than 0.1% of its work" in advice[0].message, advice


def test_a_stage_of_one_wave_is_advised_when_its_last_task_ends() -> None:
    # Both tasks run at once and end together: the stage is over before a tick or a stage event
    # could see a finished task of it while it was active.
    config = TRConfig(lifetime="exponential:mean=600", duplication=False)
    events = add_executors(["a", "b"]) + [map_stage(0, 2, 0)]
    first, second = (run_task(0, p, e, start=0.0, seconds=100.0, write=MB, shuffle_id=0) for p, e in ((0, "a"), (1, "b")))
    events += [first[0], second[0], first[1], second[1], StageCompleted(time=100.0, stage_id=0)]
    advice = _advice(config, events)
    assert [(a.kind, a.stage_id) for a in advice] == [("split", 0)]


def test_tasks_within_the_limit_get_no_advice() -> None:
    config = TRConfig(lifetime="exponential:mean=600", duplication=False)
    events = add_executors(["a"]) + [map_stage(0, 4, 0)]
    events += run_task(0, 0, "a", start=0.0, seconds=40.0, write=MB, shuffle_id=0) + [Tick(time=45.0)]
    assert _advice(config, events) == []


def test_executors_of_a_stable_pool_lose_nothing() -> None:
    config = TRConfig(lifetime="exponential:mean=5", duplication=False, pool_lifetimes=(("ondemand", "stable"),))
    events = [ExecutorAdded(time=0.0, executor_id="a", pool="ondemand")] + [map_stage(0, 4, 0)]
    events += run_task(0, 0, "a", start=0.0, seconds=300.0, write=MB, shuffle_id=0) + [Tick(time=301.0)]
    assert _advice(config, events) == []


def test_the_configured_rate_sets_the_size() -> None:
    config = TRConfig(lifetime="exponential:mean=600", sizing_rate=50e6)
    limit = largest_task_seconds(Exponential(mean=600.0), 0.05)
    assert configured_limit(config) == pytest.approx(limit)
    assert suggested_partition_bytes(config) == round(limit * 50e6)
    assert suggested_partition_bytes(TRConfig(lifetime="exponential:mean=600")) is None
    # A known end D gives L* = D, found by a root search: D x R to the byte, not one byte under it.
    assert suggested_partition_bytes(TRConfig(lifetime="deterministic:at=100", sizing_rate=1e6)) == 100_000_000


def test_the_least_stable_configured_pool_sets_the_limit() -> None:
    config = TRConfig(lifetime="exponential:mean=3600", sizing_fraction=0.1,
                      pool_lifetimes=(("ondemand", "stable"), ("spot", "exponential:mean=300")))
    assert configured_limit(config) == pytest.approx(largest_task_seconds(Exponential(mean=300.0), 0.1))
    assert math.isinf(configured_limit(TRConfig(lifetime="stable")))



def test_no_task_length_fits_gives_no_advice_and_no_error() -> None:
    # L* = 0: every executor is about to reach a notice's deadline, so no split would help.
    policy = make_policy("tr", TRConfig(lifetime="exponential:mean=600", duplication=False))
    events = add_executors(["a"]) + [map_stage(0, 4, 0)]
    events += run_task(0, 0, "a", start=0.0, seconds=100.0, write=MB, shuffle_id=0)
    feed(policy, events)
    splitter = policy.splitter  # type: ignore[attr-defined]
    splitter.limit = lambda state: 0.0
    assert splitter.check(policy.state) == []  # type: ignore[attr-defined]


def _count_limits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every L* the advisor computes from now on, in order."""
    computed: list[float] = []

    def counted(placement: object, fraction: float) -> float:
        computed.append(largest_task_seconds(placement, fraction))  # type: ignore[arg-type]
        return computed[-1]

    monkeypatch.setattr(sizing, "largest_task_seconds", counted)
    return computed


def test_the_limit_is_computed_on_executor_events_and_ticks_never_in_a_task_decision(
        monkeypatch: pytest.MonkeyPatch) -> None:
    computed = _count_limits(monkeypatch)
    policy = make_policy("tr", TRConfig(lifetime="exponential:mean=600", duplication=False))
    splitter = policy.splitter  # type: ignore[attr-defined]
    checks: list[float] = []
    check = splitter.check
    monkeypatch.setattr(splitter, "check", lambda state: checks.append(splitter.limit(state)) or check(state))
    feed(policy, add_executors(["a", "b", "c"]) + [map_stage(0, 8, 0)])
    assert len(computed) == 3  # one per executor event (each changes the set)
    # A notice gives c a known death: another model. While c drains, every task end runs the size check.
    feed(policy, [ExecutorNotice(time=0.5, executor_id="c", deadline=500.0, kind="notice")])
    assert len(computed) == 4 and computed[-1] != computed[-2]
    events = []
    for partition in range(6):
        events += run_task(0, partition, "a", start=1.0 + 5.0 * partition, seconds=5.0, write=MB, shuffle_id=0)
    before = len(checks)
    feed(policy, events)  # past REFRESH_SECONDS, but no tick came
    assert len(checks) - before >= 6 and set(checks[before:]) == {computed[-1]}
    assert len(computed) == 4
    feed(policy, [Tick(time=REFRESH_SECONDS + 2.0)])
    assert len(computed) == 5
    feed(policy, [ExecutorLost(time=REFRESH_SECONDS + 3.0, executor_id="b")])
    assert len(computed) == 6


@pytest.mark.parametrize(("lifetime", "computations"), [("exponential:mean=600", 2), ("weibull:shape=0.7,scale=600", 7)])
def test_memoryless_executors_replaced_by_like_ones_keep_the_limit(lifetime: str, computations: int,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # With memoryless laws L* depends on the laws and cores alone; with a memory, on the ages too.
    computed = _count_limits(monkeypatch)
    policy = make_policy("tr", TRConfig(lifetime=lifetime, duplication=False))
    splitter = policy.splitter  # type: ignore[attr-defined]
    feed(policy, [*add_executors(["a", "b"]), map_stage(0, 8, 0)])
    replaced = [ExecutorLost(time=40.0, executor_id="b"), ExecutorAdded(time=40.5, executor_id="c"),
                Tick(time=REFRESH_SECONDS + 41.0), ExecutorLost(time=90.0, executor_id="a"),
                ExecutorAdded(time=90.5, executor_id="d")]
    feed(policy, replaced)
    assert len(computed) == computations
    fresh = make_policy("tr", TRConfig(lifetime=lifetime, duplication=False))
    feed(fresh, add_executors(["c", "d"], time=90.5))
    if computations == 2:
        assert splitter.limit(policy.state) == fresh.splitter.limit(fresh.state)  # type: ignore[attr-defined]
