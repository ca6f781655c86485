"""Per-executor CPU quotas: a busy fake executor is throttled to its share; groups are cleaned up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from jvm_gateway import wait_for
from missing_tool import missing

from jobs.harness.cpucap import CpuCapUnavailable, ExecutorCpuCap, check
from jobs.harness.executors import EXECUTOR_CLASS

TIMEOUT = 20.0
# Burns CPU and reports, every 0.5 s of wall time, the CPU seconds it got meanwhile.
BUSY = """
import os, sys, time
while True:
    wall, cpu = time.monotonic(), time.process_time()
    while time.monotonic() - wall < 0.5:
        pass
    print(round((time.process_time() - cpu) / (time.monotonic() - wall), 3), flush=True)
"""



@pytest.fixture
def cpu_caps() -> None:
    try:
        check()
    except CpuCapUnavailable as e:
        missing(f"no writable cgroup CPU controller here: {e}")


def executor(executor_id: str) -> subprocess.Popen[str]:
    args = [EXECUTOR_CLASS, "--executor-id", executor_id]
    return subprocess.Popen([sys.executable, "-c", BUSY, *args], stdout=subprocess.PIPE, text=True)


@pytest.mark.usefixtures("cpu_caps")
def test_each_executor_gets_its_own_quota_and_its_group_goes_with_it() -> None:
    import os

    procs = [executor("0"), executor("1")]
    try:
        with ExecutorCpuCap(os.getpid(), 0.2) as cap:
            wait_for(lambda: set(cap.capped) == {"0", "1"}, "both executors capped", TIMEOUT)
            groups = [g for g in cap.root.iterdir() if g.name.startswith(f"trspark-{os.getpid()}-")]
            assert len(groups) == 2
            # Rates after capping: each gets ~0.2 CPU (a 2-core machine would give each ~1.0).
            for proc in procs:
                assert proc.stdout is not None
                proc.stdout.readline()  # a half-second that may have begun before the cap
                rates = [float(proc.stdout.readline()) for _ in range(3)]
                assert max(rates) < 0.4, rates
            procs[0].kill()
            procs[0].wait(TIMEOUT)
            wait_for(lambda: len([g for g in groups if g.exists()]) == 1, "the dead executor's group removed", TIMEOUT)
        assert not any(g.exists() for g in groups), "stop() removes every group"
        assert procs[1].poll() is None, "a running executor is released from its cap, not killed"
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(TIMEOUT)


def test_bad_share_and_missing_controller_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cpus must be > 0"):
        ExecutorCpuCap(1, 0.0, root=tmp_path)
    with pytest.raises(CpuCapUnavailable, match="cannot create a cgroup under"):
        check(tmp_path / "missing")
