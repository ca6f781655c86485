"""``trspark report`` on the committed event log of a ``local-trcluster`` run with three kills.

The fixture (``tests/fixtures/observability``) holds the run's rolling, zstd-compressed log and
the trspark lines its driver served on ``/metrics/prometheus`` just before it stopped; the
summary must match the golden text and agree with those metrics.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from lz4_stream import lz4_block_stream

import trspark
from trspark.cli import cli
from trspark.eventlog import read_events
from trspark.reporting import EventLogError, summarize, write_report
from trspark.reporting.summary import summarize_events

FIXTURE = Path(__file__).parent / "fixtures" / "observability"
LOG = next((FIXTURE / "eventlog").iterdir())


def prometheus() -> dict[str, int]:
    """The run's trspark gauges by metric name."""
    pattern = re.compile(r"_driver_trspark_(\w+?)_Value\{type=\"gauges\"\} (\d+)$")
    return {m.group(1): int(m.group(2)) for line in (FIXTURE / "metrics.prom").read_text().splitlines()
            if (m := pattern.search(line))}


def plain_lines() -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in read_events(LOG))


def test_summary_of_the_committed_log_matches_the_golden_text() -> None:
    assert summarize(LOG).text() == (FIXTURE / "summary.txt").read_text()


def test_summary_agrees_with_the_metrics_of_the_same_run() -> None:
    summary, metrics = summarize(LOG), prometheus()
    assert summary.kills >= 3
    assert len(summary.backups) == metrics["backups_finished"]
    assert summary.backup_bytes == (metrics["bytes_to_peers"], metrics["bytes_to_remote"])
    assert summary.outputs_restored == metrics["outputs_restored"]
    assert summary.outputs_lost == metrics["outputs_lost"]
    assert summary.recomputed_tasks == metrics["map_tasks_rerun"]


def test_only_outputs_a_later_or_running_job_reads_count_as_re_runs_avoided_or_recomputed() -> None:
    # The run kills an executor after each pair of jobs. Job 1 re-reads job 0's shuffle (it skips
    # the stage): the one output restored before it saved a re-run. The later restores are of
    # that shuffle too, after job 1 ended, and no job reads it again: they saved nothing. Job 5
    # re-reads job 4's shuffle, whose three lost outputs it recomputed.
    events = list(read_events(LOG))
    first_restore = next(e for e in events if e["Event"].endswith("TRRestore"))
    (restored_id,) = first_restore["restoredMapIds"]
    task = next(e["Task Info"] for e in events
                if e["Event"] == "SparkListenerTaskEnd" and e["Task Info"]["Task ID"] == restored_id)
    summary = summarize_events(events)
    assert summary.outputs_restored == 6 and summary.outputs_restored_read == 1
    assert summary.rerun_avoided_task_seconds == pytest.approx((task["Finish Time"] - task["Launch Time"]) / 1000)
    assert summary.outputs_lost_read == summary.outputs_lost == summary.recomputed_tasks == 3


def _map_stage_log(with_shuffle_ids: bool) -> list[dict]:
    """Scala's ``rdd.reduceByKey`` then ``rdd.groupByKey``: two shuffles whose map stages (0, 1)
    share their RDDs, each of two map tasks; a later job re-runs shuffle 0's partition 1 under a
    new stage id (2), its first stage having been cleaned up."""
    def job(job_id: int, stages: list[int], at: int) -> list[dict]:
        infos = [{"Stage ID": s, "RDD Info": [{"RDD ID": 3}, {"RDD ID": 5}]} for s in stages]
        return [{"Event": "SparkListenerJobStart", "Job ID": job_id, "Stage Infos": infos},
                {"Event": "SparkListenerJobEnd", "Job ID": job_id, "Completion Time": at}]

    def map_task(stage: int, index: int, task_id: int) -> dict:
        return {"Event": "SparkListenerTaskEnd", "Stage ID": stage, "Task Type": "ShuffleMapTask",
                "Task End Reason": {"Reason": "Success"},
                "Task Info": {"Task ID": task_id, "Index": index, "Launch Time": 0, "Finish Time": 2_000}}

    def map_stage(stage: int, shuffle: int) -> list[dict]:
        event = {"Event": "org.apache.spark.trspark.TRMapStage", "time": 0, "stageId": stage, "shuffleId": shuffle}
        return [event] if with_shuffle_ids else []

    return [
        {"Event": "SparkListenerApplicationStart", "Timestamp": 0, "App Name": "a", "App ID": "app-1"},
        *job(0, [0], 5_000), *map_stage(0, 0), map_task(0, 0, 10), map_task(0, 1, 11),
        *job(1, [1], 9_000), *map_stage(1, 1), map_task(1, 0, 12), map_task(1, 1, 13),
        *job(2, [2], 12_000), *map_stage(2, 0), map_task(2, 1, 14),
        {"Event": "SparkListenerApplicationEnd", "Timestamp": 13_000},
    ]


