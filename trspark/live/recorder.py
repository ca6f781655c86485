"""Recording one live application's executor lifetimes into the history store (:mod:`trspark.live.history`).

:class:`HistoryObserver` turns the engine's executor events into lifetimes, observed or
right-censored; :class:`LifetimeRecorder` keeps them and writes them to the store, off the
engine's thread when asked, so a slow store never delays the engine's answers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from trspark.engine.events import ExecutorAdded, ExecutorLost, ExecutorNotice
from trspark.engine.views import notice_expired
from trspark.live.history import HistoryStore, LifetimeRecord

# The store's logger: one name quiets or raises every warning about the lifetime history.
log = logging.getLogger("trspark.live.history")

#: Seconds the engine waits at the application's end for the last records to be written. The
#: plugin gives it 10 s to end on its own once the socket is closed (``EngineBridge.StopGraceS``),
#: then stops it: the wait and its warning must fit in that.
FINISH_WAIT_SECONDS = 8.0


class LifetimeRecorder:
    """Collects executor lifetimes of one application and flushes them to a :class:`HistoryStore`.

    Feed it :meth:`executor_added`, :meth:`executor_lost` and :meth:`finish`. Records that could
    not be written stay pending (warned once) and are retried on every later flush. With
    ``background``, each loss's flush runs on a writer thread of its own: the engine calls this
    before it answers an event, and a slow or hung store must not delay that answer past
    ``spark.trspark.engine.timeout`` (the plugin would fall back to copying everything).
    """

    def __init__(self, store: HistoryStore | None, *, pool: str, app_id: str, background: bool = False) -> None:
        self.store = store
        self.pool = pool
        self.app_id = app_id
        self._started: dict[str, float] = {}
        self._pools: dict[str, str] = {}
        self.pending: list[LifetimeRecord] = []
        self.written = 0
        self._warned = False
        self._pending_lock = threading.Lock()  # ``pending`` is shared with the writer thread
        self._flush_lock = threading.Lock()  # one flush at a time, so no record is written twice
        self._writer = _Writer(self.flush) if background and store is not None else None

    def executor_added(self, executor_id: str, time: float, pool: str | None = None) -> None:
        """Start ``executor_id``'s clock (the first call wins); ``pool`` (default: the recorder's)
        is where its lifetime is kept -- a later call may still correct it."""
        self._started.setdefault(executor_id, time)
        self._pools[executor_id] = pool or self.pool

    def executor_lost(self, executor_id: str, time: float, *, evicted: bool) -> None:
        start = self._started.pop(executor_id, None)
        if start is None:
            return
        pool = self._pools.pop(executor_id, self.pool)
        with self._pending_lock:
            self.pending.append(LifetimeRecord(pool, self.app_id, executor_id, max(time - start, 0.0), evicted))
        if self._writer is not None:
            self._writer.wake()
        else:
            self.flush()

    def finish(self, time: float, timeout: float | None = None) -> None:
        """End of the application: every executor still alive is a right-censored observation.
        Waits at most ``timeout`` seconds (default :data:`FINISH_WAIT_SECONDS`) for a background
        writer to write everything."""
        if timeout is None:
            timeout = FINISH_WAIT_SECONDS
        with self._pending_lock:
            for executor_id, start in sorted(self._started.items()):
                pool = self._pools.pop(executor_id, self.pool)
                self.pending.append(LifetimeRecord(pool, self.app_id, executor_id, max(time - start, 0.0), False))
        self._started.clear()
        if self.store is None:
            return
        if self._writer is None:
            self.flush()
        elif not self._writer.stop(timeout):
            log.warning("lifetime history store %s gave no answer within %g s; %d record(s) not written",
                        self.store.url, timeout, len(self.pending))
            return
        with self._pending_lock:
            lost = len(self.pending)
        if lost:  # the last flush failed: nothing will retry it
            log.warning("lifetime history store %s did not take the application's last %d record(s); not written",
                        self.store.url, lost)

    def flush(self) -> bool:
        """Write every pending record, one part per pool; True when none is left pending."""
        with self._flush_lock:
            with self._pending_lock:
                batch = list(self.pending)
            if self.store is None or not batch:
                return not batch
            for pool in sorted({r.pool for r in batch}):
                group = [r for r in batch if r.pool == pool]
                try:
                    self.store.append(group)
                except Exception as exc:  # keep the records; the store may come back
                    if not self._warned:
                        log.warning(
                            "lifetime history store %s unreachable (%s: %s); keeping %d record(s) and retrying",
                            self.store.url, type(exc).__name__, exc, len(batch),
                        )
                        self._warned = True
                    return False
                self.written += len(group)
                done = {id(r) for r in group}
                with self._pending_lock:
                    self.pending = [r for r in self.pending if id(r) not in done]
            return True


class _Writer:
    """Runs ``flush`` on a daemon thread each time it is woken, and once more when stopped."""

    def __init__(self, flush: Callable[[], object]) -> None:
        self._flush = flush
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="trspark-history-writer", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float) -> bool:
        """Flush what is pending and end the thread; False if that took longer than ``timeout`` s."""
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            stopping = self._stopping  # read before the flush: a stop during it gets one more flush
            self._flush()
            if stopping:
                return


class HistoryObserver:
    """Engine-side event observer that records executor lifetimes of one live application.

    ``ExecutorAdded`` starts an executor's clock; ``ExecutorLost`` with reason ``evicted`` is an
    observed lifetime, any other reason a censored one -- except after a termination notice: an
    executor that left early (released by the engine, decommissioned) would have been evicted at
    the notice's deadline, so that is its observed lifetime (as in the engine's own fits,
    :func:`trspark.engine.views.observed_lifetime`). :meth:`close` (end of the engine session)
    censors every executor still alive at the last event time.
    """

    def __init__(self, recorder: LifetimeRecorder) -> None:
        self.recorder = recorder
        self.last_time = 0.0
        self._notices: dict[str, tuple[float, float]] = {}
        """executor -> (time of its termination notice, deadline)"""

    def __call__(self, event: object) -> None:
        time = getattr(event, "time", None)
        if isinstance(time, int | float):
            self.last_time = max(self.last_time, float(time))
        if isinstance(event, ExecutorAdded):
            start = event.vm_started if event.vm_started is not None else event.time
            # "default" is the protocol's "no pool named": the recorder's own pool then.
            self.recorder.executor_added(event.executor_id, start, None if event.pool == "default" else event.pool)
        elif isinstance(event, ExecutorNotice) and event.kind == "notice":
            # A repeated notice keeps the time of the first, as the engine's state does.
            first = self._notices.get(event.executor_id)
            self._notices[event.executor_id] = (event.time if first is None else first[0], event.deadline)
        elif isinstance(event, ExecutorLost):
            notice = self._notices.pop(event.executor_id, None)
            # An executor that outlived its notice was not evicted at the deadline (the engine's rule).
            if notice is not None and event.reason != "evicted" and not notice_expired(*notice, event.time):
                self.recorder.executor_lost(event.executor_id, max(notice[1], event.time), evicted=True)
            else:
                self.recorder.executor_lost(event.executor_id, event.time, evicted=event.reason == "evicted")

    def close(self) -> None:
        self.recorder.finish(self.last_time)
