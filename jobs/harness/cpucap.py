"""Give each executor JVM of a local-cluster its own CPU quota, as if it ran on its own VM.

A local-cluster runs every executor on the same few cores. That is not how executors relate on
a real cluster, and it distorts what an eviction costs: an idle executor (decommissioned, or
drained on a notice) hands its CPU to the others, so losing it costs nothing; a replacement JVM
starting up (seconds of class loading and JIT) steals CPU from the executors running the query.
On this 2-core machine with 3 executors, a query ran its last stages 1.5-2x slower while a
replacement started, and decommissioning -- whose idle executor gives its share away -- looked
free.

:class:`ExecutorCpuCap` watches the driver's process tree (``jobs.harness.executors.find_executors``)
and moves every executor JVM, as soon as it appears, into a cgroup of its own whose CPU quota
is ``cpus`` cores (the CFS bandwidth controller: ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``
on cgroup v1, ``cpu.max`` on v2). Each executor then has exactly its quota, used or not, as on
its own VM. Written by hand: no library manages per-process cgroups without systemd, which
containers like this one do not run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from pathlib import Path
from types import TracebackType

from jobs.harness.executors import find_executors

log = logging.getLogger(__name__)

PERIOD_US = 100_000
"""CFS period (µs); the quota is ``cpus x PERIOD_US`` per period."""

V1_ROOT = Path("/sys/fs/cgroup/cpu")
V2_ROOT = Path("/sys/fs/cgroup")


class CpuCapUnavailable(RuntimeError):
    """Per-executor CPU quotas cannot be set on this machine (no writable cgroup CPU controller)."""


def _cgroup_root(root: Path | None = None) -> tuple[Path, int]:
    """The writable cgroup directory under which executor groups go, and its cgroup version."""
    if root is not None:
        return root, 1 if (root / "cpu.cfs_quota_us").exists() else 2
    if (V1_ROOT / "cpu.cfs_quota_us").exists():
        return V1_ROOT, 1
    # cgroup v2 (untested on this machine, which has v1): a child group gets cpu.max only when
    # the parent hands the controller down (cgroup.subtree_control).
    controllers = V2_ROOT / "cgroup.subtree_control"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        return V2_ROOT, 2
    raise CpuCapUnavailable("no cgroup CPU controller (neither /sys/fs/cgroup/cpu nor cgroup v2 with 'cpu' "
                            "in cgroup.subtree_control)")


def check(root: Path | None = None) -> Path:
    """Fail early, with the reason, if executor CPU quotas cannot be set here; else the cgroup root.

    Creates and removes a probe group, which is what a cap needs (root, or a delegated cgroup).
    """
    base, _ = _cgroup_root(root)
    probe = base / f"trspark-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        raise CpuCapUnavailable(f"cannot create a cgroup under {base}: {exc.strerror or exc}") from exc
    return base


class ExecutorCpuCap:
    """Caps each executor JVM below ``driver_pid`` at ``cpus`` cores, for as long as it runs.

    Use as a context manager around a session's life. Groups are named
    ``trspark-<driver pid>-<executor id>-<pid>``; :meth:`stop` moves any still-running executor
    back to the root group and removes them.
    """

    def __init__(self, driver_pid: int, cpus: float, *, root: Path | None = None, poll: float = 0.05) -> None:
        if not cpus > 0:
            raise ValueError(f"cpus must be > 0, got {cpus}")
        self.driver_pid = driver_pid
        self.cpus = cpus
        self.poll = poll
        self.root, self.version = _cgroup_root(root)
        self._groups: dict[int, Path] = {}  # pid -> its group
        self.capped: dict[str, int] = {}
        """Executor id -> pid of every JVM capped so far."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _quota(self, group: Path) -> None:
        quota = max(1000, round(self.cpus * PERIOD_US))
        if self.version == 1:
            (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (group / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")

    def step(self) -> None:
        """Cap the executor JVMs that appeared since the last step."""
        for executor in find_executors(self.driver_pid):
            if executor.pid in self._groups:
                continue
            group = self.root / f"trspark-{self.driver_pid}-{executor.executor_id}-{executor.pid}"
            try:
                group.mkdir(exist_ok=True)
                self._quota(group)
                # cgroup.procs moves the whole process, every thread of the JVM with it.
                (group / "cgroup.procs").write_text(str(executor.pid))
            except OSError as exc:  # the JVM exited meanwhile (a kill): nothing to cap
                log.debug("could not cap executor %s (pid %d): %s", executor.executor_id, executor.pid, exc)
                self._remove(group)
                continue
            self._groups[executor.pid] = group
            self.capped[executor.executor_id] = executor.pid
            log.info("executor %s (pid %d) capped at %.2f CPU", executor.executor_id, executor.pid, self.cpus)
        self._collect()

    def _collect(self) -> None:
        """Remove the groups whose JVM has exited."""
        for pid, group in list(self._groups.items()):
            if not self._pids(group):
                self._remove(group)
                del self._groups[pid]

    @staticmethod
    def _pids(group: Path) -> list[str]:
        try:
            return (group / "cgroup.procs").read_text().split()
        except OSError:
            return []

    @staticmethod
    def _remove(group: Path) -> None:
        with contextlib.suppress(OSError):
            group.rmdir()

    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            try:
                self.step()
            except Exception:  # a transient /proc or cgroupfs error must not end the capping
                log.exception("executor CPU cap step failed; retrying")

    def start(self) -> ExecutorCpuCap:
        self.step()
        self._thread = threading.Thread(target=self._run, name="trspark-executor-cpu-cap", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop capping; executors still running go back to the root group, the groups are removed.

        A JVM that is exiting (``spark.stop()`` just killed it) cannot be moved but stays listed
        until it is reaped: its group is retried until ``timeout`` seconds have passed.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        deadline = time.monotonic() + timeout
        while self._groups:
            for pid, group in list(self._groups.items()):
                for member in self._pids(group):
                    with contextlib.suppress(OSError):
                        (self.root / "cgroup.procs").write_text(member)
                self._remove(group)
                if not group.exists():
                    del self._groups[pid]
            if not self._groups or time.monotonic() > deadline:
                break
            time.sleep(0.1)  # an exiting process leaves its group when reaped; nothing to wait on
        for group in self._groups.values():
            log.warning("could not remove cgroup %s (still in use)", group)
        self._groups.clear()

    def __enter__(self) -> ExecutorCpuCap:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
