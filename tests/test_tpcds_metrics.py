"""Run metrics: re-computed task attempts from REST stage data, capacity lost to missing executors."""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace

import pytest

from jobs.tpcds import metrics
from jobs.tpcds.metrics import CapacityMeter, executor_count, recomputed_in_shuffles, recomputed_in_stage
from jobs.tpcds.results import COLUMNS


def task(partition: int, status: str = "SUCCESS") -> dict[str, object]:
    return {"partitionId": partition, "index": partition, "status": status}


def attempt(tasks: list[dict[str, object]], shuffle_bytes: int = 0) -> dict[str, object]:
    return {"shuffleWriteBytes": shuffle_bytes, "shuffleWriteRecords": 1 if shuffle_bytes else 0,
            "tasks": {str(i): t for i, t in enumerate(tasks)}}


def test_clean_map_stage_recomputes_nothing() -> None:
    assert recomputed_in_stage([attempt([task(0), task(1), task(2)], shuffle_bytes=100)]) == 0


def test_lost_outputs_and_a_resubmitted_attempt_count_as_recomputed() -> None:
    first = attempt([task(0), task(1), task(2, "FAILED"), task(2)], shuffle_bytes=300)  # died with its executor
    retry = attempt([task(0), task(1)], shuffle_bytes=200)  # outputs of 0 and 1 lost: run again
    assert recomputed_in_stage([first, retry]) == 3


def test_speculative_copies_of_running_tasks_are_not_re_runs() -> None:
    copy = {**task(1, "KILLED"), "speculative": True}  # a duplicate that lost the race
    winner = {**task(2), "speculative": True}  # a duplicate that won: its original was killed
    stage = attempt([task(0), task(1), copy, task(2, "KILLED"), winner], shuffle_bytes=100)
    assert recomputed_in_stage([stage]) == 0
    assert recomputed_in_stage([stage, attempt([task(1)], shuffle_bytes=50)]) == 1  # partition 1's output lost


def test_result_stages_are_not_counted() -> None:
    assert recomputed_in_stage([attempt([task(0), task(0, "FAILED"), task(0)])]) == 0
    assert recomputed_in_stage([]) == 0


def stage(stage_id: int, rdds: list[int], tasks: list[dict[str, object]], shuffle_bytes: int = 100) -> dict[str, object]:
    return {**attempt(tasks, shuffle_bytes), "stageId": stage_id, "rddIds": rdds}


def test_outputs_re_run_in_a_later_jobs_new_stage_count_against_their_shuffle() -> None:
    """Adaptive execution: a later job re-runs lost outputs of an earlier job's stage in a new stage over the same RDDs."""
    first = stage(3, [7, 8, 9], [task(p) for p in range(6)])
    again = stage(11, [9, 8, 7], [task(1), task(2), task(4), task(5)])  # the 4 outputs the kill took
    other = stage(12, [10, 11], [task(0), task(1)])  # another shuffle, run once
    assert recomputed_in_shuffles([first, again, other]) == 4
    assert recomputed_in_stage([first]) + recomputed_in_stage([again]) == 0  # what a count per stage id saw


def test_stages_without_rdd_ids_are_counted_by_stage_id() -> None:
    one = {**attempt([task(0), task(1)], 100), "stageId": 1}
    two = {**attempt([task(0), task(1)], 100), "stageId": 2}
    assert recomputed_in_shuffles([one, two]) == 0
    assert recomputed_in_shuffles([one, {**attempt([task(1)], 50), "stageId": 1}]) == 1


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_capacity_meter_integrates_missing_executors() -> None:
    clock, registered = _Clock(), [3]
    meter = CapacityMeter(lambda: registered[0], expected=3, clock=clock)
    meter.sample()  # starts the clock at 0 s
    clock.now = 0.2
    meter.sample()  # all there
    assert meter.lost_seconds == 0.0
    registered[0], clock.now = 1, 0.7
    meter.sample()  # two executors missing for 0.5 s
    registered[0], clock.now = 3, 2.0
    meter.sample()  # all back
    assert meter.lost_seconds == pytest.approx(1.0) and meter.samples == 3


def test_capacity_meter_counts_only_the_executors_that_could_run_at_once() -> None:
    # 3 one-core executors on 2 cores: with 2 left nothing is lost, with 1 left one core's worth.
    clock, registered = _Clock(), [2]
    meter = CapacityMeter(lambda: registered[0], expected=3, usable=2, clock=clock)
    meter.sample()
    clock.now = 1.0
    meter.sample()
    assert meter.lost_seconds == 0.0
    registered[0], clock.now = 1, 1.5
    meter.sample()
    assert meter.lost_seconds == pytest.approx(0.5)
    with pytest.raises(ValueError, match="usable executors must be > 0"):
        CapacityMeter(lambda: 1, expected=3, usable=0)


