"""Engine commands and backup outcomes on a real ``local-trcluster[3,1,1024]``.

Commands are applied through the ``TRStatus.applyCommand`` test hook (the same code path as the
engine's command lines), with the built-in policy making the backups, so each test controls
exactly what happens. One cluster for the module; executors keep their files under the
module's own ``spark.local.dir``, so a map output's copies can be counted on disk.
"""

from __future__ import annotations

import glob
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from test_shim_live import EXECUTORS, TIMEOUT, Cluster, expected_sums, reruns_of, run_job, shuffled, wait_for

from jobs.tpcds.session import forget_local_dirs

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    from pyspark.sql import SparkSession

    from trspark.live.shim import jar_path

    root = tmp_path_factory.mktemp("backups")
    local_dir = tmp_path_factory.mktemp("local")
    spark = (
        SparkSession.builder.master(f"local-trcluster[{EXECUTORS},1,1024]")
        .appName("trspark-shim-commands")
        .config("spark.jars", jar_path())
        .config("spark.plugins", "org.apache.spark.trspark.TRSparkPlugin")
        .config("spark.trspark.mode", "always")  # backups on (listener, executor polling); tests pick the policy
        .config("spark.trspark.remote.path", f"file://{root}")
        .config("spark.local.dir", str(local_dir))
        .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
        .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "180s")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    try:
        spark.sparkContext._jvm.org.apache.spark.trspark.TRStatus.setBuiltin("never", "remote", 0.0)
        c = Cluster(spark, root)
        c.local_dir = local_dir  # type: ignore[attr-defined]
        yield c
    finally:
        spark.stop()
        forget_local_dirs(spark.sparkContext)


def data_files(cluster: Cluster, shuffle_id: int, map_id: int) -> list[str]:
    """Every ``shuffle_S_M_0.data`` under the executors' local dirs: the output and its peer copies."""
    local_dir = cluster.local_dir  # type: ignore[attr-defined]
    return glob.glob(f"{local_dir}/**/shuffle_{shuffle_id}_{map_id}_0.data", recursive=True)


def shuffle_ids(cluster: Cluster) -> set[int]:
    local_dir = cluster.local_dir  # type: ignore[attr-defined]
    names = glob.glob(f"{local_dir}/**/shuffle_*_*_0.data", recursive=True)
    return {int(m.group(1)) for n in names if (m := re.search(r"shuffle_(\d+)_\d+_0\.data$", n))}


def command(cluster: Cluster, kind: str, **fields: Any) -> None:
    cluster.status.applyCommand(json.dumps({"type": kind, **fields}))


def test_drop_backup_deletes_the_peer_copies_and_keeps_the_output_readable(cluster: Cluster) -> None:
    cluster.full_strength()
    cluster.status.setBuiltin("always", "local", 0.0)
    before_ids = shuffle_ids(cluster)
    local_before = cluster.stat("backups_local")
    rdd = shuffled(cluster)
    try:
        assert run_job(cluster, rdd, "peer-drop-first") == expected_sums(60_000)
        maps = cluster.map_tasks(cluster.job_stages("peer-drop-first")[0])
        wait_for(lambda: cluster.stat("backups_local") - local_before >= len(maps), what="peer copies")
    finally:
        cluster.status.setBuiltin("never", "remote", 0.0)
    (shuffle_id,) = shuffle_ids(cluster) - before_ids
    # Each output: its own file on the writer, one copy on a peer.
    assert all(len(data_files(cluster, shuffle_id, t["taskId"])) == 2 for t in maps)
    for t in maps:
        command(cluster, "DropBackup", shuffle_id=shuffle_id, map_index=t["index"])
    wait_for(lambda: all(len(data_files(cluster, shuffle_id, t["taskId"])) == 1 for t in maps),
             what="peer copies to be deleted")
    # The outputs were re-pointed to their writers: a second job reads them, nothing re-runs.
    assert run_job(cluster, rdd, "peer-drop-second") == expected_sums(60_000)
    assert reruns_of(cluster, "peer-drop-second") == []


