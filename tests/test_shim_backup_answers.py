"""Every ``Backup`` command the engine sends gets one answer, on a real ``local-trcluster[2,1,1024]``
in ``tr`` mode.

The engine is told that executors live 100 hours, so it asks for no backup itself: the test sends
``Backup`` commands through the ``TRStatus.applyCommand`` test hook and reads the events the
engine received from its trace (``TRSPARK_TRACE``). A ``Backup`` of a copy already asked for
starts no second copy (it would write the same files): it is answered as that copy is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jvm_gateway import wait_for
from live_app import TIMEOUT, LiveApp, expected_sums, read_trace, slow_sums, tr_session
from test_shim_copies import shuffle_id

pytestmark = pytest.mark.spark

EXECUTORS = 2
TOLD = "exponential:mean=360000"  # the engine's belief: no executor ends within this test
ROWS = 6000
COPY_SECONDS = 5.0  # how long the throttled copy lasts: the repeated command comes while it runs


class App(LiveApp):
    def __init__(self, spark: Any, log: Path, trace: Path) -> None:
        super().__init__(spark, log)
        self.trace = trace

    def source(self, shuffle: int, map_index: int) -> str:
        """The executor the tracker has one map output on."""
        return str(self.status.mapOutputLocation(shuffle, map_index)).split()[1]

    def backup(self, shuffle: int, map_index: int, target: str = "remote") -> None:
        """The engine's ``Backup`` of one map output to ``target``, from where the tracker has it."""
        self.status.applyCommand(json.dumps({"type": "Backup", "shuffle_id": shuffle, "map_index": map_index,
                                             "source": self.source(shuffle, map_index), "target": target}))

    def answers(self, shuffle: int, map_index: int) -> list[str]:
        """The kinds of the answers to ``Backup`` commands of one output the engine received so far."""
        return [e["type"] for e in read_trace(self.trace) if e["type"] in ("BlockBackedUp", "BackupFailed")
                and (e["shuffle_id"], e["map_index"]) == (shuffle, map_index)]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    with tr_session(tmp_path_factory.mktemp("answers"), "trspark-answers", EXECUTORS, TOLD) as (spark, log, trace):
        yield App(spark, log, trace)


def test_a_backup_repeated_while_its_copy_runs_and_after_it_committed_is_answered_each_time(app: App) -> None:
    app.wait_full(EXECUTORS)
    rdd = slow_sums(app.sc, ROWS, 2, 0.0)
    assert dict(rdd.collect()) == expected_sums(ROWS)
    shuffle = shuffle_id(rdd)
    # The outputs are alike (the same rows per partition): one unthrottled copy gives the bytes of the other.
    done, written = app.stat("backups_done"), app.stat("backups_bytes")
    app.backup(shuffle, 0)
    wait_for(lambda: app.stat("backups_done") > done, what="the unthrottled copy", timeout=TIMEOUT)
    per_copy = app.stat("backups_bytes") - written
    requested = app.stat("backups_requested")
    app.status.setBuiltin("never", "both", per_copy / COPY_SECONDS)
    try:
        app.backup(shuffle, 1)
        app.backup(shuffle, 1)
    finally:
        app.status.setBuiltin("never", "both", 0.0)
    wait_for(lambda: len(app.answers(shuffle, 1)) >= 2, what="an answer to each of the two commands", timeout=TIMEOUT)
    assert app.stat("backups_requested") == requested + 1  # one copy made for both
    app.backup(shuffle, 1)
    wait_for(lambda: len(app.answers(shuffle, 1)) >= 3, what="the answer to the command after the commit",
             timeout=TIMEOUT)
    app.quiet()
    assert app.answers(shuffle, 1) == ["BlockBackedUp"] * 3
    assert app.stat("backups_requested") == requested + 1


def test_a_backup_to_the_executor_that_holds_the_output_is_answered_failed(app: App) -> None:
    app.wait_full(EXECUTORS)
    rdd = slow_sums(app.sc, ROWS, 2, 0.0)
    assert dict(rdd.collect()) == expected_sums(ROWS)
    shuffle = shuffle_id(rdd)
    requested = app.stat("backups_requested")
    app.backup(shuffle, 0, target=app.source(shuffle, 0))
    wait_for(lambda: app.answers(shuffle, 0), what="an answer to the command", timeout=TIMEOUT)
    app.quiet()
    assert app.answers(shuffle, 0) == ["BackupFailed"]
    assert app.stat("backups_requested") == requested
