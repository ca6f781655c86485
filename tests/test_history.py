"""Lifetime history: records survive, unreachable stores degrade, fits follow the documented rule."""

from __future__ import annotations

import json
import logging
import re
import threading
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from trspark.live.history import (
    HistoryError,
    HistoryStore,
    LifetimeRecord,
    check_url,
    fit_lifetime,
)
from trspark.live.recorder import LifetimeRecorder

TRUE_SHAPE, TRUE_SCALE = 1.5, 600.0
TRUE_MEAN = float(stats.weibull_min(TRUE_SHAPE, scale=TRUE_SCALE).mean())


def _weibull_records(n: int, seed: int, *, app: str = "app-1", horizon: float = 900.0) -> list[LifetimeRecord]:
    """n executors with Weibull lifetimes; those alive at `horizon` are right-censored there."""
    rng = np.random.default_rng(seed)
    life = stats.weibull_min(TRUE_SHAPE, scale=TRUE_SCALE).rvs(n, random_state=rng)
    return [
        LifetimeRecord("pool-a", app, str(i), float(min(x, horizon)), bool(x < horizon)) for i, x in enumerate(life)
    ]


def test_store_roundtrip_local(tmp_path):
    store = HistoryStore(str(tmp_path / "hist"))
    recs = _weibull_records(10, seed=1)
    store.append(recs[:4])
    store.append(recs[4:])
    assert sorted(store.load("pool-a"), key=lambda r: int(r.executor_id)) == recs
    assert store.load("other-pool") == []


def record_one_evicted_one_censored(store: HistoryStore) -> None:
    """Application ``a`` of pool ``p``: executor 0 evicted at 30 s, executor 1 (from 5 s) alive at its end, 100 s."""
    rec = LifetimeRecorder(store, pool="p", app_id="a")
    rec.executor_added("0", 0.0)
    rec.executor_added("1", 5.0)
    rec.executor_lost("0", 30.0, evicted=True)
    rec.finish(100.0)


def test_recorder_censors_survivors_at_finish(tmp_path):
    store = HistoryStore(f"file://{tmp_path}/h")
    record_one_evicted_one_censored(store)
    got = {r.executor_id: (r.duration, r.observed) for r in store.load("p")}
    assert got == {"0": (30.0, True), "1": (95.0, False)}


def test_unreachable_store_keeps_records_and_warns_once(tmp_path, caplog):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the store's folder should be")
    store = HistoryStore(str(blocker / "hist"))
    rec = LifetimeRecorder(store, pool="p", app_id="a")
    with caplog.at_level(logging.WARNING, logger="trspark.live.history"):
        for i in range(3):
            rec.executor_added(str(i), 0.0)
            rec.executor_lost(str(i), 10.0 + i, evicted=True)
    assert len(rec.pending) == 3 and rec.written == 0
    assert sum("unreachable" in m for m in caplog.messages) == 1
    # The store comes back: everything pending is written, nothing lost.
    blocker.unlink()
    assert rec.flush()
    assert len(store.load("p")) == 3


def test_check_url_fails_fast_naming_the_key(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(HistoryError, match=r"spark\.trspark\.history\.url"):
        check_url(str(blocker / "sub"))


def test_fit_rule_configured_weibull_km():
    few = _weibull_records(4, seed=2, horizon=1e9)
    assert fit_lifetime(few, "exponential:mean=100").method == "configured"
    some = _weibull_records(20, seed=3)
    assert fit_lifetime(some, "exponential:mean=100").method == "weibull"
    many = _weibull_records(200, seed=4)
    assert fit_lifetime(many, "exponential:mean=100").method == "kaplan-meier"


@pytest.mark.parametrize("n", [20, 200])
def test_fitted_mean_within_20_percent(n):
    fit = fit_lifetime(_weibull_records(n, seed=5 + n), "exponential:mean=100")
    assert abs(fit.model.mean() - TRUE_MEAN) / TRUE_MEAN < 0.20, (fit.method, fit.model.mean(), TRUE_MEAN)


@pytest.mark.azurite
def test_store_on_azurite(azurite, monkeypatch):
    from azure.storage.blob import BlobServiceClient

    BlobServiceClient.from_connection_string(azurite).create_container("history")
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite)
    url = "abfs://history/trspark"
    check_url(url)
    store = HistoryStore(url)
    recs = _weibull_records(40, seed=7)
    store.append(recs[:20])
    store.append(recs[20:])
    loaded = store.load("pool-a")
    assert sorted(loaded, key=lambda r: int(r.executor_id)) == recs
    fit = fit_lifetime(loaded, "exponential:mean=100")
    assert fit.method == "kaplan-meier"
    assert abs(fit.model.mean() - TRUE_MEAN) / TRUE_MEAN < 0.20


