"""``HintPlacement.scala`` must place tasks exactly as the reference ``trspark/engine/placement.py``.

Random hints and task states (fixed seed) go through both: Python's ``placement.plan`` and the
Scala ``HintPlacement.plan``, which run the same ``place`` passes the simulator and the live
scheduler use. The Scala side gets the hints the way the live scheduler does: as the engine's
JSON line (``protocol.to_json``).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from typing import Any

import pytest

from tests.jvm_gateway import Jvm, plain_jvm
from trspark.engine import placement
from trspark.engine.commands import SchedulingHints
from trspark.engine.protocol import to_json

CASES = 400
EXECUTORS = [str(i) for i in range(6)]
STAGES = range(12)


@pytest.fixture(scope="module")
def jvm() -> Iterator[Jvm]:
    with plain_jvm() as j:
        yield j


def scala_hints(jvm: Jvm, hints: SchedulingHints | None) -> Any:
    if hints is None:
        return jvm.trspark.SchedulingHints.Empty()
    return jvm.trspark.SchedulingHints.parse(to_json(hints))


def executors_by_stage(rng: random.Random) -> dict[int, tuple[str, ...]]:
    return {s: tuple(rng.sample(EXECUTORS, rng.randint(1, len(EXECUTORS)))) for s in rng.sample(STAGES, rng.randint(0, 8))}


def random_hints(rng: random.Random) -> SchedulingHints | None:
    if rng.random() < 0.1:
        return None
    return SchedulingHints(
        # Duplicates and stages that are not runnable included: both sides must agree on them too.
        stage_order=tuple(rng.choice(STAGES) for _ in range(rng.randint(0, 8))),
        forbidden=executors_by_stage(rng),
        fallback=executors_by_stage(rng) if rng.random() < 0.6 else {},
        drain=tuple(rng.sample(EXECUTORS, rng.choice([0, 0, 1, 2]))),
    )


def random_cases(seed: int) -> Iterator[tuple[SchedulingHints | None, list[int]]]:
    rng = random.Random(seed)
    for _ in range(CASES):
        yield random_hints(rng), [rng.randrange(12) for _ in range(rng.randint(0, 8))]


def random_state(rng: random.Random) -> tuple[list[str], dict[int, int], dict[int, int]]:
    """Free slots (an executor id per free core, in offer order) and pending / running task counts per stage."""
    slots = [e for e in EXECUTORS for _ in range(rng.randint(0, 3))]
    rng.shuffle(slots)
    stages = rng.sample(STAGES, rng.randint(1, 6))
    pending = {s: rng.choice([0, 1, 1, 2, 3, 8]) for s in stages}
    running = {s: rng.choice([0, 0, 1, 4]) for s in stages}
    return slots, pending, running


def scala_plan(jvm: Jvm, slots: list[str], pending: dict[int, int], running: dict[int, int], hints: Any) -> list[tuple[str, int]]:
    placed = jvm.trspark.HintPlacement.plan(slots, pending, running, hints)
    return [(e, int(s)) for e, s in (str(p).split(":") for p in placed)]


def test_order_stages_agrees_with_reference(jvm: Jvm) -> None:
    differences = []
    for hints, runnable in random_cases(seed=5):
        expected = placement.order_stages(runnable, hints)
        got = list(jvm.trspark.HintPlacement.orderStages(runnable, scala_hints(jvm, hints)))
        if got != expected:
            differences.append((hints, runnable, expected, got))
    assert differences == []


def test_tier_agrees_with_reference(jvm: Jvm) -> None:
    checked = dict.fromkeys(range(4), 0)
    differences = []
    for hints, _ in itertools.islice(random_cases(seed=8), 150):  # x 35 (executor, stage) pairs each
        scala = scala_hints(jvm, hints)
        for executor in EXECUTORS + ["unknown"]:
            for stage in (0, 3, 7, 11, 99):
                expected = placement.tier(executor, stage, hints)
                checked[expected] += 1
                if jvm.trspark.HintPlacement.tier(executor, stage, scala) != expected:
                    differences.append((hints, executor, stage, expected))
    assert differences == []
    assert min(checked.values()) > 50, f"every tier must be exercised: {checked}"


def test_placement_parity_on_random_states(jvm: Jvm) -> None:
    """Same slots, task counts and hints: Python and Scala start the same tasks on the same executors, in order."""
    rng = random.Random(21)
    differences = []
    seen = dict.fromkeys(range(3), 0)  # placements made in each pass
    for _ in range(CASES):
        hints = random_hints(rng)
        slots, pending, running = random_state(rng)
        expected = placement.plan(slots, pending, running, hints)
        got = scala_plan(jvm, slots, pending, running, scala_hints(jvm, hints))
        if got != expected:
            differences.append((hints, slots, pending, running, expected, got))
        for executor, stage in expected:
            seen[placement.tier(executor, stage, hints)] += 1
    assert differences == []
    assert min(seen.values()) > 20, f"every pass must place tasks: {seen}"


def test_worked_example(jvm: Jvm) -> None:
    """Executor 2 dies soon: stage 4's long tasks must not start there; stage 5's short ones may.

    Executor 3 is a fresh JVM (fallback): it takes what the others leave. Stage 6 has nothing
    running and every free slot forbids it: it still gets one task (no stage starves).
    """
    hints = SchedulingHints(stage_order=(5, 4), forbidden={4: ("2",), 6: ("1", "2", "3")}, fallback={4: ("3",), 5: ("3",)})
    slots = ["2", "3", "1", "2", "1", "3"]
    pending, running = {4: 3, 5: 1, 6: 2}, {4: 1, 5: 0, 6: 0}
    expected = [
        ("2", 5),  # pass 0: stage 5 first by the hints' order
        ("1", 4), ("1", 4),  # pass 0: 2 is forbidden for stage 4, 3 only a fallback
        ("3", 4),  # pass 1: the fallback takes stage 4's last task
        ("2", 6),  # pass 2: stage 6 would starve: one task on the next free slot
    ]
    assert placement.plan(slots, pending, running, hints) == expected
    scala = scala_hints(jvm, hints)
    assert scala_plan(jvm, slots, pending, running, scala) == expected
    assert list(jvm.trspark.HintPlacement.orderStages([3, 4, 5], scala)) == [5, 4, 3]


def test_draining_executor_takes_nothing(jvm: Jvm) -> None:
    """Executor 2 got a termination notice: no task starts there, even for a stage that would starve."""
    hints = SchedulingHints(stage_order=(5,), forbidden={5: ("1",)}, drain=("2",))
    assert placement.plan(["2", "2"], {5: 1}, {}, hints) == []
    assert placement.plan(["2", "1"], {5: 1}, {}, hints) == [("1", 5)]
    scala = scala_hints(jvm, hints)
    assert scala_plan(jvm, ["2", "2"], {5: 1}, {}, scala) == []
    assert scala_plan(jvm, ["2", "1"], {5: 1}, {}, scala) == [("1", 5)]


def test_parse_reads_every_field(jvm: Jvm) -> None:
    line = to_json(SchedulingHints(stage_order=(3, 1), forbidden={1: ("7", "8")}, fallback={3: ("9",)}, drain=("6",)))
    hints = jvm.trspark.SchedulingHints.parse(line)
    assert hints.stageOrder().mkString(",") == "3,1"
    assert sorted(hints.forbidden().apply(1).mkString(",").split(",")) == ["7", "8"]
    assert hints.fallback().apply(3).mkString(",") == "9"
    assert hints.drain().mkString(",") == "6"
    assert jvm.trspark.SchedulingHints.parse('{"type":"SchedulingHints"}').isEmpty()


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"type":"Backup"}', "got a 'Backup' message"),
        ('{"type":"SchedulingHints","stage_order":"3,1"}', "bad stage_order"),
        ('{"type":"SchedulingHints","stage_order":[1.5]}', "bad stage_order"),
        ('{"type":"SchedulingHints","forbidden":{"1":"7"}}', "bad forbidden[1]"),
        ('{"type":"SchedulingHints","forbidden":{"1":[7]}}', "bad forbidden[1]"),
        ('{"type":"SchedulingHints","fallback":{"x":["7"]}}', "bad fallback key"),
        ('{"type":"SchedulingHints","drain":"7"}', "bad drain"),
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
        assert "org.apache.spark.trspark.HintedScheduling" in interfaces
        live = Live(spark)
        live.run(LIVE_EXECUTORS * 2, 0.2)  # every executor has started its Python worker
        yield live
    finally:
        spark.stop()


def everywhere(*executors: str) -> dict[int, tuple[str, ...]]:
    """The same executors for every stage id a test job can get."""
    return {s: tuple(executors) for s in range(500)}


@pytest.mark.spark
def test_long_tasks_avoid_the_doomed_executor(live: Live) -> None:
    live.set_hints(SchedulingHints(forbidden=everywhere(DOOMED)))
    try:
        placed = [e for _ in range(8) for s in live.run(2, 0.3) for e, _ in live.tasks(s)]
        # More tasks than safe slots: the stage always has a task running, so it never starves.
        busy = [e for s in live.run(6, 0.5) for e, _ in live.tasks(s)]
    finally:
        live.set_hints(None)
    assert len(placed) == 16 and DOOMED not in placed, placed
    assert len(busy) == 6 and DOOMED not in busy, busy
    # Control: without hints Spark spreads the same jobs over all executors (P(miss) = (1/3)^15).
    unhinted = [e for _ in range(15) for s in live.run(2, 0.3) for e, _ in live.tasks(s)]
    assert DOOMED in unhinted, unhinted


@pytest.mark.spark
def test_fallback_executor_used_when_no_other_slot_is_free(live: Live) -> None:
    live.set_hints(SchedulingHints(fallback=everywhere(DOOMED)))
    try:
        (stage,) = live.run(6, 0.5)
    finally:
        live.set_hints(None)
    assert DOOMED in [e for e, _ in live.tasks(stage)]


@pytest.mark.spark
def test_a_stage_forbidden_everywhere_runs_one_task_at_a_time(live: Live) -> None:
    """No free slot may take the stage: it does not starve, but runs only one task at a time."""
    live.set_hints(SchedulingHints(forbidden=everywhere(*(str(i) for i in range(LIVE_EXECUTORS)))))
    try:
        (stage,) = live.run(3, 0.5)
    finally:
        live.set_hints(None)
    tasks = sorted(t for _, t in live.tasks(stage))
    assert len(tasks) == 3
    assert all(b - a >= 500 for a, b in itertools.pairwise(tasks)), tasks  # each waits for the previous one (ms)


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


def test_stable_placement_hints_place_alike(jvm: Jvm) -> None:
    """Hints of the stable-capacity rule (spot forbidden, then spot as fallback): Python and Scala agree."""
    forbid = SchedulingHints(stage_order=(1, 0), forbidden={1: ("s1", "s2")}, fallback={0: ("4",)})
    later = SchedulingHints(stage_order=(1, 0), forbidden={}, fallback={1: ("s1", "s2"), 0: ("4",)})
    slots = ["s1", "od", "s2", "4", "od"]
    for hints, pending, running in ((forbid, {0: 2, 1: 4}, {1: 1}), (later, {0: 2, 1: 4}, {1: 1}),
                                    (forbid, {1: 3}, {1: 0})):
        expected = placement.plan(slots, pending, running, hints)
        assert scala_plan(jvm, slots, pending, running, scala_hints(jvm, hints)) == expected
    # Spot slots take stage 0 only; stage 1 goes to od and to executor 4 (a fallback for stage 0 alone).
    assert placement.plan(slots, {0: 2, 1: 4}, {1: 1}, forbid) == [("s1", 0), ("od", 1), ("s2", 0), ("4", 1), ("od", 1)]
