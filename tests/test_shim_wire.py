"""Driver <-> executor messages of the shim (``Wire``): peer-copy deletes and "source missing" travel."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.jvm_gateway import Jvm, plain_jvm


@pytest.fixture(scope="module")
def jvm() -> Iterator[Jvm]:
    with plain_jvm() as j:
        yield j


def round_trip(jvm: Jvm, message: dict[str, object]) -> dict[str, object]:
    wire = jvm.trspark.Wire
    return json.loads(wire.encode(wire.decode(json.dumps(message))))  # type: ignore[no-any-return]


TASK = {"shuffle": 3, "index": 1, "map": 17, "target": "remote", "host": "", "port": 0, "throttle": 0.0}


def test_work_carries_peer_copies_to_delete(jvm: Jvm) -> None:
    work = {"type": "work", "tasks": [TASK], "cancelled": [{"shuffle": 3, "map": 9}],
            "deletes": [{"shuffle": 2, "map": 5}, {"shuffle": 2, "map": 6}]}
    assert round_trip(jvm, work) == work


def test_work_from_an_older_driver_has_no_deletes(jvm: Jvm) -> None:
    old = {"type": "work", "tasks": [], "cancelled": []}
    assert round_trip(jvm, old) == dict(old, deletes=[])


@pytest.mark.parametrize("missing", [True, False])
def test_failed_backup_says_whether_the_source_lost_the_output(jvm: Jvm, missing: bool) -> None:
    failed = {"type": "failed", "executor": "2", "reason": "java.io.FileNotFoundException: x", "missing": missing,
              "task": TASK}
    assert round_trip(jvm, failed) == failed
    legacy = {k: v for k, v in failed.items() if k != "missing"}
    assert round_trip(jvm, legacy)["missing"] is False