def test_recomputation_counts_outputs_by_shuffle_not_by_the_rdds_two_shuffles_share() -> None:
    summary = summarize_events(_map_stage_log(with_shuffle_ids=True))
    assert (summary.recomputed_tasks, summary.recomputed_task_seconds) == (1, 2.0)
    # Without trspark's records the stages' RDDs stand for the shuffle: shuffle 1 counts as re-runs.
    assert summarize_events(_map_stage_log(with_shuffle_ids=False)).recomputed_tasks == 3


def test_a_stage_retry_that_runs_the_partitions_left_over_is_no_recomputation() -> None:
    # Attempt 0 wrote partitions 0-2, then a fetch failure; attempt 1 ran partitions 3-5 as its
    # tasks 0-2 (a task's index counts within its stage attempt). Only a partition written twice counts.
    def map_task(partition: int, index: int, task_id: int, attempt: int) -> dict:
        return {"Event": "SparkListenerTaskEnd", "Stage ID": 7, "Stage Attempt ID": attempt,
                "Task Type": "ShuffleMapTask", "Task End Reason": {"Reason": "Success"},
                "Task Info": {"Task ID": task_id, "Index": index, "Partition ID": partition,
                              "Launch Time": 0, "Finish Time": 1_000}}

    events = [{"Event": "SparkListenerApplicationStart", "Timestamp": 0, "App Name": "a", "App ID": "app-1"},
              *(map_task(p, p, 40 + p, 0) for p in range(3)), *(map_task(p, p - 3, 50 + p, 1) for p in range(3, 6)),
              map_task(4, 0, 60, 2), {"Event": "SparkListenerApplicationEnd", "Timestamp": 9_000}]
    assert summarize_events(events).recomputed_tasks == 1


def test_a_duplicate_that_also_succeeded_is_no_recomputation_but_a_resubmitted_partition_is() -> None:
    # Partition 0 ran twice at once (a duplicate) and both attempts succeeded: Spark kept one
    # output. Partition 1's executor was lost: Spark marked its success Resubmitted and ran it again.
    def task_end(partition: int, task_id: int, reason: str, finish: int) -> dict:
        return {"Event": "SparkListenerTaskEnd", "Stage ID": 3, "Stage Attempt ID": 0,
                "Task Type": "ShuffleMapTask", "Task End Reason": {"Reason": reason},
                "Task Info": {"Task ID": task_id, "Index": partition, "Partition ID": partition,
                              "Launch Time": 0, "Finish Time": finish}}

    events = [{"Event": "SparkListenerApplicationStart", "Timestamp": 0, "App Name": "a", "App ID": "app-1"},
              task_end(0, 10, "Success", 1_000), task_end(0, 11, "Success", 1_500),
              task_end(1, 12, "Success", 2_000), task_end(1, 12, "Resubmitted", 2_000),
              task_end(1, 13, "Success", 6_000),
              {"Event": "SparkListenerApplicationEnd", "Timestamp": 9_000}]
    summary = summarize_events(events)
    assert (summary.recomputed_tasks, summary.recomputed_task_seconds) == (1, 6.0)


def test_prices_add_the_cost_of_each_pools_executor_hours() -> None:
    summary = summarize(LOG, prices={"default": 0.5})
    hours = summary.vm_hours()
    assert list(hours) == ["default"]
    assert summary.cost() == pytest.approx(0.5 * hours["default"])
    assert summarize(LOG).cost() is None
    assert summarize(LOG, prices={"other": 1.0}).cost() is None
    assert ("cost", "unknown: no --price for pool default (priced: other); no executor was in priced pool other"
            ) in summarize(LOG, prices={"other": 1.0}).lines()
    assert all(label != "cost" for label, _ in summarize(LOG).lines())
    with_typo = dict(summarize(LOG, prices={"default": 0.5, "spto": 0.1}).lines())["cost"]
    assert with_typo == f"${summary.cost():.4f}; no executor was in priced pool spto"



