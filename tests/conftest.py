"""Shared fixtures: an Azurite blob-store emulator on loopback (started once per session).

Also: every Hypothesis test draws the same examples on every run (a fixed seed).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from missing_tool import missing
from ports import unused_port

# Derandomized: a failing example fails on every run, in CI as on a laptop.
settings.register_profile("fixed", derandomize=True, deadline=None)
settings.load_profile("fixed")

REPO = Path(__file__).resolve().parent.parent
# Every JVM the tests start (PySpark's driver, local-cluster workers and executors, spark-submit)
# inherits these options: such JVMs live seconds to minutes, and on a 2-core machine the C2
# compiler's and the parallel collector's threads took about half of the CPU the tests had.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("JAVA_TOOL_OPTIONS", TEST_JVM_OPTIONS)
# The well-known development account of the Azure storage emulators (public, not a secret).
AZURITE_ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _azurite_binary() -> str | None:
    candidates = [os.environ.get("TRSPARK_AZURITE", ""), str(REPO / ".tools/node_modules/.bin/azurite-blob")]
    for path in candidates:
        if path and Path(path).exists():
            return path
    return shutil.which("azurite-blob")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``stops_app`` run after the other tests of their module, whatever order they were
    collected or shuffled in: they stop the application the module's tests share."""
    first_of_module: dict[object, int] = {}
    for index, item in enumerate(items):
        first_of_module.setdefault(getattr(item, "module", None), index)

    def module_then_stops(index_item: tuple[int, pytest.Item]) -> tuple[int, bool, int]:
        index, item = index_item
        return first_of_module[getattr(item, "module", None)], item.get_closest_marker("stops_app") is not None, index

    items[:] = [item for _, item in sorted(enumerate(items), key=module_then_stops)]


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"azurite exited early with code {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)  # polling a condition (the port), bounded by the deadline
    raise RuntimeError(f"azurite did not listen on port {port} within {timeout} s")


@pytest.fixture(autouse=True, scope="module")
def _fresh_spark_driver_jvm_per_module() -> Iterator[None]:
    """After each test module, stop Spark and end PySpark's driver JVM.

    PySpark starts one driver JVM per Python process, and what a test module needs of it is fixed
    when it starts: the plugin jar on the driver's class path (``spark.plugins`` and the
    ``local-trcluster`` master are loaded from there) and the ``spark.*`` system properties every
    later ``SparkConf`` inherits. Without a fresh JVM per module, the modules' results would depend
    on which of them ran first.
    """
    yield
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError:
        return
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    if proc is not None:
        if proc.stdin is not None:
            proc.stdin.close()  # PySpark's gateway JVM exits when its stdin closes
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    # A SparkSession patches py4j to convert Java exceptions through SparkContext._jvm; with that
    # JVM gone, give plain-py4j tests (tests/jvm_gateway.py) py4j's own handler back. The next
    # SparkSession installs the patch again.
    import py4j.java_gateway
    import py4j.protocol

    py4j.java_gateway.get_return_value = py4j.protocol.get_return_value


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start Azurite's blob service on 127.0.0.1 and yield its connection string.

    Skipped when Azurite is not installed, except in CI (``CI=true``) where it must be
    (``make test`` installs it).
    """
    binary = _azurite_binary()
    if binary is None:
        missing("Azurite is not installed (run `make azurite`: npm install azurite@3.35)")
    location = tmp_path_factory.mktemp("azurite")
    for attempt in range(3):
        port = unused_port()
        proc = subprocess.Popen(
            [binary, "--silent", "--disableTelemetry", "--location", str(location), "--blobHost", "127.0.0.1",
             "--blobPort", str(port), "--skipApiVersionCheck"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        try:
            _wait_for_port(port, proc, timeout=60)
            break
        except RuntimeError:
            # Another process (the other xdist worker's Spark) may have taken the free port first.
            proc.kill()
            proc.wait(timeout=10)
            if attempt == 2:
                raise
    try:
        yield (
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
            f"AccountKey={AZURITE_ACCOUNT_KEY};BlobEndpoint=http://127.0.0.1:{port}/devstoreaccount1;"
        )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