def test_observer_records_evicted_and_censored_from_engine_events(tmp_path):
    from trspark.engine.events import ExecutorAdded, ExecutorLost, TaskStarted
    from trspark.live.history import prior_from_history
    from trspark.live.recorder import HistoryObserver

    store = HistoryStore(str(tmp_path))
    obs = HistoryObserver(LifetimeRecorder(store, pool="p", app_id="app-1"))
    obs(ExecutorAdded(0.0, "0"))
    obs(ExecutorAdded(2.0, "1", vm_started=1.0))
    obs(ExecutorAdded(3.0, "2"))
    obs(ExecutorLost(40.0, "0", reason="evicted"))
    obs(ExecutorLost(41.0, "2", reason="app"))  # not an eviction: censored
    obs(TaskStarted(90.0, 0, 0, "1"))
    obs.close()
    got = {r.executor_id: (r.duration, r.observed) for r in store.load("p")}
    assert got == {"0": (40.0, True), "1": (89.0, False), "2": (38.0, False)}
    spec, account, reachable = prior_from_history(str(tmp_path), "p", "exponential:mean=100")
    assert spec.startswith("exponential") and "configured" in account and reachable  # 1 eviction < 5: keep configured


def test_observer_counts_a_noticed_executor_evicted_at_its_deadline_unless_it_outlived_the_notice(tmp_path):
    from trspark.engine.events import ExecutorAdded, ExecutorLost, ExecutorNotice
    from trspark.live.recorder import HistoryObserver

    store = HistoryStore(str(tmp_path))
    obs = HistoryObserver(LifetimeRecorder(store, pool="p", app_id="app-1"))
    for executor_id in ("0", "1"):
        obs(ExecutorAdded(0.0, executor_id))
        obs(ExecutorNotice(10.0, executor_id, deadline=40.0))  # 30 s ahead: withdrawn from 70 s on
    obs(ExecutorLost(20.0, "0", reason="released"))  # let go early: evicted at its deadline
    obs(ExecutorLost(75.0, "1", reason="removed"))  # outlived its notice: removed, censored
    obs.close()
    assert {r.executor_id: (r.duration, r.observed) for r in store.load("p")} == {"0": (40.0, True), "1": (75.0, False)}


def test_prior_from_history_fits_once_enough_evictions(tmp_path):
    from trspark.live.history import prior_from_history

    HistoryStore(str(tmp_path)).append(_weibull_records(20, seed=11))
    spec, account, _ = prior_from_history(str(tmp_path), "pool-a", "exponential:mean=100")
    assert spec.startswith("weibull:") and "weibull" in account


def test_spark_conf_refuses_unreachable_history_url_before_start(tmp_path):
    from trspark.keys import ConfigError
    from trspark.live.config import option_settings

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match=r"spark\.trspark\.history\.url"):
        option_settings(history_url=str(blocker / "h"))
    assert option_settings(history_url=str(tmp_path / "ok"))["spark.trspark.history.url"] == str(tmp_path / "ok")


def test_engine_starts_from_history_prior_and_records_lifetimes(tmp_path):
    """The engine process's hooks: prior fitted from history, lifetimes appended at session end."""
    from trspark.engine.events import ExecutorAdded, ExecutorLost
    from trspark.engine.settings import TRConfig
    from trspark.live.engine_process import event_observers, with_history_prior

    url = str(tmp_path / "hist")
    HistoryStore(url).append(_weibull_records(20, seed=13))
    config = TRConfig(history_url=url, pool="pool-a")
    assert with_history_prior(config).lifetime.startswith("weibull:")
    observers = event_observers(config, "app-9")
    for observe in observers:
        observe(ExecutorAdded(0.0, "7"))
        observe(ExecutorLost(12.5, "7", reason="evicted"))
        observe(ExecutorAdded(1.0, "8"))
        observe(ExecutorAdded(1.0, "8"))
    for observer in observers:
        observer.close()  # type: ignore[attr-defined]
    mine = {r.executor_id: (r.duration, r.observed) for r in HistoryStore(url).load("pool-a") if r.app_id == "app-9"}
    assert mine == {"7": (12.5, True), "8": (11.5, False)}  # 8 censored at the last event time


