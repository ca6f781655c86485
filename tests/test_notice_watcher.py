"""The executor-side termination-notice watcher (``NoticeWatcher.scala``) against loopback imitations
of the AWS, GCP and Azure metadata services, and SIGPWR sent to a JVM this module started."""

from __future__ import annotations

import os
import signal
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from jobs.harness.executors import driver_pid
from jobs.harness.notice_endpoints import AZURE_NAME_PATH, NoticeServer
from tests.jvm_gateway import Jvm, plain_jvm, wait_for
from tests.ports import unused_port
from tests.trickling_service import trickling_service

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGPWR"), reason="SIGPWR is Linux-only")

SOURCES = ("aws", "gcp", "azure")
POLL_S = 0.05


@pytest.fixture(scope="module")
def jvm() -> Iterator[Jvm]:
    with plain_jvm() as j:
        yield j


@pytest.fixture()
def server() -> Iterator[NoticeServer]:
    with NoticeServer() as s:
        yield s


def watcher(jvm: Jvm, source: str, url: str, *, window: float = 30.0, signal_name: str = "none") -> tuple[Any, Any]:
    """A started watcher polling every POLL_S seconds, and the recorder it calls."""
    settings = jvm.trspark.NoticeSettings(source, url, POLL_S, window, signal_name)
    recorder = jvm.trspark.NoticeRecorder()
    w = jvm.trspark.NoticeWatcher(settings, recorder)
    w.start()
    return w, recorder


# ---------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------


def spark_conf(jvm: Jvm, **entries: str) -> Any:
    conf = jvm.gateway.jvm.org.apache.spark.SparkConf(False)
    for key, value in entries.items():
        conf.set(f"spark.trspark.notice.{key}", value)
    return conf


def test_settings_defaults_per_source(jvm: Jvm) -> None:
    settings = jvm.trspark.NoticeSettings.apply(spark_conf(jvm))
    assert (settings.source(), settings.intervalS(), settings.windowS(), settings.signal()) == ("none", 1.0, 30.0, "PWR")
    assert settings.polls() is False
    assert jvm.trspark.NoticeSettings.apply(spark_conf(jvm, source="AWS")).baseUrl() == "http://169.254.169.254"
    assert jvm.trspark.NoticeSettings.apply(spark_conf(jvm, source="gcp")).baseUrl() == "http://metadata.google.internal"
    custom = jvm.trspark.NoticeSettings.apply(spark_conf(jvm, source="azure", url="http://127.0.0.1:9/", signal="none"))
    assert (custom.baseUrl(), custom.signal()) == ("http://127.0.0.1:9", "none")


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("source", "oracle", "allowed: none | aws | gcp | azure"),
        ("interval", "0", "allowed: seconds > 0"),
        ("window", "soon", "allowed: seconds > 0"),
        ("url", "ftp://x", "allowed: an http:// or https:// base URL"),
        ("interval", "5 sec", "allowed: seconds > 0: a number, or with a unit: 500ms, 30s, 2min, 1h"),
        ("signal", "SIG-PWR", "allowed: a signal name"),
    ],
)
def test_bad_setting_names_key_and_allowed_values(jvm: Jvm, key: str, value: str, allowed: str) -> None:
    from py4j.protocol import Py4JJavaError

    with pytest.raises(Py4JJavaError) as info:
        jvm.trspark.NoticeSettings.apply(spark_conf(jvm, **{key: value}))
    message = info.value.java_exception.getMessage()
    assert message.startswith(f"trspark: spark.trspark.notice.{key}='{value}' is not valid")
    assert allowed in message


def test_durations_with_spark_units_read_the_same_on_both_sides(jvm: Jvm) -> None:
    from trspark.setting_parsers import seconds

    parse = seconds(0.0)
    for raw, value in (("30", 30.0), ("0.5", 0.5), ("500ms", 0.5), ("30s", 30.0), ("2min", 120.0), ("2m", 120.0),
                       ("1h", 3600.0), ("1d", 86400.0), ("250us", 250e-6), ("1e-3s", 1e-3), (" 2MIN ", 120.0)):
        jvm_value = jvm.trspark.TRConf.seconds(raw)
        assert parse(raw) == value and jvm_value.isDefined() and jvm_value.get() == value, raw
    for raw in ("", "s", "1x", "5 sec", "infs", "nan", "1_0s"):
        with pytest.raises(ValueError):
            parse(raw)
        assert not jvm.trspark.TRConf.seconds(raw).isDefined(), raw
    assert jvm.trspark.NoticeSettings.apply(spark_conf(jvm, interval="500ms", window="2min")).windowS() == 120.0


