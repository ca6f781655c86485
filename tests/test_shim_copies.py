"""Damaged copies on a real ``local-trcluster[2,1,1024]`` with the built-in always-checkpoint
policy: a remote backup corrupted, truncated or removed after it was committed, and a remote or
peer copy damaged in transit. (A copy cut off by a kill: ``test_shim_live.py``.)

Each case backs up one shuffle, damages its copies, kills an executor and runs the job again:
the damaged copies are detected by checksum (remote: when the driver would re-point a lost
output to it; peer: when the peer re-reads what it received), treated as missing, the lost
outputs are recomputed, the answer is right, and the driver logs one warning for the case.
An intact remote copy is re-pointed to without the driver downloading its data again.

One application serves every case. Its executors carry the test-only system properties
``trspark.test.corruptPeerCopy`` (a peer copy's data block is sent with one byte flipped; it only
matters for the peer case, the other cases copy to the remote store) and
``trspark.test.corruptRemoteCopyWhile`` (a file: while it exists, remote copies are written with
one byte flipped). Their metrics go to Spark's ``CsvSink``, where the peers' count of damaged
copies is read.

A shuffle that Spark's ``ContextCleaner`` removes takes its remote copies and the listener's
records of it with it, its backups still queued or copying end once each, as cancelled, and a peer
copy that ends after its output is gone is deleted from its peer.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from driver_log import driver_log, log_lines
from executor_metrics import executor_totals, with_csv_sink
from jvm_gateway import wait_for
from live_app import TIMEOUT, LiveApp, trcluster_builder

pytestmark = pytest.mark.spark

EXECUTORS = 2
MAPS = 4


class App(LiveApp):
    def __init__(self, spark: Any, log: Path, store: Path, sink: Path, corrupt_remote: Path, events: Path) -> None:
        super().__init__(spark, log)
        self.driver_log = log  # never None here, unlike the base class's
        self.store = store
        self.sink = sink
        self.corrupt_remote = corrupt_remote
        self.events = events

    def lost_in_event_log(self, why: str | None = None) -> int:
        """Map outputs the application's event log (so far) records as lost, for ``why`` or for any reason."""
        from trspark.eventlog import read_events

        (log,) = self.events.iterdir()
        return sum(len(e["lostMapIds"]) for e in read_events(log)
                   if e["Event"].endswith("TRRestore") and why in (None, e["why"]))

    def warnings(self, text: str) -> list[str]:
        return [line for line in log_lines(self.driver_log) if line.startswith("WARN") and text in line]

    def shuffle_files(self, suffix: str) -> list[Path]:
        """The remote store's files of the newest shuffle backed up, ending in ``suffix``."""
        app_dir = self.store / self.sc.applicationId
        newest = max((d for d in app_dir.iterdir() if d.name.isdigit()), key=lambda d: int(d.name))
        return sorted(p for p in newest.rglob(f"shuffle_*{suffix}") if not p.name.startswith("."))


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    import trspark

    root = tmp_path_factory.mktemp("copies")
    java_options, log = driver_log(root)
    store, sink, corrupt_remote = root / "backups", root / "executor-metrics", root / "corrupt-remote-copies"
    sink.mkdir()
    events = root / "events"
    events.mkdir()
    builder = trcluster_builder("trspark-copies", EXECUTORS, java_options).config(
        "spark.executor.extraJavaOptions",
        f"-Dtrspark.test.corruptPeerCopy=true -Dtrspark.test.corruptRemoteCopyWhile={corrupt_remote}").config(
        "spark.eventLog.enabled", "true").config("spark.eventLog.dir", events.as_uri())
    spark = trspark.configure(with_csv_sink(builder, sink), mode="always", remote_path=store.as_uri()).getOrCreate()
    try:
        yield App(spark, log, store, sink, corrupt_remote, events)
    finally:
        spark.stop()


def sums(app: App, rows: int) -> Any:
    """Sums by key of ``rows`` numbers: a two-stage RDD with MAPS map outputs."""
    return app.sc.parallelize(range(rows), MAPS).map(lambda x: (x % 1009, x)).reduceByKey(lambda a, b: a + b, 3)


def job(app: App, rows: int) -> Callable[[], dict[int, int]]:
    """The job of ``sums`` to collect, twice."""
    rdd = sums(app, rows)
    return lambda: dict(rdd.collect())


def shuffle_id(rdd: Any) -> int:
    """The id of the shuffle an RDD reads, found along its first dependencies in the JVM."""
    jvm_rdd = rdd._jrdd.rdd()
    while True:
        dependency = jvm_rdd.dependencies().head()
        if dependency.getClass().getSimpleName() == "ShuffleDependency":
            return int(dependency.shuffleId())
        jvm_rdd = dependency.rdd()


def expected(rows: int) -> dict[int, int]:
    return {k: sum(range(k, rows, 1009)) for k in range(min(rows, 1009))}


