"""The executor JVMs of a Spark ``local-cluster``, found among the driver's descendant processes.

Each runs ``org.apache.spark.executor.CoarseGrainedExecutorBackend --executor-id <id> ...``; the
eviction injector kills them and the CPU cap throttles them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psutil

EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


@dataclass(frozen=True, slots=True)
class ExecutorProcess:
    """One executor JVM found under the driver."""

    executor_id: str
    pid: int
    started: float
    """Process start, seconds since the epoch (``psutil.Process.create_time``)."""



def _executor_id(cmdline: Sequence[str]) -> str | None:
    if EXECUTOR_CLASS not in cmdline:
        return None
    for flag, value in zip(cmdline, cmdline[1:], strict=False):
        if flag == "--executor-id":
            return value
    return None


def _id_key(executor_id: str) -> tuple[int, int | str]:
    # Spark's ids are "0", "1", ... : numeric order, not string order ("10" after "9").
    return (0, int(executor_id)) if executor_id.isdigit() else (1, executor_id)


def driver_pid(sc: Any) -> int:
    """Process id of ``sc``'s driver JVM, the ancestor of a ``local-cluster``'s executor JVMs.

    Asked from the JVM itself, so it holds however PySpark reached the JVM (``sc`` is a
    ``SparkContext``; typed ``Any`` because py4j's fields are).
    """
    return int(sc._jvm.java.lang.ProcessHandle.current().pid())


def find_executors(driver_pid: int) -> list[ExecutorProcess]:
    """Live executor JVMs among the descendants of ``driver_pid``, oldest first.

    Zombies (killed, not yet reaped) and processes that vanish while being read are skipped, and
    so is a child of an executor JVM. A JVM starts a process by forking, and until the child
    execs its program it shows the JVM's command line; an executor that shuts down (released or
    decommissioned) deletes its directories with ``rm -rf`` this way, and under a CPU quota the
    child can live long enough to be counted as one more executor.
    """
    try:
        descendants = psutil.Process(driver_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found: dict[int, tuple[ExecutorProcess, int]] = {}
    for proc in descendants:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            executor_id = _executor_id(proc.cmdline())
            if executor_id is not None:
                found[proc.pid] = (ExecutorProcess(executor_id, proc.pid, proc.create_time()), proc.ppid())
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    executors = [executor for executor, parent in found.values() if parent not in found]
    return sorted(executors, key=lambda e: (e.started, _id_key(e.executor_id)))


def signal_would_terminate(pid: int, signum: int) -> bool:
    """``signum`` would end process ``pid``: it neither catches nor ignores it (Linux ``/proc``).

    A JVM installs its SIGPWR handler (Spark's decommissioning, trspark's notice watcher) some
    time after it started, so a notice sent too early kills it on the spot: a cloud's notice
    never does that. psutil does not expose the signal masks, hence the read of ``status``.
    False when the process is gone.
    """
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            masks = dict(line.rstrip("\n").split(":\t", 1) for line in status if line.startswith(("SigCgt", "SigIgn")))
    except (OSError, ValueError):
        return False
    handled = int(masks.get("SigCgt", "0"), 16) | int(masks.get("SigIgn", "0"), 16)
    return not handled & (1 << (signum - 1))
