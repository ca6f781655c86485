"""The lifetime history store when the store fails half-way through writing a part."""

from __future__ import annotations

import uuid

import pytest
from fsspec.implementations.memory import MemoryFileSystem
from test_history import record_one_evicted_one_censored

from trspark.live.history import HistoryStore, is_part, read_part, store_fs


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
    url = f"memory://hist-{uuid.uuid4().hex}"
    record_one_evicted_one_censored(HistoryStore(url))
    assert failures
    # Every line written, not what a load gives: a load reads a duplicate once.
    fs, root = store_fs(url)
    written = [r for path in fs.find(root) if is_part(path) for r in read_part(fs, path)[0]]
    assert sorted((r.executor_id, r.observed) for r in written) == [("0", True), ("1", False)]
