"""Session helpers that need no Spark: policy lists, per-policy settings, Parquet -> Spark DDL."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.tpcds.session import PolicyUnavailable, parse_policies, policy_conf, spark_ddl


def test_parse_policies() -> None:
    assert parse_policies(" never, TR,never ") == ("never", "tr")
    with pytest.raises(ValueError, match="sometimes; allowed: comma-separated never, always, decommission, efm, pado, tr"):
        parse_policies("never,sometimes")
    with pytest.raises(ValueError, match="empty"):
        parse_policies(" , ")


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
