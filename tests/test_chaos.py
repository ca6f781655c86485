"""The eviction injector: discovery, kills and records on a fake process tree, then on real Spark."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import numpy as np
import psutil
import pytest
from jvm_gateway import wait_for as wait_until

from cost_model.lifetimes import from_spec
from jobs.harness.chaos import EvictionInjector
from jobs.harness.executors import EXECUTOR_CLASS, driver_pid, find_executors, signal_would_terminate
from jobs.harness.kill_schedule import draw_schedule
from jobs.tpcds.metrics import executor_ids

TIMEOUT = 20.0
SPARK_TIMEOUT = 150.0  # a loaded 2-core machine: executors took 40 s to register in one run
PAUSE = "import signal; signal.pause()"
# A launcher that starts an executor as its own child (a grandchild of the test) and prints its pid.
# Its own argv holds the executor's arguments with the class name split, so only the child matches.
NESTED = (
    "import subprocess, sys, signal; "
    "args = [a.replace('#', '') for a in sys.argv[2:]]; "
    "p = subprocess.Popen([sys.executable, '-c', sys.argv[1], *args]); "
    "print(p.pid, flush=True); signal.pause()"
)
# Ignores SIGPWR (as a Spark executor does: it starts decommissioning instead), then says so.
IGNORES_SIGPWR = "import signal; signal.signal(signal.SIGPWR, signal.SIG_IGN); print('ready', flush=True); signal.pause()"
# Handles SIGPWR (as trspark's notice watcher does), says when it is ready and when it got one.
CATCHES_SIGPWR = ("import signal; signal.signal(signal.SIGPWR, lambda *_: print('noticed', flush=True)); "
                  "print('ready', flush=True)\nwhile True: signal.pause()")

# Ignores SIGPWR, then forks a child that keeps the executor's command line (a JVM's child shows
# it until it execs its program) and prints the child's pid.
FORKS = ("import os, signal; signal.signal(signal.SIGPWR, signal.SIG_IGN); pid = os.fork()\n"
         "if pid == 0: signal.pause()\n"
         "print(pid, flush=True); signal.pause()")


# The shared wait, with this module's timeout.
wait_for = partial(wait_until, timeout=TIMEOUT, every=0.05)


class FakeCluster:
    """Child processes of the test whose argv looks like Spark executor JVMs."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.pids: dict[str, int] = {}

    def executor_args(self, executor_id: str) -> list[str]:
        return [EXECUTOR_CLASS, "--driver-url", "spark://x", "--executor-id", executor_id, "--cores", "1"]

    def add(self, executor_id: str, *, nested: bool = False) -> int:
        if nested:
            args = [a.replace("org.", "org.#") for a in self.executor_args(executor_id)]
            proc = subprocess.Popen([sys.executable, "-c", NESTED, PAUSE, *args], stdout=subprocess.PIPE)
            pid = int(proc.stdout.readline())  # type: ignore[union-attr]
        else:
            proc = subprocess.Popen([sys.executable, "-c", PAUSE, *self.executor_args(executor_id)])
            pid = proc.pid
        self.procs.append(proc)
        self.pids[executor_id] = pid
        # Distinct start times (10 ms /proc resolution) keep "oldest first" unambiguous.
        wait_for(lambda: any(e.pid == pid for e in find_executors(self.driver)), what=f"executor {executor_id}")
        time.sleep(0.02)
        return pid

    def start(self, executor_id: str, program: str) -> tuple[subprocess.Popen[bytes], bytes]:
        """Run ``program`` as executor ``executor_id``; return it and its first line, once printed (it is ready then)."""
        proc = subprocess.Popen([sys.executable, "-c", program, *self.executor_args(executor_id)], stdout=subprocess.PIPE)
        self.procs.append(proc)
        line = proc.stdout.readline()  # type: ignore[union-attr]
        time.sleep(0.02)  # distinct start times (10 ms /proc resolution) keep "oldest first" unambiguous
        return proc, line

    def decoy(self) -> None:
        self.procs.append(subprocess.Popen([sys.executable, "-c", PAUSE, "org.apache.spark.deploy.worker.Worker"]))

    @property
    def driver(self) -> int:
        import os

        return os.getpid()

    def alive_ids(self) -> list[str]:
        return [e.executor_id for e in find_executors(self.driver)]

    def close(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait(TIMEOUT)
        for pid in self.pids.values():  # grandchildren of nested launchers
            try:
                import os

                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    fake = FakeCluster()
    try:
        yield fake
    finally:
        fake.close()


def test_find_executors_reads_ids_from_descendants_oldest_first(cluster: FakeCluster) -> None:
    cluster.decoy()
    cluster.add("10")
    cluster.add("2", nested=True)
    cluster.add("3")
    found = find_executors(cluster.driver)
    assert [(e.executor_id, e.pid) for e in found] == [(i, cluster.pids[i]) for i in ("10", "2", "3")]
    assert found[0].started <= found[1].started <= found[2].started
    assert find_executors(2**22 + 12345) == []  # no such driver


def test_schedule_kills_by_rank_and_records_it(cluster: FakeCluster) -> None:
    for executor_id in ("0", "1", "2"):
        cluster.add(executor_id)
    with EvictionInjector(cluster.driver, schedule=[(0.0, 0), (0.3, 5)], poll=0.02) as injector:
        wait_for(lambda: len(injector.records) == 2, what="two kills")
    records = injector.records
    # rank 0 = oldest ("0"); then rank 5 mod 2 alive = 1 -> "2" (the younger of "1", "2").
    assert [(r.executor_id, r.pid, r.signal, r.rank) for r in records] == [
        ("0", cluster.pids["0"], signal.SIGKILL, 0),
        ("2", cluster.pids["2"], signal.SIGKILL, 1),
    ]
    assert 0.0 <= records[0].t <= records[1].t and records[1].t >= 0.3  # never early (late is the host's doing)
    assert cluster.procs[0].wait(TIMEOUT) == -signal.SIGKILL and cluster.procs[2].wait(TIMEOUT) == -signal.SIGKILL
    assert cluster.alive_ids() == ["1"]
    assert injector.schedule() == [(records[0].t, 0), (records[1].t, 1)]


def test_on_demand_executors_are_spared_and_not_ranked(cluster: FakeCluster) -> None:
    for executor_id in ("0", "1", "2"):
        cluster.add(executor_id)
    # "0" is on-demand: rank 0 is then "1", the oldest spot executor, and rank 3 mod 1 alive is "2".
    with EvictionInjector(cluster.driver, schedule=[(0.0, 0), (0.2, 3), (0.4, 0)], spare=lambda e: e == "0",
                          poll=0.02) as injector:
        wait_for(lambda: len(injector.records) == 2, what="two kills")
        # Until the second victim has exited, the model would still see it and draw its death.
        wait_for(lambda: cluster.alive_ids() == ["0"], what="the two kills to take effect")
        model = EvictionInjector(cluster.driver, model="exponential:mean=0.01", rng=1, spare=lambda e: e == "0",
                                 min_alive=0, poll=0.02).start()
        try:
            wait_for(lambda: injector.elapsed() > 0.6, what="the third scheduled kill's time")
        finally:
            model.stop()
    assert [r.executor_id for r in injector.records] == ["1", "2"]
    assert model.records == [] and model.planned_deaths() == {}
    assert cluster.alive_ids() == ["0"]


def test_a_child_of_an_executor_is_no_executor_and_does_not_let_min_alive_be_passed(cluster: FakeCluster) -> None:
    for executor_id in ("16", "19"):
        assert cluster.start(executor_id, IGNORES_SIGPWR)[1] == b"ready\n"
    forking, child_pid = cluster.start("20", FORKS)
    child = psutil.Process(int(child_pid))
    try:
        assert child.ppid() == forking.pid and "--executor-id" in child.cmdline()
        assert sorted(e.pid for e in find_executors(cluster.driver)) == sorted(p.pid for p in cluster.procs)
        # Two notices at once, the third due while both victims still run: with min_alive=1 it
        # waits, even though "20" has a child that looks like one more executor.
        now = [0.0]
        injector = EvictionInjector(cluster.driver, schedule=[(0.9, 2), (3.8, 1), (9.7, 0)], notice=5.0,
                                    min_alive=1, clock=lambda: now[0]).start(background=False)
        injector.step()
        now[0] = 4.7
        injector.step()
        assert [(r.executor_id, r.signal) for r in injector.records] == [("20", signal.SIGPWR), ("19", signal.SIGPWR)]
    finally:
        child.kill()


def test_min_alive_makes_a_due_kill_wait_for_a_replacement(cluster: FakeCluster) -> None:
    for executor_id in ("0", "1", "2"):
        cluster.add(executor_id)
    injector = EvictionInjector(cluster.driver, schedule=[(0.0, 0)] * 3, min_alive=2).start(background=False)
    injector.step()
    injector.step()
    assert [r.executor_id for r in injector.records] == ["0"]  # a second kill would leave 1 < 2
    wait_for(lambda: cluster.alive_ids() == ["1", "2"], what="the kill to take effect")
    cluster.add("3")  # the replacement registers
    injector.step()
    assert [r.executor_id for r in injector.records] == ["0", "1"]


def test_a_schedule_ranks_only_registered_executors_and_waits_for_them(cluster: FakeCluster) -> None:
    for executor_id in ("0", "1", "2"):
        cluster.add(executor_id)
    registered = {"0", "2"}  # "1" is a replacement still starting: its JVM runs, the driver lacks it
    asked: list[str] = []

    def is_registered(executor_id: str) -> bool:
        asked.append(executor_id)
        return executor_id in registered

    now = [0.0]
    injector = EvictionInjector(cluster.driver, schedule=[(1.0, 1), (6.0, 0)], notice=5.0, min_alive=1,
                                registered=is_registered, clock=lambda: now[0]).start(background=False)
    injector.step()
    # Rank 1 among the registered ("0", "2") is "2", not the starting "1".
    assert [(r.executor_id, r.signal, r.rank) for r in injector.records] == [("2", signal.SIGPWR, 1)]
    now[0] = 5.0
    injector.step()  # the notice's 5 s are over: "2" is killed; the next notice is due, but it would leave
    # fewer registered executors ("0") than min_alive: it waits
    assert [(r.executor_id, r.signal) for r in injector.records] == [("2", signal.SIGPWR), ("2", signal.SIGKILL)]
    registered.add("1")  # the replacement registers
    injector.step()
    assert [(r.executor_id, r.rank) for r in injector.records][2:] == [("0", 0)]
    asked.clear()
    injector.step()  # nothing more is due: the driver is not asked
    assert asked == []


def test_with_begin_the_offsets_count_from_when_it_holds(cluster: FakeCluster) -> None:
    for executor_id in ("0", "1"):
        cluster.add(executor_id)
    began = threading.Event()
    asked = []

    def begin() -> bool:
        asked.append(1)
        return began.is_set()

    now = [50.0]
    injector = EvictionInjector(cluster.driver, schedule=[(2.0, 0)], min_alive=0, begin=begin, poll=0.01,
                                clock=lambda: now[0]).start()
    try:
        wait_for(lambda: len(asked) >= 3, what="the injector to ask begin() a few times")
        now[0] = 60.0  # 10 s after start(), but the clock has not begun: nothing is due
        wait_for(lambda: len(asked) >= 6, what="more looks before begin() holds")
        assert injector.records == [] and injector.elapsed() == 0.0 and not injector.began
        began.set()
        wait_for(lambda: injector.began, what="the clock to begin")
        now[0] = 61.9
        wait_for(lambda: injector.elapsed() == pytest.approx(1.9), what="the clock to follow")
        assert injector.records == []
        now[0] = 62.0
        wait_for(lambda: len(injector.records) == 1, what="the kill 2 s after begin() held")
    finally:
        injector.stop()
    assert injector.records[0].t == pytest.approx(2.0) and injector.records[0].executor_id == "0"


def test_a_run_that_ends_before_begin_holds_meets_no_kill(cluster: FakeCluster) -> None:
    cluster.add("0")
    asked = threading.Event()

    def begin() -> bool:
        asked.set()
        return False

    injector = EvictionInjector(cluster.driver, schedule=[(0.0, 0)], min_alive=0, begin=begin, poll=0.01).start()
    wait_for(asked.is_set, what="the injector to ask begin()")
    injector.stop()
    assert injector.finish(5.0) == 0 and injector.kills_by(injector.elapsed()) == 0
    assert injector.records == [] and cluster.alive_ids() == ["0"]
    with pytest.raises(ValueError, match="begin="):
        EvictionInjector(cluster.driver, schedule=[(0.0, 0)], begin=begin).start(background=False)


def test_max_kills_and_sigpwr_only(cluster: FakeCluster) -> None:
    for executor_id in ("0", "1"):
        cluster.add(executor_id)
    injector = EvictionInjector(cluster.driver, schedule=[(0.0, 0)] * 3, max_kills=1, min_alive=0,
                                signal=signal.SIGPWR).start(background=False)
    injector.step()
    injector.step()
    assert [(r.executor_id, r.signal) for r in injector.records] == [("0", signal.SIGPWR)]
    assert cluster.procs[0].wait(TIMEOUT) == -signal.SIGPWR  # default action of SIGPWR: terminate


def test_notice_sends_sigpwr_then_sigkill_after_the_notice(cluster: FakeCluster) -> None:
    proc, line = cluster.start("0", IGNORES_SIGPWR)
    assert line == b"ready\n"
    now = [100.0]
    injector = EvictionInjector(cluster.driver, schedule=[(10.0, 0)], notice=4.0, min_alive=0,
                                clock=lambda: now[0]).start(background=False)
    now[0] = 105.9  # 5.9 s after start: 0.1 s before the notice is due
    injector.step()
    assert injector.records == []
    now[0] = 106.0
    injector.step()
    now[0] = 109.9
    injector.step()
    assert [r.signal for r in injector.records] == [signal.SIGPWR] and proc.poll() is None
    now[0] = 110.0
    injector.step()
    assert [(r.t, r.signal) for r in injector.records] == [(6.0, signal.SIGPWR), (10.0, signal.SIGKILL)]
    assert proc.wait(TIMEOUT) == -signal.SIGKILL
    assert injector.schedule() == [(10.0, 0)]
    assert injector.kills_by(9.9) == 0 and injector.kills_by(10.0) == 1


def test_a_notice_is_not_sent_to_a_jvm_that_the_signal_would_kill_and_its_kill_still_comes(cluster: FakeCluster) -> None:
    # "0" has no SIGPWR handler yet (a JVM still starting); "1" has one and takes the notice.
    starting = cluster.add("0")
    ready, line = cluster.start("1", CATCHES_SIGPWR)
    assert line == b"ready\n"
    assert signal_would_terminate(starting, signal.SIGPWR) and not signal_would_terminate(ready.pid, signal.SIGPWR)
    now = [0.0]
    injector = EvictionInjector(cluster.driver, schedule=[(5.0, 0), (5.0, 0)], notice=4.0, min_alive=0,
                                clock=lambda: now[0]).start(background=False)
    now[0] = 1.0
    injector.step()
    assert [(r.executor_id, r.signal, r.delivered) for r in injector.records] == [
        ("0", signal.SIGPWR, "missed"), ("1", signal.SIGPWR, "signal")]
    assert ready.stdout.readline() == b"noticed\n"  # type: ignore[union-attr]
    assert cluster.procs[0].poll() is None  # alive until its deadline
    now[0] = 5.0
    injector.step()
    assert [(r.executor_id, r.signal) for r in injector.records[2:]] == [("0", signal.SIGKILL), ("1", signal.SIGKILL)]
    assert cluster.procs[0].wait(TIMEOUT) == -signal.SIGKILL and ready.wait(TIMEOUT) == -signal.SIGKILL
    assert injector.schedule() == [(5.0, 0), (5.0, 0)]


def test_signal_would_terminate_reads_the_masks_of_the_process() -> None:
    ignoring = subprocess.Popen([sys.executable, "-c", IGNORES_SIGPWR], stdout=subprocess.PIPE)
    try:
        assert ignoring.stdout.readline() == b"ready\n"  # type: ignore[union-attr]
        assert not signal_would_terminate(ignoring.pid, signal.SIGPWR)
        assert signal_would_terminate(ignoring.pid, signal.SIGTERM)
    finally:
        ignoring.kill()
        ignoring.wait(TIMEOUT)
    assert not signal_would_terminate(ignoring.pid, signal.SIGPWR)  # gone


def test_finish_notices_kills_noticed_executors_at_their_deadline_after_stop(cluster: FakeCluster) -> None:
    procs = []
    for executor_id in ("0", "1"):  # started in this order: "0" is the oldest (rank 0)
        proc, line = cluster.start(executor_id, IGNORES_SIGPWR)
        assert line == b"ready\n"
        procs.append(proc)
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # the fake clock moves by what the injector waits
        slept.append(seconds)
        now[0] += seconds

    injector = EvictionInjector(cluster.driver, schedule=[(8.0, 0), (30.0, 0)], notice=5.0, min_alive=0,
                                clock=lambda: now[0]).start(background=False)
    now[0] = 3.0  # executor 0 gets its notice: its kill is due at 8 s
    injector.step()
    now[0] = 4.0  # the query ends at 4 s, inside the window; the 30 s kill is never reached
    injector.stop()
    assert [r.signal for r in injector.records] == [signal.SIGPWR] and procs[0].poll() is None
    assert injector.victims == 1 and injector.kills_by(4.0) == 0  # its kill is due after the run
    assert injector.kills_by(8.0) == 1
    assert injector.finish(0.0, sleep=sleep) == 1  # with notices: every noticed executor, whatever the window
    assert slept == [4.0]
    assert [(r.t, r.signal, r.executor_id) for r in injector.records][-1] == (8.0, signal.SIGKILL, "0")
    assert procs[0].wait(TIMEOUT) == -signal.SIGKILL
    assert procs[1].poll() is None  # the kill the run never reached is not made up
    assert injector.finish_notices(sleep=sleep) == 0


def test_finish_scheduled_makes_the_kills_due_within_the_window_after_stop(cluster: FakeCluster) -> None:
    for executor_id in ("0", "1", "2"):
        cluster.add(executor_id)
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    injector = EvictionInjector(cluster.driver, schedule=[(2.0, 0), (7.0, 0), (12.0, 0)], min_alive=0,
                                clock=lambda: now[0]).start(background=False)
    now[0] = 2.0
    injector.step()  # the kill during the run
    now[0] = 4.0  # the run ends; a policy told of kills 5 s ahead got the 7 s one's notice, not the 12 s one's
    injector.stop()
    assert injector.finish(5.0, sleep=sleep) == 1
    assert slept == [3.0]
    assert [(r.t, r.executor_id) for r in injector.records] == [(2.0, "0"), (7.0, "1")]
    assert wait_for(lambda: cluster.procs[1].poll() is not None, what="executor 1 killed")
    assert cluster.procs[2].poll() is None  # due after the window: never made up
    assert injector.finish_scheduled(1.0, sleep=sleep) == 0  # the next kill is 5 s away
    noticed = EvictionInjector(cluster.driver, schedule=[(1.0, 0)], notice=1.0).start(background=False)
    with pytest.raises(RuntimeError, match="finish_notices"):
        noticed.finish_scheduled(5.0)


def test_model_lifetimes_are_drawn_per_executor_from_its_start(cluster: FakeCluster) -> None:
    for executor_id in ("0", "1", "2"):
        cluster.add(executor_id)
    model = from_spec("exponential:mean=50")
    expected = model.sample(4, np.random.default_rng(11))  # the injector's draws, in discovery order
    now = [0.0]
    injector = EvictionInjector(cluster.driver, model="exponential:mean=50", rng=11, min_alive=1,
                                clock=lambda: now[0]).start(background=False)
    injector.step()  # draws for the three running executors, first seen at 0
    deaths = injector.planned_deaths()
    assert deaths == {"0": expected[0], "1": expected[1], "2": expected[2]}
    order = sorted(deaths, key=deaths.__getitem__)
    now[0] = deaths[order[0]] - 1e-6
    injector.step()
    assert injector.records == []
    now[0] = deaths[order[0]]
    injector.step()
    assert [r.executor_id for r in injector.records] == [order[0]]
    now[0] = max(deaths.values()) + 1.0
    injector.step()  # the last one is due too but min_alive=1 keeps it
    assert [r.executor_id for r in injector.records] == order[:2]
    wait_for(lambda: cluster.alive_ids() == [order[2]], what="two kills to take effect")
    cluster.add("3")  # a replacement: its own lifetime from when it appeared
    now[0] += 7.0
    injector.step()
    assert injector.planned_deaths()["3"] == now[0] + expected[3]


def test_a_new_executor_that_gets_a_dead_ones_pid_is_still_killed(cluster: FakeCluster,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Pids come back within a long run; the executor id tells the new JVM from the killed one."""
    from jobs.harness import chaos
    from jobs.harness.executors import ExecutorProcess

    pid = cluster.add("0")
    found = [ExecutorProcess("0", pid, 1.0)]
    monkeypatch.setattr(chaos, "find_executors", lambda driver_pid: list(found))
    now = [0.0]
    injector = EvictionInjector(cluster.driver, schedule=[(1.0, 0), (2.0, 0)], min_alive=0,
                                clock=lambda: now[0]).start(background=False)
    now[0] = 1.0
    injector.step()
    assert injector.victims == 1
    found[:] = [ExecutorProcess("1", pid, 3.0)]  # a replacement that was given the same pid
    now[0] = 2.0
    injector.step()
    assert injector.victims == 2


def test_draw_schedule_is_reproducible_and_follows_the_model() -> None:
    first = draw_schedule("exponential:mean=10", 3, 1000.0, np.random.default_rng(5))
    assert first == draw_schedule(from_spec("exponential:mean=10"), 3, 1000.0, np.random.default_rng(5))
    assert first != draw_schedule("exponential:mean=10", 3, 1000.0, np.random.default_rng(6))
    times = [t for t, _ in first]
    assert times == sorted(times) and times[-1] <= 1000.0
    assert {rank for _, rank in first} <= {0, 1, 2}
    # Three renewal processes with mean lifetime 10 s: about 3 * 1000 / 10 = 300 kills (sd ~ 17).
    assert 250 <= len(first) <= 350
    # With a replacement delay the replacement is not alive yet: a lone slot is always rank 0.
    assert {rank for _, rank in draw_schedule("exponential:mean=10", 1, 100.0, np.random.default_rng(5))} == {0}
    with pytest.raises(ValueError, match="executors >= 1"):
        draw_schedule("exponential:mean=10", 0, 10.0, np.random.default_rng(5))


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="exactly one of model"):
        EvictionInjector(1)
    with pytest.raises(ValueError, match="needs rng"):
        EvictionInjector(1, model="exponential:mean=5")
    with pytest.raises(ValueError, match="unknown lifetime model"):
        EvictionInjector(1, model="nope:x=1", rng=1)


# ---- real Spark ------------------------------------------------------------------------------------


@pytest.fixture
def two_executors() -> Iterator[Any]:
    """A local cluster of two executor JVMs, both registered with the driver."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local-cluster[2,1,1024]").appName("trspark-chaos-test")
        .config("spark.ui.enabled", "false")
        .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    try:
        assert spark.sparkContext.master == "local-cluster[2,1,1024]", "another test left a different SparkContext running"
        driver = driver_pid(spark.sparkContext)
        wait_for(lambda: len(find_executors(driver)) == 2, timeout=SPARK_TIMEOUT, what="2 executor JVMs")
        wait_for(lambda: len(spark_executor_ids(spark)) == 2, timeout=SPARK_TIMEOUT,
                 what="Spark to register both executors")
        yield spark
    finally:
        spark.stop()


def spark_executor_ids(spark: Any) -> set[str]:
    """The executors the driver lists."""
    return executor_ids(spark.sparkContext)()


@pytest.mark.spark
def test_kill_a_real_executor_and_spark_registers_a_replacement(two_executors: Any) -> None:
    spark = two_executors
    driver = driver_pid(spark.sparkContext)
    before = {e.executor_id: e.pid for e in find_executors(driver)}
    with EvictionInjector(driver, schedule=[(0.0, 0)], min_alive=1, poll=0.1) as injector:
        wait_for(lambda: injector.records, what="the kill")
    (record,) = injector.records
    assert record.executor_id in before and record.pid == before[record.executor_id]

    def replaced() -> bool:
        ids = spark_executor_ids(spark)
        return len(ids) == 2 and record.executor_id not in ids

    wait_for(replaced, timeout=SPARK_TIMEOUT, what="Spark to drop the killed executor and register a replacement")
    new_id = (spark_executor_ids(spark) - set(before)).pop()
    assert new_id in {e.executor_id for e in find_executors(driver)}
    assert spark.range(0, 10_000, numPartitions=4).selectExpr("sum(id)").collect()[0][0] == 49_995_000


@pytest.mark.spark
def test_a_held_executor_target_keeps_a_killed_executor_unreplaced_until_it_is_raised(two_executors: Any) -> None:
    from jobs.tpcds.session import set_executor_target

    spark = two_executors
    driver = driver_pid(spark.sparkContext)
    before = [e.executor_id for e in find_executors(driver)]
    set_executor_target(spark, 0)
    with EvictionInjector(driver, schedule=[(0.0, 0)], min_alive=1, poll=0.1) as injector:
        wait_for(lambda: injector.records, what="the kill")
    killed = injector.records[0].executor_id
    survivor = [executor_id for executor_id in before if executor_id != killed]
    wait_for(lambda: killed not in spark_executor_ids(spark), timeout=SPARK_TIMEOUT, what="Spark to drop it")
    # Work on the survivor, long after an unheld master would have started a replacement JVM.
    for _ in range(3):
        assert spark.range(0, 2_000_000, numPartitions=8).selectExpr("sum(id)").collect()[0][0] == 1_999_999_000_000
    assert [e.executor_id for e in find_executors(driver)] == survivor
    set_executor_target(spark, 2)
    wait_for(lambda: len(spark_executor_ids(spark)) == 2, timeout=SPARK_TIMEOUT, what="the replacement")


@pytest.mark.spark
def test_a_kill_clock_on_the_first_finished_task_of_a_job_group(two_executors: Any) -> None:
    from jobs.tpcds.metrics import first_task_finished

    spark = two_executors
    sc = spark.sparkContext
    driver = driver_pid(sc)
    finished = first_task_finished(sc, "measured-run")
    injector = EvictionInjector(driver, schedule=[(0.0, 0)], min_alive=1, poll=0.05, begin=finished).start()
    try:
        sc.setJobGroup("another-run", "not the measured run")
        assert spark.range(0, 1000, numPartitions=2).selectExpr("sum(id)").collect()[0][0] == 499_500
        assert not finished() and not injector.began and injector.records == []
        sc.setJobGroup("measured-run", "its first finished task starts the kill clock")
        assert spark.range(0, 1000, numPartitions=2).selectExpr("sum(id)").collect()[0][0] == 499_500
        assert finished()
        wait_for(lambda: injector.records, timeout=SPARK_TIMEOUT, what="the kill once the clock began")
    finally:
        injector.stop()
    assert injector.began and injector.records[0].t < 1.0