def test_backups_of_a_lost_source_are_reported_failed(cluster: Cluster) -> None:
    """Throttled remote backups; kill a source while its copies run: each ends as failed, none hangs.

    The invariant ``requested == done + failed`` holds once nothing is in flight: before, the
    backups handed to (or queued for) a dead executor were dropped without an outcome.
    """
    cluster.full_strength()
    counters = ("backups_requested", "backups_done", "backups_failed")
    before = {name: cluster.stat(name) for name in counters}
    cluster.status.setBuiltin("always", "remote", 150_000.0)  # ~2 MB outputs: ~13 s per copy
    rows = 30_000
    rdd = shuffled(cluster, rows=rows, payload=400)
    try:
        assert run_job(cluster, rdd, "lost-source") == expected_sums(rows)
        partial = wait_for(
            lambda: glob.glob(f"{cluster.root}/{cluster.app_id}/*/*/.shuffle_*.data.*.trspark-tmp"),
            what="a backup in progress",
        )
        match = re.search(r"\.shuffle_\d+_(\d+)_0\.data\.", partial[0])
        assert match
        maps = cluster.map_tasks(cluster.job_stages("lost-source")[0])
        victim = next(t["executorId"] for t in maps if str(t["taskId"]) == match.group(1))
        victim_outputs = [t for t in maps if t["executorId"] == victim]
        cluster.kill(victim)
    finally:
        cluster.status.setBuiltin("never", "remote", 0.0)

    def delta() -> dict[str, int]:
        return {name: cluster.stat(name) - before[name] for name in counters}

    wait_for(lambda: (d := delta())["backups_requested"] == d["backups_done"] + d["backups_failed"],
             what="every backup to end as done or failed")
    final = delta()
    assert final["backups_requested"] == len(maps)
    # The victim's copy in progress failed; one of its outputs may have been copied before the kill.
    assert 1 <= final["backups_failed"] <= len(victim_outputs)
    assert final["backups_done"] == len(maps) - final["backups_failed"]


def test_commands_for_unknown_outputs_are_harmless(cluster: Cluster) -> None:
    for kind in ("Backup", "CancelBackup", "DropBackup"):
        command(cluster, kind, shuffle_id=9999, map_index=0, source="0", target="remote")
    assert run_job(cluster, shuffled(cluster, rows=1_000), "after-unknown") == expected_sums(1_000)



# ---- task duplication (DuplicateTask / KillDuplicate) ----------------------------------------


def running_attempts(cluster: Cluster) -> list[dict[str, Any]]:
    """Running task attempts of the active stages, each with its ``stageId``."""
    out = []
    for stage in cluster.rest("stages?status=active"):
        path = f"stages/{stage['stageId']}/{stage['attemptId']}/taskList?status=running"
        out += [dict(t, stageId=stage["stageId"]) for t in cluster.rest(path)]
    return out


def attempts_of(cluster: Cluster, stage_id: int) -> list[dict[str, Any]]:
    return [t for a in cluster.rest(f"stages/{stage_id}")
            for t in cluster.rest(f"stages/{stage_id}/{a['attemptId']}/taskList?length=100")]


def one_slow_task(cluster: Cluster, seconds: float) -> tuple[threading.Thread, dict[str, Any]]:
    """Start a one-task job (answer 42) on a thread; returns the thread and its result holder."""
    result: dict[str, Any] = {}

    def run() -> None:
        result["answer"] = cluster.sc.parallelize([0], 1).map(lambda x: (time.sleep(seconds), x + 42)[1]).collect()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def test_duplicate_on_an_idle_executor_finishes_the_task_of_a_doomed_one(cluster: Cluster) -> None:
    """The engine's DuplicateTask starts a speculative copy; the original's executor dies; the copy wins."""
    cluster.full_strength()
    launched = cluster.stat("duplicates_launched")
    thread, result = one_slow_task(cluster, 25.0)
    (original,) = wait_for(lambda: running_attempts(cluster), what="the task to start")
    idle = sorted(cluster.alive() - {original["executorId"]})[0]
    command(cluster, "DuplicateTask", stage_id=original["stageId"], partition=0, executor_id=idle)
    copy = wait_for(lambda: [t for t in running_attempts(cluster) if t["executorId"] == idle],
                    what="the copy to start on the idle executor")
    assert copy[0]["speculative"] is True and copy[0]["index"] == 0
    cluster.kill(original["executorId"])  # the doomed executor
    thread.join(timeout=TIMEOUT)
    assert result.get("answer") == [42]
    wait_for(lambda: all(t["status"] != "RUNNING" for t in attempts_of(cluster, original["stageId"])),
             what="both attempts to end")
    attempts = attempts_of(cluster, original["stageId"])
    assert len(attempts) == 2, attempts
    (winner,) = [t for t in attempts if t["status"] == "SUCCESS"]
    assert winner["speculative"] is True and winner["executorId"] == idle
    assert cluster.stat("duplicates_launched") - launched == 1


