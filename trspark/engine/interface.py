"""What a policy is: something that turns engine events into commands.

Every policy (the baselines ``never`` / ``always`` / ``stage`` / ``interval``, TR-Spark, and the
simulator-only ``oracle``) implements :class:`Policy`. Drivers call :meth:`Policy.handle` once per
event, in time order, and apply the returned commands in list order.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from trspark.engine.commands import Command
from trspark.engine.events import Event


class Policy(ABC):
    #: Registry name (``spark.trspark.mode`` / ``--policy``).
    name: str = ""

    @abstractmethod
    def handle(self, event: Event) -> Sequence[Command]:
        """React to one event; return the commands to apply now (possibly none)."""

    def wants(self, event_type: type) -> bool:
        """Does this policy need events of ``event_type``? (default: all of them)

        A driver may skip building events a policy declares it does not need; the simulator
        uses this to stay fast for policies that ignore per-task events (e.g. ``never``).
        """
        return True

    def summary(self) -> dict[str, object]:
        """Counters worth reporting at the end of a run (backups planned, safety belt, ...)."""
        return {}

    def prepare(self) -> None:
        """Do the one-time work the first decisions would otherwise pay for (default: none).

        A long-lived driver may call it once, from another thread, before the events come;
        it must not touch the policy's state.
        """
        return None
