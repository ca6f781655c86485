"""How long must a map output survive? ``T_max`` of paper §4.3, extended to "until no longer needed".

The paper estimates the next stage's *start*, :math:`\\alpha \\sum_i N_i T_i / \\#cores` over the
stages still to run (:func:`trspark.engine.horizon.consumption_horizon`, kept for the ``stage`` baseline). With Spark
semantics a block is needed longer than that:

1. until its *reader* stages have finished (a block is read when the reader's tasks run, spread
   over the reader's whole run), and
2. after that, for as long as an output of a reader is *uncovered* (not backed up, nor planned to
   be) and may itself be lost: re-running that reader output needs the block again (the cascade).
   That need ends when the reader's own readers have finished -- and so on down the lineage.

So the horizon of a block of shuffle :math:`s` runs over the *reader chain*, level after level
(a reader's readers start only when it has finished):

.. math::

    T_{need}(s) = \\alpha \\bigl( D_{active} + W(s) \\bigr), \\qquad
    W(s) = \\sum_{r \\in R(s)} \\Bigl[ d(N_r, T_r) + u_r \\, W(\\mathrm{sh}(r)) \\Bigr],

    d(N, T) = \\max\\bigl(N T / \\#cores,\\; k\\,T\\bigr), \\qquad
    D_{active} = \\max\\Bigl(\\sum_{i \\in active} N_i T_i / \\#cores,\\; \\max_i d(N_i, T_i)\\Bigr)

with :math:`N_i` a stage's unfinished tasks and :math:`T_i` its task time (:func:`task_seconds`),
:math:`R(s)` the reader stages of :math:`s` (active ones count in :math:`D_{active}` only),
:math:`u_r \\in [0, 1]` the uncovered share of reader :math:`r`'s outputs (partitions without an
output yet count as uncovered: their backup decision is not taken), and :math:`k` =
:data:`STRAGGLER` (a stage with fewer tasks than cores lasts as long as its slowest task). A
shuffle with no known reader (Spark submits a reader only when all its inputs exist) stands in one
reader as large as its own stage -- unless the job's graph (``JobSubmitted``) names the readers:
then a reader not submitted yet first waits for the unsubmitted stages it depends on (at the
job's mean task time), then runs, and its outputs, all uncovered, continue the chain
(:func:`_planned_seconds`; in the simulator the stand-in made the horizon of tpcds's first
shuffles 3 s where the blocks were needed for 9). The block is *no longer needed* -- :math:`T_{need} = 0`, nothing
to protect it for -- when the shuffle was consumed, or every reader finished and each reader's
outputs are covered or themselves no longer needed. The recursion stops after :data:`MAX_CHAIN`
levels. Units: seconds.

The cascade's *cost* is not here: ``C_Redo`` charges a lost block's unsafe ancestors through
``Er`` (:mod:`cost_model.recompute`); this module only says until when a loss costs anything.
"""

from __future__ import annotations

from collections.abc import Callable

from trspark.engine.horizon import stand_in_writer
from trspark.engine.state import JobState
from trspark.engine.views import MapOutput, PlannedStage, StageView

#: Reader levels followed below a block (PageRank-like lineages are ~12 shuffles deep).
MAX_CHAIN = 16

#: Slowest task of a stage relative to its mean (about the 95th percentile of a log-normal task
#: time with shape 0.5): a stage with fewer tasks than cores lasts this many mean task times.
STRAGGLER = 2.0

Covered = Callable[[MapOutput], bool]
"""Is this output backed up or about to be (then it is not the reason to keep its parents)."""

CoveredCount = Callable[[JobState, int], int]
"""How many existing outputs of a shuffle are safe or covered (:data:`Covered`)."""


def count_covered(covered: Covered) -> CoveredCount:
    """The :data:`CoveredCount` of a per-output test: the outputs that pass it or are safe."""
    def count(state: JobState, shuffle_id: int) -> int:
        return sum(1 for b in state.unordered_outputs(shuffle_id) if covered(b) or state.is_safe(b))
    return count


