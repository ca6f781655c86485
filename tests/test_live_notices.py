"""Termination notices end to end: the injector's notice by callback, then a live job on
``local-trcluster`` whose executors get an Azure endpoint notice and a SIGPWR notice, each
followed by a SIGKILL: the job finishes with the right answer and trspark acted on the notices."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from test_chaos import FakeCluster, spark_executor_ids, wait_for

from bench import notice_vs_decommission as bench
from jobs.harness.chaos import EvictionInjector, ExecutorProcess, find_executors
from jobs.harness.executors import driver_pid
from jobs.harness.notice_endpoints import NoticeServer
from jobs.tpcds.session import forget_local_dirs

# ---- the injector's notice by callback (fake executors, no Spark) --------------------------------------


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    fake = FakeCluster()
    try:
        yield fake
    finally:
        fake.close()


def test_notify_replaces_sigpwr_and_the_kill_follows_after_the_notice(cluster: FakeCluster) -> None:
    cluster.add("1")
    cluster.add("2")
    noticed: list[str] = []
    injector = EvictionInjector(cluster.driver, schedule=[(0.0, 1)], notice=0.5,
                                notify=lambda victim: noticed.append(victim.executor_id), poll=0.02)
    with injector:
        wait_for(lambda: noticed, what="the notice callback")
        assert noticed == ["2"] and "2" in cluster.alive_ids()  # a callback, not a signal
        wait_for(lambda: "2" not in cluster.alive_ids(), what="the kill after the notice")
    kinds = [(r.executor_id, r.signal, r.delivered) for r in injector.records]
    assert kinds == [("2", signal.SIGPWR, "callback"), ("2", signal.SIGKILL, "signal")]
    assert injector.records[1].t - injector.records[0].t >= 0.5
    assert injector.schedule() == [(pytest.approx(injector.records[0].t + 0.5), 1)]


def test_notify_needs_a_notice_window(cluster: FakeCluster) -> None:
    with pytest.raises(ValueError, match="notice="):
        EvictionInjector(cluster.driver, schedule=[(0.0, 0)], notify=lambda victim: None)


def test_lifetime_counts_from_registration(cluster: FakeCluster) -> None:
    cluster.add("1")
    registered: set[str] = set()
    # Deterministic lifetime 0.3 s: without registration it would die 0.3 s after being seen.
    injector = EvictionInjector(cluster.driver, model="deterministic:at=0.3", rng=1, min_alive=0,
                                registered=registered.__contains__, poll=0.02)
    with injector:
        wait_for(lambda: injector.elapsed() > 1.0, what="a second of injection")
        assert "1" in cluster.alive_ids() and injector.planned_deaths() == {}
        # Read before the registration: the death drawn at it is then never earlier than born + 0.3.
        born = injector.elapsed()
        registered.add("1")
        wait_for(lambda: "1" not in cluster.alive_ids(), what="the kill after registration")
    (kill,) = injector.records
    assert born + 0.3 <= kill.t + 0.05  # lifetime counted from registration, not from first sight


def test_copy_ledger_counts_each_extra_copy(tmp_path: Path) -> None:
    local, store = tmp_path / "local", tmp_path / "store"
    for place, size in (("executor-a/blockmgr-1/0c", 100), ("executor-b/blockmgr-2/11", 100)):
        (local / place).mkdir(parents=True)
        (local / place / "shuffle_0_5_0.data").write_bytes(b"x" * size)
    (local / "executor-a/blockmgr-1/0c/shuffle_0_6_0.data").write_bytes(b"y" * 40)  # never copied
    (store / "app/0/12").mkdir(parents=True)
    (store / "app/0/12/shuffle_0_5_0.data").write_bytes(b"x" * 100)
    (store / "app/0/12/shuffle_0_5_0.index").write_bytes(b"i" * 16)
    (local / "executor-a/blockmgr-1/0c/shuffle_0_5_0.index").write_bytes(b"i" * 16)
    ledger = bench.CopyLedger(local, [store])
    ledger.scan()
    (local / "executor-b/blockmgr-2/11/shuffle_0_5_0.data").unlink()  # deleted later: still counted
    ledger.scan()
    assert ledger.bytes_copied() == 2 * 100 + 16
    assert ledger.outputs_copied() == 1


# ---- live: one local-trcluster with the plugin, notices from an endpoint and from SIGPWR --------------

WINDOW = 10.0
TRACE = "engine-trace.jsonl"
SHAPE = bench.JobShape(partitions=6, records=4000, payload=100, task_seconds=1.5)


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[Any, NoticeServer, Path]]:
    import tempfile

    from pyspark import cloudpickle  # the copy PySpark pickles closures with, not the cloudpickle package
    from pyspark.sql import SparkSession

    from jobs.tpcds.session import spark_home

    os.environ.setdefault("SPARK_HOME", str(spark_home()))
    cloudpickle.register_pickle_by_value(bench)  # executors cannot import the bench script by name
    with NoticeServer() as server, tempfile.TemporaryDirectory(prefix="trspark-live-notices-") as tmp:
        spec = bench.RunSpec(source="azure", policy="trspark", window=WINDOW, kills=[])
        master, settings = bench.policy_settings(spec, Path(tmp), server.url)
        # The engine's interpreter, wrapped to record the engine's events and commands (TRSPARK_TRACE):
        # the py4j JVM may predate this module, so its environment cannot carry the setting.
        traced = Path(tmp) / "python-traced"
        traced.write_text(f'#!/bin/sh\nexport TRSPARK_TRACE="{Path(tmp) / TRACE}"\nexec "{sys.executable}" "$@"\n')
        traced.chmod(0o755)
        settings["spark.trspark.python"] = str(traced)
        settings["spark.trspark.period"] = "1"  # ticks: a noticed executor's room is checked every second
        settings["spark.trspark.engine.timeout"] = "30"  # a fallback must not come from the loaded machine
        builder = (SparkSession.builder.master(master).appName("trspark-live-notices")
                   .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                   .config("spark.local.dir", str(Path(tmp) / "local"))
                   .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
                   .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "180s"))
        for key, value in settings.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        try:
            spark.sparkContext.parallelize(range(12), 12).count()  # every executor's Python worker is up
            yield spark, server, Path(tmp)
        finally:
            spark.stop()
            forget_local_dirs(spark.sparkContext)
            cloudpickle.unregister_pickle_by_value(bench)


def _trace_from_now(trace: Path) -> Callable[[], list[dict[str, Any]]]:
    """A reader of the engine's events (not its commands) written to ``trace`` from now on."""
    import json

    start = trace.stat().st_size if trace.exists() else 0

    def events() -> list[dict[str, Any]]:
        with trace.open(encoding="utf-8") as f:
            f.seek(start)
            # The engine may be writing a line: only whole ones.
            whole = [line for line in f.read().splitlines() if line.endswith("}")]
        return [e for e in map(json.loads, whole) if "seq" in e]

    return events


