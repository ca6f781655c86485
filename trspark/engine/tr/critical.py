"""Lineage-critical map tasks on stable capacity: a cost-based placement rule, sent as scheduling hints.

An executor is *stable* when its pool (``ExecutorAdded.pool``) is one of
:meth:`~trspark.engine.settings.TRConfig.stable_pools` (lifetime ``stable``: on-demand); every
other executor is *spot*. With no stable pool, or no alive executor of either kind, the rule
does nothing and the hints are exactly the γ rule's.

**Cost of a task of map stage s on a spot executor v** (s): what the engine expects to pay for
its output after it ends there, i.e. what Algorithm 2 then chooses to pay,

.. math:: C_s = \\min\\bigl(C_{Redo}, C_{BL}, C_{BR}\\bigr), \\qquad
          C_{Redo} = \\int_0^{T_{max}} Er(t)\\, dF_v(t),

with :math:`F_v` the probability that v dies within ``t`` (its lifetime model, at its age),
:math:`T_{max}` the time until the output's consumers are done (the need horizon) and
:math:`Er` the cascading re-computation time of the cost model; :math:`C_{BL}`,
:math:`C_{BR}` are the copy costs plus the risk left after the copy. :math:`C_s` is the mean
over the stage's latest outputs on spot executors, as the policy priced them (an exponential
average, :data:`SMOOTHING`); before a task of s has ended, the largest :math:`C` of the stages
it reads stands for it (its outputs carry their lineage), and 0 for a stage that reads none
(leaf work stays on spot). On a stable executor the output costs nothing. An executor with a
rebalance recommendation weighs :math:`k_v C_s` (:math:`k_v` the rebalance hazard factor, first
order in the failure probability; 1 otherwise).

**Expected wait for a stable core** (s): the ``n`` stable cores free at
:math:`f_1 \\le \\dots \\le f_n` (0 when free now, else the expected remaining time of the task
running there, ``ET - elapsed`` floored at 0); the stages are served in stage order, a stage's
``p`` pending tasks of ``ET_s`` seconds in turn, task ``j`` on core ``j mod n``. The last of them
starts after

.. math:: W_s = f_{(p-1) \\bmod n} + \\lfloor (p-1)/n \\rfloor\\, ET_s ,

and only the stages that wait for stable cores queue for them (the later stages see the cores
the earlier ones took).

**Price of a wait** (core-seconds): a task that starts :math:`w` seconds later delays the
stage's output by :math:`w`, and with it the cores that read it -- the same
:math:`\\Omega_s` cores (:func:`~trspark.engine.tr.stall.stall_width`, 1 with
``stallWeight`` off) by which the re-computation terms of :math:`C_s` are weighted. So a wait
of :math:`w` costs :math:`\\Omega_s w`, in the units of :math:`C_s`.

**Rule**, per stage s and spot executor v, from the cheapest to the strongest:

* :math:`k_v C_s \\le \\Omega_s f_1` (nothing to gain even from the next stable core):
  unrestricted;
* :math:`\\Omega_s f_1 < k_v C_s \\le \\Omega_s W_s` (the first tasks gain by a stable core, the
  last would wait longer than their loss): v is a ``fallback`` for s -- stable cores pick first,
  spot cores take what is left at once, so no task waits longer than it saves;
* :math:`k_v C_s > \\Omega_s W_s` (even the last task is better off waiting): v is ``forbidden``
  for s (placement's starving pass still lets a stage with nothing running take a spot core),
  until the stage has waited :math:`k_v C_s / \\Omega_s` seconds since it was first kept off
  spot; then v is a ``fallback``, so an estimate that was too low never holds a stage longer
  than the loss it avoids.

Python (:func:`trspark.engine.placement.place`) and Scala (``HintPlacement``) carry out the
same hints; no decision is made in the drivers.

**Pado as a limit.** When every lineage-critical stage's :math:`C_s` exceeds any wait (spot
lifetimes far shorter than the lineage, copies unusable), every spot executor is forbidden for
those stages: stable capacity runs the lineage-critical work and spot runs leaf and result
work, which is Pado's placement (EuroSys'17). Pado picks its stages by a capacity budget; here
the wait is the budget: once stable cores are saturated, :math:`W_s` outgrows
:math:`C_s` and the stage runs on spot with its outputs backed up. When copies are cheap,
:math:`C_s` is small and TR's backups win over waiting.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

import numpy as np

from trspark.engine.state import JobState
from trspark.engine.tr.checkpointing import Costs
from trspark.engine.tr.scheduling import GammaLimits
from trspark.engine.tr.stall import stall_width
from trspark.engine.views import ExecutorView, MapOutput, StageView

#: Weight of the newest priced output in a stage's spot cost ``C_s``.
SMOOTHING = 0.3


def last_wait(free_at: np.ndarray, pending: int, seconds: float) -> tuple[float, np.ndarray]:
    """``(W_s, free_at after)``: when the last of ``pending`` tasks of ``seconds`` each starts on cores free at ``free_at``.

    ``free_at`` sorted ascending (s from now); task ``j`` runs on core ``j mod n`` (module docstring).
    """
    n = len(free_at)
    if pending <= 0 or n == 0:
        return 0.0, free_at
    last = pending - 1
    counts = np.full(n, pending // n) + (np.arange(n) < pending % n)
    return float(free_at[last % n] + (last // n) * seconds), np.sort(free_at + counts * seconds)


class StablePlacement:
    """The rule of the module docstring: per-stage spot costs, and the restrictions they imply.

    Parameters
    ----------
    stable_pools : Collection[str]
        Pools whose executors are never evicted.
    rebalance_factor : float
        ``k_v`` of an executor with a rebalance recommendation.
    stall_weight : bool
        Price a wait by the cores it holds up (:math:`\\Omega_s`), as the policy weights
        :math:`C_s`; False: both unweighted.
    """

    def __init__(self, stable_pools: Collection[str], rebalance_factor: float = 1.0, stall_weight: bool = True) -> None:
        self.stable_pools = frozenset(stable_pools)
        self.rebalance_factor = rebalance_factor
        self.stall_weight = stall_weight
        self.cost: dict[int, float] = {}
        """shuffle -> ``C_s`` (s) of its outputs on spot executors."""
        self.since: dict[int, float] = {}
        """stage -> time its spot executors were first worth forbidding (while they still are)."""
        self.restricting = False
        """Did the last :meth:`restrict` keep spot executors off, or after stable ones, for some stage?"""

    @property
    def reads_costs(self) -> bool:
        """Does :meth:`observe` read the lowest cost of a block (some pool is stable)?"""
        return bool(self.stable_pools)

    @property
    def active(self) -> bool:
        """Is some stage restricted now (then every freed core changes the waits)?"""
        return self.restricting

    def stable(self, executor: ExecutorView) -> bool:
        return executor.pool in self.stable_pools

    def observe(self, block: MapOutput, state: JobState, costs: Costs) -> None:
        """Fold the policy's pricing of ``block`` into its stage's ``C_s`` (outputs on spot executors only)."""
        holder = state.executors.get(block.executor_id)
        if not self.stable_pools or holder is None or self.stable(holder):
            return
        paid = min(costs.c_redo, costs.c_bl, costs.c_br)
        old = self.cost.get(block.shuffle_id)
        self.cost[block.shuffle_id] = paid if old is None else (1 - SMOOTHING) * old + SMOOTHING * paid

    def forget(self, shuffle_ids: Sequence[int]) -> None:
        for shuffle in shuffle_ids:
            self.cost.pop(shuffle, None)

    def spot_cost(self, stage: StageView) -> float:
        """``C_s`` (s): priced outputs of the stage, else the costliest shuffle it reads, else 0."""
        if stage.shuffle_id is None:
            return 0.0
        if stage.shuffle_id in self.cost:
            return self.cost[stage.shuffle_id]
        return max((self.cost.get(p, 0.0) for p in stage.parent_shuffle_ids), default=0.0)

    def weight(self, executor: ExecutorView) -> float:
        """``k_v``: the rebalance hazard factor for a recommended executor, else 1."""
        return self.rebalance_factor if executor.rebalance_at is not None else 1.0

    def restrict(self, state: JobState, limits: GammaLimits) -> GammaLimits:
        """``limits`` with the spot executors kept off (forbidden) or put after stable ones (fallback), per stage."""
        alive = [e for e in state.alive_executors() if not e.draining]
        stable = [e for e in alive if self.stable(e)]
        spot = [e for e in alive if not self.stable(e)]
        if not (stable and spot):
            self.since.clear()
            self.restricting = False
            return limits
        free_at = self._free_at(state, stable, limits.expected_task_seconds)
        order = limits.stage_order or tuple(sorted(limits.expected_task_seconds))
        forbidden: dict[int, tuple[str, ...]] = {}
        fallback: dict[int, tuple[str, ...]] = {}
        kept: dict[int, float] = {}
        for stage_id in order:
            stage = state.stages.get(stage_id)
            if stage is None or stage.shuffle_id is None or stage.pending_count == 0:
                continue
            # C_s / Omega_s: the loss in seconds of the readers' delay, comparable with a wait.
            cost = self.spot_cost(stage) / (stall_width(state, stage.shuffle_id) if self.stall_weight else 1)
            seconds = limits.expected_task_seconds.get(stage_id, state.mean_task_seconds())
            wait, after = last_wait(free_at, stage.pending_count, seconds)
            weighed = [(e.executor_id, self.weight(e) * cost) for e in spot if self.weight(e) * cost > free_at[0]]
            if not weighed:
                continue
            if any(c > wait for _, c in weighed):
                kept[stage_id] = self.since.get(stage_id, state.now)
            waited = state.now - kept.get(stage_id, state.now)
            if ids := tuple(sorted(e for e, c in weighed if c > wait and waited <= c)):
                forbidden[stage_id] = ids
                free_at = after  # this stage queues for the stable cores
            else:  # its first tasks take the stable cores free now
                free_at = np.sort(np.where(np.arange(len(free_at)) < stage.pending_count, free_at + seconds, free_at))
            if ids := tuple(sorted(e for e, c in weighed if e not in forbidden.get(stage_id, ()))):
                fallback[stage_id] = ids
        self.since = kept
        self.restricting = bool(forbidden or fallback)
        return dataclasses.replace(limits, spot_forbidden=forbidden, spot_fallback=fallback)

    @staticmethod
    def _free_at(state: JobState, stable: Sequence[ExecutorView], expected: dict[int, float]) -> np.ndarray:
        """Seconds from now until each stable core frees (0: free now), sorted."""
        default = state.mean_task_seconds()
        out: list[float] = []
        for ex in stable:
            for stage_id, partition in ex.running:
                stage = state.stages.get(stage_id)
                started = stage.started_at.get((partition, ex.executor_id), state.now) if stage else state.now
                seconds = expected.get(stage_id, stage.mean_task_seconds(default) if stage else default)
                out.append(max(seconds - (state.now - started), 0.0))
            out += [0.0] * ex.free_cores
        return np.sort(np.asarray(out, dtype=float))
