"""The lifetime history's many small parts merged into one, with no record lost or counted twice."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from jvm_gateway import wait_for

from trspark.engine.settings import TRConfig
from trspark.live import history, history_compaction
from trspark.live.engine_process import event_observers
from trspark.live.history import HistoryStore, LifetimeRecord, is_part, store_fs
from trspark.live.history_compaction import COMPACTED_FOLDER, compact_pool


def _record(app: str, executor: int, pool: str = "spot") -> LifetimeRecord:
    return LifetimeRecord(pool=pool, app_id=app, executor_id=str(executor), duration=10.0 + executor, observed=True)


def _fill(url: str, apps: dict[str, int]) -> list[LifetimeRecord]:
    """One part per record, as the recorder writes one per loss: ``apps[name]`` parts for each application."""
    store, written = HistoryStore(url), []
    for app, parts in apps.items():
        for executor in range(parts):
            written.append(_record(app, executor))
            store.append([written[-1]])
    return written


def _parts(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if is_part(str(p)))


def test_a_record_found_in_two_parts_is_loaded_once(tmp_path: Path) -> None:
    store = HistoryStore(str(tmp_path))
    store.append([_record("a", 1), _record("a", 2)])
    store.append([_record("a", 1)])  # as a compaction cut short between its write and its deletes leaves it
    assert store.load("spot") == [_record("a", 1), _record("a", 2)]


def test_compaction_merges_the_other_applications_parts_and_leaves_the_running_ones(tmp_path: Path) -> None:
    written = _fill(str(tmp_path), {"a1": 30, "a2": 30, "me": 5})
    store = HistoryStore(str(tmp_path))
    assert compact_pool(store, "spot", "me", at_parts=60) == 60
    parts = _parts(tmp_path)
    assert [p.parent.name for p in parts] == [COMPACTED_FOLDER] + ["me"] * 5
    assert sorted(store.load("spot"), key=repr) == sorted(written, key=repr)
    # A second compaction finds too few parts; with a lower bar it merges the merged part again, alone.
    assert compact_pool(store, "spot", "me", at_parts=60) == 0
    assert compact_pool(store, "spot", "me", at_parts=1) == 1
    assert sorted(store.load("spot"), key=repr) == sorted(written, key=repr)


def test_a_load_while_a_compaction_deletes_its_parts_finds_every_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = _fill(str(tmp_path), {"a1": 10, "a2": 10})
    store, read_part = HistoryStore(str(tmp_path)), history.read_part
    calls = []

    def read_after_a_compaction(fs, path):  # type: ignore[no-untyped-def]
        calls.append(path)
        if len(calls) == 1:  # the listing is taken; every part it names goes now
            compact_pool(HistoryStore(str(tmp_path)), "spot", "none", at_parts=1)
        return read_part(fs, path)

    monkeypatch.setattr(history, "read_part", read_after_a_compaction)
    assert sorted(store.load("spot"), key=repr) == sorted(written, key=repr)


def test_two_compactions_at_once_lose_no_record_and_warn_of_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Two applications start together: the second compaction lists the parts, then the first
    # merges and deletes them before the second reads them.
    written = _fill(str(tmp_path), {"a1": 10, "a2": 10})
    read_part, calls = history.read_part, []

    def read_after_another_compaction(fs, path):  # type: ignore[no-untyped-def]
        calls.append(path)
        if len(calls) == 1:
            monkeypatch.setattr(history, "read_part", read_part)
            assert compact_pool(HistoryStore(str(tmp_path)), "spot", "x", at_parts=1) == 20
        return read_part(fs, path)

    monkeypatch.setattr(history, "read_part", read_after_another_compaction)
    with caplog.at_level(logging.INFO, logger="trspark.live.history"):
        history_compaction.compact_history(HistoryStore(str(tmp_path)), "y", at_parts=1)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert sorted(HistoryStore(str(tmp_path)).load("spot"), key=repr) == sorted(written, key=repr)
    assert [p.parent.name for p in _parts(tmp_path)] == [COMPACTED_FOLDER]


def test_the_engine_compacts_the_history_when_it_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written = _fill(str(tmp_path), {"a1": 12, "app-7": 2})
    monkeypatch.setattr(history_compaction, "COMPACT_AT_PARTS", 10)
    event_observers(TRConfig(history_url=str(tmp_path), pool="spot"), "app-7")
    wait_for(lambda: len(_parts(tmp_path)) == 3, what="the 12 parts of a1 merged into one", timeout=30)
    assert sorted(HistoryStore(str(tmp_path)).load("spot"), key=repr) == sorted(written, key=repr)


@pytest.mark.azurite
def test_compaction_on_azurite(azurite: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from azure.storage.blob import BlobServiceClient

    BlobServiceClient.from_connection_string(azurite).create_container("compact")
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite)
    url = "abfs://compact/trspark"
    written = _fill(url, {"a1": 6, "me": 2})
    assert compact_pool(HistoryStore(url), "spot", "me", at_parts=5) == 6
    fs, root = store_fs(url)
    assert sorted(p.split("/")[-2] for p in fs.find(root) if is_part(p)) == [COMPACTED_FOLDER, "me", "me"]
    assert sorted(HistoryStore(url).load("spot"), key=repr) == sorted(written, key=repr)