def test_the_pool_an_executor_reports_after_it_joined_bills_its_hours() -> None:
    # Spark announces an executor before its plugin finds its pool (instance metadata, TRSPARK_POOL).
    events = [
        {"Event": "SparkListenerApplicationStart", "Timestamp": 0, "App Name": "a", "App ID": "app-1"},
        {"Event": "SparkListenerExecutorAdded", "Timestamp": 0, "Executor ID": "0"},
        {"Event": "SparkListenerExecutorAdded", "Timestamp": 0, "Executor ID": "1"},
        {"Event": "org.apache.spark.trspark.TRExecutorStarted", "time": 0, "executorId": "0", "host": "h",
         "pool": "default"},
        {"Event": "org.apache.spark.trspark.TRExecutorStarted", "time": 0, "executorId": "1", "host": "h",
         "pool": "default"},
        {"Event": "org.apache.spark.trspark.TRExecutorPool", "time": 500, "executorId": "0", "pool": "ondemand",
         "source": "aws"},
        {"Event": "org.apache.spark.trspark.TRExecutorPool", "time": 500, "executorId": "1", "pool": "spot",
         "source": "aws"},
        {"Event": "SparkListenerApplicationEnd", "Timestamp": 3_600_000},
    ]
    summary = summarize_events(events, prices={"ondemand": 1.0, "spot": 0.25})
    assert {e.executor_id: e.pool for e in summary.executors.values()} == {"0": "ondemand", "1": "spot"}
    assert summary.vm_hours() == {"ondemand": pytest.approx(1.0), "spot": pytest.approx(1.0)}
    assert summary.cost() == pytest.approx(1.25)


def test_the_reported_pool_wins_over_a_started_record_the_log_holds_after_it() -> None:
    # The listener posts TRExecutorStarted with the pool it knew when it handled Spark's
    # announcement; a report handled meanwhile on the driver's RPC thread is logged first.
    events = [
        {"Event": "SparkListenerApplicationStart", "Timestamp": 0, "App Name": "a", "App ID": "app-1"},
        {"Event": "SparkListenerExecutorAdded", "Timestamp": 0, "Executor ID": "0"},
        {"Event": "org.apache.spark.trspark.TRExecutorPool", "time": 10, "executorId": "0", "pool": "spot",
         "source": "env"},
        {"Event": "org.apache.spark.trspark.TRExecutorStarted", "time": 0, "executorId": "0", "host": "h",
         "pool": "default"},
        {"Event": "SparkListenerApplicationEnd", "Timestamp": 3_600_000},
    ]
    assert summarize_events(events).executors["0"].pool == "spot"


def test_a_released_executor_is_billed_until_its_release_not_until_spark_lists_it_removed() -> None:
    # Standalone lists an executor it was told to kill for a few seconds more (here 5 s).
    events = [
        {"Event": "SparkListenerApplicationStart", "Timestamp": 1_000, "App Name": "a", "App ID": "app-1"},
        {"Event": "SparkListenerExecutorAdded", "Timestamp": 2_000, "Executor ID": "1"},
        {"Event": "SparkListenerExecutorAdded", "Timestamp": 2_000, "Executor ID": "2"},
        {"Event": "SparkListenerExecutorAdded", "Timestamp": 2_000, "Executor ID": "3"},
        {"Event": "org.apache.spark.trspark.TRExecutorRelease", "time": 11_000, "executorId": "1", "reason": "notice"},
        # An idle release that Spark refused: the executor took a task and lived on.
        {"Event": "org.apache.spark.trspark.TRExecutorRelease", "time": 11_000, "executorId": "3", "reason": "idle"},
        {"Event": "SparkListenerExecutorRemoved", "Timestamp": 16_000, "Executor ID": "1",
         "Removed Reason": "Executor killed by driver."},
        {"Event": "org.apache.spark.trspark.TRExecutorEnded", "time": 16_000, "executorId": "1", "reason": "released"},
        {"Event": "SparkListenerExecutorRemoved", "Timestamp": 16_000, "Executor ID": "2", "Removed Reason": "lost"},
        {"Event": "SparkListenerExecutorRemoved", "Timestamp": 18_000, "Executor ID": "3", "Removed Reason": "lost"},
        {"Event": "org.apache.spark.trspark.TRExecutorEnded", "time": 18_000, "executorId": "3", "reason": "evicted"},
        {"Event": "SparkListenerApplicationEnd", "Timestamp": 21_000},
    ]
    summary = summarize_events(events, prices={"default": 3600.0})
    assert (summary.executors["1"].start, summary.executors["1"].end) == (1.0, 10.0)
    assert summary.executors["2"].end == 15.0  # never released: until Spark removed it
    assert summary.executors["3"].end == 17.0
    assert summary.cost() == pytest.approx(9.0 + 14.0 + 16.0)
    assert summary.releases == 1  # the refused idle release is not counted


