"""Task-size suggestions from executor lifetimes (paper §5's splitting, as partition sizes).

The rule (:mod:`cost_model.task_size`): a task may be at most :math:`L^*` seconds long, the
longest length whose expected loss to its executor's eviction stays within a fraction ``f``
(``spark.trspark.sizing.lossFraction``) of its work. With the stage's processing rate ``R``
(bytes of input per second of one task) that is a partition of at most :math:`B^* = L^* R` bytes.

* Before the application (:func:`configured_limit`): the configured lifetimes, the default one
  and every evictable pool's, each at age 0; the shortest limit wins, since a task may land in
  any pool. ``trspark.configure`` turns it into AQE's advisory partition size when
  ``spark.trspark.sizing.rate`` gives ``R``.
* While it runs (:class:`SizeAdvisor`): the alive executors' models (as the engine knows them)
  at their ages, weighted by cores, an executor of a stable pool losing nothing. A stage whose
  finished tasks took longer than :math:`L^*` on average gets one advice line with the partition
  size at its measured rate (bytes read per task second), or the configured rate.
"""

from __future__ import annotations

import math
import statistics

from cost_model.lifetimes import LifetimeModel, Stable, from_spec
from cost_model.task_size import FractionTooLarge, Placement, largest_task_seconds, split_count
from trspark.engine.commands import Advice, Command
from trspark.engine.settings import TRConfig, is_stable_spec
from trspark.engine.state import JobState
from trspark.engine.tr.knowledge import LifetimeKnowledge
from trspark.engine.views import ExecutorView, StageView, never_evicted

Mixture = frozenset[tuple[tuple[LifetimeModel | None, int], int]]
"""Executors counted per (lifetime law, or None for a stable pool; cores)."""

#: Memoryless mixtures whose :math:`L^*` is kept.
MIXTURES_KEPT = 64

#: The largest byte count a Spark setting holds (a Java long).
JAVA_LONG_MAX = 2**63 - 1

#: Spark's default ``spark.sql.adaptive.coalescePartitions.minPartitionSize`` (``1MB``, read in binary units).
SPARK_MIN_PARTITION_BYTES = 2**20
MIN_PARTITION_SIZE_KEY = "spark.sql.adaptive.coalescePartitions.minPartitionSize"


