"""TR-Scheduling (paper §3.1, Algorithm 1) as :class:`SchedulingHints` for the driver's scheduler.

The engine decides placement completely: :func:`build_limits` computes the γ rule's numbers and
:meth:`GammaLimits.hints` turns them into per-stage sets of executors
(:func:`trspark.engine.placement.gamma_hints`), which the simulator and the Scala shim apply
with the same rule (:func:`trspark.engine.placement.place`).

1. **Stage order** (``scheduling.order = reduction``, the default; ``fifo`` keeps Spark's order)
   -- among runnable stages, the largest data-size reduction rate first:

   .. math:: rate_i = \\frac{\\bar{in}_i - \\bar{out}_i}{T_i} \\quad \\text{(bytes/s)},

   with :math:`\\bar{in}_i` the mean bytes a task reads (shuffle read + input),
   :math:`\\bar{out}_i` the mean bytes it writes, :math:`T_i` its mean run time. The paper writes
   ``reduceSize = Size(Output) - Size(Input)`` but wants "tasks that output the least amount of
   data" first, so we take the reduction as in - out (positive for a reducing task). A stage
   with no finished task yet is estimated from its parents' shuffle output spread over its
   tasks, with output = input (rate 0). The paper zeroes ``Size(Input)`` when the input is not
   on the VM; per-VM locality is left to the driver's own locality rule.

2. **The γ rule** -- a task of estimated run time ET may start on executor v only if
   ``ET / v.E(t, T) < γ``. ET is the stage's longest finished task (its mean if longer; the
   job's mean before any finished), see :func:`expected_task_seconds`. We read ``v.E(t, T)`` with ``T = ∞`` as v's expected remaining
   lifetime (mean residual life ``m_v``, s), so ``max_task_seconds[v] = γ · m_v``: with exact
   lifetimes (γ = 1) a task goes only where it can finish before the executor dies, and with a
   memoryless (exponential) belief every executor gets the same limit, i.e. no restriction.
   Limits are kept only for executors whose limit is below the safest executor's and below
   some runnable stage's ET -- otherwise the rule could never bind. An executor is
   *forbidden* for a stage whose ET exceeds its limit: no task of it starts there unless the
   stage would starve.

3. **A termination notice** -- an executor with a notice (``ExecutorNotice`` of kind
   ``"notice"``) takes only tasks that end, and whose output can be copied off, before its
   deadline: ``max_task_seconds = deadline - now - allowance`` (``allowance``: the copy time of
   the largest mean task output of the runnable stages, see :func:`notice_rules`). Once no
   runnable stage's ET fits, it is *drained*: it starts no new task at all while another
   executor is alive (whatever it computed would die with it), finishes what runs and keeps
   only the work of saving what is still needed (TR-Checkpointing with the deadline). Spark's
   decommissioning stops scheduling at the notice whatever the window, and migrates every
   block; trspark uses the window while tasks fit and copies only the outputs still needed.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np

from trspark.engine.commands import SchedulingHints
from trspark.engine.placement import gamma_hints
from trspark.engine.state import JobState
from trspark.engine.views import ExecutorView, StageView


def reduce_rate(state: JobState, stage: StageView) -> float:
    """Data-size reduction rate of one task of ``stage`` (bytes/s; larger = schedule first)."""
    seconds = stage.mean_task_seconds(state.mean_task_seconds())
    read, write = stage.mean_read_bytes(), stage.mean_write_bytes()
    if read is None or write is None:
        return 0.0
    return (read - write) / max(seconds, 1e-9)


def stage_order(state: JobState) -> tuple[int, ...]:
    """Runnable stages by reduction rate, largest first (ties: lower stage id first)."""
    runnable = state.runnable_stages()
    return tuple(s.stage_id for s in sorted(runnable, key=lambda s: (-reduce_rate(state, s), s.stage_id)))


def expected_task_seconds(state: JobState) -> dict[int, float]:
    """ET of a task of each runnable stage for the γ rule (s).

    The longest finished task of the stage, not its mean (the job's mean before any finished):
    the rule must keep *every* task of the stage off an executor that dies before it ends, and
    with the mean, the longer half of a stage's tasks started on such executors and died with
    them (the simulator's clairvoyant oracle, which places by each stage's true longest task,
    was 1.25-1.41x faster than exact-lifetime TR at stability 5).
    """
    default = state.mean_task_seconds()
    return {s.stage_id: max(s.mean_task_seconds(default), s.longest_seconds) for s in state.runnable_stages()}


def task_limits(
    executors: Sequence[ExecutorView], residual_life: np.ndarray, gamma: float, longest_task: float
) -> dict[str, float]:
    """``max_task_seconds`` per executor from the γ rule (only where it can bind)."""
    if not executors or longest_task <= 0.0:
        return {}
    limits = gamma * np.asarray(residual_life, dtype=float)
    safest = float(limits.max())
    out: dict[str, float] = {}
    for ex, limit in zip(executors, limits, strict=True):
        if limit < safest and limit < longest_task:
            out[ex.executor_id] = float(limit)
    return out


def cold_limits(executors: Sequence[ExecutorView]) -> dict[str, float]:
    """The executors that have not finished a task yet, while others have (each with limit 0: they pick last).

    A fresh executor JVM runs its first tasks several times slower (class loading, JIT), and a
    stage waits for its slowest task. Such an executor is a *fallback* in the hints: it takes a
    task only after every warm executor's free slot had its pick (``placement.FALLBACK``), so it
    still adds capacity when the warm ones are busy. Nothing is restricted when every executor
    is fresh (the application's start) or none is.
    """
    cold = [e.executor_id for e in executors if e.tasks_done == 0 and not e.draining]
    if not cold or len(cold) == len(executors):
        return {}
    return dict.fromkeys(cold, 0.0)


@dataclass(frozen=True, slots=True)
class GammaLimits:
    """The numbers behind one :class:`SchedulingHints`; the engine keeps them to judge when a change is worth sending.

    ``max_task_seconds``: executor -> longest ET (s) allowed to start there (γ rule, notice room);
    ``expected_task_seconds``: stage -> ET (s); ``cold``: fresh executors that pick after the
    warm ones (:func:`cold_limits`); ``spot_forbidden`` / ``spot_fallback``: stage -> spot
    executors kept off it or put after the stable ones (:mod:`trspark.engine.tr.critical`).
    """

    stage_order: tuple[int, ...] = ()
    max_task_seconds: dict[str, float] = field(default_factory=dict)
    expected_task_seconds: dict[int, float] = field(default_factory=dict)
    drain: tuple[str, ...] = ()
    cold: tuple[str, ...] = ()
    spot_forbidden: dict[int, tuple[str, ...]] = field(default_factory=dict)
    spot_fallback: dict[int, tuple[str, ...]] = field(default_factory=dict)

    def hints(self) -> SchedulingHints:
        """The hints the drivers apply (per stage: the forbidden and the fallback executors)."""
        hints = gamma_hints(self.stage_order, self.max_task_seconds, self.expected_task_seconds, self.drain, self.cold)
        if not (self.spot_forbidden or self.spot_fallback):
            return hints
        return widen(hints, self.spot_forbidden, self.spot_fallback)


def widen(hints: SchedulingHints, forbidden: dict[int, tuple[str, ...]],
          fallback: dict[int, tuple[str, ...]]) -> SchedulingHints:
    """``hints`` with more forbidden and fallback executors per stage (an executor forbidden either way stays forbidden)."""
    out_forbidden = {s: tuple(sorted(set(hints.forbidden.get(s, ())) | set(forbidden.get(s, ()))))
                     for s in sorted(set(hints.forbidden) | set(forbidden))}
    out_fallback: dict[int, tuple[str, ...]] = {}
    for s in sorted(set(hints.fallback) | set(fallback)):
        later = (set(hints.fallback.get(s, ())) | set(fallback.get(s, ()))) - set(out_forbidden.get(s, ()))
        if later:
            out_fallback[s] = tuple(sorted(later))
    return SchedulingHints(stage_order=hints.stage_order, forbidden=out_forbidden, fallback=out_fallback,
                           drain=hints.drain)


def build_limits(
    state: JobState, residual_life: np.ndarray, executors: Sequence[ExecutorView], gamma: float,
    notice_allowance: float = 0.0, released: Collection[str] = (), warm_first: bool = False, order: str = "reduction",
) -> GammaLimits:
    """The γ rule's numbers for the current state (``residual_life`` aligned with ``executors``).

    ``released``: executors the engine let go (``ReleaseExecutor``) that the driver has not yet
    reported lost (a killed JVM takes seconds to go): drained, whatever their room.
    ``warm_first``: fresh executors after warm ones (:func:`cold_limits`).
    ``order``: ``"reduction"`` sends :func:`stage_order`; ``"fifo"`` sends none (the driver's
    own order: Spark's FIFO pool and the simulator take the lower stage id first).
    """
    expected = expected_task_seconds(state)
    longest = max(expected.values(), default=0.0)
    limits = task_limits(executors, residual_life, gamma, longest)
    cold = sorted(cold_limits(executors)) if warm_first and expected else []
    notice_limits, drain = notice_rules(executors, state.now, notice_allowance, expected, state.mean_warm_task_seconds())
    for executor_id, limit in notice_limits.items():
        limits[executor_id] = min(limit, limits.get(executor_id, limit))
    gone = [e.executor_id for e in executors if e.executor_id in released]
    if gone:
        drain = tuple(sorted(set(drain) | set(gone)))
        limits = {k: v for k, v in limits.items() if k not in gone}
        cold = [e for e in cold if e not in gone]
    return GammaLimits(
        stage_order=stage_order(state) if order == "reduction" else (),
        max_task_seconds=limits,
        expected_task_seconds=expected,
        drain=drain,
        cold=tuple(cold),
    )


def shortest_task(expected: dict[int, float], idle_estimate: float) -> float:
    """The shortest ET among the runnable stages (s); ``idle_estimate`` when none is runnable.

    Between two stages (or two of Spark SQL's query-stage jobs) nothing is runnable for a
    moment: the application's mean warm task time
    (:meth:`~trspark.engine.state.JobState.mean_warm_task_seconds`) then stands for the next
    stage's tasks.
    """
    return min(expected.values(), default=idle_estimate)


def has_room(executor: ExecutorView, now: float, allowance: float, shortest: float) -> bool:
    """Could a task still start on a noticed ``executor`` and end, output copied, by its deadline?"""
    deadline = executor.notice_deadline
    return deadline is not None and deadline - now - allowance >= shortest


def every_one_noticed(executors: Sequence[ExecutorView]) -> bool:
    """Has every executor a termination notice? Then the noticed ones take tasks whatever their room."""
    return all(e.draining for e in executors)


def notice_rules(
    executors: Sequence[ExecutorView], now: float, allowance: float, expected: dict[int, float],
    idle_estimate: float = math.inf,
) -> tuple[dict[str, float], tuple[str, ...]]:
    """``(max_task_seconds, drain)`` for the executors under a termination notice.

    A noticed executor has ``room = deadline - now - allowance`` seconds for a task (``allowance``,
    s: copying its output off before the deadline). While the shortest task fits in the room
    (:func:`shortest_task`, :func:`has_room`), the room is its limit; otherwise (or with no
    deadline) it is drained. Nothing is restricted when every executor has a notice (someone
    must run the tasks).
    """
    noticed = [e for e in executors if e.draining]
    if not noticed or every_one_noticed(executors):
        return {}, ()
    shortest = shortest_task(expected, idle_estimate)
    limits: dict[str, float] = {}
    drain: list[str] = []
    for ex in noticed:
        if has_room(ex, now, allowance, shortest):
            assert ex.notice_deadline is not None
            room = ex.notice_deadline - now - allowance
            limits[ex.executor_id] = room
        else:
            drain.append(ex.executor_id)
    return limits, tuple(sorted(drain))


def limits_changed(old: GammaLimits | None, new: GammaLimits, tolerance: float = 0.1) -> bool:
    """Worth sending? Order, restricted or cold set changed, or a limit or ET moved by more than ``tolerance``."""
    if old is None:
        return bool(new.stage_order or new.max_task_seconds or new.drain or new.cold or new.spot_forbidden
                    or new.spot_fallback)
    if (old.stage_order != new.stage_order or old.max_task_seconds.keys() != new.max_task_seconds.keys()
            or old.drain != new.drain or old.cold != new.cold or old.spot_forbidden != new.spot_forbidden
            or old.spot_fallback != new.spot_fallback):
        return True
    for key, limit in new.max_task_seconds.items():
        if abs(limit - old.max_task_seconds[key]) > tolerance * max(limit, 1e-9):
            return True
    for stage_id, seconds in new.expected_task_seconds.items():
        before = old.expected_task_seconds.get(stage_id)
        if before is None or abs(seconds - before) > tolerance * max(seconds, 1e-9):
            return True
    return False
