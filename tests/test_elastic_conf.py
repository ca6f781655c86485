"""What the plugin makes of ``spark.trspark.release.*`` and dynamic allocation's settings at start-up
(``Elastic.configure``, in a plain JVM): the settings it fills in and the line it logs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.jvm_gateway import Jvm, plain_jvm, wait_for

TRACKING = {"spark.dynamicAllocation.enabled": "true", "spark.dynamicAllocation.shuffleTracking.enabled": "true",
            "spark.dynamicAllocation.executorIdleTimeout": "45s", "spark.dynamicAllocation.minExecutors": "1"}


@pytest.fixture(scope="module")
def jvm() -> Iterator[Jvm]:
    with plain_jvm() as j:
        yield j


def configure(jvm: Jvm, settings: dict[str, str]) -> tuple[Any, list[str]]:
    """A SparkConf of ``settings`` after ``Elastic.configure``, and the trspark lines it logged."""
    conf = jvm.gateway.jvm.org.apache.spark.SparkConf(False)
    for key, value in settings.items():
        conf.set(key, value)
    jvm.stderr.clear()
    jvm.trspark.Elastic.configure(conf)
    # stderr is read on a thread: a marker written after the call says every line before it is in.
    jvm.gateway.jvm.System.err.println("elastic-configured")
    wait_for(lambda: jvm.log_lines("elastic-configured"), what="the JVM's stderr up to the marker")
    return conf, jvm.log_lines("trspark:")


def test_dynamic_allocation_fills_in_the_release_settings_and_says_so(jvm: Jvm) -> None:
    conf, lines = configure(jvm, TRACKING)
    assert (conf.get("spark.trspark.release.idle"), conf.get("spark.trspark.release.minExecutors")) == ("45.0", "1")
    (line,) = lines
    assert "idle executors whose outputs are saved go after 45.0 s (at least 1 executors stay)" in line


@pytest.mark.parametrize("idle", ["0", "0s", "0ms"])
def test_release_turned_off_is_logged_as_off(jvm: Jvm, idle: str) -> None:
    _, (line,) = configure(jvm, {**TRACKING, "spark.trspark.release.idle": idle})
    assert "early release of idle executors is off (spark.trspark.release.idle=0)" in line and "go after" not in line


def test_a_release_setting_without_dynamic_allocation_is_warned_of(jvm: Jvm) -> None:
    conf, (line,) = configure(jvm, {"spark.trspark.release.idle": "30s"})
    assert "WARN" in line and "spark.trspark.release.idle=30s has no effect" in line
    assert "spark.dynamicAllocation.enabled=true" in line and not conf.contains("spark.trspark.release.minExecutors")
    assert configure(jvm, {"spark.trspark.release.idle": "0"})[1] == []  # off anyway: nothing to say
    assert configure(jvm, {})[1] == []
