"""``HintPlacement.scala`` must place tasks exactly as the reference ``trspark/engine/placement.py``.

Random hints and runnable stages (fixed seed) are evaluated by both; the Scala side gets the hints
the way the live scheduler does: as the engine's JSON line (``protocol.to_json``).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator
from typing import Any

import pytest

from tests.jvm_gateway import Jvm, plain_jvm
from trspark.engine import placement
from trspark.engine.protocol import SchedulingHints, to_json

CASES = 400
EXECUTORS = [str(i) for i in range(6)]


@pytest.fixture(scope="module")
def jvm() -> Iterator[Jvm]:
    with plain_jvm() as j:
        yield j


def scala_hints(jvm: Jvm, hints: SchedulingHints | None) -> Any:
    if hints is None:
        return jvm.trspark.SchedulingHints.Empty()
    return jvm.trspark.SchedulingHints.parse(to_json(hints))


def seconds(rng: random.Random) -> float:
    """Task times and limits, with the edge values the engine can produce."""
    return rng.choice([0.0, 1.0, 2.5, 10.0, math.inf, rng.uniform(0, 20), float(rng.randint(0, 20))])


def random_hints(rng: random.Random) -> SchedulingHints | None:
    if rng.random() < 0.1:
        return None
    stages = range(12)
    return SchedulingHints(
        # Duplicates and stages that are not runnable included: both sides must agree on them too.
        stage_order=tuple(rng.choice(stages) for _ in range(rng.randint(0, 8))),
        max_task_seconds={e: seconds(rng) for e in rng.sample(EXECUTORS, rng.randint(0, len(EXECUTORS)))},
        expected_task_seconds={s: seconds(rng) for s in rng.sample(stages, rng.randint(0, 12))},
        drain=tuple(rng.sample(EXECUTORS, rng.choice([0, 0, 1, 2]))),
    )


def random_cases(seed: int) -> Iterator[tuple[SchedulingHints | None, list[int]]]:
    rng = random.Random(seed)
    for _ in range(CASES):
        yield random_hints(rng), [rng.randrange(12) for _ in range(rng.randint(0, 8))]


def test_order_stages_agrees_with_reference(jvm: Jvm) -> None:
    differences = []
    for hints, runnable in random_cases(seed=5):
        expected = placement.order_stages(runnable, hints)
        got = list(jvm.trspark.HintPlacement.orderStages(runnable, scala_hints(jvm, hints)))
        if got != expected:
            differences.append((hints, runnable, expected, got))
    assert differences == []


def test_allowed_agrees_with_reference(jvm: Jvm) -> None:
    checked = {True: 0, False: 0}
    differences = []
    for hints, _ in itertools.islice(random_cases(seed=8), 150):  # x 35 (executor, stage) pairs each
        scala = scala_hints(jvm, hints)
        for executor in EXECUTORS + ["unknown"]:
            for stage in (0, 3, 7, 11, 99):
                expected = placement.allowed(executor, stage, hints)
                checked[expected] += 1
                if jvm.trspark.HintPlacement.allowed(executor, stage, scala) != expected:
                    differences.append((hints, executor, stage, expected))
    assert differences == []
    assert min(checked.values()) > 100, f"both answers must be exercised: {checked}"


def test_may_start_now_relaxes_only_when_no_allowed_executor_is_free(jvm: Jvm) -> None:
    """The live γ rule: a forbidden executor may take the task only if no free executor allows it."""
    rng = random.Random(13)
    relaxed = drained = 0
    for hints, _ in random_cases(seed=13):
        scala = scala_hints(jvm, hints)
        executor, stage = rng.choice(EXECUTORS), rng.randrange(12)
        free = rng.sample(EXECUTORS, rng.randint(0, len(EXECUTORS)))
        allowed_here = placement.allowed(executor, stage, hints)
        safer_free = any(placement.allowed(e, stage, hints) for e in free if e != executor)
        draining = hints is not None and executor in hints.drain
        expected = allowed_here or (not safer_free and not draining)
        assert placement.may_start_now(executor, stage, free, hints) == expected
        relaxed += expected and not allowed_here
        drained += draining
        assert jvm.trspark.HintPlacement.mayStartNow(executor, stage, free, scala) == expected, (hints, executor, stage, free)
    assert relaxed > 5, "the no-safer-executor exception must be exercised"
    assert drained > 5, "draining executors must be exercised"


def test_worked_example(jvm: Jvm) -> None:
    """Executor 2 is about to die (10 s left): stage 4's 30 s tasks go elsewhere, 5 s tasks may stay."""
    hints = SchedulingHints(stage_order=(5, 4), max_task_seconds={"2": 10.0},
                            expected_task_seconds={4: 30.0, 5: 5.0})
    scala = scala_hints(jvm, hints)
    assert list(jvm.trspark.HintPlacement.orderStages([3, 4, 5], scala)) == [5, 4, 3]
    assert jvm.trspark.HintPlacement.allowed("2", 5, scala)
    assert not jvm.trspark.HintPlacement.allowed("2", 4, scala)
    assert jvm.trspark.HintPlacement.allowed("1", 4, scala)
    assert not jvm.trspark.HintPlacement.mayStartNow("2", 4, ["1", "2"], scala)
    assert jvm.trspark.HintPlacement.mayStartNow("2", 4, ["2"], scala)


