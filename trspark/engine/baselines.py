"""Baseline policies: ``never`` (vanilla Spark) and ``always`` (every map output to remote).

``stage`` and ``interval`` live beside them once written; the TR-Spark policy is in ``tr``.
"""

from __future__ import annotations

from collections.abc import Sequence

from trspark.engine.policy import Policy
from trspark.engine.protocol import REMOTE, Backup, Command, Event, TaskEnded


class NeverPolicy(Policy):
    """Vanilla Spark: no backups; lost map outputs are recomputed by Spark's lineage."""

    name = "never"

    def handle(self, event: Event) -> Sequence[Command]:
        return ()


class AlwaysPolicy(Policy):
    """Always-checkpoint: back up every successful map output to remote storage as soon as it exists."""

    name = "always"

    def __init__(self) -> None:
        self.backups = 0

    def handle(self, event: Event) -> Sequence[Command]:
        if isinstance(event, TaskEnded) and event.successful and event.shuffle_id is not None:
            self.backups += 1
            return (
                Backup(
                    shuffle_id=event.shuffle_id,
                    map_index=event.partition,
                    source=event.executor_id,
                    target=REMOTE,
                    bytes=event.shuffle_write_bytes,
                    map_id=event.map_id,
                ),
            )
        return ()

    def summary(self) -> dict[str, object]:
        return {"backups_planned": self.backups}
