"""Early release under dynamic allocation: an idle executor whose outputs are saved elsewhere goes.

With ``spark.dynamicAllocation.shuffleTracking.enabled`` Spark keeps an idle executor as long as
it holds shuffle data (up to ``shuffleTracking.timeout``, unbounded by default), so executors
sit idle and billed only to guard map outputs. Once every output such an executor holds that
may still be read is safe elsewhere, losing it costs nothing, and it may go as soon as dynamic
allocation would let an executor without shuffle data go: after ``release_idle`` seconds
(``spark.dynamicAllocation.executorIdleTimeout``) without a task.

An executor ``e`` is released at time ``t`` when

* ``release_idle > 0`` (the driver runs dynamic allocation with shuffle tracking);
* no stage is active (dynamic allocation's target counts on every executor while one is);
* ``t - idle_since(e) >= release_idle`` s, where ``idle_since`` is the end of its last task (or
  its registration) and no task runs there now;
* it has no termination notice (that path releases it itself) and no backup reads from or
  writes to it;
* every unconsumed output it holds is on the remote store or has another live holder that is
  not being released; and
* at least ``release_min_executors`` executors stay (``spark.dynamicAllocation.minExecutors``).

The driver removes it as dynamic allocation does, without asking for a replacement, and only if
it is still idle there; its loss comes back as ``ExecutorLost(reason="released")``. When Spark
keeps it (a task took it, it holds cached blocks, dynamic allocation's target counts on it), the
driver says so with ``ReleaseKept``: the executor stays, its idle clock starts again, and it is
asked again once idle that long, as dynamic allocation keeps checking its own idle executors.
"""

from __future__ import annotations

from trspark.engine.commands import ReleaseExecutor
from trspark.engine.events import Event, ExecutorAdded, ExecutorLost, ReleaseKept, TaskEnded, TaskStarted
from trspark.engine.state import JobState
from trspark.engine.tr.backup_stack import BackupStack

RELEASE_REASON = "idle: every live output saved elsewhere"


class IdleRelease:
    """Tracks how long each executor has been idle and picks those to release (see module doc).

    Parameters
    ----------
    idle_seconds
        ``release_idle``: seconds without a task before an executor may go; 0 = never.
    min_executors
        Executors that always stay (dynamic allocation's floor).
    """

    def __init__(self, idle_seconds: float, min_executors: int = 0) -> None:
        self.idle_seconds = idle_seconds
        self.min_executors = min_executors
        self.idle_since: dict[str, float] = {}
        """executor -> time its last task ended (or it registered); absent while a task runs."""
        self.released: set[str] = set()
        """Executors told to go whose loss has not arrived yet."""
        self.gone = 0
        """Executors released here whose loss (``reason="released"``) arrived."""
        self.kept = 0
        """Releases the driver did not carry out (``ReleaseKept``)."""

    @property
    def enabled(self) -> bool:
        return self.idle_seconds > 0

    def observe(self, event: Event, state: JobState) -> None:
        """Update the idle clocks after ``state`` has applied ``event``."""
        if isinstance(event, ExecutorAdded):
            self.idle_since.setdefault(event.executor_id, event.time)
        elif isinstance(event, TaskStarted):
            self.idle_since.pop(event.executor_id, None)
            # A task started there after all: the driver found it busy and kept it.
            self.released.discard(event.executor_id)
        elif isinstance(event, TaskEnded):
            self._idle_from(event.executor_id, event.time, state)
        elif isinstance(event, ReleaseKept):
            self.released.discard(event.executor_id)
            self.kept += 1
            self._idle_from(event.executor_id, event.time, state)
        elif isinstance(event, ExecutorLost):
            self.idle_since.pop(event.executor_id, None)
            if event.executor_id in self.released and event.reason == "released":
                self.gone += 1
            self.released.discard(event.executor_id)

    def _idle_from(self, executor_id: str, time: float, state: JobState) -> None:
        """Start ``executor_id``'s idle clock at ``time`` (s) if it is alive and runs no task."""
        executor = state.executors.get(executor_id)
        if executor is not None and not executor.running:
            self.idle_since[executor_id] = time

    def releases(self, state: JobState, stack: BackupStack, exclude: set[str]) -> list[ReleaseExecutor]:
        """``ReleaseExecutor(idle=True)`` for each executor that may go now, oldest idle first.

        ``exclude``: executors released on another ground (a notice), still counted as going.
        """
        # While a stage is active, dynamic allocation's target counts on the executors it has: an
        # idle one is about to get a task (a fresh JVM's first task, a stage whose parents end).
        if not self.enabled or state.active_stages():
            return []
        going = self.released | exclude
        staying = sum(1 for e in state.alive_executors() if e.executor_id not in going)
        busy = {end for plan in stack.in_flight.values() for end in (plan.source, plan.target)}
        out: list[ReleaseExecutor] = []
        for since, executor_id in sorted((t, e) for e, t in self.idle_since.items()):
            if staying <= self.min_executors or state.now - since < self.idle_seconds:
                break
            executor = state.executors.get(executor_id)
            if (executor is None or executor_id in going or executor.running or executor.draining
                    or executor.notice_deadline is not None or executor_id in busy
                    or not self._outputs_safe(state, executor_id, going)):
                continue
            going.add(executor_id)
            self.released.add(executor_id)
            staying -= 1
            out.append(ReleaseExecutor(executor_id, reason=RELEASE_REASON, idle=True))
        return out

    @staticmethod
    def _outputs_safe(state: JobState, executor_id: str, going: set[str]) -> bool:
        """Every unconsumed output on ``executor_id`` is on the store or on a live holder that stays."""
        for block in state.outputs_on(executor_id):
            if state.is_safe(block):
                continue
            if not any(h != executor_id and h not in going and h in state.executors for h in block.holders()):
                return False
        return True
