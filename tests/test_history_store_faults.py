"""The lifetime history store when the store fails half-way through writing a part."""

from __future__ import annotations

import uuid

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from trspark.live.history import HistoryStore
from trspark.live.recorder import LifetimeRecorder


def test_a_part_whose_temporary_copy_could_not_be_deleted_is_written_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """An object store moves a part by copying it, then deleting the temporary one: when only the
    delete fails, the part is in place and its records must not be written a second time."""
    rm, failures = MemoryFileSystem.rm, []

    def rm_failing_once(self: MemoryFileSystem, path: str, *args: object, **kwargs: object) -> None:
        if "_tmp-" in str(path) and not failures:
            failures.append(path)
            raise OSError("the store did not answer")
        rm(self, path, *args, **kwargs)

    monkeypatch.setattr(MemoryFileSystem, "rm", rm_failing_once)
    store = HistoryStore(f"memory://hist-{uuid.uuid4().hex}")
    recorder = LifetimeRecorder(store, pool="p", app_id="a")
    recorder.executor_added("1", 0.0)
    recorder.executor_added("2", 0.0)
    recorder.executor_lost("1", 5.0, evicted=True)
    recorder.finish(10.0)
    assert failures
    assert sorted((r.executor_id, r.observed) for r in store.load("p")) == [("1", True), ("2", False)]
