"""trspark's counters on a real ``local-trcluster[3,1,1024]`` with kills, seen the ways users see them.

One application for the module: three rounds of (write a shuffle, back it up, kill an executor
that wrote part of it, read the shuffle again) -- remote backups, peer backups, then none (the
outputs are recomputed). Then the counters must agree across Spark's ``PrometheusServlet``,
``trspark.status``, the "trspark" UI tab in headless Chromium, and the event log; and the
executors' own metrics, written by Spark's ``CsvSink``, must add up to the driver's.

``TRSPARK_UPDATE_DOCS=1`` also writes the tab's screenshot to ``docs/trspark-ui-tab.png``.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from executor_metrics import executor_reports, executor_totals, with_csv_sink
from missing_tool import missing
from test_shim_live import EXECUTORS, TIMEOUT, Cluster, wait_for

import trspark

pytestmark = pytest.mark.spark

T = TypeVar("T")
ROWS = 40_000
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
DOCS = Path(__file__).resolve().parents[1] / "docs"
# Prometheus text lines of the driver's trspark source: metrics_<app>_driver_trspark_<name>_<Value|Count>
PROM_LINE = re.compile(r"^metrics_\w+?_driver_trspark_(\w+?)_(Value|Count)\{type=\"(\w+)\"\} (\S+)$")


def prometheus_text(ui_url: str) -> str:
    """The trspark lines of the driver's ``/metrics/prometheus``."""
    with urllib.request.urlopen(f"{ui_url}/metrics/prometheus", timeout=TIMEOUT) as response:
        text = response.read().decode()
    return "".join(line + "\n" for line in text.splitlines() if "_driver_trspark_" in line)


def prometheus(ui_url: str) -> dict[str, float]:
    """trspark's gauges by metric name, and each histogram's count as ``<name>_count``."""
    out = {}
    for line in prometheus_text(ui_url).splitlines():
        if m := PROM_LINE.match(line):
            name, kind, _, value = m.groups()
            out[name if kind == "Value" else f"{name}_count"] = float(value)
    return out


class App(Cluster):
    """The session, its event-log and executor-metrics directories and the kills done to it."""

    def __init__(self, spark: Any, root: Path, log_dir: Path, sink_dir: Path) -> None:
        super().__init__(spark, root)
        self.log_dir = log_dir
        self.sink_dir = sink_dir
        self.kills: list[str] = []
        self.stopped = False

    def kill(self, executor_id: str) -> None:
        # A killed executor reports nothing more: first let the sink see every copy the driver
        # counts (written by their sources, checked by their peers).
        def sink_caught_up() -> bool:
            driver, sink = trspark.status(self.spark), executor_totals(self.sink_dir)
            return (sink.get("copies_to_peers", 0) + sink.get("copies_to_remote", 0) >= driver["backups_finished"]
                    and sink.get("peer_copies_intact", 0) >= driver["backups_to_peers"])

        wait_for(sink_caught_up, what="the executors' metrics to reach the sink")
        self.kills.append(executor_id)
        super().kill(executor_id)

    def executor_metrics(self) -> dict[str, int]:
        """The executors' metrics summed, once the last kill's replacement is up and every live
        executor reported after this call."""
        wait_for(lambda: len(self.alive()) >= EXECUTORS, what="a full cluster")
        since = time.time()

        def reported() -> bool:
            found = executor_reports(self.sink_dir)
            return all(e in found and min(t for t, _ in found[e].values()) > since for e in self.alive())

        wait_for(reported, what="a report of every live executor's metrics")
        return executor_totals(self.sink_dir)

    def prometheus_text(self) -> str:
        return prometheus_text(self.sc.uiWebUrl)

    def prometheus(self) -> dict[str, float]:
        return prometheus(self.sc.uiWebUrl)

    def settled(self) -> dict[str, int]:
        """The counters once two reads a second apart agree (backups finish after their job)."""
        last: dict[str, int] = {}

        def same() -> bool:
            nonlocal last
            now = trspark.status(self.spark)
            done = bool(last) and now == last
            last = now
            if not done:
                time.sleep(1.0)
            return done

        wait_for(same, what="counters to settle")
        return last

    def settled_around(self, read: Callable[[], T]) -> tuple[dict[str, int], T]:
        """The settled counters and ``read()``, the counters unchanged from before the read to after it.

        (Spark's cleaner drops the rounds' shuffles, ``outputs_forgotten``, whenever the driver
        JVM next collects its garbage, which may fall inside a read.)
        """
        for _ in range(3):
            counters = self.settled()
            value = read()
            if trspark.status(self.spark) == counters:
                return counters, value
        raise AssertionError("trspark's counters changed during each of three reads")

    def stop(self) -> None:
        if not self.stopped:
            self.spark.stop()
            self.stopped = True