def test_kill_duplicate_takes_the_copy_back_and_the_original_finishes(cluster: Cluster) -> None:
    cluster.full_strength()
    killed = cluster.stat("duplicates_killed")
    thread, result = one_slow_task(cluster, 20.0)
    (original,) = wait_for(lambda: running_attempts(cluster), what="the task to start")
    idle = sorted(cluster.alive() - {original["executorId"]})[0]
    command(cluster, "DuplicateTask", stage_id=original["stageId"], partition=0, executor_id=idle)
    wait_for(lambda: [t for t in running_attempts(cluster) if t["executorId"] == idle], what="the copy to start")
    command(cluster, "KillDuplicate", stage_id=original["stageId"], partition=0, executor_id=idle)
    thread.join(timeout=TIMEOUT)
    assert result.get("answer") == [42]
    assert cluster.stat("duplicates_killed") - killed == 1
    wait_for(lambda: all(t["status"] != "RUNNING" for t in attempts_of(cluster, original["stageId"])),
             what="both attempts to end")
    by_executor = {t["executorId"]: t["status"] for t in attempts_of(cluster, original["stageId"])}
    assert by_executor == {original["executorId"]: "SUCCESS", idle: "KILLED"}


def test_a_copy_wanted_on_an_executor_being_released_is_not_started(cluster: Cluster) -> None:
    """A ``DuplicateTask`` aimed at an executor that a release has since closed to tasks (Spark
    still offers it until the kill registers) is dropped: the copy would die with the executor."""
    cluster.full_strength()
    launched = cluster.stat("duplicates_launched")
    thread, result = one_slow_task(cluster, 8.0)
    (original,) = wait_for(lambda: running_attempts(cluster), what="the task to start")
    leaving = sorted(cluster.alive() - {original["executorId"]})[0]
    cluster.sc._jsc.sc().taskScheduler().exclude(leaving)  # the release's first step, alone
    command(cluster, "DuplicateTask", stage_id=original["stageId"], partition=0, executor_id=leaving)
    thread.join(timeout=TIMEOUT)
    assert result.get("answer") == [42]
    assert [t["executorId"] for t in attempts_of(cluster, original["stageId"])] == [original["executorId"]]
    assert cluster.stat("duplicates_launched") == launched
    command(cluster, "ReleaseExecutor", executor_id=leaving, reason="test")
    wait_for(lambda: leaving not in cluster.alive(), what=f"executor {leaving} released")
    cluster.full_strength()


def test_a_released_executor_takes_no_task_while_spark_still_lists_it(cluster: Cluster) -> None:
    """``ReleaseExecutor`` first closes the executor to tasks, then asks the cluster manager to kill it
    (on another thread). Closed but not yet killed here: every task of a job goes to the others."""
    cluster.full_strength()
    victim = sorted(cluster.alive())[0]
    cluster.sc._jsc.sc().taskScheduler().exclude(victim)  # the release's first step, alone
    tag = f"closed-{time.monotonic_ns()}"
    assert run_job(cluster, shuffled(cluster), tag) == expected_sums(60_000)
    used = {t["executorId"] for stage in cluster.job_stages(tag) for t in cluster.map_tasks(stage)}
    assert victim in cluster.alive() and len(used) == EXECUTORS - 1 and victim not in used
    command(cluster, "ReleaseExecutor", executor_id=victim, reason="test")
    wait_for(lambda: victim not in cluster.alive(), what=f"executor {victim} released")
    cluster.full_strength()