def test_without_trspark_records_spark_loss_messages_during_the_work_count_as_kills() -> None:
    # Mode never or vanilla Spark: only Spark's own messages (those of a local-cluster run with a SIGKILL).
    def removed(ms: int, executor: str, reason: str) -> dict[str, object]:
        return {"Event": "SparkListenerExecutorRemoved", "Timestamp": ms, "Executor ID": executor, "Removed Reason": reason}

    events = [
        {"Event": "SparkListenerApplicationStart", "Timestamp": 1_000, "App Name": "a", "App ID": "app-1"},
        *({"Event": "SparkListenerExecutorAdded", "Timestamp": 2_000, "Executor ID": str(i)} for i in range(6)),
        {"Event": "SparkListenerJobStart", "Submission Time": 3_000, "Job ID": 0, "Stage Infos": []},
        removed(4_000, "0", "Command exited with code 137"),
        removed(4_500, "1", "Remote RPC client disassociated. Likely due to containers exceeding thresholds"),
        removed(5_000, "2", "Executor killed by driver."),
        removed(5_500, "3", "Command exited with code 1"),
        {"Event": "SparkListenerJobEnd", "Completion Time": 9_000, "Job ID": 0},
        # Spark stops the others with SIGTERM once the work is done: the application's end.
        removed(9_500, "4", "Command exited with code 143"),
        removed(9_600, "99", "java.lang.IllegalStateException: Shutdown hooks cannot be modified during shutdown."),
        {"Event": "SparkListenerApplicationEnd", "Timestamp": 10_000},
    ]
    summary = summarize_events(events)
    assert {e.executor_id: e.reason for e in summary.executors.values()} == {
        "0": "evicted", "1": "evicted", "2": "removed", "3": "", "4": "", "5": ""}
    assert (summary.kills, summary.removed) == (2, 1)


def test_the_committed_run_without_trspark_records_shows_the_same_kills() -> None:
    plain = [e for e in read_events(LOG) if ".trspark." not in e["Event"]]
    assert summarize_events(plain).kills == summarize(LOG).kills == 3


@pytest.mark.parametrize("codec", ["plain", "lz4", "zstd", "gzip"])
def test_a_single_file_log_in_each_codec_reads_like_the_rolling_one(codec: str, tmp_path: Path) -> None:
    import zstandard

    data = plain_lines()
    encoded = {"plain": data, "lz4": lz4_block_stream(data),
               "zstd": zstandard.ZstdCompressor().compress(data), "gzip": gzip.compress(data)}[codec]
    path = tmp_path / f"app-1.{codec}"
    path.write_bytes(encoded)
    assert summarize(path).text() == summarize(LOG).text()


def test_an_unfinished_last_line_of_a_running_log_is_skipped(tmp_path: Path) -> None:
    data = plain_lines()
    path = tmp_path / "app-1.inprogress"
    path.write_bytes(data + b'{"Event":"SparkListenerTaskStart","Stage ')
    assert len(list(read_events(path))) == data.count(b"\n")