@pytest.mark.spark
def test_job_survives_endpoint_and_sigpwr_notices_with_kills(live: tuple[Any, NoticeServer, Path]) -> None:
    spark, server, tmp = live
    sc = spark.sparkContext
    status = sc._jvm.org.apache.spark.trspark.TRStatus
    given: list[str] = []

    def notify(victim: ExecutorProcess) -> None:
        # The first victim hears it from its (imitated) Azure metadata service, the second by SIGPWR.
        if not given:
            server.post_notice(WINDOW, vm=f"vm-{victim.executor_id}")
        else:
            os.kill(victim.pid, signal.SIGPWR)
        given.append(victim.executor_id)

    # Kill times in the schedule; the notices go out WINDOW s earlier: 1 s and 3 s into the job.
    injector = EvictionInjector(driver_pid(sc), schedule=[(1.0 + WINDOW, 0), (3.0 + WINDOW, 1)],
                                notice=WINDOW, notify=notify)
    with bench.CopyLedger(tmp / "local", [tmp / "backups"]) as ledger, injector:
        answer = bench.shuffle_job(sc, SHAPE)
        # Each noticed executor is gone by its deadline: killed then, or released earlier by the
        # engine once it held nothing needed. Wait for both.
        wait_for(lambda: len(given) == 2 and not set(given) & {e.executor_id for e in find_executors(driver_pid(sc))},
                 timeout=3 * WINDOW, what="both noticed executors gone")
    assert answer == bench.expected_answer(SHAPE)
    assert len(set(given)) == 2
    wait_for(lambda: status.stat("notices") >= 2, timeout=30.0, what="both notices at the driver plugin")
    # The engine acted on the notices: it had outputs on the doomed executors copied in the window.
    assert status.stat("backups_done") > 0 and ledger.bytes_copied() > 0


