"""The rebalance rule: an AWS rebalance recommendation raises that executor's hazard by a factor.

EC2 posts a rebalance recommendation (``/latest/meta-data/events/recommendations/rebalance``)
when a spot instance is at elevated risk of interruption, often before the two-minute
termination notice and with no deadline. The engine takes it as a proportional-hazards shift
from the moment it was posted (``ExecutorRebalance.since``, else its arrival): for an executor
of model :math:`S_0` recommended at age :math:`a`,

.. math:: h(t) = k\\,h_0(t) \\quad (t \\ge a), \\qquad
          P(\\text{alive at } \\tau + u \\mid \\text{alive at } \\tau \\ge a) = S_{0,\\tau}(u)^k ,

with :math:`k` = ``spark.trspark.rebalance.hazardFactor`` (:class:`cost_model.lifetimes.Raised`).
Everything downstream follows from the model, with no rule of its own: ``C_Redo`` of the
executor's outputs grows (so they are backed up sooner), its ``C_B2`` and its worth as a backup
peer shrink, its mean residual life falls by up to :math:`k` (so the γ rule keeps long tasks off
it), and the lineage-critical placement counts it as riskier spot capacity.

A termination notice is stronger knowledge: once an executor has a known deadline that the
knowledge variant honours, the deadline model is used as it is. ``k = 1`` turns the rule off.
"""

from __future__ import annotations

from collections.abc import Mapping

from cost_model.lifetimes import LifetimeModel, Raised
from trspark.engine.tr.knowledge import LifetimeKnowledge
from trspark.engine.views import ExecutorView


def raised_model(base: LifetimeModel, executor: ExecutorView, factor: float) -> LifetimeModel:
    """``base`` with its hazard times ``factor`` from the executor's age at the recommendation on."""
    assert executor.rebalance_at is not None
    return Raised(base, onset=max(executor.rebalance_at - executor.started, 0.0), factor=factor)


class RebalanceKnowledge(LifetimeKnowledge):
    """:class:`LifetimeKnowledge` whose models follow the rebalance rule (module docstring).

    ``factor``: the hazard multiplier ``k`` (> 0; 1 = no effect). Other arguments as for
    :class:`LifetimeKnowledge`. A raised model is built once per (executor, recommendation,
    base model), so executors sharing nothing do not share a model group.
    """

    def __init__(self, prior: LifetimeModel, mode: str = "notices", *, factor: float = 1.0,
                 min_evictions: int = 5, pools: Mapping[str, LifetimeModel] | None = None) -> None:
        super().__init__(prior, mode, min_evictions=min_evictions, pools=pools)
        if not factor > 0.0:
            raise ValueError(f"rebalance hazard factor must be > 0, got {factor!r}")
        self.factor = factor
        self._raised: dict[str, tuple[float, LifetimeModel, LifetimeModel]] = {}

    def forget(self, executor_id: str) -> None:
        super().forget(executor_id)
        self._raised.pop(executor_id, None)

    def model(self, executor: ExecutorView) -> LifetimeModel:
        base = super().model(executor)
        if executor.rebalance_at is None or self.factor == 1.0 or (executor.notice_deadline is not None and self.uses_notices):
            return base
        kept = self._raised.get(executor.executor_id)
        if kept is not None and kept[0] == executor.rebalance_at and kept[1] is base:
            return kept[2]
        model = raised_model(base, executor, self.factor)
        self._raised[executor.executor_id] = (executor.rebalance_at, base, model)
        return model