def test_capacity_meter_samples_on_its_own_thread_while_entered() -> None:
    with CapacityMeter(lambda: 1, expected=3, poll=0.01) as meter:
        while meter.samples < 3:
            time.sleep(0.01)
    assert meter.lost_seconds > 0.0
    assert meter._thread is not None and not meter._thread.is_alive()  # no sample after the exit


class _Driver:
    """What ``ExecutorCount`` reads of a SparkContext: ``sc._jsc.sc().getExecutorIds().mkString(",")``."""

    def __init__(self, registered: list[str]) -> None:
        self.registered = registered
        self._jsc = self

    def sc(self) -> _Driver:
        return self

    def getExecutorIds(self) -> _Driver:  # noqa: N802 (Spark's name)
        return self

    def mkString(self, sep: str) -> str:  # noqa: N802 (Scala's name)
        return sep.join(self.registered)


def test_an_executor_still_listed_after_its_jvm_went_is_not_counted_and_unsettles_the_cluster(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    import jobs.harness.executors

    jvms = ["0", "1", "3"]  # executor 2 was released: its JVM is gone, the driver still lists it
    monkeypatch.setattr(jobs.harness.executors, "find_executors",
                        lambda pid: [SimpleNamespace(executor_id=e) for e in jvms])
    driver = _Driver(["0", "1", "2", "3"])
    count = executor_count(driver, driver_pid=1)  # type: ignore[arg-type]
    assert count() == 3 and not count.settled()
    driver.registered.remove("2")  # the driver dropped it
    assert count() == 3 and count.settled()
    assert executor_count(driver).settled()  # no driver process to look at: nothing to wait for


def test_a_runs_counters_wait_for_the_copies_still_open_when_its_query_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    # The query ended while its last copy was being written: the counters read then miss it.
    reads = iter([
        {"backups_planned": 3, "backups_finished": 1, "backups_failed": 1, "bytes_to_remote": 10},
        {"backups_planned": 3, "backups_finished": 1, "backups_failed": 1, "bytes_to_remote": 10},
        {"backups_planned": 3, "backups_finished": 2, "backups_failed": 1, "backups_to_remote": 2,
         "bytes_to_remote": 25},
    ])
    monkeypatch.setattr(metrics, "_status", lambda sc: next(reads))
    counters = metrics.plugin_counters(None, settle=5.0)  # type: ignore[arg-type]
    assert counters == {"backups_count": 2, "backups_bytes": 25, "backups_local": 0, "backups_remote": 2,
                        "notices": 0, "executors_drained": 0, "executors_released": 0}


def test_a_runs_counters_hold_the_notices_drains_and_releases_of_the_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    status = {"notices": 2, "executors_drained": 2, "executors_released": 1, "executors_released_idle": 4}
    monkeypatch.setattr(metrics, "_status", lambda sc: status)
    counters = metrics.plugin_counters(None)  # type: ignore[arg-type]
    assert (counters["notices"], counters["executors_drained"], counters["executors_released"]) == (2, 2, 1)
    assert set(counters) <= set(COLUMNS)  # each counter has its CSV column


def test_a_copy_that_never_ends_is_waited_for_no_longer_than_the_settle_time(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    now, reads = [100.0], []
    monkeypatch.setattr(metrics, "time", SimpleNamespace(monotonic=lambda: now[0],
                                                         sleep=lambda s: now.__setitem__(0, now[0] + s)))
    monkeypatch.setattr(metrics, "_status", lambda sc: reads.append(now[0]) or {"backups_planned": 1})
    with caplog.at_level(logging.WARNING, logger=metrics.log.name):
        assert metrics.plugin_counters(None, settle=0.3)["backups_count"] == 0  # type: ignore[arg-type]
    waited = now[0] - 100.0
    assert 0.3 <= waited <= 0.4 + 1e-9  # stopped at the settle time, within one 0.1 s step (float steps)
    assert len(reads) == 1 + round(waited / 0.1)  # a read at once, then one per step
    assert any("1 backups still open after 0 s" in m for m in caplog.messages)


def test_without_the_plugin_the_counters_are_zeros_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "_status", lambda sc: {})
    assert set(metrics.plugin_counters(None).values()) == {0}  # type: ignore[arg-type]
