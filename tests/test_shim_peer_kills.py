"""Kills of the executors that receive peer copies, on a real ``local-trcluster[2,1,1024]`` in
``always`` mode with ``backup.targets=local`` (every map output copied to the other executor).

The receiver of peer copies is killed. Its copies are dropped from the driver's ledger: the
outputs are read from their living sources (nothing re-runs), and when those sources die too the
outputs are recomputed, never looked for on the dead peer. With peer copies throttled (the rate
of ``spark.trspark.backup.throttle``, set at run time through ``TRStatus.setBuiltin``), the
receiver of one is killed while the copy is in flight: the copy never counts, the driver fails it
and cancels it at its source at once, and only the dead executor's own output is recomputed.

The plugin's warnings and Spark's fetch failures are read from the driver's log.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from driver_log import driver_log, log_lines
from jvm_gateway import wait_for
from live_app import TIMEOUT, LiveApp, expected_sums, slow_sums, trcluster_builder

pytestmark = pytest.mark.spark

EXECUTORS = 2
ROWS = 6000
COPY_SECONDS = 30.0  # how long a throttled peer copy lasts: a kill lands while it is in flight


class App(LiveApp):
    def trspark_warnings(self, since: int) -> list[str]:
        assert self.log is not None
        return [line for line in log_lines(self.log)[since:] if line.startswith("WARN") and "trspark:" in line]

    def fetch_failures(self, since: int) -> list[str]:
        """Reducers sent to an executor that no longer holds what they read (Spark logs each one)."""
        assert self.log is not None
        return [line for line in log_lines(self.log)[since:] if "FetchFailed" in line]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    import trspark

    java_options, log = driver_log(tmp_path_factory.mktemp("peer-kills"))
    builder = trcluster_builder("trspark-peer-kills", EXECUTORS, java_options)
    spark = trspark.configure(builder, mode="always", targets="local").getOrCreate()
    try:
        yield App(spark, log)
    finally:
        spark.stop()


def test_the_executor_that_received_peer_copies_is_killed(app: App) -> None:
    app.wait_full(EXECUTORS)
    since = len(log_lines(app.log))
    names = ("backups_local", "outputs_lost", "outputs_repointed", "maps_rerun")
    rdd = slow_sums(app.sc, ROWS, 4, 0.0)  # run three times over the same shuffle
    app.quiet()
    before = {name: app.stat(name) for name in names}
    assert dict(rdd.collect()) == expected_sums(ROWS)
    wait_for(lambda: app.stat("backups_local") >= before["backups_local"] + 4, what="4 verified peer copies",
             timeout=TIMEOUT)
    app.quiet()
    # With two executors each one received the other's copies: kill one of them.
    app.kill_one_executor()
    assert dict(rdd.collect()) == expected_sums(ROWS)
    after_first = {name: app.stat(name) for name in names}
    # Every output still had a living holder: the victim's own ones their copies, the others
    # their sources (the tracker's location of an output stays its source while it lives). Nothing
    # re-ran and no reducer was sent to the dead peer.
    assert after_first["maps_rerun"] == before["maps_rerun"]
    assert after_first["outputs_repointed"] > before["outputs_repointed"]
    assert not app.fetch_failures(since)
    # The victim's copies are gone from the ledger: when the other original executor dies too,
    # each of the four outputs is recomputed once; none is re-pointed to the dead peer.
    app.wait_full(EXECUTORS)
    app.kill_one_executor()
    assert dict(rdd.collect()) == expected_sums(ROWS)
    assert app.stat("maps_rerun") - after_first["maps_rerun"] == 4
    assert app.stat("outputs_lost") - after_first["outputs_lost"] >= 4
    assert app.stat("outputs_repointed") == after_first["outputs_repointed"]
    assert not app.fetch_failures(since)
    warnings = app.trspark_warnings(since)
    assert len(warnings) <= 1, warnings


def test_the_executor_receiving_a_throttled_peer_copy_is_killed_mid_copy(app: App) -> None:
    """Peer copies are throttled to last about COPY_SECONDS each, and the receiver of one is killed
    while it is in flight."""
    app.wait_full(EXECUTORS)
    names = ("backups_local", "backups_failed", "backups_bytes", "backups_started", "maps_rerun")
    app.quiet()
    # The same two outputs, unthrottled, give the bytes of one copy (the outputs are deterministic).
    probe = {name: app.stat(name) for name in names}
    assert dict(slow_sums(app.sc, ROWS, 2, 0.5).collect()) == expected_sums(ROWS)
    wait_for(lambda: app.stat("backups_local") >= probe["backups_local"] + 2, what="2 verified peer copies",
             timeout=TIMEOUT)
    per_copy = (app.stat("backups_bytes") - probe["backups_bytes"]) / 2
    app.quiet()
    since = len(log_lines(app.log))
    app.status.setBuiltin("always", "local", per_copy / COPY_SECONDS)
    try:
        before = {name: app.stat(name) for name in names}
        # Two map tasks of half a second start together, one on each single-core executor: each
        # executor is the source of one copy and the receiver of the other's.
        rdd = slow_sums(app.sc, ROWS, 2, 0.5)
        assert dict(rdd.collect()) == expected_sums(ROWS)
        wait_for(lambda: app.stat("backups_started") >= before["backups_started"] + 2, what="both copies started",
                 timeout=TIMEOUT)
        assert app.stat("backups_local") == before["backups_local"]  # in flight, not finished
        app.kill_one_executor()
    finally:
        app.status.setBuiltin("always", "local", 0.0)
    # Every copy ends without counting, both at the loss: the victim's own copy with it, and the
    # copy to it cancelled at its source rather than when its paced pass (COPY_SECONDS) would have
    # reached the upload to the dead peer. No record is left waiting in the driver's ledger.
    wait_for(lambda: app.stat("backups_failed") - before["backups_failed"] >= 2,
             what="both copies failed at the loss", timeout=COPY_SECONDS / 2)
    app.quiet()
    assert app.stat("backups_local") == before["backups_local"]
    assert app.stat("backups_failed") - before["backups_failed"] == 2
    # Only the victim's output is lost and recomputed; the survivor's is read where it was, and
    # no reducer is sent to the dead peer.
    assert dict(rdd.collect()) == expected_sums(ROWS)
    assert app.stat("maps_rerun") - before["maps_rerun"] == 1
    assert not app.fetch_failures(since)