def test_each_executor_is_recorded_and_fitted_in_its_own_pool(tmp_path):
    from trspark.engine.protocol import ExecutorAdded, ExecutorLost
    from trspark.engine.settings import TRConfig
    from trspark.live.engine_process import event_observers, with_history_prior

    url = str(tmp_path / "hist")
    HistoryStore(url).append(_weibull_records(20, seed=17))  # pool-a's earlier applications
    config = TRConfig(history_url=url, pool="pool-b",
                      pool_lifetimes=(("ondemand", "stable"), ("pool-a", "exponential:mean=100")))
    fitted = with_history_prior(config)
    assert fitted.lifetime.startswith("exponential:")  # pool-b has no history yet: as configured
    assert fitted.pool_lifetimes[0] == ("ondemand", "stable") and fitted.pool_lifetimes[1][1].startswith("weibull:")
    (observer,) = event_observers(config, "app-3")
    observer(ExecutorAdded(0.0, "0", pool="pool-b"))
    observer(ExecutorAdded(0.5, "0", pool="ondemand"))  # the executor named its pool after registering
    observer(ExecutorAdded(1.0, "1", pool="pool-a"))
    observer(ExecutorAdded(1.0, "2"))  # no pool named: the configured one
    observer(ExecutorLost(9.0, "1", reason="evicted"))
    observer.close()  # type: ignore[attr-defined]
    store = HistoryStore(url)
    assert [(r.executor_id, r.duration) for r in store.load("ondemand")] == [("0", 9.0)]
    assert [(r.executor_id, r.observed) for r in store.load("pool-a") if r.app_id == "app-3"] == [("1", True)]
    assert [r.executor_id for r in store.load("pool-b")] == ["2"]


def test_a_pool_the_executors_reported_gets_its_own_model_once_its_history_supports_one(tmp_path):
    # Executors named pools no setting names (TRSPARK_POOL, instance metadata): "spot" was evicted
    # often enough to fit, "ondemand" never; the configured pool "pool-b" has no history.
    from dataclasses import replace

    from trspark.engine.settings import TRConfig
    from trspark.live.engine_process import with_history_prior

    url = str(tmp_path / "hist")
    store = HistoryStore(url)
    store.append([replace(r, pool="spot") for r in _weibull_records(20, seed=19)])
    store.append([LifetimeRecord("ondemand", "app-1", str(i), 900.0, False) for i in range(6)])
    config = TRConfig(history_url=url, pool="pool-b", lifetime="exponential:mean=100")
    fitted = with_history_prior(config)
    assert fitted.lifetime.startswith("exponential:mean=100")  # pool-b: no history, as configured
    assert [pool for pool, _ in fitted.pool_lifetimes] == ["spot"]
    assert fitted.pool_lifetimes[0][1].startswith("weibull:")
    # A pool with a setting of its own is fitted once, as configured, and never twice.
    configured = with_history_prior(replace(config, pool_lifetimes=(("spot", "stable"),)))
    assert configured.pool_lifetimes == (("spot", "stable"),)


BAD_CONFIGS = [
    ({"lifetime": "bogus"}, "spark.trspark.lifetime='bogus' is not valid", "allowed: stable (never evicted) or a lifetime spec"),
    ({"gamma": "-1"}, "spark.trspark.gamma='-1' is not valid", "allowed: a number > 0"),
    ({"history_url": "file:///proc/trspark-history"}, "spark.trspark.history.url='file:///proc/trspark-history' is not reachable",
     "allowed: an fsspec URL"),
]


@pytest.mark.parametrize(("options", "message", "allowed"), BAD_CONFIGS)
def test_bad_config_fails_before_spark_starts_through_spark_conf_and_configure(options, message, allowed):
    """Each bad setting fails in ``trspark.spark_conf`` and ``trspark.configure`` (no builder is touched)."""
    import trspark
    from trspark.keys import ConfigError

    settings: dict[str, str] = {}
    for apply in (trspark.spark_conf, lambda **o: trspark.configure(settings, **o)):
        with pytest.raises(ConfigError) as failure:
            apply(**options)
        assert message in str(failure.value) and allowed in str(failure.value)
        assert "\n" not in str(failure.value)
    assert settings == {}  # configure() failed before writing anything


