"""Task duplication on idle executors (paper §5; its splitting advice is :mod:`trspark.engine.tr.sizing`).

Duplication. When an executor has a free core and no waiting task may run there (none is
waiting, or every waiting task is longer than the γ rule lets it take), the running task with the
largest *duplication rate* gets a copy there:

.. math::

    duplicationRate_i = reduceSizeRate_i \\cdot
        \\frac{ET_i - s.E(t, t + ET_i)}{ET_i - v.E(t, t + ET_i) + \\epsilon}

where ``s`` is the executor running task ``i``, ``v`` the idle one, ``ET_i`` the task's
remaining estimated run time (s: its stage's mean task time minus its elapsed time, or the
whole mean once it ran longer than that) and ``x.E(t, t+ET)`` the expected time ``x`` stays alive in
that window (s). How we read the paper's ``E`` here: the paper writes ``s.E / v.E``, which
taken literally prefers copying tasks from *stable* sources onto *unstable* targets -- the
opposite of the point of duplication. We therefore use the expected time each executor is
*not* alive in the window, ``ET - x.E(t, t+ET)``: the copy pays off when the source is likely
to die before the task ends and the target is not. A copy is made only if the source's
expected loss exceeds the target's. ``reduceSizeRate`` (bytes/s, clipped at 1 so that
non-reducing tasks still rank by risk) keeps the paper's preference for reducing tasks.
Idleness is checked on every successful task end and tick, with no minimum idle time (the
paper has none): a stage's tail, when cores free up one by one, is usually shorter than one
re-planning period, and a rule that waited a period never fired in the simulator. Copies
cannot crowd out real work: none starts while a task that may run there is waiting, and
:meth:`Duplicator.kill_if_needed` frees cores as soon as tasks wait.

Killing. When tasks are waiting and no core is free, the copy we started with the most
remaining time is killed; when any copy of a task succeeds, its other copies are killed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from trspark.engine.commands import Command, DuplicateTask, KillDuplicate, SchedulingHints
from trspark.engine.placement import allowed
from trspark.engine.state import JobState
from trspark.engine.tr.knowledge import LifetimeKnowledge
from trspark.engine.tr.scheduling import cold_limits, reduce_rate
from trspark.engine.views import ExecutorView

_EPS = 1e-6


class Duplicator:
    """Starts and kills task copies; remembers the copies it started."""

    def __init__(self, knowledge: LifetimeKnowledge) -> None:
        self.knowledge = knowledge
        self.copies: dict[tuple[int, int], str] = {}
        """(stage, partition) -> executor running the copy we asked for."""
        self.started = 0
        self.killed = 0

    def on_task_succeeded(self, state: JobState, stage_id: int, partition: int) -> list[Command]:
        """One copy finished: kill the others."""
        self.copies.pop((stage_id, partition), None)
        stage = state.stages.get(stage_id)
        others = sorted(stage.running.get(partition, ())) if stage is not None else []
        self.killed += len(others)
        return [KillDuplicate(stage_id=stage_id, partition=partition, executor_id=e) for e in others]

    def attempt_failed(self, stage_id: int, partition: int, executor_id: str) -> None:
        """An attempt of ``(stage_id, partition)`` on ``executor_id`` ended without success: if it
        was our copy, it is gone (the task may get another one, and no kill is spent on it)."""
        if self.copies.get((stage_id, partition)) == executor_id:
            del self.copies[(stage_id, partition)]

    def forget_lost(self, state: JobState) -> None:
        """Drop copies whose executor died, whose task no longer runs anywhere, or that run alone.

        A copy just asked for is kept although its ``TaskStarted`` has not arrived yet. A copy
        whose original ended (its executor died) is the task's only attempt: it is never killed.
        """
        for key, executor in list(self.copies.items()):
            stage = state.stages.get(key[0])
            ex = state.executors.get(executor)
            running = stage.running.get(key[1]) if stage is not None else None
            if not running or ex is None or not ex.alive or running == {executor}:
                del self.copies[key]

    def kill_if_needed(self, state: JobState) -> list[Command]:
        """Tasks waiting and no free core: kill the copy with the most remaining time."""
        self.forget_lost(state)
        if not self.copies:
            return []
        waiting = sum(s.pending_count for s in state.runnable_stages())
        free = sum(e.free_cores for e in state.alive_executors())
        out: list[Command] = []
        for _ in range(min(max(0, waiting - free), len(self.copies))):
            key, executor = max(self.copies.items(), key=lambda kv: self._remaining(state, kv[0], kv[1]))
            del self.copies[key]
            self.killed += 1
            out.append(KillDuplicate(stage_id=key[0], partition=key[1], executor_id=executor))
        return out

    def _remaining(self, state: JobState, key: tuple[int, int], executor: str) -> float:
        stage = state.stages[key[0]]
        started = stage.started_at.get((key[1], executor), state.now)
        return stage.mean_task_seconds(state.mean_task_seconds()) - (state.now - started)

    def duplicate_on_idle(self, state: JobState, hints: SchedulingHints | None = None,
                          warm_first: bool = False) -> list[Command]:
        """Copy the top running tasks onto idle executors (see :func:`idle_executors`)."""
        if self.knowledge.one_memoryless_law(bool(state.with_deadline)):
            return []  # one memoryless law for all: a copy is never safer than its original
        ready = idle_executors(state, hints, warm_first)
        if not ready:
            return []
        candidates = self._candidates(state)
        if not candidates:
            return []
        keys = [c[0] for c in candidates]
        windows = np.array([c[2] for c in candidates])
        rates = np.array([c[3] for c in candidates])
        loss_s = self._expected_loss([c[1] for c in candidates], state.now, windows)
        taken = np.zeros(len(candidates), dtype=bool)
        loss_targets = self._loss_matrix(ready, state.now, windows)
        out: list[Command] = []
        for target, loss_v in zip(ready, loss_targets, strict=True):
            # A copy only where it is safer than the original, and never onto the task's own executor.
            score = np.where((loss_s > loss_v) & ~taken, rates * loss_s / (loss_v + _EPS), 0.0)
            for i, c in enumerate(candidates):
                if c[1] is target:
                    score[i] = 0.0
            for _ in range(target.free_cores):
                best = int(np.argmax(score))
                if score[best] <= 0.0:
                    break
                stage_id, partition = keys[best]
                taken[best], score[best] = True, 0.0
                self.copies[keys[best]] = target.executor_id
                self.started += 1
                out.append(DuplicateTask(stage_id=stage_id, partition=partition, executor_id=target.executor_id))
        return out

    def _candidates(self, state: JobState) -> list[tuple[tuple[int, int], ExecutorView, float, float]]:
        """Running tasks with one copy and time left: (key, source, remaining seconds, reduce rate clipped at 1)."""
        out: list[tuple[tuple[int, int], ExecutorView, float, float]] = []
        default = state.mean_task_seconds()
        for stage in state.active_stages():
            et = stage.mean_task_seconds(default)
            rate = max(reduce_rate(state, stage), 1.0)
            for partition, copies in stage.running.items():
                if len(copies) != 1 or (stage.stage_id, partition) in self.copies or partition in stage.finished:
                    continue
                source = state.executors.get(next(iter(copies)))
                if source is None or not source.alive:
                    continue
                started = stage.started_at.get((partition, source.executor_id), state.now)
                remaining = _remaining_seconds(et, state.now - started)
                if remaining <= _EPS:
                    continue
                out.append(((stage.stage_id, partition), source, remaining, rate))
        return out

    def _expected_loss(self, executors: Sequence[ExecutorView], now: float, windows: np.ndarray) -> np.ndarray:
        """``w - E(t, t + w)`` per (executor, window): expected seconds not alive in the window.

        One vectorised call per distinct lifetime model.
        """
        out = np.empty(len(executors))
        groups: dict[int, list[int]] = {}
        models = {}
        for i, ex in enumerate(executors):
            model = self.knowledge.model(ex)
            groups.setdefault(id(model), []).append(i)
            models[id(model)] = model
        for key, rows in groups.items():
            ages = np.array([executors[i].age(now) for i in rows])
            alive = models[key].expected_lifetime(ages, 0.0, windows[rows])
            out[rows] = windows[rows] - alive
        return out


    def _loss_matrix(self, targets: Sequence[ExecutorView], now: float, windows: np.ndarray) -> np.ndarray:
        """``w_j - E_i(t, t + w_j)`` for every target i and window j, shape (targets, windows).

        One broadcast call per distinct lifetime model (ages down, windows across): tails
        have up to #executors idle targets and #cores running tasks.
        """
        out = np.empty((len(targets), windows.size))
        groups: dict[int, list[int]] = {}
        models = {}
        for i, ex in enumerate(targets):
            model = self.knowledge.model(ex)
            groups.setdefault(id(model), []).append(i)
            models[id(model)] = model
        for key, rows in groups.items():
            ages = np.array([targets[i].age(now) for i in rows])
            out[rows] = windows[None, :] - models[key].expected_lifetime(ages[:, None], 0.0, windows[None, :])
        return out


def _remaining_seconds(mean: float, elapsed: float) -> float:
    """Expected seconds left (s) of a task that ran ``elapsed`` s, in a stage whose tasks take ``mean`` s.

    ``mean - elapsed`` until the mean; past it, ``mean``. A task that outlived its stage's mean
    (a straggler) has no estimated end, and it holds up the stage's end; its loss would cost
    the most, so it stays a candidate, priced over the time a fresh copy needs.
    """
    return mean - elapsed if elapsed < mean else mean


def idle_executors(state: JobState, hints: SchedulingHints | None, warm_first: bool = False) -> list[ExecutorView]:
    """Alive executors with a free core that no waiting task may use.

    A waiting task of stage ``s`` may use executor ``e`` unless the γ rule of ``hints`` forbids
    it (:func:`trspark.engine.placement.allowed`); without hints any waiting task blocks. A
    draining executor (termination notice) is never idle: it takes no copy either.
    """
    # With warm_first, a fresh executor among warm ones (scheduling.cold_limits) is held back by its
    # 0 limit, not idle: a copy of a running task would run several times slower there.
    alive = state.alive_executors()
    cold = cold_limits(alive) if warm_first else {}
    free = [e for e in alive if e.free_cores > 0 and not e.draining and e.executor_id not in cold]
    if not free:
        return []
    waiting = [s.stage_id for s in state.runnable_stages()]
    if not waiting:
        return free
    if hints is None or not (hints.forbidden or hints.fallback):
        return []
    return [e for e in free if not any(allowed(e.executor_id, stage, hints) for stage in waiting)]