def test_draining_executor_takes_nothing(jvm: Jvm) -> None:
    """Executor 2 got a termination notice: no task starts there, even when it is the only one free."""
    hints = SchedulingHints(stage_order=(5,), expected_task_seconds={5: 1.0}, drain=("2",))
    scala = scala_hints(jvm, hints)
    assert not jvm.trspark.HintPlacement.allowed("2", 5, scala)
    assert not jvm.trspark.HintPlacement.mayStartNow("2", 5, ["2"], scala)
    assert jvm.trspark.HintPlacement.mayStartNow("1", 5, ["1", "2"], scala)


def test_parse_reads_every_field_and_non_finite_numbers(jvm: Jvm) -> None:
    line = to_json(SchedulingHints(stage_order=(3, 1), max_task_seconds={"7": math.inf, "8": 2.5},
                                   expected_task_seconds={1: 4.0, 3: math.nan}))
    assert "Infinity" in line and "NaN" in line  # what Python's json writes for non-finite floats
    hints = jvm.trspark.SchedulingHints.parse(line)
    assert hints.stageOrder().mkString(",") == "3,1"
    assert hints.maxTaskSeconds().apply("7") == math.inf
    assert hints.maxTaskSeconds().apply("8") == 2.5
    assert hints.expectedTaskSeconds().apply(1) == 4.0
    assert math.isnan(hints.expectedTaskSeconds().apply(3))
    assert jvm.trspark.SchedulingHints.parse('{"type":"SchedulingHints"}').isEmpty()


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"type":"Backup"}', "got a 'Backup' message"),
        ('{"type":"SchedulingHints","stage_order":"3,1"}', "bad stage_order"),
        ('{"type":"SchedulingHints","stage_order":[1.5]}', "bad stage_order"),
        ('{"type":"SchedulingHints","max_task_seconds":{"1":"soon"}}', "bad max_task_seconds[1]"),
        ('{"type":"SchedulingHints","expected_task_seconds":{"x":1}}', "bad expected_task_seconds key"),
    ],
)
def test_parse_rejects_bad_lines_with_a_reason(jvm: Jvm, line: str, complaint: str) -> None:
    from py4j.protocol import Py4JJavaError

    with pytest.raises(Py4JJavaError) as info:
        jvm.trspark.SchedulingHints.parse(line)
    assert info.value.java_exception.getClass().getName() == "java.lang.IllegalArgumentException"
    assert complaint in info.value.java_exception.getMessage()


# ---------------------------------------------------------------------------------------------
# Live: HintedScheduling inside TRTaskScheduler on a real local-trcluster (real executor JVMs)
# ---------------------------------------------------------------------------------------------

LIVE_EXECUTORS = 3
DOOMED = "2"


class Live:
    """A ``local-trcluster[3,1,1024]`` session whose task scheduler takes hints directly (no engine)."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.sc = spark.sparkContext
        self.scheduler = self.sc._jsc.sc().taskScheduler()
        self.hints = self.sc._jvm.org.apache.spark.trspark.SchedulingHints

    def set_hints(self, hints: SchedulingHints | None) -> None:
        self.scheduler.setHints(self.hints.Empty() if hints is None else self.hints.parse(to_json(hints)))

    def run(self, partitions: int, seconds: float) -> list[int]:
        """One job of ``partitions`` tasks of ``seconds`` each; returns its stage ids."""
        import time as _time

        group = f"job-{random.random()}"
        self.sc.setJobGroup(group, group)
        try:
            self.sc.parallelize(range(partitions), partitions).map(lambda x: _time.sleep(seconds) or x).collect()
        finally:
            self.sc.setJobGroup("", "")
        return self.stages(group)

    def stages(self, group: str) -> list[int]:
        tracker = self.sc.statusTracker()
        return sorted(s for j in tracker.getJobIdsForGroup(group) for s in tracker.getJobInfo(j).stageIds)

    def tasks(self, stage_id: int) -> list[tuple[str, int]]:
        """(executor id, launch time in ms) of every task of ``stage_id``, from Spark's status store."""
        listed = self.sc._jsc.sc().statusStore().taskList(stage_id, 0, 10_000)
        out = []
        for i in range(listed.size()):
            task = listed.apply(i)
            out.append((str(task.executorId()), int(task.launchTime().getTime())))
        return out


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    import os

    from pyspark.sql import SparkSession

    from trspark.live.shim import jar_path

    # TRSPARK_TEST_SHIM_JAR: try a jar built from unmerged sources (e.g. with the hook mixed in).
    spark = (
        SparkSession.builder.master(f"local-trcluster[{LIVE_EXECUTORS},1,1024]")
        .appName("trspark-hint-scheduling")
        .config("spark.jars", os.environ.get("TRSPARK_TEST_SHIM_JAR") or jar_path())
        # No plugin, so no engine replaces the hints set here. Explicit, because PySpark's builder
        # keeps options of earlier sessions in the same process (other test modules).
        .config("spark.plugins", "")
        .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
        .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "180s")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    try:
        interfaces = [c.getName() for c in spark.sparkContext._jsc.sc().taskScheduler().getClass().getInterfaces()]
        if "org.apache.spark.trspark.HintedScheduling" not in interfaces:
            pytest.skip("TRTaskScheduler does not mix in HintedScheduling yet (docs/notices-and-pools.md, integration)")
        live = Live(spark)
        live.run(LIVE_EXECUTORS * 2, 0.2)  # every executor has started its Python worker
        yield live
    finally:
        spark.stop()