def need_horizon(state: JobState, alpha: float, block: MapOutput, covered: Covered) -> float:
    """:math:`T_{need}` (s from now) of ``block``: until its readers finished and their outputs are covered (0: not needed)."""
    default = state.mean_task_seconds()
    active = state.active_stages()
    cores = max(1, state.total_cores())
    chain = chain_seconds(state, block.shuffle_id, count_covered(covered), {s.stage_id for s in active}, default, cores)
    if chain is None:
        return 0.0
    return max(default, alpha * (active_seconds(state, active, default, cores) + chain))


def stage_seconds(tasks: float, task_time: float, cores: int) -> float:
    """Run time (s) of ``tasks`` tasks of mean ``task_time`` on ``cores`` cores.

    .. math:: d = \\max\\bigl(N T / \\#cores,\\; k\\,T\\bigr) \\quad (N > 0)

    A stage with fewer tasks than cores lasts as long as its slowest task, not ``N T / cores``:
    :data:`STRAGGLER` ``= k`` is the slowest task relative to the mean.
    """
    if tasks <= 0.0:
        return 0.0
    return max(tasks * task_time / cores, STRAGGLER * task_time)


def active_seconds(state: JobState, active: list[StageView], default: float, cores: int) -> float:
    """Until the active stages finished (s): they share the cores; at least the longest of them alone."""
    times = [task_seconds(state, s, default) for s in active]
    work = sum(s.unfinished * t for s, t in zip(active, times, strict=True))
    longest = max((stage_seconds(s.unfinished, t, cores) for s, t in zip(active, times, strict=True)), default=0.0)
    return max(work / cores, longest)


def chain_seconds(state: JobState, shuffle_id: int, covered: CoveredCount, active: set[int], default: float,
                  cores: int, depth: int = MAX_CHAIN, counted: set[int] | None = None) -> float | None:
    """:math:`W(s)` (s): the reader chain of ``shuffle_id`` below the active stages, level after level.

    None when the shuffle is no longer needed: consumed, or every reader finished and the
    outputs of every reader are safe or covered (or, recursively, themselves no longer needed).
    """
    if depth <= 0 or shuffle_id in state.consumed_shuffles:
        return None
    counted = set() if counted is None else counted
    readers = state.reader_stages(shuffle_id)
    planned = state.unsubmitted_readers(shuffle_id)
    if not readers and not planned:
        return _stand_in(state, shuffle_id, default, cores) if shuffle_id not in state.shuffle_readers else None
    total, needed = 0.0, bool(planned)
    if planned:
        total += _planned_seconds(state, planned, covered, active, default, cores, depth, counted)
    for reader in readers:
        if reader.unfinished > 0:
            needed = True
            if reader.stage_id not in active:
                total += stage_seconds(reader.unfinished, task_seconds(state, reader, default), cores)
        if reader.shuffle_id is not None:
            uncovered = uncovered_fraction(state, reader, covered)
            below = (chain_seconds(state, reader.shuffle_id, covered, active, default, cores, depth - 1, counted)
                     if uncovered > 0.0 else None)
            if below is not None:
                needed = True
                total += uncovered * below
    return total if needed else None


def _planned_seconds(state: JobState, readers: list[PlannedStage], covered: CoveredCount, active: set[int], default: float,
                     cores: int, depth: int, counted: set[int]) -> float:
    """Until readers Spark has not submitted yet have finished, and their own readers below (s).

    A reader starts once every stage it depends on has finished: the unsubmitted ones among
    them (found through the job's graph; submitted ones are active, in :math:`D_{active}`, or
    done) run first, their tasks at the job's mean task time. Then the readers run, and their
    outputs, all uncovered yet, keep the block needed down their own reader chain.
    ``counted``: stages whose time is already in the estimate (shared down the chain, so that
    a stage on several paths counts once).
    """
    readers = [r for r in readers if r.stage_id not in counted]
    counted.update(r.stage_id for r in readers)
    waiting: list[PlannedStage] = []
    todo = [p for r in readers for p in r.parent_stage_ids]
    while todo:
        stage_id = todo.pop()
        if stage_id in counted or stage_id in state.stages or stage_id not in state.planned:
            continue
        counted.add(stage_id)
        waiting.append(state.planned[stage_id])
        todo.extend(state.planned[stage_id].parent_stage_ids)
    total = sum(s.num_tasks for s in waiting) * default / cores
    for reader in readers:
        total += stage_seconds(reader.num_tasks, default, cores)
        if reader.shuffle_id is not None:
            below = chain_seconds(state, reader.shuffle_id, covered, active, default, cores, depth - 1, counted)
            total += below or 0.0
    return total


