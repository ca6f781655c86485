"""Warm start: executor JVMs write a class-data archive at exit and later ones map it."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from jvm_gateway import wait_for

import trspark
from jobs.harness.executors import driver_pid, find_executors
from trspark.keys import ConfigError
from trspark.live import sparkconf, warmstart
from trspark.live.warmstart import SETTLE_S, executor_java_options, merge_options, version_tag

TAG = "spark9.9-java99"


def _dump(directory: Path, name: str, age: float) -> Path:
    path = directory / f"dump-{TAG}-{name}.jsa"
    path.write_bytes(name.encode())
    os.utime(path, (time.time() - age, time.time() - age))
    return path


def test_without_an_archive_every_executor_writes_one_at_exit(tmp_path: Path) -> None:
    option = executor_java_options(tmp_path / "cds", TAG)
    assert option == f"-XX:ArchiveClassesAtExit={tmp_path}/cds/dump-{TAG}-{{{{APP_ID}}}}-{{{{EXECUTOR_ID}}}}.jsa"
    assert (tmp_path / "cds").is_dir()


def test_the_newest_settled_dump_becomes_the_archive_and_the_others_go(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warmstart, "archive_usable", lambda path: True)
    old, newest = _dump(tmp_path, "app-1-0", age=60), _dump(tmp_path, "app-1-1", age=30)
    writing = _dump(tmp_path, "app-2-0", age=0)
    option = executor_java_options(tmp_path, TAG)
    archive = tmp_path / f"executor-{TAG}.jsa"
    assert option == f"-XX:SharedArchiveFile={archive}"
    assert archive.read_bytes() == b"app-1-1", "the newest finished dump"
    assert not old.exists() and not newest.exists()
    assert writing.exists(), f"a dump written in the last {SETTLE_S} s may be unfinished: left alone"
    assert executor_java_options(tmp_path, TAG, now=time.time() + SETTLE_S) == option
    assert not writing.exists(), "once settled, an extra dump is removed and the archive kept"
    assert archive.read_bytes() == b"app-1-1"


def test_a_dump_a_jvm_cannot_start_with_is_removed_and_an_older_one_taken(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warmstart, "archive_usable", lambda path: "broken" not in path.name)
    _dump(tmp_path, "app-1-0", age=60)
    broken = _dump(tmp_path, "app-1-broken", age=30)
    assert executor_java_options(tmp_path, TAG).startswith("-XX:SharedArchiveFile=")
    assert not broken.exists() and (tmp_path / f"executor-{TAG}.jsa").read_bytes() == b"app-1-0"


def test_a_truncated_archive_is_found_unusable_by_a_real_jvm(tmp_path: Path) -> None:
    """A JVM crashes on a truncated archive (an executor killed while writing it) and skips a foreign file."""
    dump = tmp_path / "dump.jsa"
    java = warmstart.java_binary()
    assert java is not None
    subprocess.run([java, f"-XX:ArchiveClassesAtExit={dump}", "-version"], capture_output=True, check=True)
    assert warmstart.archive_usable(dump)
    truncated = tmp_path / "truncated.jsa"
    truncated.write_bytes(dump.read_bytes()[: dump.stat().st_size // 2])
    assert not warmstart.archive_usable(truncated)
    assert not list(Path.cwd().glob("hs_err_pid*.log")), "no crash report left behind"


def test_the_users_own_archive_option_wins() -> None:
    assert merge_options("-Xss4m", "-XX:SharedArchiveFile=/a.jsa") == "-Xss4m -XX:SharedArchiveFile=/a.jsa"
    assert merge_options(None, "-XX:SharedArchiveFile=/a.jsa") == "-XX:SharedArchiveFile=/a.jsa"
    mine = "-Xss4m -XX:SharedArchiveFile=/mine.jsa"
    assert merge_options(mine, "-XX:SharedArchiveFile=/a.jsa") == mine


def test_configure_appends_the_jvm_option_to_the_users(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sparkconf, "plugin_jar", lambda: "/opt/trspark.jar")
    conf = trspark.configure({"spark.executor.extraJavaOptions": "-Xss4m"}, warm_start=str(tmp_path))
    options = conf["spark.executor.extraJavaOptions"]
    assert options.startswith("-Xss4m -XX:ArchiveClassesAtExit=" + str(tmp_path)), options
    assert conf["spark.trspark.warmStart"] == str(tmp_path)
    assert "spark.executor.extraJavaOptions" not in trspark.configure({}, mode="tr"), "off by default"


def test_a_relative_directory_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"spark\.trspark\.warmStart.*false \| true \| an absolute directory"):
        trspark.spark_conf(warm_start="cache/cds")


@pytest.mark.spark
def test_a_later_applications_executors_map_the_archive_the_first_ones_wrote(tmp_path: Path) -> None:
    from pyspark.sql import SparkSession

    def run_app() -> list[str]:
        """One job on a 1-executor local cluster; the executor JVM's mapped files, read while it runs."""
        options = trspark.spark_conf(warm_start=str(tmp_path))["spark.executor.extraJavaOptions"]
        spark = (SparkSession.builder.master("local-cluster[1,1,1024]").appName("warm-start")
                 .config("spark.executor.extraJavaOptions", options).config("spark.ui.enabled", "false")
                 .getOrCreate())
        try:
            assert spark.range(1000).selectExpr("sum(id)").collect()[0][0] == 499500
            (executor,) = find_executors(driver_pid(spark.sparkContext))
            return Path(f"/proc/{executor.pid}/maps").read_text().splitlines()
        finally:
            spark.stop()

    first = run_app()
    assert not any(line.endswith(".jsa") and str(tmp_path) in line for line in first)
    # The executor writes its dump when it exits, after the application ended.
    wait_for(lambda: executor_java_options(tmp_path, version_tag()).startswith(
        "-XX:SharedArchiveFile="), "the first executor's class archive", timeout=120, every=0.5)
    archives = list(tmp_path.glob("executor-*.jsa"))
    assert len(archives) == 1 and archives[0].stat().st_size > 1 << 20
    second = run_app()
    assert any(line.endswith(str(archives[0])) for line in second), "the new executor maps the archive"
