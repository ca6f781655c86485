"""Eviction injector: kills real executor JVMs of a Spark ``local-cluster`` the way spot VMs die.

In ``local-cluster[N,cores,MB]`` every executor is its own JVM, a descendant of the driver JVM,
running ``org.apache.spark.executor.CoarseGrainedExecutorBackend --executor-id <id> ...``.
SIGKILL takes it and its shuffle files away for real, and the cluster's master starts a
replacement. :class:`EvictionInjector` does that from a background thread, either

* from a lifetime model: every executor, when first seen, draws its own lifetime
  :math:`L \\sim` ``model`` (seeded ``numpy.random.Generator``) and is killed at
  :math:`s + L`, where :math:`s` is when the injector first saw its process (within ``poll``
  seconds of its start; an executor already running at ``start()`` counts from then, so a
  warm-up before ``start()`` does not use up its lifetime); or
* from an explicit schedule ``[(offset_seconds, victim_rank), ...]``: at each offset after
  ``start()`` it kills the alive executor of that rank, ranks counted oldest first (by process
  start, then executor id) and taken modulo the number alive.

Paired comparisons (same evictions for several policies): draw one schedule with
:func:`~jobs.harness.kill_schedule.draw_schedule`, or replay ``injector.schedule()`` of a
model-driven run, in every run. Every kill is recorded as a :class:`KillRecord`. ``min_alive``
keeps at least that many executors: a kill that would go below it waits until replacements have
registered.
"""

from __future__ import annotations

import logging
import signal as signals
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType

import numpy as np
import psutil

from cost_model.lifetimes import LifetimeModel, from_spec
from jobs.harness.executors import ExecutorProcess, find_executors, signal_would_terminate
from jobs.harness.kill_schedule import Schedule

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class KillRecord:
    """One signal sent to an executor."""

    t: float
    """Seconds after :meth:`EvictionInjector.start`."""
    executor_id: str
    pid: int
    signal: signals.Signals
    rank: int = -1
    """Rank of the victim among the alive executors (oldest = 0) when it was chosen."""
    delivered: str = "signal"
    """How it reached the executor: ``signal``; ``callback`` (a notice given by ``notify``,
    e.g. posted on a cloud metadata-service imitation; the record's ``signal`` is then
    ``SIGPWR``, the notice marker, although no signal was sent); or ``missed`` (a notice not
    sent because the JVM had no SIGPWR handler yet, which the signal would have killed; its
    kill still comes at the deadline)."""


