"""Deletes that come after a copy ended, on a real ``local-trcluster[3,1,1024]`` (the cluster of
``test_shim_commands.py``, commands through ``TRStatus.applyCommand``).

A map output's remote copy always has the same path, and the driver deletes a copy it no longer
wants on its store thread, which can be busy for seconds with other deletes: a newer copy of the
same output written meanwhile must survive that delete. A peer copy sends its data block first,
so one cancelled, or cut off by its source's death, after that block landed leaves files on the
peer: the peer must delete them. A remote copy commits its data file first, so one that fails
after that must not leave the file in the store.

Which copy ran first is known without sleeps: an executor runs the copies handed to it one at a
time, in order, so once a later copy from the same executor is done, the earlier one has ended.
"""

from __future__ import annotations

import glob
import os
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import test_shim_commands
from test_shim_commands import command, data_files, shuffle_ids
from test_shim_live import TIMEOUT, Cluster, expected_sums, run_job, shuffled, wait_for

pytestmark = pytest.mark.spark

# The same module-scoped fixture: this module gets a cluster of its own, set up the same way.
cluster = test_shim_commands.cluster

MiB = 1 << 20


def two_outputs(cluster: Cluster, name: str) -> tuple[int, str, list[tuple[int, int]], str]:
    """After a first job on a fresh shuffle: the shuffle, an executor that wrote two of its map
    outputs, their (map id, partition), and a peer to copy them to."""
    cluster.full_strength()
    known = shuffle_ids(cluster)
    tag = f"{name}-{time.monotonic_ns()}"
    assert run_job(cluster, shuffled(cluster), tag) == expected_sums(60_000)
    (shuffle,) = shuffle_ids(cluster) - known
    by_source: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for task in cluster.map_tasks(cluster.job_stages(tag)[0]):
        by_source[task["executorId"]].append((int(task["taskId"]), task["partitionId"]))
    # Six outputs on three executors: one wrote at least two.
    source, outputs = next((e, o) for e, o in sorted(by_source.items()) if len(o) >= 2)
    peer = next(e for e in sorted(cluster.alive()) if e != source)
    return shuffle, source, sorted(outputs)[:2], peer


def remote_files(cluster: Cluster, shuffle: int, map_id: int) -> list[str]:
    """The committed files of one output's remote copy (marker, index, data), no temporary ones."""
    return sorted(glob.glob(f"{cluster.root}/{cluster.app_id}/{shuffle}/*/shuffle_{shuffle}_{map_id}_0.*"))


class StoreThreadStep:
    """A step run on the driver's store thread (py4j calls it back): ``hold`` keeps the thread
    busy until ``release``, as a slow delete on a blob store does; the step after it marks the
    point by which every earlier task on that thread has run."""

    def __init__(self, hold: bool) -> None:
        self.hold = hold
        self.started = threading.Event()
        self.released = threading.Event()

    def run(self) -> None:
        self.started.set()
        if self.hold:
            self.released.wait(TIMEOUT)

    class Java:
        implements = ["java.lang.Runnable"]


def on_store_thread(cluster: Cluster, hold: bool) -> StoreThreadStep:
    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(cluster.sc._gateway)
    step = StoreThreadStep(hold)
    cluster.sc._jvm.org.apache.spark.trspark.TRDriverPlugin.active().get().storeWork().execute(step)
    return step