def test_a_released_executor_s_outputs_are_read_from_their_remote_copies_even_after_a_drop(cluster: Cluster) -> None:
    """``ReleaseExecutor`` re-points the executor's outputs to their copies before it goes, and the
    cluster manager replaces it; a later ``DropBackup`` of those outputs (their shuffle looked
    consumed) keeps the remote copy the tracker points to, so the next job re-runs nothing."""
    cluster.full_strength()
    before_ids = shuffle_ids(cluster)
    done_before, released_before = cluster.stat("backups_done"), cluster.stat("executors_released")
    cluster.status.setBuiltin("always", "remote", 0.0)
    tag = f"release-{time.monotonic_ns()}"
    rdd = shuffled(cluster)
    try:
        assert run_job(cluster, rdd, f"first-{tag}") == expected_sums(60_000)
        maps = cluster.map_tasks(cluster.job_stages(f"first-{tag}")[0])
        wait_for(lambda: cluster.stat("backups_done") - done_before >= len(maps), what="remote copies")
    finally:
        cluster.status.setBuiltin("never", "remote", 0.0)
    (shuffle_id,) = shuffle_ids(cluster) - before_ids
    victim = maps[0]["executorId"]
    command(cluster, "ReleaseExecutor", executor_id=victim, reason="test")
    wait_for(lambda: victim not in cluster.alive(), what=f"executor {victim} released")
    assert cluster.stat("executors_released") == released_before + 1
    for task in (t for t in maps if t["executorId"] == victim):
        command(cluster, "DropBackup", shuffle_id=shuffle_id, map_index=task["index"])
    assert run_job(cluster, rdd, f"second-{tag}") == expected_sums(60_000)
    assert reruns_of(cluster, f"second-{tag}") == []
    cluster.full_strength()  # killed without lowering the executor target: a replacement comes


def test_a_drain_counts_once_the_scheduler_holds_it_and_not_when_ignored(cluster: Cluster) -> None:
    cluster.full_strength()
    victim = sorted(cluster.alive())[0]
    drained = cluster.stat("executors_drained")
    cluster.status.setBuiltin("always", "local", 0.0)  # as after a fallback: the engine's hints are ignored
    try:
        command(cluster, "SchedulingHints", drain=[victim])
        assert cluster.stat("executors_drained") == drained
    finally:
        cluster.status.setBuiltin("never", "local", 0.0)
    try:
        command(cluster, "SchedulingHints", drain=[victim])
        assert cluster.stat("executors_drained") == drained + 1
        command(cluster, "SchedulingHints", drain=[victim, "no-such-executor"])  # an id Spark does not list
        assert cluster.stat("executors_drained") == drained + 1
    finally:
        command(cluster, "SchedulingHints", drain=[])  # the executor takes tasks again


def tracked(cluster: Cluster, shuffle: int, map_index: int) -> tuple[int, str] | None:
    """(map id, executor id) of the tracker's live entry for one map output; None while removed."""
    entry = str(cluster.status.mapOutputLocation(shuffle, map_index))
    if not entry:
        return None
    map_id, executor_id = entry.split(" ")
    return int(map_id), executor_id


def rerun_partitions(cluster: Cluster, group: str) -> list[int]:
    """The map partitions a job ran again (a task's index counts within its stage attempt only)."""
    return sorted(t["partitionId"] for t in cluster.map_tasks(cluster.job_stages(group)[0]))


