"""Kills the engine's estimates do not foresee, on a real ``local-trcluster[2,1,1024]`` in ``tr`` mode.

The safety belt: the engine is told that executors live 100 hours on average, while here every
executor is SIGKILLed again and again within a job of a few minutes (lives more than 100x
shorter). The engine backs up nothing, the kills make it re-run lost map outputs, and once that
re-computation exceeds ``beta`` times the job's time before it started, the belt fires: from then
on every map output is backed up. The next job, submitted alone, is measured afresh: the belt is
released and the engine decides by its estimates again.

The engine's events and commands are read from its trace (``TRSPARK_TRACE``), the plugin's
warnings from the driver's log.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from driver_log import log_lines
from jvm_gateway import wait_for
from live_app import TIMEOUT, LiveApp, expected_sums, read_trace, slow_sums, tr_session

pytestmark = pytest.mark.spark

EXECUTORS = 2
TOLD = "exponential:mean=360000"  # what the engine is told; the kills below end executors within minutes
ROWS = 6000
TASKS, SECONDS = 24, 2.0  # the first job's map stage: 24 s of work on the two cores
STORM_EVERY = 6  # successful map tasks between two storms
MAX_STORMS = 6


class App(LiveApp):
    def __init__(self, spark: Any, log: Path, trace: Path) -> None:
        super().__init__(spark, log)
        self.trace = trace

    def trace_lines(self, start: int) -> list[str]:
        with self.trace.open(encoding="utf-8") as f:
            f.seek(start)
            return f.read().splitlines()

    def map_outputs_since(self, start: int) -> int:
        """Successful map tasks the engine has seen since byte ``start`` of its trace (text search:
        polled often, so not parsed)."""
        return sum('"type":"TaskEnded"' in line and '"successful":true' in line and '"shuffle_id":null' not in line
                   for line in self.trace_lines(start))

    def belt_fired_since(self, start: int) -> bool:
        return any('"type":"SafetyBelt"' in line and '"on":true' in line for line in self.trace_lines(start))


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    with tr_session(tmp_path_factory.mktemp("kills"), "trspark-kills", EXECUTORS, TOLD) as (spark, log, trace):
        yield App(spark, log, trace)


def successful_map_tasks(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in lines if e["type"] == "TaskEnded" and e["successful"] and e.get("shuffle_id") is not None]


def belt_commands(lines: list[dict[str, Any]], on: bool) -> list[int]:
    """Positions of the engine's ``SafetyBelt`` commands with ``on`` in ``lines``."""
    return [i for i, e in enumerate(lines) if e["type"] == "SafetyBelt" and e["on"] is on]


def storm_until_the_belt_fires(app: App, start: int, job: threading.Thread) -> int:
    """Kill every executor whenever STORM_EVERY more map outputs exist, until the belt fires or the job ends."""
    storms = 0
    while storms < MAX_STORMS:
        done = app.map_outputs_since(start)
        wait_for(lambda d=done: not job.is_alive() or app.belt_fired_since(start) or (
            len(app.alive()) >= EXECUTORS and app.map_outputs_since(start) >= d + STORM_EVERY),
            what="more map outputs to lose", timeout=TIMEOUT * 2)
        if not job.is_alive() or app.belt_fired_since(start):
            break
        app.kill_all_executors()
        storms += 1
    return storms


def test_the_safety_belt_fires_on_a_job_that_re_runs_too_much_and_is_released_for_the_next_job(app: App) -> None:
    app.wait_full(EXECUTORS)
    start, since = app.trace.stat().st_size, len(log_lines(app.log))
    result: dict[str, Any] = {}
    job = threading.Thread(target=lambda: result.update(answer=dict(slow_sums(app.sc, ROWS, TASKS, SECONDS).collect())))
    job.start()
    storms = storm_until_the_belt_fires(app, start, job)
    job.join(timeout=TIMEOUT * 5)
    assert result.get("answer") == expected_sums(ROWS)
    assert storms >= 1 and not app.status.isFallenBack()  # the engine decided throughout
    first = read_trace(app.trace, start)
    fired = belt_commands(first, True)
    assert len(fired) == 1, first
    assert "exceeded beta=0.5" in first[fired[0]]["reason"]
    # Before it fired the engine, told of long lives, backed nothing up; from then on every map
    # output that ended was backed up to the remote store.
    backups = [(e["shuffle_id"], e["map_index"]) for e in first if e["type"] == "Backup"]
    assert not [e for e in first[:fired[0]] if e["type"] == "Backup"]
    later = [(e["shuffle_id"], e["partition"]) for e in successful_map_tasks(first[fired[0]:])]
    assert later and set(later) <= set(backups)
    assert all(e["target"] == "remote" for e in first if e["type"] == "Backup")
    lines = log_lines(app.log)[since:]
    assert len([line for line in lines if "trspark: engine safety belt on=true" in line]) == 1
    app.quiet()

    # The next job, alone: measured afresh, the belt is released and nothing is backed up.
    start = app.trace.stat().st_size
    assert dict(slow_sums(app.sc, ROWS, 4, 0.0).collect()) == expected_sums(ROWS)
    second = wait_for(lambda: (events := read_trace(app.trace, start)) and any(e["type"] == "JobEnded" for e in events)
                      and events, "the second job's end in the engine's trace", timeout=TIMEOUT)
    submitted = next(i for i, e in enumerate(second) if e["type"] == "JobSubmitted")
    released = belt_commands(second, False)
    assert released and released[0] == submitted + 1 and "measured afresh" in second[released[0]]["reason"]
    assert not belt_commands(second, True)
    shuffles = {e["shuffle_id"] for e in successful_map_tasks(second)}
    assert shuffles and not [e for e in second if e["type"] == "Backup" and e["shuffle_id"] in shuffles]
    wait_for(lambda: any("trspark: engine safety belt on=false" in line for line in log_lines(app.log)[since:]),
             what="the release in the driver's log", timeout=TIMEOUT)