def test_checking_a_local_history_url_makes_no_folder_and_refuses_one_that_cannot_be_made(tmp_path: Path) -> None:
    import trspark
    from trspark.keys import ConfigError

    trspark.spark_conf(history_url=str(tmp_path / "a" / "b"))
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is not reachable: NotADirectoryError: .*/file' is not a folder"):
        trspark.spark_conf(history_url=str(tmp_path / "file" / "h"))


def test_unreachable_history_at_run_time_degrades_to_the_configured_model(tmp_path, caplog):
    from trspark.engine.settings import TRConfig
    from trspark.live.engine_process import with_history_prior

    url = str(tmp_path / "hist")
    HistoryStore(url).append(_weibull_records(20, seed=17))
    config = TRConfig(history_url=url, pool="pool-a", lifetime="exponential:mean=100")
    assert with_history_prior(config).lifetime.startswith("weibull:")
    # The store becomes unreachable after start-up validation: the engine keeps the configured model.
    (tmp_path / "hist").rename(tmp_path / "away")
    (tmp_path / "hist").write_text("a file where the store's folder should be")
    with caplog.at_level(logging.WARNING, logger="trspark.live.engine_process"):
        assert with_history_prior(config).lifetime == "exponential:mean=100"
    assert any("unreachable" in m and m.endswith("using exponential:mean=100") for m in caplog.messages)
    # What was written before is still there once the store is back.
    (tmp_path / "hist").unlink()
    (tmp_path / "away").rename(tmp_path / "hist")
    assert len(HistoryStore(url).load("pool-a")) == 20


class HungStore:
    """A store whose writes wait until released, recording the thread each one ran on."""

    url = "hung://store"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.threads: list[threading.Thread] = []
        self.records: list[LifetimeRecord] = []

    def append(self, records: list[LifetimeRecord]) -> None:
        self.threads.append(threading.current_thread())
        self.release.wait(timeout=30.0)
        self.records.extend(records)


def test_a_hung_store_never_holds_up_the_engine_and_gets_every_record_in_the_end() -> None:
    from trspark.engine.events import ExecutorAdded, ExecutorLost
    from trspark.live.recorder import HistoryObserver

    store = HungStore()
    observer = HistoryObserver(LifetimeRecorder(store, pool="p", app_id="a", background=True))  # type: ignore[arg-type]
    for i in range(3):
        observer(ExecutorAdded(0.0, str(i)))
    observer(ExecutorLost(10.0, "0", reason="evicted"))
    observer(ExecutorLost(11.0, "1", reason="evicted"))  # while the first write still hangs
    assert threading.current_thread() not in store.threads  # the engine's thread never wrote
    store.release.set()
    observer.close()  # censors "2" and waits for the writer to write it all
    assert sorted((r.executor_id, r.observed) for r in store.records) == [("0", True), ("1", True), ("2", False)]
    assert threading.current_thread() not in store.threads and not observer.recorder.pending


def test_a_store_that_never_answers_delays_the_end_only_within_the_plugins_grace(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from trspark.engine.events import ExecutorAdded
    from trspark.live import recorder
    from trspark.live.recorder import HistoryObserver

    # The plugin stops an engine that has not ended StopGraceS seconds after the socket closed.
    scala = (Path(__file__).parents[1] / "jvm-shim/src/main/scala/org/apache/spark/trspark/EngineBridge.scala").read_text()
    grace = float(re.search(r"val StopGraceS = (\d+)L", scala).group(1))  # type: ignore[union-attr]
    assert grace > recorder.FINISH_WAIT_SECONDS
    monkeypatch.setattr(recorder, "FINISH_WAIT_SECONDS", 0.2)
    store = HungStore()
    observer = HistoryObserver(LifetimeRecorder(store, pool="p", app_id="a", background=True))  # type: ignore[arg-type]
    observer(ExecutorAdded(0.0, "1"))
    with caplog.at_level(logging.WARNING):
        observer.close()  # the store hangs: the wait ends, the record is counted as not written
    store.release.set()
    assert any("gave no answer within 0.2 s; 1 record(s) not written" in m for m in caplog.messages)


@pytest.mark.parametrize("background", [False, True])
def test_records_a_failing_store_did_not_take_at_the_end_are_counted_in_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, background: bool) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the store's folder should be")
    recorder = LifetimeRecorder(HistoryStore(str(blocker / "hist")), pool="p", app_id="a", background=background)
    for i in range(2):
        recorder.executor_added(str(i), 0.0)
    recorder.executor_lost("0", 5.0, evicted=True)
    with caplog.at_level(logging.WARNING, logger="trspark.live.history"):
        recorder.finish(10.0)  # the store refuses again: the censored "1" and the lost "0" go unwritten
    assert any("did not take the application's last 2 record(s)" in m for m in caplog.messages)


