"""trspark.configure suggests a shuffle partition size through AQE; the user's own settings win."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import trspark
from cost_model.lifetimes import Exponential
from cost_model.task_size import largest_task_seconds
from trspark.engine.tr.sizing import MIN_PARTITION_SIZE_KEY
from trspark.live import sparkconf
from trspark.live.sizing import (
    ADVISORY,
    AQE,
    COALESCE,
    INITIAL,
    INITIAL_PARTITIONS,
    SHUFFLE_PARTITIONS,
    size_command,
)

OPTIONS = {"lifetime": "exponential:mean=600", "sizing_rate": "50m"}
SIZE = str(round(largest_task_seconds(Exponential(mean=600.0), 0.05) * 50e6))  # ~60 s x 50 MB/s ~ 3 GB


@pytest.fixture(autouse=True)
def fake_jar(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sparkconf, "plugin_jar", lambda: "/opt/trspark/shim.jar")


def test_the_rate_sets_the_advisory_size_and_the_initial_partitions() -> None:
    conf = trspark.configure({}, **OPTIONS)
    assert conf[ADVISORY] == SIZE and conf[INITIAL] == str(INITIAL_PARTITIONS)


def test_without_a_rate_or_with_stable_capacity_nothing_is_set() -> None:
    assert ADVISORY not in trspark.configure({}, lifetime="exponential:mean=600")
    assert ADVISORY not in trspark.configure({}, lifetime="stable", sizing_rate="50m")


@pytest.mark.parametrize("user", [
    {ADVISORY: "64m"},
    {AQE: "false"},
    {COALESCE: "false"},
])
def test_the_users_advisory_size_or_switched_off_aqe_wins(user: dict[str, str]) -> None:
    conf = trspark.configure(dict(user), **OPTIONS)
    assert {k: conf[k] for k in user} == user
    assert INITIAL not in conf and (ADVISORY in user or ADVISORY not in conf)


@pytest.mark.parametrize(("user", "sized"), [({AQE: False}, False), ({COALESCE: False}, False), ({AQE: True}, True)])
def test_a_dicts_python_values_for_spark_sql_are_read_as_spark_will_read_them(user: dict[str, object], sized: bool) -> None:
    conf = trspark.configure(dict(user), **OPTIONS)
    assert (ADVISORY in conf) == sized


@pytest.mark.parametrize("user", [{SHUFFLE_PARTITIONS: "64"}, {INITIAL: "300"}])
def test_the_users_partition_count_wins(user: dict[str, str]) -> None:
    conf = trspark.configure(dict(user), **OPTIONS)
    assert conf[ADVISORY] == SIZE
    assert {k: conf[k] for k in user} == user and len({SHUFFLE_PARTITIONS, INITIAL} & set(conf)) == 1


def test_a_sparkconf_keeps_its_own_settings() -> None:
    from pyspark import SparkConf

    conf = SparkConf(loadDefaults=False).set(SHUFFLE_PARTITIONS, "32")
    trspark.configure(conf, **OPTIONS)
    assert conf.get(SHUFFLE_PARTITIONS) == "32" and conf.get(ADVISORY) == SIZE and conf.get(INITIAL) is None


def test_size_command_prints_the_settings() -> None:
    out = CliRunner().invoke(size_command, ["--lifetime", "exponential:mean=600", "--rate", "50m",
                                            "--pool", "ondemand=stable"])
    assert out.exit_code == 0, out.output
    assert f"--conf {ADVISORY}={SIZE}" in out.output and "longest task: 6" in out.output
    bad = CliRunner().invoke(size_command, ["--fraction", "1.5"])
    assert bad.exit_code == 2 and "--fraction='1.5' is not valid" in bad.output


def test_size_command_says_when_the_lifetimes_set_no_limit() -> None:
    out = CliRunner().invoke(size_command, ["--lifetime", "stable", "--rate", "50m"])
    assert out.exit_code == 0, out.output
    assert "longest task: no limit" in out.output and "inf" not in out.output


@pytest.mark.parametrize("held", [
    {"spark.trspark.lifetime": "exponential:mean=600"},
    {"spark.trspark.lifetime": "exponential:mean=600", "spark.trspark.sizing.rate": "50m"},
])
def test_the_size_follows_the_trspark_settings_the_target_already_holds(held: dict[str, str]) -> None:
    # spark-defaults.conf or a SparkConf built earlier: configure sizes from them and the options together.
    from pyspark import SparkConf

    options = {k: v for k, v in OPTIONS.items() if f"spark.trspark.{'lifetime' if k == 'lifetime' else 'sizing.rate'}" not in held}
    conf = SparkConf(loadDefaults=False).setAll(list(held.items()))
    trspark.configure(conf, **options)
    assert conf.get(ADVISORY) == SIZE
    assert trspark.configure(dict(held), **options)[ADVISORY] == SIZE


def test_a_loss_fraction_above_the_lifetimes_peak_stops_start_up_naming_the_key() -> None:
    from trspark.keys import ConfigError
    from trspark.live.config import check_settings

    settings = {"spark.trspark.lifetime": "exponential:mean=60", "spark.trspark.sizing.lossFraction": "0.3"}
    with pytest.raises(ConfigError, match=r"spark.trspark.sizing.lossFraction=0.3 .*allowed: a number in \(0, 0.298\)"):
        check_settings(settings)
    result = CliRunner().invoke(size_command, ["--lifetime", "exponential:mean=60", "--fraction", "0.3"])
    assert result.exit_code == 2 and "--fraction=0.3 is not below" in result.output and "Traceback" not in result.output


def test_a_lifetime_that_loses_more_than_the_default_fraction_is_named_in_the_refusal() -> None:
    from trspark.keys import ConfigError
    from trspark.live.config import check_settings

    settings = {"spark.trspark.lifetime": "exponential:mean=600", "spark.trspark.pool.spot.lifetime": "weibull:shape=0.01,scale=1"}
    with pytest.raises(ConfigError, match=r"lossFraction=0.05 \(its default\) is not below the largest expected loss "
                                          r"fraction spark.trspark.pool.spot.lifetime='weibull:shape=0.01,scale=1' gives"):
        check_settings(settings)


def test_with_stable_capacity_a_fraction_over_a_spot_pools_peak_sets_no_limit_from_that_pool() -> None:
    from trspark.live.config import check_settings

    # A task lost again and again on a spot executor ends on an on-demand one (docs/task-sizing.md).
    settings = {"spark.trspark.lifetime": "exponential:mean=600", "spark.trspark.pool.od.lifetime": "stable",
                "spark.trspark.sizing.lossFraction": "0.3"}
    check_settings(settings)
    result = CliRunner().invoke(size_command, ["--lifetime", "exponential:mean=600", "--fraction", "0.3", "--pool", "od=stable"])
    assert result.exit_code == 0, result.output
    assert "the lifetimes set no limit" in result.output


@pytest.mark.parametrize(("fraction", "shown"), [("0.001", "0.1%"), ("0.025", "2.5%"), ("0.05", "5%")])
def test_size_command_states_the_loss_fraction_it_used(fraction: str, shown: str) -> None:
    result = CliRunner().invoke(size_command, ["--lifetime", "exponential:mean=600", "--fraction", fraction])
    assert result.exit_code == 0, result.output
    assert f"(expected loss <= {shown} of its work)" in result.output, result.output


def test_a_partition_size_never_exceeds_what_a_spark_setting_holds() -> None:
    result = CliRunner().invoke(size_command, ["--lifetime", "exponential:mean=600", "--rate", "1e30"])
    assert result.exit_code == 0, result.output
    assert f"--conf {ADVISORY}={2**63 - 1}" in result.output


def _spark_bytes(text: str) -> int:
    """A Spark byte size as SQLConf reads it (binary units: 1m = 2**20)."""
    units = {"": 1, "b": 1, "k": 2**10, "kb": 2**10, "m": 2**20, "mb": 2**20, "g": 2**30, "gb": 2**30}
    digits = text.rstrip("bkmgBKMG")
    return int(digits) * units[text[len(digits):].lower()]


@pytest.mark.parametrize("rate", ["1k", "10k", "1"])
def test_a_partition_size_below_aqes_minimum_partition_size_is_what_aqe_coalesces_to(rate: str) -> None:
    # AQE's target is max(min(.., advisory), coalescePartitions.minPartitionSize) (default 1m):
    # an advisory size below that minimum would still give partitions of 1 MiB.
    conf = trspark.configure({}, lifetime="exponential:mean=600", sizing_rate=rate)
    advisory = int(conf[ADVISORY])
    assert advisory < 2**20
    assert _spark_bytes(conf.get(MIN_PARTITION_SIZE_KEY, "1m")) <= advisory


def test_the_users_minimum_partition_size_wins() -> None:
    conf = trspark.configure({MIN_PARTITION_SIZE_KEY: "2m"}, lifetime="exponential:mean=600", sizing_rate="1k")
    assert conf[MIN_PARTITION_SIZE_KEY] == "2m"
    assert MIN_PARTITION_SIZE_KEY not in trspark.configure({}, **OPTIONS)
