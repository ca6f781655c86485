"""The event kernel's order: time, then priority, then insertion; one after-instant hook per instant."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from simulators.kernel import EventKernel, cycles_collected_after


class Log(EventKernel):
    """Records (time, kind, payload) of every entry handled and each instant's end."""

    def __init__(self, stop_at: float = float("inf")) -> None:
        super().__init__()
        self.log: list[tuple[float, Any, Any]] = []
        self.stop_at = stop_at

    def handler(self, kind: int) -> Any:
        def handle(payload: Any) -> None:
            self.log.append((self.now, kind, payload))
            if payload == "spawn":  # pushed for this very instant: handled before the instant ends
                self._push(self.now, 0, "late")
            if payload == "end":
                self._finished = True
        return handle

    def before_instant(self, t: float) -> bool:
        return t > self.stop_at

    def after_instant(self) -> None:
        self.log.append((self.now, "instant", None))

    def on_empty(self) -> None:
        self.log.append((self.now, "empty", None))


def test_same_time_entries_go_by_priority_then_insertion() -> None:
    k = Log()
    k._push(2.0, 1, "b1")
    k._push(1.0, 2, "a")
    k._push(2.0, 0, "spawn")
    k._push(2.0, 1, {"not": "comparable"})  # payloads are never compared
    k.run_events([k.handler(i) for i in range(3)])
    assert k.log == [(1.0, 2, "a"), (1.0, "instant", None), (2.0, 0, "spawn"), (2.0, 0, "late"),
                     (2.0, 1, "b1"), (2.0, 1, {"not": "comparable"}), (2.0, "instant", None), (2.0, "empty", None)]
    assert k.processed == 5


def test_finishing_stops_at_once_and_a_limit_stops_before_the_clock_moves() -> None:
    k = Log()
    k._push(1.0, 0, "end")
    k._push(1.0, 1, "never handled")
    k.run_events([k.handler(i) for i in range(2)])
    assert k.log == [(1.0, 0, "end")] and k.processed == 1
    limited = Log(stop_at=1.5)
    limited._push(1.0, 0, "x")
    limited._push(2.0, 0, "y")
    limited.run_events([limited.handler(0)])
    assert limited.log == [(1.0, 0, "x"), (1.0, "instant", None)] and limited.now == 1.0


def test_the_cyclic_collector_is_paused_while_a_run_lasts_and_restored_after() -> None:
    seen: list[bool] = []
    k = Log()
    k._push(1.0, 0, "x")
    k._push(2.0, 0, "end")
    handle = k.handler(0)
    k.run_events([lambda payload: seen.append(gc.isenabled()) or handle(payload)])
    assert seen == [False, False] and gc.isenabled()
    # A handler that raises leaves the collector as it found it; a paused one stays paused.
    failing = Log()
    failing._push(1.0, 0, "x")
    with pytest.raises(RuntimeError):
        failing.run_events([lambda payload: (_ for _ in ()).throw(RuntimeError("handler failed"))])
    assert gc.isenabled()
    gc.disable()
    try:
        with cycles_collected_after():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