def task_seconds(state: JobState, stage: StageView, default: float) -> float:
    """:math:`T_i` (s): mean task time, not below what the running tasks tell.

    The tasks that finish first are the short ones, so the mean of finished tasks alone is far
    too low early in a stage (it made :math:`T_{max}` 3-5x too short). A task seen running has
    run, on average, half of a length-biased duration (the inspection paradox:
    :math:`E[now - start] = E[D^2] / 2E[D] \\ge E[D] / 2`), so twice the mean elapsed time of
    the running tasks estimates :math:`E[D]` from above:

    .. math:: T_i = \\max\\Bigl(\\bar d_{done},\\; 2\\,\\overline{(now - start)}_{running}\\Bigr)

    with :math:`\\bar d_{done}` = ``default`` (the job's mean) before any task of the stage finished.
    """
    finished = stage.mean_task_seconds(default)
    if not stage.started_at:
        return finished
    now = state.now
    running = sum(now - start for start in stage.started_at.values()) / len(stage.started_at)
    return max(finished, 2.0 * running)


def uncovered_fraction(state: JobState, stage: StageView, covered: CoveredCount) -> float:
    """Share of ``stage``'s partitions whose output is missing or neither safe nor covered (0..1)."""
    if stage.shuffle_id is None or stage.num_tasks <= 0:
        return 0.0
    return max(0.0, 1.0 - covered(state, stage.shuffle_id) / stage.num_tasks)


class NeedHorizon:
    """:func:`need_horizon` with the reader-chain work cached per shuffle for ``ttl`` seconds.

    The chain walks the outputs of every reader level (O(outputs) per shuffle); decisions are
    asked per task end, so the work per shuffle is reused until the clock moved ``ttl`` seconds
    (coverage changes by at most the backups decided in that time).

    Parameters
    ----------
    alpha : float
        :math:`\\alpha \\ge 1`.
    covered : callable
        How many outputs of a shuffle are safe, backed up or planned to be (:data:`CoveredCount`).
    ttl : float
        Seconds of driver time a cached chain estimate is reused (> 0).
    """

    def __init__(self, alpha: float, covered: CoveredCount, ttl: float = 1.0) -> None:
        self.alpha = alpha
        self.covered = covered
        self.ttl = ttl
        self._at = float("-inf")
        self._chain: dict[int, float | None] = {}
        self._active: tuple[float, set[int]] | None = None

    def __call__(self, state: JobState, block: MapOutput) -> float:
        """:math:`T_{need}` (s from now) of ``block``."""
        if state.now - self._at >= self.ttl:
            self._chain.clear()
            self._active = None
            self._at = state.now
        default = state.mean_task_seconds()
        cores = state.total_cores()
        cores = cores if cores > 1 else 1  # max(1, cores), inlined on every decision
        if self._active is None:
            active = state.active_stages()
            self._active = (active_seconds(state, active, default, cores), {s.stage_id for s in active})
        if block.shuffle_id in self._chain:
            chain = self._chain[block.shuffle_id]
        else:
            chain = chain_seconds(state, block.shuffle_id, self.covered, self._active[1], default, cores)
            self._chain[block.shuffle_id] = chain
        if chain is None:
            return 0.0  # no longer needed: nothing to protect it for
        need = self.alpha * (self._active[0] + chain)
        return need if need > default else default  # max(default, need), inlined on every decision


def _stand_in(state: JobState, shuffle_id: int, default: float, cores: int) -> float:
    """Run time (s) of a not-yet-submitted reader of ``shuffle_id``, as large as the stage that writes it."""
    writer = stand_in_writer(state, shuffle_id)
    if writer is None:
        return 0.0
    return stage_seconds(writer.num_tasks, task_seconds(state, writer, default), cores)
