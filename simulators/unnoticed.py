"""The simulator-only ``tr-without-notices``: ``tr`` deaf to termination notices, on the same worlds.

A world with ``--notice N`` announces each death ``N`` seconds ahead; a world without it does
not, and otherwise the two are the same world (the same VMs die at the same times). Running
``tr`` once in each gives two sweeps whose runs pair only by seed, so the paired statistics of
one sweep (``tr_ratio``, :mod:`simulators.sweep`) cannot compare them. This policy is ``tr``
that never hears a termination notice: in a noticed world it behaves as ``tr`` does without
notices, so one sweep with ``--notice`` gives ``tr`` with and without notices side by side on
the very same worlds, and each row's paired ratio to ``tr`` is what notices gained.

Only notices (``ExecutorNotice`` of kind ``"notice"``) are withheld; a lifetime known from the
start (kind ``"lifetime"``, the exact-knowledge world) still reaches the policy. One trace of the
notices stays: the simulator places pending tasks at every instant something happens, and a
notice's instant is one, so a placement rule that relaxes with time (a stage kept off spot
executors for a while) may place a task at that instant where, without notices, it waits for
the next event (the pools report sets the two side by side where both sweeps ran as many runs).
"""

from __future__ import annotations

from collections.abc import Sequence

from trspark.engine.commands import Command
from trspark.engine.events import Event, ExecutorNotice
from trspark.engine.interface import Policy

NAME = "tr-without-notices"


class WithoutNotices(Policy):
    """``policy`` with every termination notice withheld from it."""

    name = NAME

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def handle(self, event: Event) -> Sequence[Command]:
        if isinstance(event, ExecutorNotice) and event.kind == "notice":
            return []
        return self.policy.handle(event)

    def wants(self, event_type: type) -> bool:
        return self.policy.wants(event_type)

    def summary(self) -> dict[str, object]:
        return self.policy.summary()