class EvictionInjector:
    """Kills executor JVMs under ``driver_pid`` from a background thread.

    Parameters
    ----------
    driver_pid
        The driver JVM's process id (for PySpark: :func:`jobs.harness.executors.driver_pid`).
    model, rng
        Lifetime model (or spec) and the generator lifetimes are drawn from (an int is a seed).
    schedule
        Instead of ``model``: explicit ``(offset seconds, victim rank)`` kills.
    signal
        What a kill sends: ``SIGKILL`` (default; no warning) or ``SIGPWR`` (Spark's decommission
        signal alone).
    notice
        If set, send ``SIGPWR`` this many seconds before each ``SIGKILL`` (a termination notice;
        Spark acts on it with ``spark.decommission.enabled=true``).
    notify
        With ``notice``: give the notice by calling ``notify(victim)`` instead of sending
        ``SIGPWR`` -- e.g. post it on the victim's cloud metadata endpoint, which the trspark
        plugin polls (``spark.trspark.notice.source``). The kill still follows ``notice`` s later.
    registered
        Model mode: an executor's lifetime starts when ``registered(executor_id)`` first holds
        (e.g. the driver lists it), not when its process is first seen, and it is not killed
        before. This is the clock Spark -- and the lifetime history -- measures executors by: a JVM
        takes seconds to register, which would otherwise shorten every observed lifetime.
        Schedule mode: ranks count only registered executors (as
        :func:`~jobs.harness.kill_schedule.draw_schedule` counts a replacement only once its
        ``replacement_delay`` is over), and a due kill waits while
        too few are registered (``min_alive``). Without it a replayed rank could pick a JVM
        still starting, which a SIGKILL kills then, but a SIGPWR notice kills at once as well
        (the JVM has no handler yet): a notice-driven policy would lose it ``notice`` s early.
    spare
        ``spare(executor_id)`` holds for on-demand executors: they are never killed, never ranked
        and draw no lifetime; ``min_alive`` still counts them. The others are the spot executors.
    begin
        Offsets and lifetimes count from when ``begin()`` first holds, polled by the thread every
        ``poll`` s (for example: the run's first task has finished), not from :meth:`start`. A
        job spends its first second planning, when an executor holds nothing a kill could take.
        A run that ends before ``begin()`` held meets no kills.
    max_kills
        Stop killing after this many victims.
    min_alive
        Never bring the number of live executors below this; a due kill waits instead.
    poll
        Seconds between looks at the process tree.
    """

    def __init__(
        self,
        driver_pid: int,
        *,
        model: LifetimeModel | str | None = None,
        rng: np.random.Generator | int | None = None,
        schedule: Sequence[tuple[float, int]] | None = None,
        signal: signals.Signals = signals.SIGKILL,
        notice: float | None = None,
        notify: Callable[[ExecutorProcess], None] | None = None,
        registered: Callable[[str], bool] | None = None,
        spare: Callable[[str], bool] | None = None,
        begin: Callable[[], bool] | None = None,
        max_kills: int | None = None,
        min_alive: int = 1,
        poll: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if (model is None) == (schedule is None):
            raise ValueError("give exactly one of model= (lifetime model or spec) and schedule=")
        if model is not None and rng is None:
            raise ValueError("model= needs rng= (a numpy Generator or an int seed) so kills can be reproduced")
        if notice is not None and notice < 0:
            raise ValueError(f"notice must be >= 0 seconds, got {notice}")
        if notify is not None and notice is None:
            raise ValueError("notify= gives notices: it needs notice= (seconds from notice to kill)")
        self.driver_pid = driver_pid
        self.model = from_spec(model) if isinstance(model, str) else model
        self.rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        self._pending = sorted((float(t), int(r)) for t, r in schedule) if schedule is not None else []
        self.signal = signal
        self.notice = notice
        self.notify = notify
        self.registered = registered
        self.spare = spare
        self.begin = begin
        self.max_kills = max_kills
        self.min_alive = min_alive
        self.poll = poll
        self._clock = clock
        self._records: list[KillRecord] = []
        # Keyed by (pid, executor id): pids are reused within an hour-long run (pid_max is often
        # 32768), an executor id never is within one application.
        self._deaths: dict[tuple[int, str], float] = {}  # -> drawn death (model mode)
        self._noticed: dict[tuple[int, str], tuple[float, ExecutorProcess, int]] = {}  # -> (kill at, victim, rank)
        self._chosen: set[tuple[int, str]] = set()  # already picked (a SIGPWR'd executor stays alive a while)
        self._victims = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0: float | None = None
        self._started = False

    # ---- life cycle ------------------------------------------------------------------------
    def start(self, *, background: bool = True) -> EvictionInjector:
        """Start the clock (offsets and lifetimes count from now) and, by default, the thread.

        With ``background=False`` the caller drives the injector by calling :meth:`step`.
        """
        if self._started:
            raise RuntimeError("injector already started")
        if self.begin is not None and not background:
            raise ValueError("begin= is polled by the injector's thread: start(background=True)")
        self._started = True
        if self.begin is None:
            self._t0 = self._clock()
        if background:
            self._thread = threading.Thread(target=self._run, name="trspark-eviction-injector", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop injecting (pending notices are not followed by their kill: see :meth:`finish_notices`)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def finish(self, window: float, *, sleep: Callable[[float], None] = time.sleep) -> int:
        """After :meth:`stop`: the kills a run leaves behind it, made at their times; return how many.

        With notices, each noticed executor at its deadline (:meth:`finish_notices`); without, the
        kills due within ``window`` s (:meth:`finish_scheduled`: the ones a policy told of kills
        ``window`` s ahead was noticed of during the run). A paired benchmark calls this for every
        policy, so all leave the same executors dead behind a run.
        """
        if self._t0 is None:
            return 0  # the run ended before its clock began: no kill was due for any policy
        if self.notice is not None:
            return self.finish_notices(sleep=sleep)
        return self.finish_scheduled(window, sleep=sleep)

    def finish_notices(self, *, sleep: Callable[[float], None] = time.sleep) -> int:
        """After :meth:`stop`: kill each executor that got a notice, at its deadline; return how many.

        A noticed VM is taken away at its deadline whether or not the job still needs it. Without
        this, a notice that outlives the run leaves its executor alive for the policies that are
        only killed and gone for those that act on notices (they release or decommission it),
        and the next run starts from different clusters. Blocks until the last deadline.
        """
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("stop() the injector before finish_notices()")
        due = sorted(self._noticed.values(), key=lambda item: item[0])
        self._noticed.clear()
        for kill_at, victim, rank in due:
            wait = kill_at - self.elapsed()
            if wait > 0:
                sleep(wait)  # the deadline is a wall-clock time: nothing to wait on but the clock
            self._signal(victim, signals.SIGKILL, rank)
        return len(due)

    def finish_scheduled(self, window: float, *, sleep: Callable[[float], None] = time.sleep) -> int:
        """After :meth:`stop`, a schedule without notices: make its kills due within ``window`` s, at
        their times; return how many.

        These are the kills whose notice a policy told of kills ``window`` s ahead got during the
        run, and which :meth:`finish_notices` makes for it: with both, every policy of a paired
        benchmark leaves the same executors dead behind a run. A kill held back (too few executors
        registered) is not made.
        """
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("stop() the injector before finish_scheduled()")
        if self.notice is not None or self.model is not None:
            raise RuntimeError("finish_scheduled() is for a schedule without notices; see finish_notices()")
        end = self.elapsed() + window
        before = self.victims
        while self._pending and self._pending[0][0] <= end:
            wait = self._pending[0][0] - self.elapsed()
            if wait > 0:
                sleep(wait)  # a kill time is a wall-clock time: nothing to wait on but the clock
            victims = self.victims
            self.step()
            if self.victims == victims:
                break
        return self.victims - before

    def __enter__(self) -> EvictionInjector:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # ---- results -------------------------------------------------------------------------------
    @property
    def records(self) -> list[KillRecord]:
        with self._lock:
            return list(self._records)

    @property
    def victims(self) -> int:
        """Executors signalled so far (a notice and its kill count once)."""
        with self._lock:
            return self._victims

    def kills_by(self, t: float) -> int:
        """Victims whose kill is due at or before ``t`` s after start.

        With notices a victim's kill is its deadline, ``notice`` s after its SIGPWR: a notice
        given near the end of a run is for a kill that lands after it. Counting by kill time makes
        the count the same for a policy that acts on notices and for one that only meets the kills.
        """
        return sum(1 for kill_at, _ in self.schedule() if kill_at <= t)

    def schedule(self) -> Schedule:
        """The kills so far as a schedule, to replay the same evictions in another run."""
        if self.notice is None:
            return [(r.t, r.rank) for r in self.records if r.signal == self.signal]
        # With notices the victim was chosen when its SIGPWR went out, `notice` s before the kill.
        return [(r.t + self.notice, r.rank) for r in self.records if r.signal == signals.SIGPWR]

    @property
    def began(self) -> bool:
        """Has the clock begun (at :meth:`start`; with ``begin``, once it held)?"""
        return self._t0 is not None

    def elapsed(self) -> float:
        """Seconds since :meth:`start` (with ``begin``: since it held; 0 before)."""
        if not self._started:
            raise RuntimeError("injector not started")
        return 0.0 if self._t0 is None else self._clock() - self._t0

    def planned_deaths(self) -> dict[str, float]:
        """Model mode: executor id -> drawn time of death (seconds after start) of those seen so far."""
        with self._lock:
            return {executor_id: t for (_, executor_id), t in self._deaths.items()}

    # ---- the loop ------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self._t0 is None:
                    if not self._began():
                        self._stop.wait(self.poll)
                        continue
                    self._t0 = self._clock()
                self.step()
            except Exception:  # a transient /proc read error must not end the injection
                log.exception("eviction injector step failed; retrying")
            self._stop.wait(self.poll)

    def step(self) -> None:
        """One look at the process tree: follow up notices, then signal the victims that are due."""
        now = self.elapsed()
        for key, (kill_at, victim, rank) in list(self._noticed.items()):
            if kill_at <= now:
                del self._noticed[key]
                self._signal(victim, signals.SIGKILL, rank)
        alive = [e for e in find_executors(self.driver_pid) if _key(e) not in self._chosen]
        spared = [e for e in alive if self.spare is not None and self.spare(e.executor_id)]
        alive = [e for e in alive if e not in spared]
        lead = self.notice or 0.0
        if self.registered is not None and (self.model is not None or self._kill_due(now + lead)):
            # Not yet born (still starting): no lifetime drawn, not a candidate for a kill. (A
            # schedule asks the driver only when a kill is due: it is a remote call.)
            alive = [e for e in alive if _key(e) in self._deaths or self.registered(e.executor_id)]
        while (choice := self._next_victim(alive, now + lead)) is not None:
            victim, rank = choice
            if self.max_kills is not None and self.victims >= self.max_kills:
                return
            if len(alive) + len(spared) - 1 < self.min_alive:
                return  # the kill waits until replacements have registered
            if self.model is None:
                self._pending.pop(0)
            alive.remove(victim)
            self._chosen.add(_key(victim))
            with self._lock:
                self._victims += 1
            if self.notice is None:
                self._signal(victim, self.signal, rank)
            else:
                self._signal(victim, signals.SIGPWR, rank)
                # The window counts from the notice as given (a callback may take a while), so
                # the victim always gets its full `notice` seconds.
                self._noticed[_key(victim)] = (self.elapsed() + lead, victim, rank)

    def _began(self) -> bool:
        try:
            return self.begin is None or self.begin()
        except Exception:  # an observer of the run (a remote call): never end the injection over it
            log.exception("the injector's begin() failed; asking again")
            return False

    def _kill_due(self, horizon: float) -> bool:
        """Schedule mode: the next scheduled (notice or kill) time is at or before ``horizon``."""
        return bool(self._pending) and self._pending[0][0] <= horizon

    def _next_victim(self, alive: list[ExecutorProcess], horizon: float) -> tuple[ExecutorProcess, int] | None:
        """The next executor whose (notice or kill) time is at or before ``horizon``, with its rank."""
        if not alive:
            return None
        if self.model is None:
            if not self._kill_due(horizon):
                return None
            rank = self._pending[0][1] % len(alive)
            return alive[rank], rank
        for executor in alive:
            if _key(executor) not in self._deaths:
                # Lifetimes are drawn in discovery order (oldest first): same seed, same draws. The
                # lifetime counts from discovery: process start times from /proc are only as exact
                # as the kernel's boot-time stamp (whole seconds), the monotonic clock is exact.
                death = self.elapsed() + float(self.model.sample(1, self.rng)[0])
                with self._lock:
                    self._deaths[_key(executor)] = death
        death, rank = min((self._deaths[_key(e)], i) for i, e in enumerate(alive))
        return (alive[rank], rank) if death <= horizon else None

    def _signal(self, victim: ExecutorProcess, sig: signals.Signals, rank: int) -> None:
        if sig == signals.SIGPWR and self.notify is not None:
            self.notify(victim)
            delivered, what = "callback", "gave a notice to"
        elif sig == signals.SIGPWR and self.notice is not None and signal_would_terminate(victim.pid, sig):
            # A replacement JVM still starting: the notice is lost on it, as on a VM whose agent is
            # not up yet, and its kill comes at the deadline (SIGPWR would have killed it at once).
            delivered, what = "missed", "could not give a notice (no SIGPWR handler yet) to"
        else:
            try:
                psutil.Process(victim.pid).send_signal(sig)
            except psutil.NoSuchProcess:
                log.info("executor %s (pid %d) was already gone", victim.executor_id, victim.pid)
                return
            delivered, what = "signal", f"sent {sig.name} to"
        record = KillRecord(self.elapsed(), victim.executor_id, victim.pid, sig, rank, delivered=delivered)
        log.info("%s executor %s (pid %d) at %.2f s", what, victim.executor_id, victim.pid, record.t)
        with self._lock:
            self._records.append(record)


def _key(executor: ExecutorProcess) -> tuple[int, str]:
    """What identifies one executor JVM over a long run: its pid alone may come back."""
    return executor.pid, executor.executor_id