def corrupt(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x5A
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


DAMAGE: dict[str, Callable[[Path], None]] = {"corrupt": corrupt, "truncated": truncate, "missing": Path.unlink}


@pytest.mark.parametrize("problem", list(DAMAGE))
def test_a_damaged_remote_backup_is_treated_as_missing_and_recomputed(app: App, problem: str) -> None:
    wait_for(lambda: len(app.alive()) >= EXECUTORS, what="every executor registered", timeout=TIMEOUT)
    app.status.setBuiltin("always", "remote", 0.0)
    before = {name: app.stat(name) for name in ("backups_remote", "backups_rejected", "outputs_repointed", "outputs_lost")}
    run = job(app, 20000)
    assert run() == expected(20000)
    wait_for(lambda: app.stat("backups_remote") >= before["backups_remote"] + MAPS, what="every map output backed up",
             timeout=TIMEOUT)
    data = [p for p in app.shuffle_files(".data") if p.stat().st_size > 0]
    assert len(data) == MAPS
    for path in data:
        DAMAGE[problem](path)
    app.kill_one_executor()
    assert run() == expected(20000)
    # This shuffle's lost outputs were recomputed (outputs of earlier shuffles with intact copies
    # may be re-pointed).
    assert app.stat("outputs_lost") > before["outputs_lost"]
    assert app.stat("backups_rejected") > before["backups_rejected"]
    warnings = app.warnings(f" is {problem}; treated as missing")
    assert len(warnings) == 1, warnings
    assert "remote copy of shuffle" in warnings[0]


def test_a_remote_copy_lost_after_readers_were_sent_to_it_is_recomputed(app: App) -> None:
    # Spark reads an output served from the store as a local block, so a copy gone by then blames
    # the reader's own executor: without the plugin's help every retry read the same copy again.
    wait_for(lambda: len(app.alive()) >= EXECUTORS, what="every executor registered", timeout=TIMEOUT)
    app.status.setBuiltin("always", "remote", 0.0)
    before = {name: app.stat(name) for name in ("backups_remote", "outputs_repointed", "outputs_lost")}
    run = job(app, 30000)
    assert run() == expected(30000)
    wait_for(lambda: app.stat("backups_remote") >= before["backups_remote"] + MAPS, what="every map output backed up",
             timeout=TIMEOUT)
    data = app.shuffle_files(".data")
    app.kill_one_executor()
    wait_for(lambda: app.stat("outputs_repointed") > before["outputs_repointed"], what="the re-point to the store",
             timeout=TIMEOUT)
    for path in data:  # the store loses them after the loss check let readers go to them
        path.unlink()
    assert run() == expected(30000)
    assert app.stat("outputs_lost") > before["outputs_lost"]
    assert app.warnings(" is not readable by a reducer; unregistered, the output is recomputed")
    # The event log, and so `trspark report`, counts every output the plugin counted as lost
    # (the kill may take other shuffles' outputs without copies too), these among them.
    wait_for(lambda: app.lost_in_event_log("remote copy unreadable") > 0
             and app.lost_in_event_log() == app.stat("outputs_lost"), what="the losses in the event log",
             timeout=TIMEOUT)


def driver_bytes_read(app: App) -> int:
    """Bytes the driver JVM has read through Hadoop's local file system (the remote store here)."""
    every = app.sc._jvm.org.apache.hadoop.fs.FileSystem.getAllStatistics()
    return sum(int(stats.getBytesRead()) for stats in every if stats.getScheme() == "file")


def test_the_driver_downloads_a_remote_copy_neither_at_its_commit_nor_at_a_loss_while_unchanged(app: App) -> None:
    # Each executor reads its own copies back: one driver thread reading every copy of a cluster
    # would fall behind the copies, and outputs would stay unprotected for longer. A loss checks
    # the copy again before readers go to it, while the scheduler waits; downloading the data then
    # would hold it for as long as the lost executor's outputs take to read from a blob store.
    app.wait_full(EXECUTORS)
    app.status.setBuiltin("always", "remote", 0.0)
    backed_up, repointed, read_before = app.stat("backups_remote"), app.stat("outputs_repointed"), driver_bytes_read(app)
    rows = 200_000
    rdd = app.sc.parallelize(range(rows), MAPS).map(lambda x: (x, 1)).reduceByKey(lambda a, b: a + b, 3)
    assert rdd.values().sum() == rows
    wait_for(lambda: app.stat("backups_remote") >= backed_up + MAPS, what="every map output backed up",
             timeout=TIMEOUT)
    data_bytes = sum(p.stat().st_size for p in app.shuffle_files(".data"))
    assert data_bytes > 100_000
    assert driver_bytes_read(app) - read_before < data_bytes / 20
    read_before = driver_bytes_read(app)
    app.kill_one_executor()
    assert rdd.values().sum() == rows
    assert app.stat("outputs_repointed") > repointed
    assert driver_bytes_read(app) - read_before < data_bytes / 20


def test_a_remote_copy_damaged_in_transit_is_rejected_by_the_executor_that_wrote_it(app: App) -> None:
    app.wait_full(EXECUTORS)
    app.quiet()
    app.status.setBuiltin("always", "remote", 0.0)
    counters = ("backups_remote", "backups_rejected", "backups_requested", "outputs_lost")
    before = {name: app.stat(name) for name in counters}
    run = job(app, 20000)
    app.corrupt_remote.touch()
    try:
        assert run() == expected(20000)
        wait_for(lambda: app.stat("backups_requested") >= before["backups_requested"] + MAPS and app.backups_ended(),
                 what="every remote copy written and read back", timeout=TIMEOUT)
    finally:
        app.corrupt_remote.unlink()
    assert app.stat("backups_remote") == before["backups_remote"]
    assert app.stat("backups_rejected") - before["backups_rejected"] >= MAPS
    # The earlier corrupt case may have given this kind's one warning: later ones are INFO lines.
    assert [line for line in log_lines(app.driver_log) if " is corrupt; not used" in line]
    app.kill_one_executor()
    assert run() == expected(20000)
    assert app.stat("outputs_lost") > before["outputs_lost"]


def test_a_peer_copy_damaged_in_transit_is_rejected_by_its_checksum(app: App) -> None:
    wait_for(lambda: len(app.alive()) >= EXECUTORS, what="every executor registered", timeout=TIMEOUT)
    # Copies still in flight from an earlier case would be counted in this one.
    app.quiet()
    app.status.setBuiltin("always", "local", 0.0)
    try:
        before = {name: app.stat(name) for name in ("backups_local", "backups_rejected", "outputs_repointed",
                                                    "outputs_lost", "backups_requested")}
        run = job(app, 20000)
        assert run() == expected(20000)
        # Every peer copy arrives with a flipped byte: the peer's check rejects each one.
        wait_for(lambda: app.stat("backups_rejected") > before["backups_rejected"] and app.backups_ended(),
                 what="every peer copy checked", timeout=TIMEOUT)
        requested = app.stat("backups_requested") - before["backups_requested"]
        # None is accepted, and each is rejected. A late check of an earlier case's remote copy
        # (an executor lost before this case) may add to the rejections, never to the accepted.
        assert requested > 0
        assert app.stat("backups_local") == before["backups_local"]
        assert app.stat("backups_rejected") - before["backups_rejected"] >= requested
        # The peers count each copy they rejected in their own metrics, as users see them in a sink;
        # the earlier cases copied to the remote store only, so no peer copy was checked before.
        wait_for(lambda: executor_totals(app.sink).get("peer_copies_damaged", 0) >= requested,
                 what="the peers' damaged-copy count in the metrics sink", timeout=TIMEOUT)
        assert executor_totals(app.sink).get("peer_copies_intact", 0) == 0
        app.kill_one_executor()
        assert run() == expected(20000)
        assert app.stat("outputs_lost") > before["outputs_lost"]
        warnings = app.warnings("peer copy of shuffle")
        assert len(warnings) == 1, warnings
        assert " is corrupt; " in warnings[0]
    finally:
        app.status.setBuiltin("always", "remote", 0.0)


def test_a_shuffle_spark_cleans_up_takes_its_remote_copies_with_it(app: App) -> None:
    # Spark's ContextCleaner removes a shuffle once nothing references it; always-checkpoint copied
    # every output of it, and without the cleanup those copies would stay until the application ends.
    rows = 20000
    done = app.stat("backups_done")
    collect = job(app, rows)
    assert collect() == expected(rows)
    wait_for(lambda: app.stat("backups_done") >= done + MAPS, what="every map output backed up", timeout=TIMEOUT)
    shuffle_dir = app.shuffle_files(".data")[0].parent.parent
    assert len(app.shuffle_files(".data")) == MAPS
    forgotten = app.stat("outputs_forgotten")
    del collect  # the job's RDDs, and with them its shuffle dependency
    gc.collect()

    def cleaned() -> bool:
        app.sc._jvm.System.gc()  # the cleaner learns of unreachable shuffles from the JVM's collector
        return not shuffle_dir.exists() and app.stat("outputs_forgotten") >= forgotten + MAPS

    wait_for(cleaned, what=f"{shuffle_dir} deleted and its outputs forgotten", timeout=TIMEOUT)


def test_backups_of_a_forgotten_shuffle_end_once_as_cancelled(app: App) -> None:
    # Two copies of each output, to the store and to a peer, slowed to 2 kB/s: when the shuffle is
    # forgotten some are copying and some still queued (two in flight per executor). Each ends
    # exactly once, as cancelled, and a report its source still sends counts for nothing.
    import json

    wait_for(lambda: len(app.alive()) >= EXECUTORS and app.backups_ended(), what="the earlier backups ended",
             timeout=TIMEOUT)
    names = ("backups_requested", "backups_started", "backups_done", "backups_failed", "backups_cancelled")
    before = {name: app.stat(name) for name in names}

    def delta() -> dict[str, int]:
        return {name: app.stat(name) - before[name] for name in before}

    app.status.setBuiltin("never", "remote", 2000.0)
    try:
        slow = sums(app, 20000)
        assert dict(slow.collect()) == expected(20000)
        shuffle = shuffle_id(slow)
        for index in range(MAPS):
            for target in ("remote", *sorted(app.alive())):  # a copy to the output's own executor is refused
                backup = {"type": "Backup", "shuffle_id": shuffle, "map_index": index, "target": target}
                app.status.applyCommand(json.dumps(backup))
        wait_for(lambda: delta()["backups_started"] >= 1, what="a copy started", timeout=TIMEOUT)
        app.sc._jvm.org.apache.spark.trspark.TRDriverPlugin.active().get().forgetShuffle(shuffle)
        wait_for(app.backups_ended, what="every backup of the forgotten shuffle ended", timeout=TIMEOUT)
    finally:
        app.status.setBuiltin("always", "remote", 0.0)
    ended = delta()
    assert ended["backups_requested"] == 2 * MAPS
    assert ended["backups_started"] < 2 * MAPS, ended  # some were still queued
    assert ended["backups_cancelled"] >= MAPS, ended
    # Another shuffle backed up in full: the sources have polled since, stopped the cancelled
    # copies, and any report of them came and went without a count.
    fast = job(app, 20000)
    assert fast() == expected(20000)
    wait_for(lambda: delta()["backups_requested"] == 3 * MAPS and app.backups_ended(),
             what="the next shuffle backed up", timeout=TIMEOUT)
    assert delta()["backups_done"] == ended["backups_done"] + MAPS
    assert delta()["backups_cancelled"] == ended["backups_cancelled"]


def test_a_peer_copy_that_ends_after_its_output_is_gone_is_deleted_from_its_peer(app: App) -> None:
    # A copy can end after Spark forgot its shuffle or re-ran its map (the cancel reaches the source
    # only on its next poll), in both places a copy ends: reported done and not yet checked by its
    # peer, or checked intact. Either way nothing reads it again, so the peer must delete it. The
    # two reports go in as an executor sends them; the peer "ghost" never polls on its own.
    import json

    plugin = app.sc._jvm.org.apache.spark.trspark.TRDriverPlugin.active().get()
    shuffle = 900_000  # no job has this shuffle: its outputs are gone
    peer = "ghost"

    def done(map_id: int) -> str:
        task = {"shuffle": shuffle, "index": map_id, "map": map_id, "target": peer, "host": "", "port": 0,
                "throttle": 0.0}
        return json.dumps({"type": "done", "executor": "0", "bytes": 10, "seconds": 0.1, "indexCrc": 1,
                           "dataCrc": 2, "task": task})

    plugin.receive(done(1))  # received, then its shuffle is forgotten before the peer checked it
    plugin.forgetShuffle(shuffle)
    plugin.receive(done(2))  # received after the shuffle was forgotten, then checked intact
    check = {"shuffle": shuffle, "map": 2, "indexCrc": 1, "dataCrc": 2}
    plugin.receive(json.dumps({"type": "checked", "executor": peer, "problem": "", "check": check}))
    work = json.loads(plugin.receive(json.dumps({"type": "poll", "executor": peer, "capacity": 0})))
    assert sorted((d["shuffle"], d["map"]) for d in work["deletes"]) == [(shuffle, 1), (shuffle, 2)]


def test_the_listener_forgets_the_shuffles_spark_cleans_up(app: App) -> None:
    # An application that runs for days runs millions of stages: what the listener keeps per stage
    # and shuffle must go with the shuffles Spark removes, not grow with every job.
    collects = [job(app, 2000) for _ in range(5)]
    for collect in collects:
        assert collect() == expected(2000)
    app.sc._jsc.sc().listenerBus().waitUntilEmpty(int(TIMEOUT * 1000))  # the jobs' last events are counted
    grown = app.status.listenerTracked()
    del collects, collect
    gc.collect()

    def dropped() -> bool:
        app.sc._jvm.System.gc()  # the cleaner learns of unreachable shuffles from the JVM's collector
        app.sc.parallelize([1], 1).count()  # an event: the listener forgets on its own thread, at its next one
        return bool(app.status.listenerTracked() <= grown - 2 * 5)  # a map stage and a consumed mark each

    wait_for(dropped, what="the listener's stages and shuffles of the cleaned jobs dropped", timeout=TIMEOUT)
