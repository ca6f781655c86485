"""A plain JVM with the shim jar and Spark's jars on its classpath, driven over py4j (no SparkContext).

Cheaper than a SparkSession (about a second to start) and safe to signal: the JVM is a child of
the test process and runs nothing but what the test calls.
"""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from subprocess import Popen
from typing import Any, TypeVar

from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway

from trspark.live.shim import jar_path, spark_jars_dir

T = TypeVar("T")


@dataclass
class Jvm:
    gateway: JavaGateway
    proc: Popen[bytes]
    stderr: collections.deque[str]
    """Lines the JVM wrote to stderr (Spark's default log4j2 setup logs INFO there)."""

    @property
    def trspark(self) -> Any:
        """The ``org.apache.spark.trspark`` package."""
        return self.gateway.jvm.org.apache.spark.trspark

    def log_lines(self, needle: str) -> list[str]:
        return [line for line in list(self.stderr) if needle in line]


@contextmanager
def plain_jvm() -> Iterator[Jvm]:
    classpath = os.pathsep.join([jar_path(), f"{spark_jars_dir()}/*"])
    stderr: collections.deque[str] = collections.deque(maxlen=10_000)
    port, proc = launch_gateway(classpath=classpath, die_on_exit=True, return_proc=True, redirect_stderr=stderr)
    gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port, auto_convert=True))
    try:
        yield Jvm(gateway, proc, stderr)
    finally:
        gateway.shutdown()
        proc.terminate()
        proc.wait(timeout=10)


def wait_for(condition: Callable[[], T], what: str, timeout: float = 10.0, every: float = 0.02) -> T:
    """Poll ``condition`` every ``every`` s until it holds and return its value; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(every)  # polling a condition, bounded by the deadline
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
