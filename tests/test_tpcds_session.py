"""Session helpers that need no Spark: policy lists, per-policy settings, Parquet -> Spark DDL."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.tpcds.session import (
    ClusterSpec,
    PolicyUnavailable,
    jvm_console_to,
    parse_policies,
    policy_conf,
    spark_ddl,
)


def test_parse_policies() -> None:
    assert parse_policies(" never, TR ") == ("never", "tr")
    with pytest.raises(ValueError, match="names a policy twice"):
        parse_policies(" never, TR,never ")
    with pytest.raises(ValueError, match="sometimes; allowed: comma-separated never, always, decommission, efm, pado, tr"):
        parse_policies("never,sometimes")
    with pytest.raises(ValueError, match="empty"):
        parse_policies(" , ")


def test_the_plugins_policies_run_with_trsparks_scheduler_and_vanilla_spark_on_the_master_as_given() -> None:
    local, standalone, yarn = ClusterSpec(executors=2), ClusterSpec(master="spark://h:7077"), ClusterSpec(master="yarn")
    assert [local.master_for(p) for p in ("tr", "always", "never")] == [
        "local-trcluster[2,1,2048]", "local-trcluster[2,1,2048]", "local-cluster[2,1,2048]"]
    assert [standalone.master_for(p) for p in ("tr", "never", "decommission")] == [
        "spark-tr://h:7077", "spark://h:7077", "spark://h:7077"]
    assert yarn.master_for("tr") == "yarn"


def test_decommission_uses_spark_fallback_storage(tmp_path: Path) -> None:
    conf = policy_conf("decommission", tmp_path)
    assert conf["spark.decommission.enabled"] == "true"
    assert conf["spark.storage.decommission.shuffleBlocks.enabled"] == "true"
    path = conf["spark.storage.decommission.fallbackStorage.path"]
    assert path.startswith("file://") and path.endswith("/")
    assert (tmp_path / "fallback").is_dir()
    assert policy_conf("never", tmp_path) == {}
    with pytest.raises(PolicyUnavailable, match="unknown policy"):
        policy_conf("sometimes", tmp_path)


def test_spark_ddl_from_parquet_footer(tmp_path: Path) -> None:
    table = pa.table({
        "k": pa.array([1], pa.int64()), "n": pa.array([2], pa.int32()), "s": pa.array(["x"]),
        "d": pa.array([dt.date(2000, 1, 1)]), "m": pa.array([Decimal("1.25")], pa.decimal128(7, 2)),
    })
    pq.write_table(table, tmp_path / "t.parquet")
    assert spark_ddl(tmp_path / "t.parquet") == "`k` BIGINT, `n` INT, `s` STRING, `d` DATE, `m` DECIMAL(7, 2)"
    pq.write_table(pa.table({"t": pa.array([dt.datetime(2000, 1, 1)])}), tmp_path / "u.parquet")
    assert spark_ddl(tmp_path / "u.parquet") is None  # not mapped: Spark infers it


def test_the_console_filter_hides_spark_executor_kills_but_not_trspark_warnings() -> None:
    from jobs.tpcds.session import _LOG4J

    conf = dict(line.split(" = ", 1) for line in _LOG4J.splitlines() if " = " in line and not line.startswith("#"))
    assert conf["appender.console.filter.expected.onMatch"] == "DENY"
    denied = re.compile(conf["appender.console.filter.expected.regex"]).fullmatch
    assert denied("Lost executor 0 on 192.0.2.2: Command exited with code 137")
    assert denied("Executor app-1/0 finished with state EXITED message Command exited with code 137 exitStatus 137")
    assert not denied("trspark: policy engine unavailable (engine process exited with code 137); falling back "
                      "to always-checkpoint (every map output to a peer) for the rest of this application")
    assert not denied("Lost executor 0 on 192.0.2.2: Command exited with code 1")


def test_a_process_started_inside_jvm_console_to_writes_its_stderr_to_the_file(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "logs" / "console.log"
    # Started inside the block (as PySpark starts the driver JVM), it writes once at start and
    # once after the block ended: both lines belong in the file.
    script = "import sys; print('child at start', file=sys.stderr, flush=True); sys.stdin.readline(); " \
             "print('child later', file=sys.stderr, flush=True)"
    with jvm_console_to(log):
        child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, text=True)
    print("python after the block", file=sys.stderr, flush=True)
    child.communicate("go\n", timeout=60)
    assert child.returncode == 0
    assert log.read_text().splitlines() == ["child at start", "child later"]
    assert capfd.readouterr().err == "python after the block\n"


def test_jvm_console_to_none_changes_nothing_and_a_failed_start_shows_the_files_end(tmp_path: Path) -> None:
    with jvm_console_to(None):
        pass
    log = tmp_path / "console.log"
    log.write_text("".join(f"line {i}\n" for i in range(30)))
    with pytest.raises(OSError, match="gateway") as failed, jvm_console_to(log):
        raise OSError("Java gateway process exited before sending its port number")
    note = failed.value.__notes__[0]
    assert note.startswith(f"the end of {log}:\nline 10\n") and note.endswith("line 29")
    # A log that cannot be opened stops before the launch, with standard error left alone.
    before = os.fstat(2)
    with pytest.raises(IsADirectoryError), jvm_console_to(tmp_path):
        pytest.fail("the block must not run")
    after = os.fstat(2)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)


@pytest.mark.spark
def test_a_sessions_driver_jvm_prints_to_the_console_log_not_the_console(tmp_path: Path) -> None:
    log = tmp_path / "spark-console.log"
    # A fresh process: PySpark starts one driver JVM per process, and this test's needs to be new.
    script = f"""
