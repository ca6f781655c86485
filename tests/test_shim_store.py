"""The remote store failing under a real ``local-trcluster[2,1,1024]`` with the built-in
always-checkpoint policy: unwritable from the start, removed while copies are writing, full.
A copy that failed is asked for once more, and no more.

The store's root is a symbolic link, so one application serves every case: the test points it
at a healthy directory, at a regular file (nothing can be created below it, not even by root), or
at a small tmpfs (mounted by the test; skipped where mounting is not allowed), and removes the
directory it points at while copies are writing their data files (each one then fails at its
commit, where the vanished directory shows as a missing file: a store failure, not the executor
losing its map output). In every case the job's answer is right, an executor killed afterwards
loses only outputs that are recomputed (nothing half-written is read), and the driver logs one
warning when the store starts failing.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from driver_log import driver_log, log_lines
from jvm_gateway import wait_for
from live_app import TIMEOUT, LiveApp, trcluster_builder
from missing_tool import missing

pytestmark = pytest.mark.spark

EXECUTORS = 2
MAPS = 2
ROWS = 200000  # 0.5-0.7 MB of map output per map: more than the small tmpfs holds
# Bytes/s while copies run into a fault: a copy writes for 12-18 s, longer than the job takes to
# return on a loaded machine, so the fault lands while a copy is writing.
THROTTLE = 40e3
STORE_WARNING = "backups to the remote store"
STORE_RECOVERED = "takes backups again"


class App(LiveApp):
    def __init__(self, spark: Any, log: Path, root: Path) -> None:
        super().__init__(spark, log)
        self.link = root / "store"
        self.healthy = root / "healthy"

    def point_at(self, target: Path) -> None:
        tmp = self.link.with_name("store.new")
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(target)
        tmp.replace(self.link)  # atomic: a copy sees the old target or the new one

    def copies_writing(self) -> int:
        """Remote copies writing their data: a temporary data file with bytes in it (created,
        its permissions set, the first chunk written; a committed one has lost that name)."""
        return sum(1 for tmp in self.healthy.glob("**/.shuffle_*.data.*.trspark-tmp") if _size(tmp) > 0)

    def store_episodes(self) -> list[str]:
        """``"fail"`` for each store warning and ``"ok"`` for each "takes backups again", in log order."""
        return ["fail" if line.startswith("WARN") else "ok" for line in log_lines(self.log)
                if (line.startswith("WARN") and STORE_WARNING in line) or STORE_RECOVERED in line]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:  # committed (renamed) or removed since the listing
        return 0


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    import trspark

    root = tmp_path_factory.mktemp("store")
    java_options, log = driver_log(root)
    (root / "healthy").mkdir()
    (root / "store").symlink_to(root / "healthy")
    builder = trcluster_builder("trspark-store", EXECUTORS, java_options)
    spark = trspark.configure(builder, mode="always", remote_path=(root / "store").as_uri()).getOrCreate()
    try:
        yield App(spark, log, root)
    finally:
        spark.stop()


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        missing(f"cannot mount a 64 KiB tmpfs here (needs root with CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        # Lazily: the executors may still hold files there, and a busy mount would be left behind.
        subprocess.run(["umount", "--lazy", str(mount)], check=False)


def job(app: App) -> Callable[[], dict[int, int]]:
    rdd = app.sc.parallelize(range(ROWS), MAPS).map(lambda x: (x, x % 7)).reduceByKey(lambda a, b: a + b, 3)
    return lambda: {k: v for k, v in rdd.collect() if k % 1000 == 0}


EXPECTED = {k: k % 7 for k in range(0, ROWS, 1000)}


def healthy_store(app: App) -> None:
    """Executors all up, the store healthy and taking backups (a failing one is over)."""
    wait_for(lambda: len(app.alive()) >= EXECUTORS, what="every executor registered", timeout=TIMEOUT)
    app.status.setBuiltin("always", "remote", 0.0)
    app.healthy.mkdir(exist_ok=True)
    app.point_at(app.healthy)
    done = app.stat("backups_remote")
    small = app.sc.parallelize(range(100), 2).map(lambda x: (x % 3, x)).reduceByKey(lambda a, b: a + b)
    assert dict(small.collect()) == {k: sum(range(k, 100, 3)) for k in range(3)}
    wait_for(lambda: app.stat("backups_remote") >= done + 2, what="the healthy store to take backups", timeout=TIMEOUT)


def survives(app: App, fault: Callable[[], None], during_copies: bool = False) -> None:
    """Run a job under ``fault``; kill an executor; run it again: right answers, and one warning per
    failing spell: a second only after a copy committed in between (a full store frees room when a
    failed copy's partial file is removed, and a smaller copy can then fit)."""
    healthy_store(app)
    episodes = len(app.store_episodes())
    failed = app.stat("backups_failed")
    repointed, lost = app.stat("outputs_repointed"), app.stat("outputs_lost")
    run = job(app)
    if during_copies:
        app.status.setBuiltin("always", "remote", THROTTLE)
        assert run() == EXPECTED
        wait_for(lambda: app.copies_writing() >= 1, what="a copy writing", timeout=TIMEOUT)
        fault()
        app.status.setBuiltin("always", "remote", 0.0)
    else:
        fault()
        assert run() == EXPECTED
    wait_for(lambda: app.stat("backups_failed") > failed, what="a backup to fail", timeout=TIMEOUT)
    app.kill_one_executor()
    assert run() == EXPECTED
    # Each lost output was either re-pointed to a verified copy or recomputed.
    assert app.stat("outputs_repointed") + app.stat("outputs_lost") > repointed + lost
    new = app.store_episodes()[episodes:]
    assert new[:1] == ["fail"] and ["fail", "fail"] not in [new[i:i + 2] for i in range(len(new) - 1)], new


def test_a_store_unwritable_from_the_start(app: App, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    survives(app, lambda: app.point_at(blocker))


def test_a_failed_copy_is_asked_for_once_more_and_never_again(app: App, tmp_path: Path) -> None:
    # Always-checkpoint asks again for a copy that failed, so that its output stays protected;
    # once per output, so that a store that keeps failing does not make the copies loop.
    healthy_store(app)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    app.point_at(blocker)
    requested, failed = app.stat("backups_requested"), app.stat("backups_failed")
    rdd = app.sc.parallelize(range(1000), MAPS).map(lambda x: (x % 5, x)).reduceByKey(lambda a, b: a + b)
    assert dict(rdd.collect()) == {k: sum(range(k, 1000, 5)) for k in range(5)}
    wait_for(lambda: app.stat("backups_failed") >= failed + 2 * MAPS, what="each output's copy to fail twice",
             timeout=TIMEOUT)
    app.quiet()
    assert app.stat("backups_requested") - requested == 2 * MAPS
    assert app.stat("backups_failed") - failed == 2 * MAPS


def remove_store(store: Path) -> None:
    """Take ``store`` away at once, as an unmounted volume does.

    A plain ``rmtree`` races the copies still writing into it (a file created between listing a
    directory and removing it fails the removal); moved aside, the path is gone in one step and
    the moved tree is deleted whatever those copies still write into it.
    """
    moved = store.with_name(store.name + "-removed")
    store.rename(moved)
    shutil.rmtree(moved, ignore_errors=True)


def test_a_store_removed_while_the_copies_of_a_jobs_outputs_are_writing(app: App) -> None:
    survives(app, lambda: remove_store(app.healthy), during_copies=True)


def test_a_full_store(app: App, small_tmpfs: Path) -> None:
    survives(app, lambda: app.point_at(small_tmpfs))