@pytest.mark.parametrize("events", [17, 40, 200])
def test_a_log_cut_anywhere_lasts_past_everything_it_saw_and_bills_no_negative_time(tmp_path: Path, events: int) -> None:
    lines = plain_lines().splitlines(keepends=True)
    path = tmp_path / "app-1.inprogress"
    path.write_bytes(b"".join(lines[:events]))
    cut, whole = summarize(path), summarize(LOG)
    seen = [e.start for e in cut.executors.values()] + [e.end for e in cut.executors.values() if e.end is not None]
    seen += [end for *_, end in cut.stages] + [t for t, *_ in cut.backups + cut.restores + cut.notices]
    assert max(seen) <= cut.duration <= whole.duration
    assert cut.executor_seconds >= 0


def test_a_file_that_is_not_an_event_log_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\nworld\n")
    with pytest.raises(EventLogError, match="line 1 is not JSON"):
        summarize(path)


def test_the_command_writes_the_summary_the_timeline_and_a_self_contained_page(tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = CliRunner().invoke(cli, ["report", str(LOG), "--out", str(out), "--price", "default=0.2"])
    assert result.exit_code == 0, result.output
    golden = (FIXTURE / "summary.txt").read_text()
    assert result.output.startswith(golden)
    assert "cost" in result.output
    png = (out / "timeline.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    page = (out / "report.html").read_text()
    assert f"data:image/png;base64,{base64.b64encode(png).decode()}" in page
    assert "src=\"http" not in page and "href=" not in page


def test_the_command_rejects_a_malformed_price(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["report", str(LOG), "--out", str(tmp_path), "--price", "default"])
    assert result.exit_code == 2
    assert "POOL=USD_PER_HOUR" in result.output
    twice = CliRunner().invoke(cli, ["report", str(LOG), "--out", str(tmp_path), "--price", "default=0.1",
                                     "--price", "default=0.2"])
    assert twice.exit_code == 2 and "pool 'default' is priced twice" in twice.output


def test_a_log_without_an_application_start_is_refused_naming_the_file(tmp_path: Path) -> None:
    empty, cut = tmp_path / "empty", tmp_path / "cut"
    empty.write_bytes(b"")
    cut.write_text('{"Event":"SparkListenerLogStart","Spark Version":"4.3.0"}\n')
    with pytest.raises(EventLogError, match=f"{empty}: the event log is empty"):
        summarize(empty)
    with pytest.raises(EventLogError, match=f"{cut}: the event log has no SparkListenerApplicationStart in its 1 event"):
        summarize(cut)


def test_a_folder_of_event_logs_is_refused_naming_them(tmp_path: Path) -> None:
    for name in ("app-1", "app-2.inprogress", "notes.txt"):
        (tmp_path / name).write_text("")
    with pytest.raises(EventLogError, match=r"it holds 2 event logs \(app-1, app-2.inprogress\): give one of them"):
        summarize(tmp_path)


def test_an_lz4_frame_is_refused_as_the_lz4_tools_format(tmp_path: Path) -> None:
    import lz4.frame

    path = tmp_path / "app-1.lz4"
    path.write_bytes(lz4.frame.compress(b'{"Event":"SparkListenerLogStart","Spark Version":"4.3.0"}\n'))
    with pytest.raises(EventLogError, match="an lz4 frame"):
        summarize(path)


def test_python_api_returns_the_same_summary(tmp_path: Path) -> None:
    golden = (FIXTURE / "summary.txt").read_text()
    assert trspark.report(str(LOG)).text() == golden
    assert write_report(LOG, tmp_path).text() == golden == (tmp_path / "summary.txt").read_text()


def test_whatif_replays_the_log_as_if_trspark_events_were_not_there(tmp_path: Path) -> None:
    from simulators.eventlog import load_eventlog

    plain = tmp_path / "without-trspark"
    plain.write_bytes(b"".join(json.dumps(e).encode() + b"\n" for e in read_events(LOG)
                               if ".trspark." not in e["Event"]))
    with_tr, without = load_eventlog(LOG), load_eventlog(plain)
    assert (with_tr.executors, with_tr.cores, with_tr.recorded_seconds) == (
        without.executors, without.cores, without.recorded_seconds)
    assert with_tr.job.num_tasks == without.job.num_tasks > 0


def test_status_without_the_plugin_or_after_stop_is_empty() -> None:
    """Without the plugin's jar py4j resolves the class name to a package, which cannot be
    called (``TypeError: 'JavaPackage' object is not callable``); a stopped context has no JVM."""
    from types import SimpleNamespace

    from py4j.java_gateway import JavaPackage

    package = JavaPackage("org.apache.spark.trspark.TRMetricsStatus", gateway_client=None)
    jvm = SimpleNamespace(org=SimpleNamespace(apache=SimpleNamespace(spark=SimpleNamespace(
        trspark=SimpleNamespace(TRMetricsStatus=package)))))
    assert trspark.status(SimpleNamespace(sparkContext=SimpleNamespace(_jvm=jvm))) == {}
    assert trspark.status(SimpleNamespace(sparkContext=SimpleNamespace(_jvm=None))) == {}
    with pytest.raises(TypeError, match="trspark.status takes a SparkSession or a SparkContext, got NoneType"):
        trspark.status(None)


def test_the_timeline_of_thousands_of_stages_keeps_its_size_and_leaves_the_callers_pyplot_alone(tmp_path: Path) -> None:
    import matplotlib
    import matplotlib.image
    from matplotlib import pyplot as plt

    from trspark.reporting.timeline import MAX_ROWS, draw

    summary = summarize(LOG)
    summary.stages = summary.stages * (3000 // len(summary.stages) + 1)
    before = matplotlib.get_backend()
    matplotlib.use("svg")
    try:
        out = draw(summary, tmp_path / "timeline.png")
        assert matplotlib.get_backend() == "svg" and plt.get_fignums() == []
    finally:
        matplotlib.use(before)
    height = matplotlib.image.imread(out).shape[0]
    assert height <= (3 + 0.35 * MAX_ROWS) * 90


def test_a_retried_stage_gets_a_row_per_attempt_labelled_by_its_retry() -> None:
    from trspark.reporting.timeline import _stage_labels

    summary = summarize(LOG)
    summary.stages = [(0, "map", 0.0, 1.0), (1, "reduce", 1.0, 2.0), (1, "reduce", 3.0, 4.0), (1, "reduce", 5.0, 6.0)]
    assert _stage_labels(summary) == ["stage 0", "stage 1", "stage 1 retry 1", "stage 1 retry 2"]


def test_a_log_without_an_application_end_says_its_numbers_stop_at_its_last_event() -> None:
    whole = summarize(LOG)
    cut = summarize_events(e for e in read_events(LOG) if e["Event"] != "SparkListenerApplicationEnd")
    assert whole.ended and not cut.ended and cut.duration <= whole.duration
    assert "no application end" not in dict(whole.lines())["application"]
    assert dict(cut.lines())["application"].endswith(
        "s up to its last event (no application end in the log: still running, or crashed)")


def test_a_restored_output_whose_task_ran_again_anyway_avoided_no_re_run() -> None:
    # Both outputs of the running map stage were restored at 3 s; Spark still re-ran partition 1
    # (a copy on a peer of the lost executor's host, for a stage still running).
    def task_end(partition: int, task_id: int, reason: str, launch: int, finish: int) -> dict:
        return {"Event": "SparkListenerTaskEnd", "Stage ID": 3, "Stage Attempt ID": 0,
                "Task Type": "ShuffleMapTask", "Task End Reason": {"Reason": reason},
                "Task Info": {"Task ID": task_id, "Index": partition, "Partition ID": partition,
                              "Launch Time": launch, "Finish Time": finish}}

    events = [{"Event": "SparkListenerApplicationStart", "Timestamp": 0, "App Name": "a", "App ID": "app-1"},
              {"Event": "SparkListenerJobStart", "Job ID": 0, "Submission Time": 0,
               "Stage Infos": [{"Stage ID": 3, "RDD Info": [{"RDD ID": 7}]}]},
              task_end(0, 20, "Success", 0, 1_000), task_end(1, 21, "Success", 0, 2_500),
              {"Event": "org.apache.spark.trspark.TRRestore", "time": 3_000, "executorId": "1",
               "why": "executor lost", "restoredMapIds": [20, 21], "lostMapIds": []},
              task_end(1, 21, "Resubmitted", 0, 2_500), task_end(1, 22, "Success", 3_100, 5_100)]
    summary = summarize_events(events)
    assert (summary.outputs_restored, summary.outputs_restored_read, summary.recomputed_tasks) == (2, 2, 1)
    assert summary.rerun_avoided_task_seconds == pytest.approx(1.0)  # task 20's only


def _without(events: list[dict], at: int, path: tuple[str, ...], value: object = None) -> list[dict]:
    """``events`` with field ``path`` of event ``at`` removed (``value`` None) or set to ``value``."""
    changed = json.loads(json.dumps(events[at]))
    node = changed
    for key in path[:-1]:
        node = node[key]
    if value is None:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return [*events[:at], changed, *events[at + 1:]]


def test_an_event_without_a_field_it_needs_is_refused_naming_the_event() -> None:
    """Every field of the first event of each kind, and of its objects, removed in turn: the
    summary is made or refused with an EventLogError, never a KeyError or TypeError."""
    events = list(read_events(LOG))
    first: dict[str, int] = {}
    for at, event in enumerate(events):
        first.setdefault(event["Event"], at)
    refused = 0
    for at in first.values():
        event = events[at]
        paths = [(k,) for k in event if k != "Event"] + [(k, inner) for k, v in event.items() if isinstance(v, dict) for inner in v]
        for path in paths:
            try:
                summarize_events(_without(events, at, path), path="log")
            except EventLogError as exc:
                assert f"log: event {at + 1} ({event['Event']})" in str(exc)
                refused += 1
    assert refused >= 20  # the fields the summary reads


@pytest.mark.parametrize(("commands", "kind", "path", "value", "message"), [
    # whatif reads no application start time.
    (("report",), "SparkListenerApplicationStart", ("Timestamp",), None, "(SparkListenerApplicationStart) has no field 'Timestamp'"),
    (("report", "whatif"), "SparkListenerJobStart", ("Job ID",), None, "(SparkListenerJobStart) has no field 'Job ID'"),
    (("report", "whatif"), "SparkListenerTaskEnd", ("Task Info",), "x", "(SparkListenerTaskEnd) has a field of the wrong type"),
    # A pool that is no text would fail only later, when the hours are summed by pool.
    (("report",), "org.apache.spark.trspark.TRExecutorStarted", ("pool",), 5,
     "(org.apache.spark.trspark.TRExecutorStarted) has a field of the wrong type (field 'pool' is 5, not text)"),
    (("report",), "SparkListenerApplicationStart", ("App Name",), ["x"],
     "(SparkListenerApplicationStart) has a field of the wrong type (field 'App Name' is ['x'], not text)"),
])
def test_report_and_whatif_refuse_a_malformed_event_in_one_line(tmp_path: Path, commands: tuple[str, ...], kind: str,
                                                                  path: tuple[str, ...], value: object, message: str) -> None:
    events = list(read_events(LOG))
    at = next(i for i, e in enumerate(events) if e["Event"] == kind)
    log = tmp_path / "app.json"
    log.write_text("".join(json.dumps(e) + "\n" for e in _without(events, at, path, value)))
    options = {"report": ["--out", str(tmp_path / "report")], "whatif": ["--runs", "1", "--workers", "1"]}
    for args in ([command, str(log), *options[command]] for command in commands):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, (args, result.output)
        assert f"event {at + 1} {message}" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(("prices", "message"), [
    ({"default": -5}, "prices['default']=-5 is not valid; allowed: a pool name and a finite number of USD"),
    ({"default": float("nan")}, "prices['default']=nan is not valid"),
    ({"default": "3"}, "prices['default']='3' is not valid"),
    ({"": 1.0}, "prices['']=1.0 is not valid"),
    ([("default", 1.0)], "prices=[('default', 1.0)] is not valid; allowed: a mapping"),
])
def test_the_python_report_checks_prices_as_the_command_does(prices: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        trspark.report(str(LOG), prices=prices)


def test_the_python_report_takes_any_kind_of_number_as_a_price() -> None:
    from decimal import Decimal

    import numpy as np

    costs = {trspark.report(str(LOG), prices={"default": price}).cost() for price in (0.5, np.float32(0.5), Decimal("0.5"), np.int64(1) / 2)}
    assert len(costs) == 1 and costs.pop() > 0


@pytest.mark.parametrize(("path", "message"), [("", "no event log given: the path is empty"),
                                               ("/dev/null", "/dev/null: not a regular file")])
def test_a_path_that_names_no_log_file_is_refused_saying_so(path: str, message: str) -> None:
    with pytest.raises(EventLogError, match=re.escape(message)):
        trspark.report(path)
