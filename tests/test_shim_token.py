"""The plugin accepts only an engine that proves it got the application's token, and lets go of
an engine that misbehaves once connected.

Each case is a ``local[1]`` application in ``tr`` mode whose ``spark.trspark.python`` is a wrapper
around this interpreter: it runs everything as usual except the engine, which it starts with a
wrong token, without its token, or replaces by a client that says ``Hello`` with no token field,
that never connects (within ``spark.trspark.engine.startTimeout``),
that sends a line that is not JSON, or that acknowledges each event three times
``spark.trspark.engine.timeout`` late; or the real engine is stopped with SIGSTOP. The plugin must
refuse or drop the engine (one warning naming why), fall back to always-checkpoint and still run
the job right; with the real token (the control) it connects.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from driver_log import driver_log, log_lines
from jvm_gateway import wait_for

from jobs.harness.executors import driver_pid

pytestmark = pytest.mark.spark

TIMEOUT = 120.0
START_TIMEOUT = 5.0  # spark.trspark.engine.startTimeout of the case whose engine never connects
# Every other case sets its own start timeout, long enough for a slow machine to start Python: the
# settings of the driver JVM's first session stay in its SparkConf defaults and would carry the 5 s on.
SLOW_START_TIMEOUT = TIMEOUT
# The engine is the one command the plugin starts with `--connect 127.0.0.1:<port>`.
WRAPPER = """\
#!{python}
import json, os, signal, socket, sys, time
args = sys.argv[1:]
if "--connect" in args:
    case = {case!r}
    if case.startswith("never connects"):
        signal.pause()  # the fault: an engine that never connects; the plugin ends it
    if case == "wrong token":
        os.environ["TRSPARK_TOKEN"] = "0" * 32
    elif case == "no token in the environment":
        os.environ.pop("TRSPARK_TOKEN", None)
    elif case == "no token in Hello":
        host, port = args[args.index("--connect") + 1].rsplit(":", 1)
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(json.dumps({{"type": "Hello", "version": 1}}).encode() + b"\\n")
            sock.recv(1)  # until the plugin hangs up
        sys.exit(0)
    elif case in ("garbage", "slow"):
        host, port = args[args.index("--connect") + 1].rsplit(":", 1)
        with socket.create_connection((host, int(port))) as sock:
            hello = {{"type": "Hello", "token": os.environ["TRSPARK_TOKEN"], "version": 1}}
            sock.sendall(json.dumps(hello).encode() + b"\\n")
            if case == "garbage":
                sock.sendall(b"this is not json\\n")
                sock.recv(1)  # until the plugin hangs up
            else:
                try:
                    for line in sock.makefile():
                        time.sleep(3 * {timeout})  # the fault: an engine slower than engine.timeout
                        sock.sendall(json.dumps({{"type": "Ack", "seq": json.loads(line)["seq"]}}).encode() + b"\\n")
                except OSError:
                    pass  # the plugin hung up
        sys.exit(0)
    elif case == "garbage after a job, slow history":
        import runpy
        from trspark.live import bridge, history
        answer, append = bridge.Bridge.handle_line, history.HistoryStore.append
        def handle_line(self, line):
            lines = answer(self, line)
            return [*lines, "this is not json"] if '"JobSubmitted"' in line else lines
        def slow_append(self, records):
            time.sleep({slow_store})  # the fault: a store slower than the plugin's old 2 s of grace
            append(self, records)
        bridge.Bridge.handle_line, history.HistoryStore.append = handle_line, slow_append
        sys.argv = [sys.argv[0], *args[2:]]  # the real engine: python -m trspark.live --connect ...
        runpy.run_module("trspark.live", run_name="__main__", alter_sys=True)