def round_with_kill(app: App, mode: str, targets: str, tag: str) -> None:
    """Write a shuffle, wait for its backups, kill an executor holding some of it, read it again."""
    wait_for(lambda: len(app.alive()) >= EXECUTORS, what="a full cluster")
    app.status.setBuiltin(mode, targets, 0.0)
    rdd = (app.sc.parallelize(range(ROWS), 6).map(lambda x: (x % 101, x)).partitionBy(4)
           .reduceByKey(lambda a, b: a + b, numPartitions=4))
    expected = {k: sum(range(k, ROWS, 101)) for k in range(101)}
    before = trspark.status(app.spark)["backups_finished"]
    app.sc.setJobGroup(tag, tag)
    assert dict(rdd.collect()) == expected
    if mode == "always":
        wait_for(lambda: trspark.status(app.spark)["backups_finished"] - before >= 6, what=f"{tag} backups")
    tracker = app.sc.statusTracker()
    stage = min(s for j in tracker.getJobIdsForGroup(tag) for s in tracker.getJobInfo(j).stageIds)
    writers = sorted({t["executorId"] for t in app.map_tasks(stage)})
    app.kill(writers[0])
    assert dict(rdd.collect()) == expected
    app.sc.setJobGroup("", "")


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    from pyspark.sql import SparkSession

    from trspark.live.shim import jar_path

    root = tmp_path_factory.mktemp("backups")
    log_dir = tmp_path_factory.mktemp("eventlog")
    sink_dir = tmp_path_factory.mktemp("executor-metrics")
    spark = (
        with_csv_sink(SparkSession.builder, sink_dir).master(f"local-trcluster[{EXECUTORS},1,1024]")
        .appName("trspark-observability")
        .config("spark.jars", jar_path())
        .config("spark.plugins", "org.apache.spark.trspark.TRSparkPlugin")
        .config("spark.trspark.mode", "always")
        .config("spark.trspark.remote.path", f"file://{root}")
        .config("spark.ui.prometheus.enabled", "true")
        .config("spark.metrics.conf.*.sink.prometheusServlet.class", "org.apache.spark.metrics.sink.PrometheusServlet")
        .config("spark.metrics.conf.*.sink.prometheusServlet.path", "/metrics/prometheus")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", f"file://{log_dir}")
        .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
        .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "180s")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    app = App(spark, root, log_dir, sink_dir)
    try:
        round_with_kill(app, "always", "remote", "remote")
        round_with_kill(app, "always", "local", "peers")
        round_with_kill(app, "never", "remote", "none")
        # Engine commands as the engine would send them: the belt goes on, an executor is drained.
        app.status.applyCommand('{"type":"SafetyBelt","on":true,"reason":"test: lifetimes shorter than believed"}')
        drained = sorted(app.alive())[0]
        app.status.applyCommand(f'{{"type":"SchedulingHints","drain":["{drained}"]}}')
        app.status.applyCommand('{"type":"SchedulingHints","drain":[]}')  # it takes tasks again; the count stays
        yield app
    finally:
        app.stop()


def test_prometheus_shows_every_trspark_metric_with_the_driver_values(app: App) -> None:
    counters, scraped = app.settled_around(app.prometheus)
    print("trspark.status:", counters)
    assert {k: int(scraped[k]) for k in counters if k != "engine_decisions"} == {
        k: v for k, v in counters.items() if k != "engine_decisions"}
    assert "engine_decision_latency_us_count" in scraped
    assert len(app.kills) == 3
    # Two rounds of 6 backups each; both targets carried bytes; the killed writers' outputs came
    # back from copies twice and were recomputed once.
    assert counters["backups_finished"] >= 12
    assert counters["backups_planned"] >= counters["backups_started"] >= counters["backups_finished"]
    assert counters["bytes_to_remote"] > 0 and counters["bytes_to_peers"] > 0
    assert counters["outputs_restored"] >= 2
    assert counters["outputs_lost"] >= 1
    # Lost outputs of earlier shuffles that nothing reads again are not recomputed.
    assert 1 <= counters["map_tasks_rerun"] <= counters["outputs_lost"]
    assert counters["engine_fallback"] == 0
    assert counters["safety_belt"] == 1 and counters["executors_drained"] == 1
    assert int(app.status.stat("backups_done")) == counters["backups_finished"]
    assert counters["backups_to_peers"] + counters["backups_to_remote"] == counters["backups_finished"]
    # The TPC-DS bench's CSV columns come from the same metrics.
    from jobs.tpcds.metrics import plugin_counters, plugin_fell_back

    assert plugin_counters(app.sc) == {
        "backups_count": counters["backups_finished"], "backups_local": counters["backups_to_peers"],
        "backups_remote": counters["backups_to_remote"],
        "backups_bytes": counters["bytes_to_peers"] + counters["bytes_to_remote"],
        "notices": counters["notices"], "executors_drained": counters["executors_drained"],
        "executors_released": counters["executors_released"]}
    assert plugin_fell_back(app.sc) is False