@pytest.mark.spark
def test_long_tasks_avoid_the_doomed_executor_while_others_are_free(live: Live) -> None:
    doomed = SchedulingHints(max_task_seconds={DOOMED: 1.0}, expected_task_seconds={s: 30.0 for s in range(500)})
    live.set_hints(doomed)
    try:
        placed = [e for _ in range(8) for s in live.run(2, 0.3) for e, _ in live.tasks(s)]
    finally:
        live.set_hints(None)
    assert len(placed) == 16 and DOOMED not in placed, placed
    # Control: without hints Spark spreads the same jobs over all executors (P(miss) = (1/3)^15).
    unhinted = [e for _ in range(15) for s in live.run(2, 0.3) for e, _ in live.tasks(s)]
    assert DOOMED in unhinted, unhinted


@pytest.mark.spark
def test_doomed_executor_still_used_when_no_safe_slot_is_free(live: Live) -> None:
    live.set_hints(SchedulingHints(max_task_seconds={DOOMED: 1.0}, expected_task_seconds={s: 30.0 for s in range(500)}))
    try:
        (stage,) = live.run(6, 0.5)
    finally:
        live.set_hints(None)
    assert DOOMED in [e for e, _ in live.tasks(stage)]


def two_map_stages(live: Live, preferred: int) -> tuple[int, int]:
    """Run a job with two independent 6-task map stages on 3 slots, hinting ``preferred`` (0 or 1)
    of them first; returns the two map stage ids (lower, higher)."""
    import time as _time

    low = max(live.run(1, 0.0)) + 1  # stage ids are sequential: this job's are low, low+1, low+2
    live.set_hints(SchedulingHints(stage_order=(low + preferred,)))
    group = f"two-{random.random()}"
    try:

        def slow(x: int) -> tuple[int, int]:
            _time.sleep(0.4)
            return x % 3, x

        left = live.sc.parallelize(range(6), 6).map(slow).reduceByKey(lambda a, b: a + b)
        right = live.sc.parallelize(range(6), 6).map(slow).reduceByKey(lambda a, b: a + b)
        live.sc.setJobGroup(group, group)
        assert sorted(left.join(right).collect()) == [(0, (3, 3)), (1, (5, 5)), (2, (7, 7))]
    finally:
        live.sc.setJobGroup("", "")
        live.set_hints(None)
    assert live.stages(group) == [low, low + 1, low + 2]  # two map stages, then the result stage
    return low, low + 1


@pytest.mark.spark
def test_stage_order_follows_hints(live: Live) -> None:
    def launched_before_last_of(stage: int, other: int) -> int:
        """Tasks of ``other`` launched before the last task of ``stage`` launched."""
        last = max(t for _, t in live.tasks(stage))
        return sum(t < last for _, t in live.tasks(other))

    # Hint the higher id first; Spark's FIFO alone would run the lower id first. The two task
    # sets can reach the scheduler in separate revives, so the first round (3 slots) may still go
    # to the lower stage before the hinted one is queued -- never more.
    low, high = two_map_stages(live, preferred=1)
    assert launched_before_last_of(high, low) <= LIVE_EXECUTORS
    # Control: hinting the lower id (= FIFO) makes the higher stage wait for all 6 of its tasks.
    low, high = two_map_stages(live, preferred=0)
    assert launched_before_last_of(high, low) == 6