os.execv(sys.executable, [sys.executable, *args])
"""
HISTORY_CASE = "garbage after a job, slow history"
QUEUE_CASE = "never connects, small queue"
QUEUE_CAPACITY = 8  # events the plugin holds for an engine that has not connected yet, in that case
SLOW_STORE = 4.0  # seconds each append of the lifetime history takes in that case
REFUSALS = {
    "wrong token": "engine did not say Hello with the right token and version",
    "no token in Hello": "engine did not say Hello with the right token and version",
    "no token in the environment": "engine process exited with code 2",
    "never connects": f"engine did not connect within {START_TIMEOUT} s (spark.trspark.engine.startTimeout)",
}
# An engine that connected and then misbehaves: the plugin drops it (and ends its process).
MISBEHAVIOURS = {
    "garbage": "engine sent garbage: this is not json",
    "slow": "engine has not acknowledged event",
    "hang": "engine has not acknowledged event",
}
ENGINE_TIMEOUT = 2.0  # seconds; the plugin checks it every spark.trspark.period (0.5 s here)
LAG_OPTIONS = {"engine_timeout": ENGINE_TIMEOUT, "period": 0.5}


@pytest.fixture(scope="module")
def logging(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The driver's log options and file (this module starts its own driver JVM, see conftest.py)."""
    return driver_log(tmp_path_factory.mktemp("token-log"))


@pytest.fixture
def application(tmp_path: Path, logging: tuple[str, Path]) -> Iterator[Callable[[str], Any]]:
    """Start a ``tr`` application whose engine is started as ``case`` says."""
    started: list[Any] = []

    def start(case: str) -> Any:
        from pyspark.sql import SparkSession

        import trspark

        wrapper = tmp_path / "python"
        wrapper.write_text(WRAPPER.format(python=sys.executable, case=case, timeout=ENGINE_TIMEOUT,
                                          slow_store=SLOW_STORE))
        wrapper.chmod(0o755)
        builder = (
            SparkSession.builder.master("local[1]").appName(f"trspark-token-{case.replace(' ', '-')}")
            .config("spark.driver.extraJavaOptions", logging[0])
            .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        )
        spark = trspark.configure(builder, mode="tr", lifetime="exponential:mean=600", python=str(wrapper),
                                  remote_path=(tmp_path / "backups").as_uri(),
                                  # A generous engine.timeout unless the case is about it: no fallback from the loaded machine.
                                  **(LAG_OPTIONS if case in MISBEHAVIOURS else {"engine_timeout": 30}),
                                  engine_start_timeout=START_TIMEOUT if case == "never connects" else SLOW_START_TIMEOUT,
                                  **({"history_url": str(tmp_path / "history"), "pool": "token-test"}
                                     if case == HISTORY_CASE else {}),
                                  **({"engine_queue_capacity": QUEUE_CAPACITY} if case == QUEUE_CASE else {}),
                                  ).getOrCreate()
        started.append(spark)
        return spark

    try:
        yield start
    finally:
        for spark in started:
            spark.stop()


def run_job(spark: Any) -> list[tuple[int, int]]:
    pairs = spark.sparkContext.parallelize(range(600), 3).map(lambda x: (x % 3, x)).reduceByKey(lambda a, b: a + b)
    return sorted(pairs.collect())


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_an_engine_without_the_right_token_is_refused(application: Callable[[str], Any], logging: tuple[str, Path],
                                                      case: str) -> None:
    log = logging[1]
    since = len(log_lines(log))
    spark = application(case)
    status = spark.sparkContext._jvm.org.apache.spark.trspark.TRStatus
    wait_for(status.isFallenBack, what=f"the plugin to refuse the engine ({case})", timeout=TIMEOUT)
    assert run_job(spark) == [(k, sum(range(k, 600, 3))) for k in range(3)]
    lines = log_lines(log)[since:]
    warnings = [line for line in lines if line.startswith("WARN") and "policy engine unavailable" in line]
    assert len(warnings) == 1 and REFUSALS[case] in warnings[0], warnings
    assert not any("trspark: engine connected" in line for line in lines)


def test_the_engine_with_the_token_connects(application: Callable[[str], Any], logging: tuple[str, Path]) -> None:
    log = logging[1]
    since = len(log_lines(log))
    spark = application("the real token")
    wait_for(lambda: any("trspark: engine connected" in line for line in log_lines(log)[since:]),
             what="the engine to connect", timeout=TIMEOUT)
    assert run_job(spark) == [(k, sum(range(k, 600, 3))) for k in range(3)]
    assert not spark.sparkContext._jvm.org.apache.spark.trspark.TRStatus.isFallenBack()


