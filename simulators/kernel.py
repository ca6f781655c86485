"""The event kernel: a clock and one heap of timed entries, processed one instant at a time.

Entries are ``(time, priority, seq, priority, payload)`` tuples. The heap orders them by time,
then by ``priority`` (lower first), then by ``seq``, the insertion count: two entries never
compare equal, so payloads are never compared and a run is deterministic whatever they hold.
Within one instant every entry is processed -- including those pushed for that very instant
while it is processed, in the same order -- before :meth:`EventKernel.after_instant` runs once.
What the priorities mean (which kind wins a tie, and why) is the world model's to say
(:mod:`simulators.core`). The kernel does no I/O and draws no random numbers.
"""

from __future__ import annotations

import gc
import heapq
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

Entry = tuple[float, int, int, int, object]

#: Entries handled without progress (:meth:`EventKernel.progressed`) before a run is stuck. Lifetimes
#: far below the float resolution of the clock, or far below the time a task takes, make the clock
#: crawl or stop while VMs die and come back; a stall limit in simulated time then never comes.
MAX_ENTRIES_WITHOUT_PROGRESS = 100_000


class EventKernel:
    """Clock (``now``, s) and heap; a subclass supplies the handlers and the instant hooks."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[Entry] = []
        self._seq = 0
        self._finished = False
        """Set by the world model once nothing more should be processed."""
        self.processed = 0
        """Heap entries handled so far."""
        self._progress_at = 0

    def _push(self, t: float, kind: int, payload: object) -> None:
        """Schedule ``payload`` for handler ``kind`` at absolute time ``t`` (s); ``kind`` is its tie priority."""
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, kind, payload))

    # ---- what a world model supplies ------------------------------------------------------------
    def before_instant(self, t: float) -> bool:
        """Called before the clock moves to ``t``; True stops the run there (e.g. a time limit)."""
        return False

    def after_instant(self) -> None:
        """Called once all entries of the current instant were handled (unless stopped)."""

    def on_empty(self) -> None:
        """The heap ran dry before the run finished (nothing left to happen)."""

    def on_stuck(self, entries: int) -> None:
        """``entries`` entries were handled since the last :meth:`progressed`: the run makes none."""

    def progressed(self) -> None:
        """The world model made progress (e.g. a task succeeded): the count towards being stuck restarts."""
        self._progress_at = self.processed

    # ---- the loop -------------------------------------------------------------------------------
    def run_events(self, handlers: Sequence[Callable[[Any], None]]) -> None:
        """Advance instant by instant, calling ``handlers[kind](payload)`` for every entry, until finished.

        The cyclic garbage collector is paused meanwhile (:func:`cycles_collected_after`).
        """
        with cycles_collected_after():
            self._run(handlers)

    def _run(self, handlers: Sequence[Callable[[Any], None]]) -> None:
        heap = self._heap
        pop = heapq.heappop
        before, after = self.before_instant, self.after_instant  # bound once: called every instant
        while not self._finished:
            if not heap:
                self.on_empty()
                break
            t = heap[0][0]
            if before(t):
                break
            self.now = t
            while heap and heap[0][0] == t and not self._finished:
                _, kind, _, _, payload = pop(heap)
                self.processed += 1
                handlers[kind](payload)
                if self.processed - self._progress_at > MAX_ENTRIES_WITHOUT_PROGRESS:
                    self.on_stuck(MAX_ENTRIES_WITHOUT_PROGRESS)
                    break
            if not self._finished:
                after()


@contextmanager
def cycles_collected_after() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the block, as :mod:`timeit` does while it times.

    A run allocates hundreds of thousands of short-lived objects (events, commands, outputs) and
    almost no reference cycles: reference counting frees them, and the collector's passes over the
    young generations found next to nothing while taking several per cent of a run's CPU time. The
    few cycles left wait for the next pass after the run. Nested uses leave it paused.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
