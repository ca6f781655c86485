"""``trspark simulate`` survives its worker processes: a worker killed mid-run has its runs redone with
the same results, a worker that keeps dying ends the command with one line, and Ctrl-C or SIGTERM
leave no worker behind. Each waits on process states, never on a fixed sleep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from jvm_gateway import wait_for

ROOT = Path(__file__).resolve().parents[1]
# Four runs of about a second each on two workers: long enough to be killed mid-run.
COMMAND = [sys.executable, "-m", "trspark", "simulate", "--workload", "tpcds", "--policy", "tr", "--scale", "0.1",
           "--runs", "4", "--seed", "5", "--workers", "2", "--format", "json", "--rows"]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _interruptible() -> None:
    """A test run started in the background (``pytest &``) inherits SIGINT ignored, and so would
    the command: give it the default, so that Python turns Ctrl-C into KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start() -> tuple[subprocess.Popen[str], psutil.Process]:
    proc = subprocess.Popen(COMMAND, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                            start_new_session=True, preexec_fn=_interruptible)
    return proc, psutil.Process(proc.pid)


def busy_workers(parent: psutil.Process) -> list[psutil.Process]:
    """The parent's worker processes once two of them are computing a run (> 0.2 s of CPU each)."""
    try:
        children = parent.children()
        busy = [c for c in children if sum(c.cpu_times()[:2]) > 0.2]
    except psutil.NoSuchProcess:
        return []
    return children if len(busy) >= 2 else []


def finish(proc: subprocess.Popen[str], seconds: float) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=seconds)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def rows_of(stdout: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = json.loads(stdout)["rows"]
    return rows


def test_a_worker_killed_mid_run_has_its_runs_redone_with_the_same_results() -> None:
    reference = subprocess.run(COMMAND, capture_output=True, text=True, env=ENV, timeout=120, check=True)
    proc, parent = start()
    try:
        wait_for(lambda: bool(busy_workers(parent)), what="two workers computing runs", timeout=60)
        busy_workers(parent)[0].send_signal(signal.SIGKILL)
    finally:
        out, err = finish(proc, 60)
    assert proc.returncode == 0, err
    assert rows_of(out) == rows_of(reference.stdout)


def test_a_worker_that_keeps_dying_ends_the_command_within_seconds_with_one_line() -> None:
    proc, parent = start()
    try:
        def killed_all() -> bool:  # kill every worker seen until the command gives up
            for child in busy_workers(parent):
                child.send_signal(signal.SIGKILL)
            return proc.poll() is not None

        wait_for(killed_all, what="the command to end after its workers died", timeout=60)
    finally:
        out, err = finish(proc, 10)
    assert proc.returncode == 1
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: a simulator worker process died twice"), err


@pytest.mark.parametrize("stop", ["SIGTERM", "Ctrl-C"])
def test_stopping_the_command_leaves_no_worker_behind(stop: str) -> None:
    proc, parent = start()
    try:
        wait_for(lambda: bool(busy_workers(parent)), what="two workers computing runs", timeout=60)
        workers = busy_workers(parent)
        if stop == "SIGTERM":  # kill(1) and CI runners signal the command alone
            proc.send_signal(signal.SIGTERM)
        else:  # a terminal's Ctrl-C signals the whole foreground process group
            os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        finish(proc, 10)
    assert proc.returncode != 0, err
    assert "Traceback" not in err, err

    def gone(p: psutil.Process) -> bool:
        try:
            return p.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    wait_for(lambda: all(gone(w) for w in workers), what="every worker to exit", timeout=10)