def test_a_copy_that_lands_after_spark_gave_up_on_its_source_keeps_its_readers(cluster: Cluster) -> None:
    """A reducer fails to fetch from a living executor (it lost another shuffle's files), so Spark
    drops every output there, one of them while its peer copy still runs. That copy then lands
    and its output stays on the peer: readers are not sent back to the executor Spark gave up
    on (where, had its files really gone, they would fail again)."""
    cluster.full_strength()
    tag = f"gave-up-{time.monotonic_ns()}"
    first, second = shuffled(cluster, rows=30_000, payload=50), shuffled(cluster, rows=30_000)
    known = shuffle_ids(cluster)
    assert run_job(cluster, first, f"a-{tag}") == expected_sums(30_000)
    (shuffle_a,) = shuffle_ids(cluster) - known
    maps_a = cluster.map_tasks(cluster.job_stages(f"a-{tag}")[0])
    output = maps_a[0]
    source, map_id = output["executorId"], int(output["taskId"])
    peer = next(e for e in sorted(cluster.alive()) if e != source)
    assert run_job(cluster, second, f"b-{tag}") == expected_sums(30_000)
    (shuffle_b,) = shuffle_ids(cluster) - known - {shuffle_a}
    on_source = [t for t in cluster.map_tasks(cluster.job_stages(f"b-{tag}")[0]) if t["executorId"] == source]
    assert on_source, "the second shuffle wrote nothing on the first output's executor"

    (path,) = data_files(cluster, shuffle_a, map_id)
    started, done = cluster.stat("backups_started"), cluster.stat("backups_done")
    cluster.status.setBuiltin("never", "local", os.path.getsize(path) / 40)  # a copy of about 40 s
    try:
        command(cluster, "Backup", shuffle_id=shuffle_a, map_index=output["partitionId"], source=source, target=peer)
        wait_for(lambda: cluster.stat("backups_started") > started, what="the copy to start")
    finally:
        cluster.status.setBuiltin("never", "remote", 0.0)
    for task in on_source:
        for name in data_files(cluster, shuffle_b, int(task["taskId"])):
            os.remove(name)
    assert run_job(cluster, second, f"b-again-{tag}") == expected_sums(30_000)
    assert reruns_of(cluster, f"b-again-{tag}"), "no fetch failure"
    assert cluster.stat("backups_done") == done, "the copy landed before the fetch failure"
    assert tracked(cluster, shuffle_a, output["partitionId"]) is None  # Spark dropped it with the others

    wait_for(lambda: cluster.stat("backups_done") > done, what="the copy to land and pass its check")
    assert tracked(cluster, shuffle_a, output["partitionId"]) == (map_id, peer)
    # The source's other outputs of the first shuffle had no copy: only they run again.
    assert run_job(cluster, first, f"a-again-{tag}") == expected_sums(30_000)
    others = sorted(t["partitionId"] for t in maps_a if t["executorId"] == source and t is not output)
    assert rerun_partitions(cluster, f"a-again-{tag}") == others


def one_output(cluster: Cluster, name: str) -> tuple[Any, str, int, str, int, int, str]:
    """After a first job on a fresh shuffle: its rdd, the job tag, the shuffle, and one map output's
    source executor, map id and partition, with a peer to copy it to."""
    cluster.full_strength()
    tag = f"{name}-{time.monotonic_ns()}"
    rdd = shuffled(cluster)
    known = shuffle_ids(cluster)
    assert run_job(cluster, rdd, f"first-{tag}") == expected_sums(60_000)
    (shuffle,) = shuffle_ids(cluster) - known
    output = cluster.map_tasks(cluster.job_stages(f"first-{tag}")[0])[0]
    source, map_id, index = output["executorId"], int(output["taskId"]), output["partitionId"]
    peer = next(e for e in sorted(cluster.alive()) if e != source)
    return rdd, tag, shuffle, source, map_id, index, peer


def test_a_peer_that_dies_holding_an_unchecked_copy_gives_the_output_back_to_its_source(cluster: Cluster) -> None:
    """A peer copy's index lands on the peer before the copy is checked, and Spark then points the
    output at the peer. When that peer dies before the check answers, the output goes back to its
    living source: the loss must not forget the copy before it looks where the output is."""
    rdd, tag, shuffle, source, map_id, index, peer = one_output(cluster, "unchecked")
    (path,) = data_files(cluster, shuffle, map_id)
    started = cluster.stat("backups_started")
    cluster.status.setBuiltin("never", "local", os.path.getsize(path) / 60)  # a copy of about a minute
    try:
        command(cluster, "Backup", shuffle_id=shuffle, map_index=index, source=source, target=peer)
        wait_for(lambda: cluster.stat("backups_started") > started, what="the copy to start")
    finally:
        cluster.status.setBuiltin("never", "remote", 0.0)
    cluster.status.pointMapOutputAt(shuffle, index, peer)  # as the copy's index landing on the peer does
    assert tracked(cluster, shuffle, index) == (map_id, peer)
    cluster.kill(peer)
    wait_for(lambda: tracked(cluster, shuffle, index) == (map_id, source), what="the output back on its source")
    cluster.full_strength()
    assert run_job(cluster, rdd, f"again-{tag}") == expected_sums(60_000)
    assert index not in rerun_partitions(cluster, f"again-{tag}")


