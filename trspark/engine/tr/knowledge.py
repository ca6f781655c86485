"""What the engine knows about each executor's lifetime (paper §4.1, §6.1.1 variants).

Each executor follows its *pool's* model: ``spark.trspark.pool.<name>.lifetime``
(``TRConfig.pool_lifetimes``; spec ``stable`` = on-demand, never evicted) for the pools that
have one, the shared ``spark.trspark.lifetime`` for every other pool. On top of that, one of
four variants, chosen by ``spark.trspark.lifetime.knowledge``:

* ``notices`` (default): the pool models, and an executor's exact lifetime once the driver sends
  an ``ExecutorNotice`` for it (a termination notice, a spot block): a
  :class:`~cost_model.lifetimes.deterministic.Deterministic` model dying at the deadline.
* ``indeterministic``: only the pool models (the paper's "TR-Spark (indeterministic)").
  Termination notices are ignored in the costs (the scheduler still drains the executor).
* ``deterministic``: as ``notices``, and the γ rule uses γ = 1 (lifetimes are exact).
* ``fitted``: start from the configured models; once ``min_evictions`` evictions were observed
  in a pool, use a Kaplan-Meier fit of that pool's observed lifetimes with its executors still
  alive (and those that left for other reasons) as right-censored survivors. Pools without a
  model of their own share one fit. Notices are honoured; stable pools are never refitted.

Every model speaks in an executor's *age* (seconds since its lifetime clock started).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from cost_model.lifetimes import Exponential, LifetimeModel
from cost_model.lifetimes.deterministic import Deterministic
from trspark.engine.state import JobState
from trspark.engine.views import ExecutorView, never_evicted

KNOWLEDGE = ("notices", "indeterministic", "deterministic", "fitted")


class LifetimeKnowledge:
    """Per-executor lifetime models for one knowledge variant.

    Parameters
    ----------
    prior : LifetimeModel
        The configured distribution (s) of executors whose pool has no model of its own.
    mode : str
        One of :data:`KNOWLEDGE`.
    min_evictions : int
        Observed evictions needed before ``fitted`` replaces a model.
    pools : mapping of str to LifetimeModel, optional
        Each named pool's own model (s).
    """

    def __init__(self, prior: LifetimeModel, mode: str = "notices", *, min_evictions: int = 5,
                 pools: Mapping[str, LifetimeModel] | None = None) -> None:
        if mode not in KNOWLEDGE:
            raise ValueError(f"lifetime knowledge must be one of {', '.join(KNOWLEDGE)}, got {mode!r}")
        self.prior = prior
        self.mode = mode
        self.min_evictions = min_evictions
        self.shared: LifetimeModel = prior
        self.pools: dict[str, LifetimeModel] = dict(pools or {})
        self._configured = dict(self.pools)
        self._known: dict[tuple[str, float], LifetimeModel] = {}
        self._fitted_on: dict[str | None, int] = {}
        self.refits = 0

    @property
    def uses_notices(self) -> bool:
        return self.mode != "indeterministic"

    def exact(self, deadlines_pending: bool) -> bool:
        """Exact deadlines may be in play: the failure table must follow the clock closely.

        ``deadlines_pending``: some alive executor has a known death time
        (:attr:`~trspark.engine.state.JobState.with_deadline`); it counts only where notices are
        priced. Once the last such executor is gone, the models are distributions again. A fitted
        model's point masses at observed lifetimes are as sharp as a deadline, so ``fitted`` is
        always exact.
        """
        return self.mode == "fitted" or (deadlines_pending and self.uses_notices)

    def pool_model(self, pool: str) -> LifetimeModel:
        """The model of an executor of ``pool`` without a notice."""
        return self.pools.get(pool, self.shared)

    def model(self, executor: ExecutorView) -> LifetimeModel:
        """The lifetime model of ``executor`` (its age is ``executor.age(now)``)."""
        deadline = executor.notice_deadline
        if deadline is None or not self.uses_notices:
            return self.pools.get(executor.pool, self.shared)
        key = (executor.executor_id, deadline)
        model = self._known.get(key)
        if model is None:
            # The executor dies exactly at the deadline: a point mass at age deadline - started.
            model = Deterministic(at=max(deadline - executor.started, 1e-9))
            self._known[key] = model
        return model

    def forget(self, executor_id: str) -> None:
        """Drop what is kept for a lost executor (an application that runs for days sees many)."""
        for key in [key for key in self._known if key[0] == executor_id]:
            del self._known[key]

    def never_fails(self, executor: ExecutorView) -> bool:
        """P(``executor`` is ever evicted) = 0 under its current model (stable capacity, no notice)."""
        return never_evicted(self.model(executor))

    def one_memoryless_law(self, deadlines_pending: bool) -> bool:
        """Every executor follows the same exponential law: no executor is safer than another.

        ``deadlines_pending``: as in :meth:`exact` (an executor with a priced deadline follows its own law).
        """
        if (deadlines_pending and self.uses_notices) or not isinstance(self.shared, Exponential):
            return False
        return all(model is self.shared for model in self.pools.values())

    def longest_mean(self, default: float) -> float:
        """The largest finite mean lifetime (s) among the models, ``default`` if none is finite."""
        means = [m.mean() for m in (self.prior, *self._configured.values())]
        finite = [m for m in means if np.isfinite(m)]
        return max(finite) if finite else default

    def cell_fail_probs(self, executors: Sequence[ExecutorView], now: float, grid: np.ndarray) -> np.ndarray:
        """P(executor i fails in grid cell j | alive now), shape ``(len(executors), len(grid) - 1)``.

        ``grid`` holds times from now (s). Executors sharing a model are evaluated in one call.
        """
        out = np.zeros((len(executors), max(0, len(grid) - 1)))
        for model, rows in self._groups(executors):
            ages = np.array([executors[i].age(now) for i in rows])
            out[rows] = model.cell_fail_probs(ages, grid)
        return out

    def mean_residual_life(self, executors: Sequence[ExecutorView], now: float) -> np.ndarray:
        """Expected remaining lifetime of each executor (s): the paper's ``v.E(t, ∞)``."""
        out = np.empty(len(executors))
        for model, rows in self._groups(executors):
            ages = np.array([executors[i].age(now) for i in rows])
            out[rows] = model.mean_residual_life(ages)
        return out

    def _groups(self, executors: Sequence[ExecutorView]) -> list[tuple[LifetimeModel, list[int]]]:
        groups: dict[int, tuple[LifetimeModel, list[int]]] = {}
        for i, ex in enumerate(executors):
            model = self.model(ex)
            groups.setdefault(id(model), (model, []))[1].append(i)
        return list(groups.values())

    def observe(self, state: JobState) -> bool:
        """Refit each pool's model from the lifetimes seen so far (``fitted`` mode only); True if one changed.

        Pools with a model of their own are fitted each on its own history; the other pools
        together refit the shared model. Stable pools are never refitted.
        """
        if self.mode != "fitted":
            return False
        changed = False
        for pool in [*(p for p, m in self._configured.items() if not never_evicted(m)), None]:
            changed |= self._refit(state, pool)
        return changed

    def _refit(self, state: JobState, pool: str | None) -> bool:
        """Refit one pool's model (``None``: the shared model of the pools without their own)."""
        def mine(name: str) -> bool:
            return name == pool if pool is not None else name not in self._configured

        history = [item for name, items in state.lifetimes.items() if mine(name) for item in items]
        evictions = sum(1 for _, evicted in history if evicted)
        if evictions < self.min_evictions or evictions == self._fitted_on.get(pool, 0):
            return False
        from cost_model.lifetimes import Empirical

        alive = [(e.age(state.now), False) for e in state.alive_executors() if mine(e.pool)]
        durations = np.array([d for d, _ in history + alive], dtype=float)
        observed = np.array([ev for _, ev in history + alive], dtype=bool)
        fit = Empirical.fit(np.maximum(durations, 1e-9), observed)
        if pool is None:
            self.shared = fit
        else:
            self.pools[pool] = fit
        self._fitted_on[pool] = evictions
        self.refits += 1
        return True


def pool_models(prior: LifetimeModel, pool_lifetimes: Sequence[tuple[str, str]]) -> dict[str, LifetimeModel]:
    """Each ``(pool, spec)`` parsed by ``from_spec``; pools believing ``prior`` are left out (they use it).

    Raises
    ------
    ValueError
        A spec ``from_spec`` rejects (the message names the pool and the model at fault).
    """
    from cost_model.lifetimes import from_spec

    pools: dict[str, LifetimeModel] = {}
    for pool, spec in pool_lifetimes:
        try:
            model = from_spec(spec)
        except ValueError as exc:
            raise ValueError(f"pool {pool!r}: {exc}") from None
        # A pool that believes the shared law shares its object: one vectorised group, one fit.
        if model.spec() != prior.spec():
            pools[pool] = model
    return pools