def exit_time(pid: int) -> Callable[[], float | None]:
    """A callable giving the epoch second at which process ``pid`` exited, or None while it runs
    (watched from a thread, to psutil's polling interval of at most 0.04 s)."""
    process = psutil.Process(pid)
    seen: list[float] = []

    def watch() -> None:
        process.wait()
        seen.append(time.time())

    threading.Thread(target=watch, daemon=True).start()
    return lambda: seen[0] if seen else None


def removed_at(sc: Any, executor_id: str) -> float:
    """The epoch second at which Spark's listeners saw ``executor_id`` removed (its status store's ``removeTime``)."""
    summaries = sc._jsc.sc().statusStore().executorList(False)
    (summary,) = [summaries.apply(i) for i in range(summaries.size()) if summaries.apply(i).id() == executor_id]
    return int(summary.removeTime().get().getTime()) / 1000


@pytest.mark.spark
def test_an_idle_noticed_executor_is_released_once_no_task_fits_and_replaced(
        live: tuple[Any, NoticeServer, Path]) -> None:
    """Nothing left to do once no task fits before its deadline: the engine lets it go then (about
    one mean task time before the deadline, at the next tick), and the worker starts its
    replacement; nobody kills it. The engine and Spark's scheduler count it gone from its
    release, before the deadline, while its JVM takes up to 5 s to exit; the engine hears of it once."""
    spark, _, tmp = live
    events = _trace_from_now(tmp / TRACE)
    sc = spark.sparkContext
    status = sc._jvm.org.apache.spark.trspark.TRStatus
    driver = driver_pid(sc)
    wait_for(lambda: len(find_executors(driver)) == 3, timeout=90.0, what="three executors")
    spark.sparkContext.parallelize(range(6), 6).count()  # no shuffle: nothing is held anywhere
    victim = find_executors(driver)[0]
    before, others = status.stat("executors_released"), {e.executor_id for e in find_executors(driver)} - {victim.executor_id}
    exited = exit_time(victim.pid)
    os.kill(victim.pid, signal.SIGPWR)  # a notice with a WINDOW s deadline; nobody kills it
    wait_for(lambda: status.stat("executors_released") == before + 1, timeout=60.0, what="the release")  # its time is checked below
    wait_for(lambda: victim.executor_id not in spark_executor_ids(spark), what="Spark to drop it")

    def lost() -> list[dict[str, Any]]:
        return [e for e in events() if e["type"] == "ExecutorLost" and e["executor_id"] == victim.executor_id]

    wait_for(lost, what="the engine told of the release")
    notice = next(e for e in events() if e["type"] == "ExecutorNotice" and e["executor_id"] == victim.executor_id)
    assert lost()[0]["reason"] == "released" and lost()[0]["time"] <= notice["deadline"]
    wait_for(lambda: victim.executor_id not in {e.executor_id for e in find_executors(driver)}, timeout=60.0,
             what="the released executor's exit")
    # Spark stopped listing it (and counting its cores in the default parallelism) at the release,
    # while its JVM still shut down, not once the process had exited.
    assert removed_at(sc, victim.executor_id) < wait_for(exited, what="the JVM's exit time")
    wait_for(lambda: len({e.executor_id for e in find_executors(driver)} - others - {victim.executor_id}) == 1,
             timeout=90.0, what="the replacement")
    assert sc.parallelize(range(6), 6).map(lambda x: x * 2).sum() == 30
    assert len(lost()) == 1


@pytest.mark.spark
def test_a_shuffle_written_by_a_map_stage_job_is_consumed_only_after_its_reader_ends(
        live: tuple[Any, NoticeServer, Path]) -> None:
    """Spark SQL's adaptive execution runs each query stage as its own map-stage job: the shuffle
    it writes is read by the *next* job, so its end must not mark that shuffle consumed (the
    engine would drop its backups before anyone read it)."""
    spark, _, tmp = live
    events = _trace_from_now(tmp / TRACE)

    spark.conf.set("spark.sql.adaptive.enabled", "true")
    rows = spark.range(0, 70_000, 1, 4).selectExpr("id % 7 AS k").groupBy("k").count().collect()
    assert sorted((r["k"], r["count"]) for r in rows) == [(k, 10_000) for k in range(7)]
    readers = wait_for(lambda: [e for e in events() if e["type"] == "StageSubmitted" and e["parent_shuffle_ids"]],
                       what="the stage reading the shuffle")
    shuffle, reader = readers[0]["parent_shuffle_ids"][0], readers[0]["stage_id"]
    wait_for(lambda: any(e["type"] == "ShuffleConsumed" and e["shuffle_id"] == shuffle for e in events()),
             what=f"shuffle {shuffle} consumed")
    seen = events()
    jobs_before_reader = sum(1 for e in seen[:seen.index(readers[0])] if e["type"] == "JobEnded")
    assert jobs_before_reader >= 1, "the shuffle was written by a map-stage job of its own"
    consumed_at = next(i for i, e in enumerate(seen) if e["type"] == "ShuffleConsumed" and e["shuffle_id"] == shuffle)
    reader_done = next(i for i, e in enumerate(seen) if e["type"] == "StageCompleted" and e["stage_id"] == reader)
    assert consumed_at > reader_done