def min_partition_bytes(size: int) -> int | None:
    """The ``minPartitionSize`` (bytes) a partition size of ``size`` bytes needs: a fifth of it, as
    Spark's documentation asks, when Spark's default would be larger (AQE coalesces up to it
    whatever the advisory size); else None."""
    return max(1, size // 5) if size < SPARK_MIN_PARTITION_BYTES else None

#: Seconds of driver time a computed limit is reused while the executors stay the same: ages
#: move slowly against lifetimes, and the limit is a mixture over every executor.
REFRESH_SECONDS = 30.0


def percent(fraction: float) -> str:
    """A loss fraction as a percentage to three significant digits: ``0.05`` -> ``5%``, ``0.001`` -> ``0.1%``
    (``{:.0%}`` would print ``0%`` for any fraction below 0.005, and ``2%`` for 0.025)."""
    return f"{fraction * 100:.3g}%"


def configured_models(config: TRConfig) -> list[LifetimeModel]:
    """The configured lifetime laws: the default one and each pool's."""
    specs = [config.lifetime, *(spec for _pool, spec in config.pool_lifetimes)]
    return [Stable() if is_stable_spec(spec) else from_spec(spec) for spec in specs]


def configured_limit(config: TRConfig) -> float:
    """:math:`L^*` (s) of the configured lifetimes at age 0: the shortest over the default and each pool.

    A lifetime whose loss never stays under the fraction sets no limit when some configured
    capacity is stable (a task lost there again and again ends on a stable executor); without
    stable capacity it raises :class:`~cost_model.task_size.FractionTooLarge`.
    """
    models = configured_models(config)
    stable = any(never_evicted(model) for model in models)
    limits = []
    for model in models:
        try:
            limits.append(largest_task_seconds(model, config.sizing_fraction))
        except FractionTooLarge:
            if not stable:
                raise
            limits.append(math.inf)
    return min(limits)


def suggested_partition_bytes(config: TRConfig) -> int | None:
    """:math:`B^* = L^* R` in bytes for ``spark.trspark.sizing.rate`` = ``R``; None without a rate or a limit."""
    limit = configured_limit(config)
    if config.sizing_rate <= 0.0 or not math.isfinite(limit) or limit <= 0.0:
        return None
    return min(max(1, round(limit * config.sizing_rate)), JAVA_LONG_MAX)  # nearest: L* is a root, found to ~1e-9


class SizeAdvisor:
    """Advise smaller partitions for stages whose tasks outlast the lifetime rule's :math:`L^*`."""

    def __init__(self, config: TRConfig, knowledge: LifetimeKnowledge) -> None:
        self.fraction = config.sizing_fraction
        self.rate = config.sizing_rate
        self.stable_pools = frozenset(config.stable_pools())
        self.knowledge = knowledge
        self.advised: set[int] = set()
        # (time, executors, their models' identities, the mixture when memoryless, limit): a notice
        # or a rebalance changes a model.
        self._cached: tuple[float, frozenset[str], frozenset[tuple[str, int]], Mixture | None, float] | None = None
        # L* of each memoryless mixture met: an evicted executor and its replacement move between two.
        self._memoryless: dict[Mixture, float] = {}

    def refresh(self, state: JobState) -> None:
        """Recompute :math:`L^*` if the executors or their models changed, or it is :data:`REFRESH_SECONDS` old.

        Called on executor events and ticks, so that the mixture (a root search over the
        lifetime laws) is not computed inside a task's backup decision. With memoryless laws
        only, :math:`L^*` depends on the laws and cores alone, not on which executors hold them
        or their ages: it is kept per such mixture.
        """
        executors = state.alive_executors()
        models = self._models(executors)
        cached = self._cached
        if cached is not None and cached[2] == models and state.now - cached[0] < REFRESH_SECONDS:
            return
        mixture = self._mixture(executors)
        if cached is not None and mixture is not None and cached[3] == mixture:
            self._cached = (cached[0], frozenset(e.executor_id for e in executors), models, mixture, cached[4])
            return
        self._store(state, executors, models, mixture)

    def limit(self, state: JobState) -> float:
        """:math:`L^*` (s) over the alive executors (``inf``: no limit): the last refresh's while they stay the same."""
        executors = state.alive_executors()
        cached = self._cached
        if cached is not None and cached[1] == frozenset(e.executor_id for e in executors):
            return cached[4]
        return self._store(state, executors, self._models(executors), self._mixture(executors))

    def _models(self, executors: list[ExecutorView]) -> frozenset[tuple[str, int]]:
        """Each executor with its model's identity (a notice, a rebalance or a refit gives it another)."""
        return frozenset((e.executor_id, id(self.knowledge.model(e))) for e in executors)

    def _mixture(self, executors: list[ExecutorView]) -> Mixture | None:
        """How many executors of each (law, cores), or None when some law has a memory (then ages count)."""
        counts: dict[tuple[LifetimeModel | None, int], int] = {}
        for ex in executors:
            model = None if ex.pool in self.stable_pools else self.knowledge.model(ex)
            if model is not None and not model.age_free:
                return None
            counts[(model, ex.cores)] = counts.get((model, ex.cores), 0) + 1
        return frozenset(counts.items())

    def _store(self, state: JobState, executors: list[ExecutorView], models: frozenset[tuple[str, int]],
               mixture: Mixture | None) -> float:
        limit = self._memoryless.get(mixture) if mixture is not None else None
        if limit is None:
            limit = self._compute(executors, state.now) if executors else math.inf
            if mixture is not None:
                if len(self._memoryless) >= MIXTURES_KEPT:
                    self._memoryless.clear()
                self._memoryless[mixture] = limit
        self._cached = (state.now, frozenset(e.executor_id for e in executors), models, mixture, limit)
        return limit

    def _compute(self, executors: list[ExecutorView], now: float) -> float:
        # One term per model (executors sharing it at their median age), weighted by their cores.
        groups: dict[int, tuple[LifetimeModel, list[ExecutorView]]] = {}
        for ex in executors:
            stable = ex.pool in self.stable_pools
            model = Stable() if stable else self.knowledge.model(ex)
            groups.setdefault(-1 if stable else id(model), (model, []))[1].append(ex)
        models = [model for model, _ in groups.values()]
        ages = [statistics.median(e.age(now) for e in members) for _, members in groups.values()]
        weights = [float(sum(e.cores for e in members)) for _, members in groups.values()]
        try:
            return largest_task_seconds(Placement(models, ages=ages, weights=weights), self.fraction)
        except FractionTooLarge:
            # The configured laws were checked before start-up; a refitted one may lose less per
            # second of work than the fraction at every length: no length to advise then.
            return math.inf

    def check(self, state: JobState) -> list[Command]:
        """Advice for the active stages not advised yet whose finished tasks outlast :math:`L^*`."""
        return self._advise(state, [s for s in state.active_stages() if s.stage_id not in self.advised and s.tasks_done > 0])

    def stage_done(self, state: JobState, stage_id: int) -> list[Command]:
        """Advice for a stage whose last task just ended: a stage of one wave is over before
        any :meth:`check` (on stage and executor events, ticks) sees a finished task of it."""
        stage = state.stages.get(stage_id)
        if stage is None or stage.stage_id in self.advised or stage.unfinished or not stage.tasks_done:
            return []
        return self._advise(state, [stage])

    def _advise(self, state: JobState, candidates: list[StageView]) -> list[Command]:
        if not candidates:
            return []
        limit = self.limit(state)
        if limit <= 0.0:
            # Every executor dies (a notice's deadline) before any task could finish: splitting cannot help.
            return []
        out: list[Command] = []
        for stage in candidates:
            seconds = stage.mean_task_seconds(0.0)
            if seconds > limit:
                self.advised.add(stage.stage_id)
                out.append(Advice(kind="split", stage_id=stage.stage_id, message=self._message(stage, seconds, limit)))
        return out

    def _message(self, stage: StageView, seconds: float, limit: float) -> str:
        head = (f"stage {stage.stage_id}: tasks take {seconds:.1f} s on average, but with these executors' lifetimes "
                f"a task longer than {limit:.1f} s loses more than {percent(self.fraction)} of its work to evictions "
                f"on average; split them (at least {split_count(seconds, limit)}x as many partitions)")
        read = stage.mean_read_bytes() or 0.0
        rate = self.rate if self.rate > 0.0 else read / seconds
        if rate <= 0.0:
            return head
        size = min(max(1, round(limit * rate)), JAVA_LONG_MAX)  # a size Spark can read
        source = "the configured" if self.rate > 0.0 else "the measured"
        # AQE coalesces up to minPartitionSize (1 MiB) whatever the advisory size; a fifth is Spark's advice.
        smaller = "" if (least := min_partition_bytes(size)) is None else f", {MIN_PARTITION_SIZE_KEY}={least}"
        return (f"{head}; at {source} {rate / 1e6:.1f} MB/s per task that is partitions of at most {size} bytes "
                f"(SQL: spark.sql.adaptive.advisoryPartitionSizeInBytes={size}{smaller}; RDD: repartition or numPartitions)")
