"""What the engine knows about each executor's lifetime (paper §4.1, §6.1.1 variants).

Three variants, chosen by ``spark.trspark.lifetime.knowledge``:

* ``indeterministic``: only a distribution is known -- ``spark.trspark.lifetime`` -- shared by
  every executor (the paper's "TR-Spark (indeterministic)"). Termination notices are ignored.
* ``deterministic``: an executor's exact lifetime is known once the driver sends an
  ``ExecutorNotice`` for it (spot block, or a notice at registration in the simulator): a
  :class:`~cost_model.lifetimes.deterministic.Deterministic` model dying at the deadline.
  Executors without a notice fall back to the distribution.
* ``fitted``: start from the configured distribution; once ``min_evictions`` evictions were
  observed, use a Kaplan-Meier fit of the observed lifetimes with the executors still alive
  (and those that left for other reasons) as right-censored survivors. Notices are honoured.

Every model speaks in an executor's *age* (seconds since its lifetime clock started).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cost_model.lifetimes import LifetimeModel
from cost_model.lifetimes.deterministic import Deterministic
from trspark.engine.state import ExecutorView, JobState

KNOWLEDGE = ("indeterministic", "deterministic", "fitted")


class LifetimeKnowledge:
    """Per-executor lifetime models for one knowledge variant.

    Parameters
    ----------
    prior : LifetimeModel
        The configured distribution (s).
    mode : str
        One of :data:`KNOWLEDGE`.
    min_evictions : int
        Observed evictions needed before ``fitted`` replaces the prior.
    """

    def __init__(self, prior: LifetimeModel, mode: str = "indeterministic", *, min_evictions: int = 5) -> None:
        if mode not in KNOWLEDGE:
            raise ValueError(f"lifetime knowledge must be one of {', '.join(KNOWLEDGE)}, got {mode!r}")
        self.prior = prior
        self.mode = mode
        self.min_evictions = min_evictions
        self.shared: LifetimeModel = prior
        self._known: dict[tuple[str, float], LifetimeModel] = {}
        self._fitted_on = 0
        self.refits = 0

    @property
    def uses_notices(self) -> bool:
        return self.mode != "indeterministic"

    def model(self, executor: ExecutorView) -> LifetimeModel:
        """The lifetime model of ``executor`` (its age is ``executor.age(now)``)."""
        deadline = executor.notice_deadline
        if deadline is None or not self.uses_notices:
            return self.shared
        key = (executor.executor_id, deadline)
        model = self._known.get(key)
        if model is None:
            # The executor dies exactly at the deadline: a point mass at age deadline - started.
            model = Deterministic(at=max(deadline - executor.started, 1e-9))
            self._known[key] = model
        return model

    def cell_fail_probs(self, executors: Sequence[ExecutorView], now: float, grid: np.ndarray) -> np.ndarray:
        """P(executor i fails in grid cell j | alive now), shape ``(len(executors), len(grid) - 1)``.

        ``grid`` holds times from now (s). Executors sharing a model are evaluated in one call.
        """
        out = np.zeros((len(executors), max(0, len(grid) - 1)))
        groups: dict[int, tuple[LifetimeModel, list[int]]] = {}
        for i, ex in enumerate(executors):
            model = self.model(ex)
            groups.setdefault(id(model), (model, []))[1].append(i)
        for model, rows in groups.values():
            ages = np.array([executors[i].age(now) for i in rows])
            out[rows] = model.cell_fail_probs(ages, grid)
        return out

    def mean_residual_life(self, executors: Sequence[ExecutorView], now: float) -> np.ndarray:
        """Expected remaining lifetime of each executor (s): the paper's ``v.E(t, ∞)``."""
        out = np.empty(len(executors))
        groups: dict[int, tuple[LifetimeModel, list[int]]] = {}
        for i, ex in enumerate(executors):
            model = self.model(ex)
            groups.setdefault(id(model), (model, []))[1].append(i)
        for model, rows in groups.values():
            ages = np.array([executors[i].age(now) for i in rows])
            out[rows] = model.mean_residual_life(ages)
        return out

    def observe(self, state: JobState) -> bool:
        """Refit the shared model from the lifetimes seen so far (``fitted`` mode only); True if it changed."""
        if self.mode != "fitted":
            return False
        history = [item for pool in state.lifetimes.values() for item in pool]
        evictions = sum(1 for _, evicted in history if evicted)
        if evictions < self.min_evictions or evictions == self._fitted_on:
            return False
        from cost_model.lifetimes import Empirical

        alive = [(e.age(state.now), False) for e in state.alive_executors()]
        durations = np.array([d for d, _ in history + alive], dtype=float)
        observed = np.array([ev for _, ev in history + alive], dtype=bool)
        self.shared = Empirical.fit(np.maximum(durations, 1e-9), observed)
        self._fitted_on = evictions
        self.refits += 1
        return True