def test_the_ui_tab_shows_the_metrics_in_a_headless_browser(app: App, tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        missing(f"{CHROMIUM} is missing (Debian package chromium; `make browser` installs it)")
    try:
        import playwright.sync_api as playwright
    except ImportError:
        missing("Python package playwright is missing (`make setup` installs it)")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1100})

            def read_tab() -> tuple[dict[str, int], dict[str, float]]:
                page.goto(f"{app.sc.uiWebUrl}/trspark/", timeout=TIMEOUT * 1000)
                cells = {name: int(page.inner_text(f"#trspark-{name}")) for name in trspark.status(app.spark)}
                return cells, app.prometheus()

            counters, (shown, scraped) = app.settled_around(read_tab)
            assert page.locator("#trspark-counters").is_visible()
            assert "SafetyBelt" in page.inner_text("#trspark-decisions")
            assert "trspark" in page.title()
            shot = tmp_path / "trspark-ui-tab.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert shown == counters
    assert {k: v for k, v in shown.items() if k in scraped} == {k: int(v) for k, v in scraped.items() if k in shown}
    assert shot.stat().st_size > 10_000
    if os.environ.get("TRSPARK_UPDATE_DOCS") == "1":
        shutil.copy(shot, DOCS / "trspark-ui-tab.png")


def test_the_ui_tab_serves_its_figures_as_json(app: App) -> None:
    def read_json() -> dict[str, Any]:
        with urllib.request.urlopen(f"{app.sc.uiWebUrl}/trspark/json", timeout=TIMEOUT) as answer:
            return json.loads(answer.read())  # type: ignore[no-any-return]

    counters, shown = app.settled_around(read_json)
    assert {name: shown["counters"][name] for name in counters} == counters
    assert set(shown["latency_ms"]) == {"median", "p95", "max", "events"}
    assert all(value >= 0 for value in shown["latency_ms"].values())
    assert "SafetyBelt" in [decision["command"] for decision in shown["decisions"]]


def test_the_executors_metrics_reach_a_sink_and_add_up_to_the_driver_counters(app: App) -> None:
    counters = app.settled()
    on_executors = app.executor_metrics()
    reports = executor_reports(app.sink_dir)
    print("executors' metrics (summed):", on_executors)
    # Every executor the application had, the killed ones included, reported every metric.
    assert len(reports) >= EXECUTORS + len(app.kills)
    assert all(set(m) == set(on_executors) for m in reports.values())
    # Each copy the driver committed was written by one executor and (a peer copy) checked by another.
    assert on_executors["copies_to_remote"] == counters["backups_to_remote"] > 0
    assert on_executors["copies_to_peers"] == counters["backups_to_peers"] > 0
    assert on_executors["bytes_to_remote"] == counters["bytes_to_remote"]
    assert on_executors["bytes_to_peers"] == counters["bytes_to_peers"]
    assert on_executors["copy_time"] == counters["backups_finished"]
    assert on_executors["peer_copies_intact"] == counters["backups_to_peers"]
    assert on_executors["peer_copies_damaged"] == 0
    assert on_executors["copies_failed"] == counters["backups_failed"] == 0
    # A delete counts only files that were there: a peer copy that landed, or one cancelled part-way.
    assert on_executors["peer_copies_deleted"] <= on_executors["copies_to_peers"] + on_executors["copies_cancelled"]


def poll_rates(app: App, seconds: float) -> dict[str, float]:
    """Polls per second of each live executor over at least ``seconds`` s, from its ``polls`` metric in the sink."""
    def polls() -> dict[str, tuple[float, int]]:
        found = executor_reports(app.sink_dir)
        return {e: found[e]["polls"] for e in app.alive() if "polls" in found.get(e, {})}

    first = wait_for(polls, what="the executors' poll counts in the sink")
    last = wait_for(lambda: (now := polls()) and all(now[e][0] >= first[e][0] + seconds for e in first) and now,
                    what=f"a report of every executor {seconds} s later")
    return {e: (last[e][1] - first[e][1]) / (last[e][0] - first[e][0]) for e in first}