def test_a_damaged_or_newer_record_is_skipped_or_read_and_the_rest_of_the_pool_kept(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = HistoryStore(str(tmp_path / "hist"))
    store.append([LifetimeRecord("p", "a", str(i), 10.0 + i, True) for i in range(3)])
    newer = {"pool": "p", "app_id": "b", "executor_id": "9", "duration": 7.5, "observed": False, "host": "h1"}
    bad = ['{"pool": "p"', '{"pool": "p", "app_id": "b", "executor_id": "8", "duration": -1, "observed": true}', "[1]"]
    (tmp_path / "hist" / "p" / "b").mkdir()
    part = "\n".join([json.dumps(newer), *bad]).encode() + b"\n\xff\xfe not UTF-8\n"
    (tmp_path / "hist" / "p" / "b" / "part-000001-x.jsonl").write_bytes(part)
    with caplog.at_level(logging.WARNING, logger="trspark.live.history"):
        records = store.load("p")
    assert sorted(r.executor_id for r in records) == ["0", "1", "2", "9"]
    assert any("4 record(s) of pool 'p' unreadable, skipped" in m for m in caplog.messages)


def test_an_unreachable_store_is_read_and_warned_about_once_however_many_pools(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from trspark.engine.settings import TRConfig
    from trspark.live.engine_process import with_history_prior

    (tmp_path / "hist").write_text("a file where the store's folder should be")
    config = TRConfig(history_url=str(tmp_path / "hist"), lifetime="exponential:mean=100",
                      pool_lifetimes=(("spot", "exponential:mean=600"), ("spot2", "exponential:mean=900")))
    with caplog.at_level(logging.WARNING, logger="trspark.live.engine_process"):
        assert with_history_prior(config) == config
    assert sum("unreachable" in m for m in caplog.messages) == 1


def test_a_pool_whose_name_says_unreachable_keeps_the_fits_of_a_store_that_answered(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from trspark.engine.settings import TRConfig
    from trspark.live.engine_process import with_history_prior

    url = str(tmp_path / "hist")
    HistoryStore(url).append(_weibull_records(20, seed=13))
    HistoryStore(url).append([LifetimeRecord("zone-unreachable-b", "app-2", str(i), 50.0, False) for i in range(2)])
    with caplog.at_level(logging.WARNING, logger="trspark.live.engine_process"):
        assert with_history_prior(TRConfig(history_url=url, pool="pool-a")).lifetime.startswith("weibull:")
    assert not caplog.messages


def test_a_stable_shared_lifetime_is_kept_whatever_the_pools_history(tmp_path: Path) -> None:
    from trspark.engine.settings import TRConfig
    from trspark.live.engine_process import with_history_prior

    url = str(tmp_path / "hist")
    HistoryStore(url).append(_weibull_records(20, seed=13))
    assert with_history_prior(TRConfig(history_url=url, pool="pool-a", lifetime="stable")).lifetime == "stable"
    assert with_history_prior(TRConfig(history_url=url, pool="pool-a")).lifetime.startswith("weibull:")


def test_a_history_no_model_fits_leaves_the_configured_model_and_the_engine_starts(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from trspark.engine.settings import TRConfig
    from trspark.live.config import build_policy
    from trspark.live.engine_process import with_history_prior

    url = str(tmp_path / "hist")
    # Valid records each (finite, >= 0), but the Weibull fit's scale overflows: no model to build.
    damaged = [LifetimeRecord(pool, "a", str(i), 1e308 if i == 0 else 0.0, True) for pool in ("p", "q") for i in range(5)]
    HistoryStore(url).append([r for r in damaged if r.pool == "p"])
    HistoryStore(url).append([r for r in damaged if r.pool == "q"])
    config = TRConfig(history_url=url, pool="p", lifetime="exponential:mean=100")
    with caplog.at_level(logging.WARNING, logger="trspark.live"):
        started = with_history_prior(config)
    assert started.lifetime == "exponential:mean=100" and started.pool_lifetimes == ()
    build_policy(started)
    assert sum("cannot be fitted" in m for m in caplog.messages) == 2