def test_a_late_delete_of_a_dropped_remote_copy_spares_the_copy_made_after_it(cluster: Cluster) -> None:
    """``DropBackup`` of an output's remote copy, then ``Backup`` of it again while the store thread
    is still busy: the new copy is committed and counted, and the drop's delete, when it runs,
    must not remove it (the driver would re-point a lost output to a copy that is not there)."""
    shuffle, source, ((map_a, index_a), (map_b, index_b)), _ = two_outputs(cluster, "late-remote-delete")
    done = cluster.stat("backups_done")
    command(cluster, "Backup", shuffle_id=shuffle, map_index=index_a, source=source, target="remote")
    wait_for(lambda: cluster.stat("backups_done") > done, what="the first remote copy")
    assert len(remote_files(cluster, shuffle, map_a)) == 3

    busy = on_store_thread(cluster, hold=True)
    try:
        assert busy.started.wait(TIMEOUT), "the store thread did not take the holding step"
        command(cluster, "DropBackup", shuffle_id=shuffle, map_index=index_a)
        command(cluster, "Backup", shuffle_id=shuffle, map_index=index_a, source=source, target="remote")
        command(cluster, "Backup", shuffle_id=shuffle, map_index=index_b, source=source, target="remote")
        # The second output's copy comes from the same executor and was requested after the first
        # one's: once it is committed, that one was either written or held back by the driver.
        wait_for(lambda: len(remote_files(cluster, shuffle, map_b)) == 3, what="the other output's remote copy")
    finally:
        busy.released.set()
    drained = on_store_thread(cluster, hold=False)
    assert drained.started.wait(TIMEOUT), "the store thread did not run the drop's delete"
    wait_for(lambda: cluster.stat("backups_done") >= done + 3 and cluster.backups_ended(),
             what="the new copies committed")
    assert sorted(os.path.basename(p) for p in remote_files(cluster, shuffle, map_a)) == [
        f"shuffle_{shuffle}_{map_a}_0.data", f"shuffle_{shuffle}_{map_a}_0.index", f"shuffle_{shuffle}_{map_a}_0.trspark-ok"]


def test_a_peer_copy_cancelled_after_its_data_block_landed_leaves_no_file_on_the_peer(cluster: Cluster) -> None:
    """``CancelBackup`` while a throttled peer copy paces its data block: the block still goes (the
    pacing comes after it is read whole), the copy stops before its index, and the peer must not
    keep the data file."""
    shuffle, source, ((map_a, index_a), (map_b, index_b)), peer = two_outputs(cluster, "cancel-peer-copy")
    (path,) = data_files(cluster, shuffle, map_a)
    size = os.path.getsize(path)
    assert 0 < size < MiB, "one chunk: a larger block is checked for a cancel between its chunks"
    started, cancelled, done = (cluster.stat(n) for n in ("backups_started", "backups_cancelled", "backups_done"))
    cluster.status.setBuiltin("never", "local", size / 10.0)  # the data block is paced for about 10 s
    try:
        command(cluster, "Backup", shuffle_id=shuffle, map_index=index_a, source=source, target=peer)
        wait_for(lambda: cluster.stat("backups_started") > started, what="the peer copy to start")
    finally:
        cluster.status.setBuiltin("never", "remote", 0.0)
    command(cluster, "CancelBackup", shuffle_id=shuffle, map_index=index_a)
    assert cluster.stat("backups_cancelled") == cancelled + 1
    command(cluster, "Backup", shuffle_id=shuffle, map_index=index_b, source=source, target="remote")
    # The source runs its copies in order: with this one committed, the cancelled one has ended.
    wait_for(lambda: cluster.stat("backups_done") > done, what="the source's next copy")
    wait_for(lambda: len(data_files(cluster, shuffle, map_a)) == 1, what="no copy of the output left on the peer")
    assert data_files(cluster, shuffle, map_a) == [path]
    assert cluster.stat("backups_done") == done + 1


def store_dir(cluster: Cluster, shuffle: int, name: str) -> Path:
    """The store's directory for the file ``name`` of a remote copy (Spark's fallback-storage layout)."""
    bucket = cluster.sc._jvm.org.apache.spark.network.util.JavaUtils.nonNegativeHash(name)
    return Path(cluster.root) / cluster.app_id / str(shuffle) / str(bucket)