def test_executors_poll_once_a_second_while_the_application_is_quiet_and_every_beat_while_a_job_runs(app: App) -> None:
    app.settled()  # the earlier rounds' copies ended: nothing pending
    # Quiet: about one poll a second; every 150 ms would be about 6.7.
    quiet = wait_for(lambda: (rates := poll_rates(app, 4.0)) and max(rates.values()) < 2.0 and rates,
                     what="quiet executors to poll at most twice a second")
    print("polls per second, quiet:", quiet)
    slow = app.sc.parallelize(range(EXECUTORS), EXECUTORS).map(lambda x: time.sleep(12.0) or x)
    job = threading.Thread(target=slow.collect)
    job.start()
    tracker = app.sc.statusTracker()
    try:
        wait_for(lambda: sum(info.numActiveTasks for s in tracker.getActiveStageIds()
                             if (info := tracker.getStageInfo(s))) >= EXECUTORS, what="a task on every executor")
        busy = poll_rates(app, 4.0)
    finally:
        job.join()
    print("polls per second, a job running:", busy)
    # A task start ends an executor's quiet wait, and the driver answers "not quiet" while a job runs
    # (a poll every 150 ms plus the ask's own time: about 6.5 a second here, fewer on a loaded host):
    # the mode is told by the two rates of the same run, not by a rate the host's load sets.
    assert min(busy.values()) > 2 * max(quiet.values())


def test_a_drained_executors_cores_leave_the_default_parallelism_until_the_drain_ends(app: App) -> None:
    wait_for(lambda: len(app.alive()) >= EXECUTORS, what="a full cluster")
    first = sorted(app.alive())[0]
    assert app.sc.defaultParallelism == EXECUTORS  # one core each
    app.status.applyCommand(f'{{"type":"SchedulingHints","drain":["{first}"]}}')
    try:
        # Adaptive execution coalesces a stage planned now to this many partitions: the cores that can run them.
        assert app.sc.defaultParallelism == EXECUTORS - 1
    finally:
        app.status.applyCommand('{"type":"SchedulingHints","drain":[]}')  # as the fixture left them
    assert app.sc.defaultParallelism == EXECUTORS


@pytest.mark.stops_app
def test_the_event_log_and_its_report_agree_with_the_metrics(app: App, tmp_path: Path) -> None:
    """It stops the application to read its finished event log, so it runs after the others (``stops_app``)."""
    counters = app.settled()
    scrape = app.prometheus_text()
    app.stop()
    logs = glob.glob(str(app.log_dir / "*"))
    assert len(logs) == 1, logs
    from trspark.eventlog import read_events
    from trspark.reporting import write_report

    events = list(read_events(logs[0]))
    kinds = [e["Event"].rsplit(".", 1)[-1] for e in events]
    assert kinds.count("TRExecutorStarted") == kinds.count("SparkListenerExecutorAdded") >= EXECUTORS + 2
    assert kinds.count("TRExecutorEnded") == kinds.count("SparkListenerExecutorRemoved") >= 3
    # Each map stage is named with its shuffle once, and the three rounds wrote three shuffles.
    map_stages = [(e["stageId"], e["shuffleId"]) for e in events if e["Event"].endswith(".TRMapStage")]
    ran_maps = {e["Stage ID"] for e in events
                if e["Event"] == "SparkListenerTaskEnd" and e["Task Type"] == "ShuffleMapTask"}
    assert len({stage for stage, _ in map_stages}) == len(map_stages) and ran_maps <= dict(map_stages).keys()
    assert len({shuffle for _, shuffle in map_stages}) == 3
    summary = write_report(logs[0], tmp_path / "report")
    assert summary.kills == len(app.kills) == 3
    assert len(summary.backups) == counters["backups_finished"]
    assert summary.backup_bytes == (counters["bytes_to_peers"], counters["bytes_to_remote"])
    assert summary.outputs_restored == counters["outputs_restored"]
    assert summary.outputs_lost == counters["outputs_lost"]
    assert summary.recomputed_tasks == counters["map_tasks_rerun"]
    assert summary.belt_firings == counters["safety_belt"] == 1
    if os.environ.get("TRSPARK_UPDATE_DOCS") == "1":
        fixture = Path(__file__).parent / "fixtures" / "observability"
        shutil.rmtree(fixture / "eventlog", ignore_errors=True)
        shutil.copytree(app.log_dir, fixture / "eventlog")
        (fixture / "metrics.prom").write_text(scrape)
        # docs/observability.md names the price of its example report.
        write_report(logs[0], tmp_path / "report", prices={"default": 0.1})
        shutil.copytree(tmp_path / "report", DOCS / "observability", dirs_exist_ok=True)
