"""Which pool an executor is in: the executor-side metadata lookup (``NoticeWatcher.metadataPool``)
against loopback imitations of the AWS, GCP and Azure instance metadata, and the
``spark.trspark.pool.<name>.lifetime`` settings (parsed, validated, delivered to the engine)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from jobs.harness.notice_endpoints import AWS_REBALANCE_PATH, NoticeServer
from tests.jvm_gateway import Jvm, plain_jvm
from tests.ports import unused_port
from trspark.engine.pool_baselines import EFMPolicy, PadoPolicy
from trspark.keys import ConfigError
from trspark.live import confcheck
from trspark.live.config import build_policy, from_spark_conf, option_settings

SOURCES = ("aws", "gcp", "azure")


@pytest.fixture(scope="module")
def jvm() -> Iterator[Jvm]:
    with plain_jvm() as j:
        yield j


def metadata_pool(jvm: Jvm, source: str, url: str, executor_id: str = "1") -> str | None:
    settings = jvm.trspark.NoticeSettings(source, url, 1.0, 30.0, "none").forExecutor(executor_id)
    answer = jvm.trspark.NoticeWatcher(settings, jvm.trspark.NoticeRecorder()).metadataPool()
    return str(answer.get()) if answer.isDefined() else None


@pytest.mark.parametrize("source", SOURCES)
def test_each_executor_reads_its_own_pool_from_the_cloud_metadata(jvm: Jvm, source: str) -> None:
    with NoticeServer() as server:
        server.set_pool("ondemand", vm="vm-0")
        url = server.url + "/vm-{executorId}"
        assert metadata_pool(jvm, source, url, "0") == "ondemand"
        assert metadata_pool(jvm, source, url, "1") == "spot"
        server.set_pool("ondemand")  # every VM without one of its own
        assert metadata_pool(jvm, source, url, "2") == "ondemand"


def test_gcp_spot_vm_known_by_its_provisioning_model(jvm: Jvm) -> None:
    with NoticeServer() as server:
        server.gcp_spot_model = True  # preemptible answers FALSE: only the provisioning model says SPOT
        assert metadata_pool(jvm, "gcp", server.url) == "spot"
        server.set_pool("ondemand")
        assert metadata_pool(jvm, "gcp", server.url) == "ondemand"


def test_aws_life_cycle_with_an_imdsv2_token(jvm: Jvm) -> None:
    with NoticeServer(aws_require_token=True) as server:
        assert metadata_pool(jvm, "aws", server.url) == "spot"
        assert server.aws_tokens


@pytest.mark.parametrize("source", ("gcp", "azure"))
def test_refused_or_absent_metadata_names_no_pool(jvm: Jvm, source: str) -> None:
    with NoticeServer() as server:
        server.refuse_metadata = True
        assert metadata_pool(jvm, source, server.url) is None
    closed = f"http://127.0.0.1:{unused_port()}"
    assert metadata_pool(jvm, source, closed) is None
    assert metadata_pool(jvm, "none", closed) is None


def jvm_conf(jvm: Jvm, entries: dict[str, str]) -> Any:
    conf = jvm.gateway.jvm.org.apache.spark.SparkConf(False)
    for key, value in entries.items():
        conf.set(key, value)
    return conf


def test_jvm_rejects_a_bad_pool_name_naming_the_key(jvm: Jvm) -> None:
    from py4j.protocol import Py4JJavaError

    with pytest.raises(Py4JJavaError) as info:
        jvm.trspark.TRConf.apply(jvm_conf(jvm, {"spark.trspark.pool.on demand.lifetime": "stable"}))
    message = str(info.value.java_exception.getMessage())
    assert "spark.trspark.pool.on demand.lifetime" in message and "allowed:" in message
    good = jvm.trspark.TRConf.apply(jvm_conf(jvm, {"spark.trspark.pool.ondemand.lifetime": "stable",
                                                   "spark.trspark.pool.m5.xlarge-spot.lifetime": "exponential:mean=60",
                                                   "spark.trspark.mode": "efm"}))
    assert good.mode() == "efm" and good.usesEngine()


# ---- the settings on the Python side ----------------------------------------------------------


def test_pool_lifetimes_reach_the_engine_settings() -> None:
    config = from_spark_conf({"spark.trspark.pool.spot.lifetime": "weibull:shape=0.6,scale=33",
                              "spark.trspark.pool.ondemand.lifetime": "stable"})
    assert config.pool_lifetimes == (("ondemand", "stable"), ("spot", "weibull:shape=0.6,scale=33"))
    assert config.stable_pools() == ("ondemand",)
    assert from_spark_conf({}).pool_lifetimes == ()
    # Instance-type pool names carry dots, as docs/history.md suggests.
    dotted = from_spark_conf({"spark.trspark.pool": "m5.xlarge-spot", "spark.trspark.pool.m5.xlarge-spot.lifetime": "stable"})
    assert dotted.pool == "m5.xlarge-spot" and dotted.stable_pools() == ("m5.xlarge-spot",)


def test_pool_lifetimes_that_name_a_pool_twice_are_refused_not_left_to_the_last() -> None:
    import trspark

    with pytest.raises(ConfigError, match="pool_lifetimes names pool 'spot' twice; allowed: one lifetime per pool"):
        trspark.spark_conf(pool_lifetimes=[("spot", "stable"), ("spot", "exponential:mean=60")])


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("spark.trspark.pool.spot.lifetime", "sometimes", "allowed: stable (never evicted) or a lifetime spec"),
        ("spark.trspark.pool.spot.lifetime", "weibull:shape=-1,scale=3", "allowed: stable"),
        ("spark.trspark.pool.on demand.lifetime", "stable", "with <name> of letters, digits, _, - and . (not first)"),
        ("spark.trspark.pool..hidden.lifetime", "stable", "with <name> of letters, digits, _, - and . (not first)"),
        ("spark.trspark.pool", "a,b", "allowed: a pool name: letters, digits, _, - and . (not first)"),
        ("spark.trspark.pool.spot.mean", "60", "allowed: spark.trspark.pool.<name>.lifetime"),
    ],
)
def test_bad_pool_setting_stops_start_up_naming_the_key(key: str, value: str, allowed: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError) as info:
        from_spark_conf({key: value})
    assert key in str(info.value) and allowed in str(info.value)
    # The driver plugin's start-up check (the JVM runs it and fails SparkContext creation on exit 2).
    assert confcheck.main({"TRSPARK_CONF": json.dumps({key: value})}) == confcheck.EXIT_BAD
    assert key in capsys.readouterr().err


def test_efm_and_pado_count_the_stable_pools_as_on_demand() -> None:
    settings = option_settings(mode="efm", pool_lifetimes={"reserved": "stable", "spot": "exponential:mean=60"})
    efm = build_policy(from_spark_conf(settings))
    assert isinstance(efm, EFMPolicy) and efm.pools.on_demand_pools == frozenset({"reserved"})
    pado = build_policy(from_spark_conf({"spark.trspark.mode": "pado"}))
    assert isinstance(pado, PadoPolicy)


# ---- AWS rebalance recommendation -------------------------------------------------------------


def test_aws_rebalance_recommendation_is_reported_once_and_is_no_notice(jvm: Jvm) -> None:
    from tests.jvm_gateway import wait_for

    with NoticeServer() as server:
        settings = jvm.trspark.NoticeSettings("aws", server.url + "/vm-{executorId}", 0.05, 30.0, "none")
        notices, rebalances = jvm.trspark.NoticeRecorder(), jvm.trspark.NoticeRecorder()
        watcher = jvm.trspark.NoticeWatcher(settings.forExecutor("1"), notices, rebalances)
        watcher.start()
        try:
            wait_for(lambda: watcher.polls() >= 3, what="three polls")
            assert rebalances.calls() == 0
            server.post_rebalance(vm="vm-2")  # another VM's recommendation
            polls = watcher.polls()
            every = jvm.trspark.NoticeWatcher.RebalanceEveryPolls()
            wait_for(lambda: watcher.polls() >= polls + 2 * every, what="two rebalance polls")
            assert rebalances.calls() == 0
            # The first poll asks for a recommendation, then every `every`-th (counts taken while polling).
            polled, asked = watcher.polls(), server.asked[AWS_REBALANCE_PATH]
            assert polled // every <= asked <= polled // every + 2, (polled, asked)
            since = server.post_rebalance(vm="vm-1")
            wait_for(lambda: rebalances.calls() == 1, what="the rebalance recommendation")
            polls = watcher.polls()
            wait_for(lambda: watcher.polls() >= polls + 2 * every, what="two more rebalance polls")
        finally:
            watcher.stop()
    assert rebalances.calls() == 1 and rebalances.source() == "aws-rebalance"
    assert rebalances.deadline() == int(since.timestamp() * 1000)
    assert notices.calls() == 0 and not watcher.hasFired()


def test_rebalance_event_round_trips_the_protocol() -> None:
    from trspark.engine.protocol import ExecutorRebalance, from_dict, to_dict

    event = ExecutorRebalance(12.5, "3", since=11.0)
    assert from_dict(to_dict(event)) == event
    assert from_dict({"type": "ExecutorRebalance", "time": 1.0, "executor_id": "0"}).since is None