def test_a_remote_copy_that_fails_after_committing_its_data_file_leaves_nothing_in_the_store(cluster: Cluster) -> None:
    """A file stands where the store needs the directory of an output's index, so its remote copy
    commits the data file and then fails: the driver deletes that file on its store thread (held
    meanwhile, so the committed file is seen first)."""
    shuffle, source, ((map_id, index), _), _ = two_outputs(cluster, "failed-remote-copy")
    index_dir = store_dir(cluster, shuffle, f"shuffle_{shuffle}_{map_id}_0.index")
    assert index_dir != store_dir(cluster, shuffle, f"shuffle_{shuffle}_{map_id}_0.data")
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    index_dir.write_bytes(b"")
    failed = cluster.stat("backups_failed")
    busy = on_store_thread(cluster, hold=True)
    try:
        assert busy.started.wait(TIMEOUT), "the store thread did not take the holding step"
        command(cluster, "Backup", shuffle_id=shuffle, map_index=index, source=source, target="remote")
        wait_for(lambda: cluster.stat("backups_failed") > failed, what="the remote copy to fail")
        assert [os.path.basename(p) for p in remote_files(cluster, shuffle, map_id)] == [f"shuffle_{shuffle}_{map_id}_0.data"]
    finally:
        busy.released.set()
    drained = on_store_thread(cluster, hold=False)
    assert drained.started.wait(TIMEOUT), "the store thread did not run the steps queued before it"
    index_dir.unlink()
    assert remote_files(cluster, shuffle, map_id) == []
    assert cluster.backups_ended()


def index_files(cluster: Cluster, shuffle: int, map_id: int) -> list[str]:
    """Every ``shuffle_S_M_0.index`` under the executors' local dirs (Spark files it apart from the data)."""
    local_dir = cluster.local_dir  # type: ignore[attr-defined]
    return glob.glob(f"{local_dir}/**/shuffle_{shuffle}_{map_id}_0.index", recursive=True)


def map_stage_with_large_indexes(cluster: Cluster, partitions: int) -> tuple[Any, int]:
    """(the RDD, its shuffle) after running only the map stage of a shuffle into ``partitions``
    partitions: two outputs of a few rows each, so a small data file and an index of
    ``partitions`` + 1 offsets. No reduce stage runs (it would have ``partitions`` tasks)."""
    rdd = cluster.sc.parallelize(range(200), 2).map(lambda x: (x, x)).partitionBy(partitions)
    jvm_rdd = rdd._jrdd.rdd()
    while (dependency := jvm_rdd.dependencies().head()).getClass().getSimpleName() != "ShuffleDependency":
        jvm_rdd = dependency.rdd()
    cluster.sc._jsc.sc().submitMapStage(dependency).get()
    return rdd, int(dependency.shuffleId())


def test_a_peer_copy_cut_off_by_its_source_s_death_leaves_no_file_on_the_peer(cluster: Cluster) -> None:
    """The source of a throttled peer copy is killed after the data block landed on the peer and
    while the large index block is still paced: the peer must not keep the data file."""
    cluster.full_strength()
    rdd, shuffle = map_stage_with_large_indexes(cluster, 50_000)
    map_id, source = str(cluster.status.mapOutputLocation(shuffle, 0)).split()
    peer = next(e for e in sorted(cluster.alive()) if e != source)
    (own,) = data_files(cluster, shuffle, int(map_id))
    (own_index,) = index_files(cluster, shuffle, int(map_id))
    index_bytes, data_bytes = os.path.getsize(own_index), os.path.getsize(own)
    assert data_bytes * 20 < index_bytes, "the data block is sent at once, the index block is paced"
    started, failed = cluster.stat("backups_started"), cluster.stat("backups_failed")
    cluster.status.setBuiltin("never", "local", index_bytes / 30.0)  # the index block is paced for about 30 s
    try:
        command(cluster, "Backup", shuffle_id=shuffle, map_index=0, source=source, target=peer)
        wait_for(lambda: cluster.stat("backups_started") > started, what="the peer copy to start")
    finally:
        cluster.status.setBuiltin("never", "remote", 0.0)
    (landed,) = wait_for(lambda: [p for p in data_files(cluster, shuffle, int(map_id)) if p != own],
                         what="the data block on the peer")
    assert index_files(cluster, shuffle, int(map_id)) == [own_index]
    cluster.kill(source)
    wait_for(lambda: cluster.stat("backups_failed") == failed + 1, what="the copy failed at its source's loss")
    wait_for(lambda: not os.path.exists(landed), what="the data block deleted from the peer")
    assert rdd is not None  # the shuffle stays registered until here
