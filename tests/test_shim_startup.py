"""Start-up on a real ``local-trcluster``: executors that register before the engine is connected.

The driver plugin hands the engine its events only once the settings are checked and the engine
has started; Spark launches the executors before that. Here the settings check waits until the
driver's log shows every executor registered, and then a further ``GAP`` seconds, so the
executors register well before the engine starts. The engine must still know every executor before it hears of that executor's
first map output: an output on an executor it does not know would never be priced or backed up.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from driver_log import driver_log
from jvm_gateway import wait_for
from live_app import LiveApp, expected_sums, read_trace, slow_sums, trcluster_builder

pytestmark = pytest.mark.spark

EXECUTORS = 2
GAP = 6  # seconds between the executors' registration and the settings check: the scenario itself
REGISTERED = "Registered executor"  # the driver's log line as each executor registers
ROWS, TASKS, SECONDS = 2000, 8, 0.2


def slow_check_python(folder: Path, log: Path) -> tuple[Path, Path]:
    """(an interpreter whose settings check starts once ``log`` shows every executor registered,
    GAP s later, the engine's trace file). It gives up waiting after 50 s, within the plugin's
    60 s for the check, and the test then fails on the scenario's assertion."""
    trace = folder / "engine-trace.jsonl"
    python = folder / "python-slow-check"
    python.write_text(
        "#!/bin/sh\n"
        f'export TRSPARK_TRACE="{trace}"\n'
        'if [ "$2" = "trspark.live.confcheck" ]; then\n'
        "  i=0\n"
        f'  while [ "$(grep -c "{REGISTERED}" "{log}" 2>/dev/null)" -lt {EXECUTORS} ] && [ $i -lt 500 ]; do\n'
        "    sleep 0.1; i=$((i + 1))\n"
        "  done\n"
        f"  sleep {GAP}\n"
        "fi\n"
        f'exec "{sys.executable}" "$@"\n'
    )
    python.chmod(0o755)
    return python, trace


def with_registrations_logged(java_options: str) -> str:
    """The driver log configuration of ``java_options`` with the scheduler backend's INFO lines."""
    config = Path(java_options.removeprefix("-Dlog4j2.configurationFile="))
    config.write_text(config.read_text() + "logger.backend.name = org.apache.spark.scheduler.cluster\n"
                      "logger.backend.level = info\n")
    return java_options


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveApp, Path]]:
    import trspark

    root = tmp_path_factory.mktemp("startup")
    java_options, log = driver_log(root)
    python, trace = slow_check_python(root, log)
    builder = trcluster_builder("trspark-startup", EXECUTORS, with_registrations_logged(java_options))
    spark = trspark.configure(builder, mode="tr", lifetime="exponential:mean=30", python=str(python),
                              engine_timeout=30, remote_path=(root / "backups").as_uri()).getOrCreate()
    try:
        yield LiveApp(spark, log), trace
    finally:
        spark.stop()


def test_executors_registered_before_the_engine_started_are_announced_to_it(app: tuple[LiveApp, Path]) -> None:
    live, trace = app
    live.wait_full(EXECUTORS)
    assert dict(slow_sums(live.sc, ROWS, TASKS, SECONDS).collect()) == expected_sums(ROWS)
    # The engine hears of the job a moment after it ends: its trace is read once it has.
    events: list[dict[str, Any]] = wait_for(
        lambda: (found := read_trace(trace)) and any(e.get("type") == "JobEnded" for e in found) and found,
        "the job's end in the engine's trace", timeout=60)
    added = [e for e in events if e.get("type") == "ExecutorAdded"]
    # The scenario happened: an executor registered seconds before the engine heard of it.
    assert any(e.get("vm_started") is not None and e["time"] - e["vm_started"] > 5.0 for e in added), added
    known_at: dict[str, int] = {}
    first_output: dict[str, int] = {}
    for position, e in enumerate(events):
        if e.get("type") == "ExecutorAdded":
            known_at.setdefault(e["executor_id"], position)
        elif e.get("type") == "TaskEnded" and e.get("shuffle_id") is not None:
            first_output.setdefault(e["executor_id"], position)
    assert set(first_output) == live.alive(), (first_output, live.alive())
    assert all(known_at.get(executor, len(events)) < position for executor, position in first_output.items()), (
        known_at, first_output)
    assert not live.status.isFallenBack()
