"""``BackupFailed.source`` / ``source_missing``: the engine forgets a copy only when told it is gone."""

from __future__ import annotations

import pytest
from engine_world import MB, add_executors, feed, map_stage, run_task

from trspark.engine.commands import Backup
from trspark.engine.events import REMOTE, BackupFailed, Tick
from trspark.engine.protocol import from_json, to_json
from trspark.engine.registry import make_policy
from trspark.engine.settings import TRConfig


def retry_after_failure(failure: BackupFailed) -> list[tuple[str, str]]:
    """Backups the TR engine releases on the next tick after ``failure`` of its first backup."""
    config = TRConfig(lifetime="exponential:mean=10", targets="remote", duplication=False, scheduling=False)
    policy = make_policy("tr", config)
    events = add_executors(["a", "b"], cores=1) + [map_stage(0, 1, 0), map_stage(1, 1, None, parents=[0], parent_shuffles=[0])]
    events += run_task(0, 0, "a", start=0.0, seconds=20.0, write=10 * MB, shuffle_id=0)
    first = [c for c in feed(policy, events) if isinstance(c, Backup)]
    assert [(b.source, b.target) for b in first] == [("a", REMOTE)]
    feed(policy, [failure])
    return [(b.source, b.target) for b in feed(policy, [Tick(time=21.0)]) if isinstance(b, Backup)]


@pytest.mark.parametrize(
    ("source", "missing", "reason", "retried"),
    [
        ("a", True, "java.io.FileNotFoundException: no map output file", []),  # the copy on a is gone
        ("a", False, "remote copy failed verification", [("a", REMOTE)]),  # a still holds it: try again
        ("a", False, "source does not hold the block", [("a", REMOTE)]),  # the field wins over the words
        ("b", True, "no map output file", [("a", REMOTE)]),  # not the source of the released backup
        ("", False, "source does not hold the block", []),  # a driver naming no source (the simulator)
    ],
)
def test_failed_backup_forgets_the_source_copy_only_when_it_is_missing(
    source: str, missing: bool, reason: str, retried: list[tuple[str, str]]
) -> None:
    failure = BackupFailed(time=20.3, shuffle_id=0, map_index=0, target=REMOTE, reason=reason, source=source,
                           source_missing=missing)
    assert retry_after_failure(failure) == retried


def test_backup_failed_round_trips_with_and_without_the_new_fields() -> None:
    full = BackupFailed(time=1.0, shuffle_id=2, map_index=3, target="7", reason="x", source="4", source_missing=True)
    assert from_json(to_json(full)) == full
    legacy = from_json('{"type":"BackupFailed","time":1.0,"shuffle_id":2,"map_index":3,"target":"remote"}')
    assert legacy == BackupFailed(time=1.0, shuffle_id=2, map_index=3, target=REMOTE)
