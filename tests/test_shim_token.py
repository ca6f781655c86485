"""The plugin accepts only an engine that proves it got the application's token.

Each case is a ``local[1]`` application in ``tr`` mode whose ``spark.trspark.python`` is a wrapper
around this interpreter: it runs everything as usual except the engine, which it starts with a
wrong token, without its token, or replaces by a client that says ``Hello`` with no token field.
The plugin must refuse the connection (one warning naming why), fall back to always-checkpoint and
still run the job right; with the real token (the control) it connects.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

TIMEOUT = 120.0
LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %p %c: %m%n
logger.trspark.name = org.apache.spark.trspark
logger.trspark.level = info
"""
# The engine as started by the plugin: `<python> -m trspark.engine --connect 127.0.0.1:<port>`.
WRAPPER = """\
#!{python}
import json, os, socket, sys
args = sys.argv[1:]
if args[:2] == ["-m", "trspark.engine"]:
    case = {case!r}
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
os.execv(sys.executable, [sys.executable, *args])
"""
REFUSALS = {
    "wrong token": "engine did not say Hello with the right token and version",
    "no token in Hello": "engine did not say Hello with the right token and version",
    "no token in the environment": "engine process exited with code 2",
}


def wait_for(condition: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)  # polling a condition, bounded by the deadline
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The driver's log file (this module starts its own driver JVM, see conftest.py)."""
    root = tmp_path_factory.mktemp("token-log")
    config = root / "log4j2.properties"
    config.write_text(LOG4J2.format(log=root / "driver.log"))
    return root / "driver.log"


@pytest.fixture
def application(tmp_path: Path, log: Path) -> Iterator[Callable[[str], Any]]:
    """Start a ``tr`` application whose engine is started as ``case`` says."""
    started: list[Any] = []

    def start(case: str) -> Any:
        from pyspark.sql import SparkSession

        import trspark

        wrapper = tmp_path / "python"
        wrapper.write_text(WRAPPER.format(python=sys.executable, case=case))
        wrapper.chmod(0o755)
        builder = (
            SparkSession.builder.master("local[1]").appName(f"trspark-token-{case.replace(' ', '-')}")
            .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log.parent / 'log4j2.properties'}")
            .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        )
        spark = trspark.configure(builder, mode="tr", lifetime="exponential:mean=600", python=str(wrapper),
                                  remote_path=(tmp_path / "backups").as_uri()).getOrCreate()
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
def test_an_engine_without_the_right_token_is_refused(application: Callable[[str], Any], log: Path, case: str) -> None:
    since = len(log.read_text().splitlines()) if log.exists() else 0
    spark = application(case)
    status = spark.sparkContext._jvm.org.apache.spark.trspark.TRStatus
    wait_for(status.isFallenBack, what=f"the plugin to refuse the engine ({case})")
    assert run_job(spark) == [(k, sum(range(k, 600, 3))) for k in range(3)]
    lines = log.read_text().splitlines()[since:]
    warnings = [line for line in lines if line.startswith("WARN") and "policy engine unavailable" in line]
    assert len(warnings) == 1 and REFUSALS[case] in warnings[0], warnings
    assert not any("trspark: engine connected" in line for line in lines)


def test_the_engine_with_the_token_connects(application: Callable[[str], Any], log: Path) -> None:
    since = len(log.read_text().splitlines()) if log.exists() else 0
    spark = application("the real token")
    wait_for(lambda: any("trspark: engine connected" in line for line in log.read_text().splitlines()[since:]),
             what="the engine to connect")
    assert run_job(spark) == [(k, sum(range(k, 600, 3))) for k in range(3)]
    assert not spark.sparkContext._jvm.org.apache.spark.trspark.TRStatus.isFallenBack()