def engine_processes(spark: Any) -> list[Any]:
    """The driver JVM's child processes running the engine (``python -m trspark.live``)."""
    import psutil

    driver = psutil.Process(driver_pid(spark.sparkContext))
    found = []
    for child in driver.children(recursive=True):
        try:
            if "trspark.live" in " ".join(child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
        except psutil.Error:  # exited meanwhile
            pass
    return found


@pytest.mark.parametrize("case", sorted(MISBEHAVIOURS))
def test_an_engine_that_misbehaves_once_connected_is_dropped(application: Callable[[str], Any],
                                                            logging: tuple[str, Path], case: str) -> None:
    log = logging[1]
    since = len(log_lines(log))
    spark = application(case)
    wait_for(lambda: any("trspark: engine connected" in line for line in log_lines(log)[since:]),
             what="the engine to connect", timeout=TIMEOUT)
    if case == "hang":
        wait_for(lambda: bool(engine_processes(spark)), what="the engine process", timeout=TIMEOUT)
        for engine in engine_processes(spark):
            engine.send_signal(signal.SIGSTOP)
    status = spark.sparkContext._jvm.org.apache.spark.trspark.TRStatus
    wait_for(status.isFallenBack, what=f"the plugin to drop the engine ({case})", timeout=TIMEOUT)
    assert run_job(spark) == [(k, sum(range(k, 600, 3))) for k in range(3)]
    warnings = [line for line in log_lines(log)[since:] if line.startswith("WARN") and "policy engine unavailable" in line]
    assert len(warnings) == 1 and MISBEHAVIOURS[case] in warnings[0], warnings
    # Not restarted: the engine's process is ended (a stopped one is killed), none replaces it.
    wait_for(lambda: not engine_processes(spark), what="the engine process to end", timeout=TIMEOUT)
    assert status.isFallenBack()


def test_an_engine_dropped_alive_still_writes_its_lifetime_history(application: Callable[[str], Any],
                                                                   logging: tuple[str, Path], tmp_path: Path) -> None:
    from trspark.live.history import HistoryStore

    log = logging[1]
    since = len(log_lines(log))
    spark = application(HISTORY_CASE)
    app_id = spark.sparkContext.applicationId
    assert run_job(spark) == [(k, sum(range(k, 600, 3))) for k in range(3)]
    status = spark.sparkContext._jvm.org.apache.spark.trspark.TRStatus
    wait_for(status.isFallenBack, what="the plugin to drop the engine", timeout=TIMEOUT)
    warnings = [line for line in log_lines(log)[since:] if line.startswith("WARN") and "policy engine unavailable" in line]
    assert len(warnings) == 1 and "engine sent garbage" in warnings[0], warnings
    # SIGTERMed, the engine censors the executor it knew and writes it (SLOW_STORE s) before it ends.
    wait_for(lambda: not engine_processes(spark), what="the engine process to end", timeout=TIMEOUT)
    records = [r for r in HistoryStore(str(tmp_path / "history")).load("token-test") if r.app_id == app_id]
    assert len(records) == 1 and not records[0].observed, records


def test_events_past_the_queue_capacity_before_the_engine_connects_fall_back_naming_the_key(
        application: Callable[[str], Any], logging: tuple[str, Path]) -> None:
    log = logging[1]
    since = len(log_lines(log))
    spark = application(QUEUE_CASE)
    jvm = spark.sparkContext._jvm
    # The engine never connects (start timeout 120 s): the job's events fill the queue first.
    assert run_job(spark) == [(k, sum(range(k, 600, 3))) for k in range(3)]
    wait_for(jvm.org.apache.spark.trspark.TRStatus.isFallenBack, what="the plugin to fall back", timeout=TIMEOUT)
    warnings = [line for line in log_lines(log)[since:] if line.startswith("WARN") and "policy engine unavailable" in line]
    assert len(warnings) == 1, warnings
    assert f"event queue full ({QUEUE_CAPACITY} events, spark.trspark.engine.queueCapacity)" in warnings[0]
    # The plugin's own parse of the key refuses what the Python check refuses, with the same words.
    for bad in ("0", "1e4", "\u0665", "99999999999"):
        conf = jvm.org.apache.spark.SparkConf(False).set("spark.trspark.engine.queueCapacity", bad)
        # PySpark turns the JVM's IllegalArgumentException into its own, with the same message.
        with pytest.raises(Exception) as info:  # noqa: B017 -- the message is what is checked
            jvm.org.apache.spark.trspark.TRConf.apply(conf)
        assert f"spark.trspark.engine.queueCapacity='{bad}' is not valid; allowed: an integer 1..10000000" in str(info.value)