# ---------------------------------------------------------------------------------------------
# Parsing, exactly as each service answers
# ---------------------------------------------------------------------------------------------


def test_aws_answers(jvm: Jvm) -> None:
    endpoints = jvm.trspark.NoticeEndpoints
    assert "NoNotice" in endpoints.parseAws(404, "Not Found").toString()
    notice = endpoints.parseAws(200, '{"action": "stop", "time": "2026-11-22T01:00:00Z"}')
    assert notice.deadlineEpochMillis() == 1795309200000
    with_offset = endpoints.parseAws(200, '{"action": "terminate", "time": "2026-11-22T02:00:00+01:00"}')
    assert with_offset.deadlineEpochMillis() == 1795309200000
    without_zone = endpoints.parseAws(200, '{"action": "terminate", "time": "2026-11-22T01:00:00"}')
    assert without_zone.deadlineEpochMillis() == 1795309200000  # metadata times are UTC
    for status, body in [(200, '{"action": "terminate"}'), (200, "<html>"), (200, '{"time": "tomorrow"}'), (500, "")]:
        assert "Unusable" in endpoints.parseAws(status, body).toString()


def test_the_watcher_keeps_one_connection_to_the_metadata_service(jvm: Jvm, server: NoticeServer) -> None:
    w, _ = watcher(jvm, "aws", server.url)
    try:
        wait_for(lambda: server.requests >= 20, what="20 requests from the watcher", timeout=30.0)
    finally:
        w.stop()
    # HTTP/1.1 with the connection kept, as instance metadata services allow: not one connection a request.
    assert len(server.clients) <= 2, server.clients


