"""Driver <-> executor messages of the shim (``Wire``): peer-copy deletes and checks, "source
missing", a copy rejected by its writer, and the stamp of a remote copy its writer read back travel."""

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


TASK = {"shuffle": 3, "index": 1, "map": 17, "target": "remote", "host": "", "port": 0, "throttle": 0.0, "id": 42}


CHECK = {"shuffle": 2, "map": 7, "indexCrc": 4294967295, "dataCrc": 12345}


def test_work_carries_peer_copies_to_delete_and_to_check(jvm: Jvm) -> None:
    work = {"type": "work", "tasks": [TASK], "cancelled": [{"shuffle": 3, "map": 9}],
            "deletes": [{"shuffle": 2, "map": 5}, {"shuffle": 2, "map": 6}], "checks": [CHECK], "quiet": False}
    assert round_trip(jvm, work) == work


def test_work_says_when_the_application_is_quiet(jvm: Jvm) -> None:
    quiet = {"type": "work", "tasks": [], "cancelled": [], "deletes": [], "checks": [], "quiet": True}
    assert round_trip(jvm, quiet) == quiet


def test_work_from_an_older_driver_has_no_deletes_nor_checks_and_is_not_quiet(jvm: Jvm) -> None:
    old = {"type": "work", "tasks": [], "cancelled": []}
    assert round_trip(jvm, old) == dict(old, deletes=[], checks=[], quiet=False)


@pytest.mark.parametrize("problem", ["", "corrupt"])
def test_a_peer_check_outcome_travels(jvm: Jvm, problem: str) -> None:
    checked = {"type": "checked", "executor": "4", "problem": problem, "check": CHECK}
    assert round_trip(jvm, checked) == checked


@pytest.mark.parametrize(("missing", "rejected"), [(True, False), (False, False), (False, True)])
def test_failed_backup_says_whether_the_source_lost_the_output_or_the_copy_was_rejected(
        jvm: Jvm, missing: bool, rejected: bool) -> None:
    failed = {"type": "failed", "executor": "2", "reason": "java.io.FileNotFoundException: x", "missing": missing,
              "rejected": rejected, "task": TASK}
    assert round_trip(jvm, failed) == failed
    legacy = {k: v for k, v in failed.items() if k not in ("missing", "rejected")}
    assert round_trip(jvm, legacy)["missing"] is False
    assert round_trip(jvm, legacy)["rejected"] is False


def test_a_remote_copy_read_back_by_its_writer_carries_the_stamp_it_was_read_at(jvm: Jvm) -> None:
    done = {"type": "done", "executor": "1", "bytes": 2048, "seconds": 0.5, "indexCrc": 1, "dataCrc": 4294967295,
            "task": TASK}
    assert round_trip(jvm, done) == done  # a peer copy: its peer checks it later
    read_back = dict(done, stampLength=2000, stampModified=1764800000123)
    assert round_trip(jvm, read_back) == read_back


def test_a_task_without_an_id_reads_as_id_0(jvm: Jvm) -> None:
    old = {k: v for k, v in TASK.items() if k != "id"}
    work = {"type": "work", "tasks": [old], "cancelled": [], "deletes": [], "checks": []}
    assert round_trip(jvm, work)["tasks"] == [dict(old, id=0)]


# ---------------------------------------------------------------------------------------------
# Engine -> driver: SchedulingHints (trspark/engine/commands.py, Messages.scala)
# ---------------------------------------------------------------------------------------------


def test_scheduling_hints_survive_the_python_wire() -> None:
    from trspark.engine.commands import SchedulingHints
    from trspark.engine.protocol import from_json, to_json

    hints = SchedulingHints(stage_order=(4, 2), forbidden={2: ("1", "3")}, fallback={4: ("7",)}, drain=("9",))
    line = to_json(hints)
    assert json.loads(line)["forbidden"] == {"2": ["1", "3"]}  # stage ids travel as JSON object keys
    assert from_json(line) == hints
    assert from_json('{"type":"SchedulingHints"}') == SchedulingHints()


def test_scheduling_hints_parse_in_scala_as_sent(jvm: Jvm) -> None:
    """Every field of the engine's line reaches the shim: executor sets per stage and the drain."""
    import random

    from trspark.engine.commands import SchedulingHints
    from trspark.engine.protocol import to_json

    rng = random.Random(3)
    executors = [str(i) for i in range(8)]
    for _ in range(50):
        def by_stage() -> dict[int, tuple[str, ...]]:
            return {s: tuple(sorted(rng.sample(executors, rng.randint(1, 4)))) for s in rng.sample(range(20), rng.randint(0, 5))}

        hints = SchedulingHints(stage_order=tuple(rng.sample(range(20), rng.randint(0, 5))), forbidden=by_stage(),
                                fallback=by_stage(), drain=tuple(rng.sample(executors, rng.randint(0, 2))))
        scala = jvm.trspark.SchedulingHints.parse(to_json(hints))

        def sets(m: object) -> dict[int, tuple[str, ...]]:
            keys = list(m.keys().toList().mkString(",").split(",")) if not m.isEmpty() else []  # type: ignore[attr-defined]
            return {int(k): tuple(sorted(m.apply(int(k)).mkString(",").split(","))) for k in keys}  # type: ignore[attr-defined]

        assert [int(s) for s in scala.stageOrder().mkString(",").split(",") if s] == list(hints.stage_order)
        assert sets(scala.forbidden()) == hints.forbidden
        assert sets(scala.fallback()) == hints.fallback
        assert sorted(s for s in scala.drain().mkString(",").split(",") if s) == sorted(hints.drain)