@pytest.mark.spark
def test_a_query_stage_output_nobody_reads_is_consumed_when_the_query_ends(
        live: tuple[Any, NoticeServer, Path]) -> None:
    """Adaptive execution materialises both sides of a join as query stages; one side turns out
    empty, so the join is replaced by an empty relation and the other side's shuffle is never read.
    No reader ends, so only the query's end can tell the engine that shuffle is done with (it
    keeps a shuffle needed while a reader's output is unread)."""
    spark, _, tmp = live
    events = _trace_from_now(tmp / TRACE)
    spark.conf.set("spark.sql.adaptive.enabled", "true")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")  # shuffle both sides
    try:
        big = spark.range(0, 20_000, 1, 4).selectExpr("id % 100 AS k", "id AS v")
        # Empty, but only found so at run time (Spark folds rand() > 2 before running anything).
        empty = spark.range(0, 1_000, 1, 2).where("hash(id) = 7").selectExpr("id AS k")
        assert big.join(empty, "k").collect() == []
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
    written = wait_for(lambda: {e["shuffle_id"] for e in events() if e["type"] == "StageSubmitted"
                                and e.get("shuffle_id") is not None} or None, what="the query stages' shuffles")
    read = {s for e in events() if e["type"] == "StageSubmitted" for s in e["parent_shuffle_ids"]}
    assert written - read, "a query stage's shuffle that no stage read"
    wait_for(lambda: written <= {e["shuffle_id"] for e in events() if e["type"] == "ShuffleConsumed"},
             what=f"shuffles {sorted(written)} consumed at the query's end")
    # Adaptive execution may cancel a query stage still running once the other proved empty: its
    # job ends after the query. Wait for it, so that the next test's trace starts clean.
    wait_for(lambda: {e["job_id"] for e in events() if e["type"] == "JobSubmitted"}
             <= {e["job_id"] for e in events() if e["type"] == "JobEnded"}, what="every job of the query ended")


@pytest.mark.spark
def test_the_engine_learns_each_jobs_stage_graph_before_its_stages_are_submitted(
        live: tuple[Any, NoticeServer, Path]) -> None:
    """``JobSubmitted`` carries Spark's JobStart graph: every stage the job then submits is in it,
    with its task count, the shuffle it writes and its parents, and it arrives before them;
    ``JobEnded`` carries the same job id."""
    from operator import add

    spark, _, tmp = live
    events = _trace_from_now(tmp / TRACE)

    pairs = spark.sparkContext.parallelize(range(1000), 4).map(lambda x: (x % 10, x)).reduceByKey(add, 3)
    result = pairs.map(lambda kv: (kv[0] % 3, kv[1])).reduceByKey(add, 2).collectAsMap()
    assert result == {r: sum(x for x in range(1000) if x % 10 % 3 == r) for r in range(3)}
    seen = wait_for(lambda: (lambda es: es if any(e["type"] == "JobEnded" for e in es) else None)(events()),
                    what="the job's end in the engine trace")
    job = next(e for e in seen if e["type"] == "JobSubmitted")
    graph = {sid: (tasks, shuffle, tuple(parents)) for sid, tasks, shuffle, parents
             in zip(job["stage_ids"], job["num_tasks"], job["shuffle_ids"], job["parents"], strict=True)}
    submitted = [e for e in seen if e["type"] == "StageSubmitted"]
    assert len(submitted) == 3 and len(graph) == 3
    for stage in submitted:
        assert seen.index(job) < seen.index(stage)
        tasks, shuffle, parents = graph[stage["stage_id"]]
        assert (tasks, shuffle, parents) == (stage["num_tasks"], stage["shuffle_id"], tuple(stage["parent_stage_ids"]))
    assert sorted(t for t, _, _ in graph.values()) == [2, 3, 4]
    # Its end names it: the engine forgets the graph of a job that is over.
    assert next(e for e in seen if e["type"] == "JobEnded")["job_id"] == job["job_id"]