def test_a_connection_dropped_by_a_killed_client_prints_nothing(server: NoticeServer,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    before = set(threading.enumerate())
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as client:
        client.sendall(b"GET /latest/meta-data/instance-life-cycle HTTP/1.1\r\nHost: metadata\r\n\r\n")
        assert client.recv(1000).startswith(b"HTTP/1.1 200")
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
    # The connection's handler thread ends once it has handled the reset.
    wait_for(lambda: not [t for t in threading.enumerate() if t not in before and "process_request" in t.name],
             what="the dropped connection's handler to end")
    assert "Traceback" not in capsys.readouterr().err


def test_gcp_answers(jvm: Jvm) -> None:
    endpoints = jvm.trspark.NoticeEndpoints
    assert endpoints.parseGcp(200, "TRUE", 1000, 30000).deadlineEpochMillis() == 31000
    assert "NoNotice" in endpoints.parseGcp(200, "FALSE\n", 1000, 30000).toString()
    assert "403" in endpoints.parseGcp(403, "Missing Metadata-Flavor:Google header", 1000, 30000).reason()
    assert "Unusable" in endpoints.parseGcp(200, "maybe", 1000, 30000).toString()


def test_azure_answers(jvm: Jvm) -> None:
    endpoints = jvm.trspark.NoticeEndpoints

    def events(*items: str) -> str:
        return '{"DocumentIncarnation": 3, "Events": [' + ",".join(items) + "]}"

    preempt = '{"EventType": "Preempt", "Resources": ["vm1"], "NotBefore": "Sun, 22 Nov 2026 01:00:00 GMT"}'
    terminate_now = '{"EventType": "Terminate", "Resources": ["vm1"], "NotBefore": ""}'
    freeze = '{"EventType": "Freeze", "Resources": ["vm1"], "NotBefore": "Sun, 22 Nov 2026 00:00:00 GMT"}'
    other_vm = '{"EventType": "Preempt", "Resources": ["vm2"], "NotBefore": "Sun, 22 Nov 2026 00:00:00 GMT"}'
    assert endpoints.parseAzure(200, events(preempt, freeze), "vm1", 0, 30000).deadlineEpochMillis() == 1795309200000
    assert endpoints.parseAzure(200, events(terminate_now), "vm1", 5000, 30000).deadlineEpochMillis() == 35000
    assert "NoNotice" in endpoints.parseAzure(200, events(freeze, other_vm), "vm1", 0, 30000).toString()
    # Name unknown: every Preempt/Terminate counts (a needless backup beats a missed notice).
    assert endpoints.parseAzure(200, events(other_vm), "", 0, 30000).deadlineEpochMillis() == 1795305600000
    assert "NoNotice" in endpoints.parseAzure(200, events(), "vm1", 0, 30000).toString()
    assert "400" in endpoints.parseAzure(400, '{"error":"Bad request"}', "vm1", 0, 30000).reason()
    assert "Unusable" in endpoints.parseAzure(200, '{"Events": 3}', "vm1", 0, 30000).toString()
    # Resource names are case-insensitive.
    assert endpoints.parseAzure(200, events(preempt), "VM1", 0, 30000).deadlineEpochMillis() == 1795309200000
    # An unreadable NotBefore is still a notice, as early as it can be; it spoils no other event.
    garbled = '{"EventType": "Terminate", "Resources": ["vm1"], "NotBefore": "soon"}'
    assert endpoints.parseAzure(200, events(preempt, garbled), "vm1", 5000, 30000).deadlineEpochMillis() == 35000
    assert endpoints.parseAzure(200, events(garbled, freeze), "vm1", 5000, 30000).deadlineEpochMillis() == 35000


# ---------------------------------------------------------------------------------------------
# Polling the imitations
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_one_callback_after_notice_with_posted_deadline(jvm: Jvm, server: NoticeServer, source: str) -> None:
    w, recorder = watcher(jvm, source, server.url)
    try:
        wait_for(lambda: w.polls() >= 5, "five polls before the notice")
        assert recorder.calls() == 0
        assert w.problem() == ""
        posted = server.post_notice(30)
        wait_for(lambda: recorder.calls() >= 1, f"the {source} notice")
        assert recorder.deadline() / 1000 == pytest.approx(posted.timestamp(), abs=2.0)
        assert recorder.source() == source
        # Exactly once: further polls and reports do not call back again.
        w.pollOnce()
        w.fire(0, "again")
        assert recorder.calls() == 1
        assert w.hasFired()
    finally:
        w.stop()


def test_gcp_deadline_counts_from_the_last_poll_that_saw_none(jvm: Jvm, server: NoticeServer) -> None:
    """GCP says only TRUE: seen at a poll, it may be one interval old. The window counts from the
    start of the last poll that saw FALSE, so the deadline is never later than the real one."""
    settings = jvm.trspark.NoticeSettings("gcp", server.url, 1.0, 30.0, "none")
    recorder = jvm.trspark.NoticeRecorder()
    w = jvm.trspark.NoticeWatcher(settings, recorder)
    w.start()
    try:
        wait_for(lambda: w.polls() >= 1, "a first poll")
        polls = w.polls()
        wait_for(lambda: w.polls() > polls, "a poll that saw no notice")
        posted = time.time()  # the next poll comes about 1 s later
        server.post_notice(30)
        wait_for(lambda: recorder.calls() >= 1, "the gcp notice")
        # Counted from when TRUE was seen it would be about posted + 31 s: it counts from the start
        # of the last poll that saw FALSE, which came before the notice was posted.
        assert recorder.deadline() == w.lastClear() + 30_000
        assert 0 < w.lastClear() / 1000 <= posted + 0.005
    finally:
        w.stop()


def test_aws_imdsv2_token(jvm: Jvm) -> None:
    with NoticeServer(aws_require_token=True) as server:
        w, recorder = watcher(jvm, "aws", server.url)
        try:
            wait_for(lambda: w.polls() >= 3, "three polls")
            assert recorder.calls() == 0 and w.problem() == ""
            assert server.aws_tokens, "the watcher asked for an IMDSv2 token"
            posted = server.post_notice(120)
            wait_for(lambda: recorder.calls() == 1, "the AWS notice")
            assert recorder.deadline() / 1000 == pytest.approx(posted.timestamp(), abs=2.0)
            assert len(server.aws_tokens) == 1, "one token serves every poll until it expires"
        finally:
            w.stop()


def test_azure_notice_for_another_vm_is_ignored(jvm: Jvm) -> None:
    with NoticeServer(azure_vm_name="executor-vm", azure_resources=("other-vm",)) as server:
        w, recorder = watcher(jvm, "azure", server.url)
        try:
            server.post_notice(30)
            first = w.polls()
            wait_for(lambda: w.polls() >= first + 5, "five polls after the other VM's notice")
            assert recorder.calls() == 0
            server.azure_resources.append("executor-vm")
            wait_for(lambda: recorder.calls() == 1, "the notice naming this VM")
        finally:
            w.stop()


def test_a_throttled_azure_vm_name_is_asked_again_before_another_vms_event_can_count(jvm: Jvm) -> None:
    with NoticeServer(azure_vm_name="executor-vm", azure_resources=("other-vm",)) as server:
        server.throttle_azure_name = 2
        server.post_notice(30)
        w, recorder = watcher(jvm, "azure", server.url)
        try:
            wait_for(lambda: w.polls() >= 6, "six polls while another VM's event is posted")
            assert recorder.calls() == 0
            assert server.asked[AZURE_NAME_PATH] == 3  # 429, 429, then the name, kept
        finally:
            w.stop()


@pytest.mark.parametrize("source", SOURCES)
def test_notice_for_one_executor_only(jvm: Jvm, server: NoticeServer, source: str) -> None:
    """``{executorId}`` in the URL lets executors on one host stand for different VMs."""
    conf = spark_conf(jvm, source=source, url=server.url + "/vm-{executorId}", interval=str(POLL_S))
    settings = jvm.trspark.NoticeSettings.apply(conf)
    watchers, recorders = [], []
    for executor in ("1", "2"):
        recorders.append(jvm.trspark.NoticeRecorder())
        watchers.append(jvm.trspark.NoticeWatcher(settings.forExecutor(executor), recorders[-1]))
        watchers[-1].start()
    try:
        # A notice seen at a watcher's first poll may be a window old (GCP gives no time): post after one.
        wait_for(lambda: all(w.polls() >= 1 for w in watchers), "a first poll of each watcher")
        posted = server.post_notice(30, vm="vm-2")
        wait_for(lambda: recorders[1].calls() == 1, "executor 2's notice")
        assert recorders[1].deadline() / 1000 == pytest.approx(posted.timestamp(), abs=2.0)
        first = watchers[0].polls()
        wait_for(lambda: watchers[0].polls() >= first + 5, "executor 1 to poll on")
        assert recorders[0].calls() == 0 and watchers[0].problem() == ""
    finally:
        for w in watchers:
            w.stop()


@pytest.mark.parametrize(("source", "status"), [("gcp", "403"), ("azure", "400")])
def test_refused_request_is_no_notice_and_logged_once(jvm: Jvm, source: str, status: str) -> None:
    with NoticeServer() as server:
        server.refuse_metadata = True
        server.post_notice(30)
        w, recorder = watcher(jvm, source, server.url)
        try:
            wait_for(lambda: w.polls() >= 10, "ten refused polls")
            assert recorder.calls() == 0
            assert f"({status}:" in w.problem()
            wait_for(lambda: jvm.log_lines(w.problem()), "the INFO line about the refusal")
            assert len(jvm.log_lines(w.problem())) == 1, "a repeated problem is logged at DEBUG only"
            server.refuse_metadata = False  # recovers: the same watcher sees the notice
            wait_for(lambda: recorder.calls() == 1, f"the {source} notice once accepted")
        finally:
            w.stop()


def test_stopped_watcher_reports_nothing(jvm: Jvm, server: NoticeServer) -> None:
    """After the plugin shut it down, a late notice (e.g. a signal: handlers stay registered) is dropped."""
    w, recorder = watcher(jvm, "aws", server.url)
    wait_for(lambda: w.polls() >= 1, "a first poll")
    w.stop()
    w.fire(1, "signal:PWR")
    assert recorder.calls() == 0 and not w.hasFired()


@pytest.mark.parametrize("source", SOURCES)
def test_unreachable_service_is_no_notice_and_no_crash(jvm: Jvm, source: str) -> None:
    w, recorder = watcher(jvm, source, f"http://127.0.0.1:{unused_port()}")
    try:
        wait_for(lambda: w.polls() >= 3, "three polls of a closed port")
        assert "unreachable" in w.problem()
        before = w.polls()
        wait_for(lambda: w.polls() >= before + 3, "polling to go on after failures")
        assert recorder.calls() == 0
    finally:
        w.stop()


def test_silent_service_times_out(jvm: Jvm) -> None:
    """A service that accepts connections but never answers costs one request timeout per poll."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        w, recorder = watcher(jvm, "gcp", f"http://127.0.0.1:{listener.getsockname()[1]}")
        try:
            wait_for(lambda: w.polls() >= 1, "one timed-out poll")
            assert "unreachable" in w.problem() and "imeout" in w.problem()
            assert recorder.calls() == 0
        finally:
            w.stop()


def test_a_service_that_trickles_its_answer_is_cut_off_at_the_request_timeout(jvm: Jvm) -> None:
    """The read timeout bounds each read only: a byte every 0.5 s would hold a poll for ever."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n"
    with trickling_service(head, 0.5) as url:
        w, recorder = watcher(jvm, "gcp", url)
        try:
            wait_for(lambda: w.polls() >= 1, "one poll")
            assert "no whole answer within 1000 ms" in w.problem()
            assert recorder.calls() == 0  # the whole answer takes 50 s: a poll that ended read only part of it
        finally:
            w.stop()


# ---------------------------------------------------------------------------------------------
# SIGPWR
# ---------------------------------------------------------------------------------------------


def test_sigpwr_is_a_notice_and_chains_handlers(jvm: Jvm) -> None:
    """Two watchers take SIGPWR (as Spark's decommission handler and ours would): both fire, the JVM lives."""
    first, first_calls = watcher(jvm, "none", "http://127.0.0.1:9", window=30.0, signal_name="PWR")
    second, second_calls = watcher(jvm, "none", "http://127.0.0.1:9", window=10.0, signal_name="PWR")
    first.installSignalHandler()
    second.installSignalHandler()
    wait_for(lambda: jvm.log_lines("Registering signal handler for PWR"), "Spark's SignalUtils to register PWR")
    assert first_calls.calls() == 0 and second_calls.calls() == 0
    sent = time.time()
    os.kill(jvm.proc.pid, signal.SIGPWR)
    wait_for(lambda: first_calls.calls() == 1 and second_calls.calls() == 1, "both SIGPWR callbacks")
    assert first_calls.deadline() / 1000 == pytest.approx(sent + 30, abs=2.0)
    assert second_calls.deadline() / 1000 == pytest.approx(sent + 10, abs=2.0)
    assert first_calls.source() == "signal:PWR"
    assert jvm.proc.poll() is None, "SIGPWR must not kill the JVM once a notice handler is installed"
    assert jvm.trspark.NoticeSettings.DefaultSignal() == "PWR"  # the gateway still answers


# ---------------------------------------------------------------------------------------------
# Live: executor plugin -> driver plugin on a real local-trcluster (the wiring of
# docs/notices-and-pools.md)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live_notices() -> Iterator[tuple[Any, NoticeServer]]:
    import sys

    from pyspark.sql import SparkSession

    from trspark.live.shim import jar_path

    with NoticeServer() as server:
        # TRSPARK_TEST_SHIM_JAR: a jar built elsewhere instead of this tree's.
        spark = (
            SparkSession.builder.master("local-trcluster[2,1,1024]")
            .appName("trspark-notices")
            .config("spark.jars", os.environ.get("TRSPARK_TEST_SHIM_JAR") or jar_path())
            .config("spark.plugins", "org.apache.spark.trspark.TRSparkPlugin")
            .config("spark.trspark.mode", "tr")
            .config("spark.trspark.python", sys.executable)
            .config("spark.trspark.engine.timeout", "30")  # a fallback must not come from the loaded machine
            .config("spark.trspark.notice.source", "gcp")
            .config("spark.trspark.notice.url", server.url + "/vm-{executorId}")
            .config("spark.trspark.notice.interval", "0.2")
            .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
            .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "180s")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        try:
            yield spark, server
        finally:
            spark.stop()


@pytest.mark.spark
def test_notices_reach_the_driver_from_endpoint_and_sigpwr(live_notices: tuple[Any, NoticeServer]) -> None:
    from jobs.harness.executors import find_executors

    spark, server = live_notices
    sc = spark.sparkContext
    status = sc._jvm.org.apache.spark.trspark.TRStatus
    assert sc.parallelize(range(100), 4).sum() == 4950
    assert status.stat("notices") == 0
    server.post_notice(30, vm="vm-1")  # executor 1's VM only
    wait_for(lambda: status.stat("notices") == 1, "executor 1's GCP notice at the driver", timeout=60)
    driver = driver_pid(sc)
    (pid,) = [e.pid for e in find_executors(driver) if e.executor_id == "0"]
    os.kill(pid, signal.SIGPWR)
    wait_for(lambda: status.stat("notices") == 2, "executor 0's SIGPWR notice at the driver", timeout=60)
    # Both executors live on (a notice is not an eviction), the engine took the events, jobs run.
    assert sc._jsc.sc().getExecutorIds().size() == 2
    assert not status.isFallenBack()
    assert sc.parallelize(range(100), 4).sum() == 4950