def test_an_output_moved_to_a_copy_after_spark_dropped_it_moves_again_when_that_copy_dies(cluster: Cluster) -> None:
    """Spark brings back an output the plugin moves after Spark dropped it (as a copy that passes
    its check after its source died is), but leaves its map id out of the tracker's index and then
    ignores every later move of it ("untracked map status"). When the executor holding that copy
    died too, the output was not moved to its next copy, and was recomputed."""
    rdd, tag, shuffle, source, map_id, index, peer = one_output(cluster, "moves-again")
    done = cluster.stat("backups_done")
    for target in (peer, "remote"):
        command(cluster, "Backup", shuffle_id=shuffle, map_index=index, source=source, target=target)
    wait_for(lambda: cluster.stat("backups_done") >= done + 2, what="the peer and remote copies")

    cluster.status.unregisterMapOutput(shuffle, index)  # Spark drops it before the plugin hears of the loss
    cluster.kill(source)
    wait_for(lambda: tracked(cluster, shuffle, index) == (map_id, peer), what="the output on its peer copy")
    cluster.kill(peer)  # returns once Spark's listeners saw it removed: the plugin's move came before
    assert tracked(cluster, shuffle, index) == (map_id, "fallback")
    cluster.full_strength()
    assert run_job(cluster, rdd, f"second-{tag}") == expected_sums(60_000)
    assert index not in rerun_partitions(cluster, f"second-{tag}")


def test_a_drop_stops_the_copies_still_running_and_leaves_none_behind(cluster: Cluster) -> None:
    """``DropBackup`` while a peer and a remote copy of the output are under way: both are stopped
    and end as cancelled, and neither lands afterwards as a backup nobody reads."""
    rdd, tag, shuffle, source, map_id, index, peer = one_output(cluster, "drop-running")
    (path,) = data_files(cluster, shuffle, map_id)
    started, cancelled, done = (cluster.stat(name) for name in ("backups_started", "backups_cancelled", "backups_done"))
    cluster.status.setBuiltin("never", "local", os.path.getsize(path) / 20)  # copies of about 20 s each
    try:
        for target in (peer, "remote"):
            command(cluster, "Backup", shuffle_id=shuffle, map_index=index, source=source, target=target)
        wait_for(lambda: cluster.stat("backups_started") > started, what="a copy to start")
    finally:
        cluster.status.setBuiltin("never", "remote", 0.0)
    command(cluster, "DropBackup", shuffle_id=shuffle, map_index=index)
    wait_for(lambda: cluster.stat("backups_cancelled") >= cancelled + 2, what="both copies to end as cancelled")
    remote_files = f"{cluster.root}/{cluster.app_id}/{shuffle}/*/*shuffle_{shuffle}_{map_id}_0.*"
    wait_for(lambda: not glob.glob(remote_files), what="no remote copy left")
    assert cluster.stat("backups_done") == done
    assert tracked(cluster, shuffle, index) == (map_id, source)
    assert run_job(cluster, rdd, f"again-{tag}") == expected_sums(60_000)
    assert index not in rerun_partitions(cluster, f"again-{tag}")


def test_a_success_spark_ignored_leaves_the_registered_output_and_its_copies_alone(cluster: Cluster) -> None:
    """Spark ignores some successful map tasks (one launched before a fetch failure blamed its
    executor, an older attempt of an indeterminate stage) and keeps the output it registered. The
    plugin must not record the ignored one in that output's place: it deleted the registered
    output's copies, so the output was recomputed when its executor died."""
    rdd, tag, shuffle, source, map_id, index, peer = one_output(cluster, "ignored")
    done = cluster.stat("backups_done")
    command(cluster, "Backup", shuffle_id=shuffle, map_index=index, source=source, target=peer)
    wait_for(lambda: cluster.stat("backups_done") > done, what="the peer copy")
    assert len(data_files(cluster, shuffle, map_id)) == 2
    stage = cluster.job_stages(f"first-{tag}")[0]
    cluster.status.endIgnoredMapTask(stage, index, peer, 10**9 + map_id)
    cluster.kill(source)
    wait_for(lambda: tracked(cluster, shuffle, index) == (map_id, peer), what="the output on its peer copy")
    cluster.full_strength()
    assert run_job(cluster, rdd, f"again-{tag}") == expected_sums(60_000)
    assert index not in rerun_partitions(cluster, f"again-{tag}")