from pathlib import Path
from jobs.tpcds import session
spark, work_dir = session.start(session.ClusterSpec(master="local[1]"), "never", console_log=Path({str(log)!r}))
spark.sparkContext._jvm.java.lang.System.err.println("marker printed by the JVM")
spark.sparkContext._jvm.org.apache.log4j.LogManager.getLogger("trspark.test").error("marker logged by Spark's log")
session.stop(spark, work_dir)
print("python done")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("python done")
    written = log.read_text()
    assert "marker printed by the JVM" in written and "marker logged by Spark's log" in written
    assert "marker" not in done.stderr


@pytest.mark.spark
def test_a_later_session_in_the_same_jvm_keeps_to_its_own_local_folder() -> None:
    # A fresh process: the driver JVM must not have cached an earlier test's folders.
    script = """
import json
from jobs.tpcds import session
spec = session.ClusterSpec(executors=1, cores=1, memory_mb=1024)
work_dirs, in_use = [], []
for _ in range(2):
    spark, work_dir = session.start(spec, "never")
    sc = spark.sparkContext
    assert sc.parallelize(range(100), 2).map(lambda x: (x % 3, x)).reduceByKey(lambda a, b: a + b).count() == 3
    utils = getattr(getattr(sc._jvm.org.apache.spark.util, "Utils$"), "MODULE$")
    in_use.append(utils.getLocalDir(sc._jsc.sc().conf()))
    session.stop(spark, work_dir)
    work_dirs.append(str(work_dir))
print(json.dumps({"work_dirs": work_dirs, "in_use": in_use}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for work_dir, in_use in zip(result["work_dirs"], result["in_use"], strict=True):
        assert in_use.startswith(work_dir + "/local/")
        assert not Path(work_dir).exists()


@pytest.mark.spark
def test_a_later_session_in_the_same_jvm_does_not_inherit_the_first_sessions_settings() -> None:
    # A fresh process: PySpark launches the driver JVM with the first session's settings as
    # --conf options, which become system properties that a later SparkConf would load.
    script = """
import json
from jobs.tpcds import session
first, work_dir = session.start(session.ClusterSpec(master="local[1]", extra_conf={"spark.first.only": "1"}), "never")
session.stop(first, work_dir)
second, work_dir = session.start(session.ClusterSpec(master="local[1]", extra_conf={"spark.second.only": "2"}), "never")
conf = dict(second.sparkContext.getConf().getAll())
session.stop(second, work_dir)
print(json.dumps([conf.get("spark.first.only"), conf.get("spark.second.only")]))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [None, "2"]
