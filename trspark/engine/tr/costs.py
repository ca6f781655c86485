"""Cost terms of Algorithm 2 for one block: ``C_Redo``, ``C_BL``, ``C_BR`` from ``cost_model``.

All numbers (``Er``, ``C_Redo``, ``C_B1``, ``C_R``, ``C_B2``, the peer's own death risk, the
remote cap share) come from :mod:`cost_model.recompute` and :mod:`cost_model.backup`, over the
lineage that :class:`~trspark.engine.state.JobState` keeps in step with the events. This module
only moves the cost model's clock and picks the arguments; everything a decision depends on
beyond the lineage (``T_max``, the stall weight, the remote backups in flight) is an argument.

Two readings of the paper that are ours, not the cost model's:

* ``T`` in ``C_B2`` (paper §4.3 writes ``T``, not ``T_max``). We take it as the executor's
  whole remaining life, so ``C_B2 = BT · P(the source outlives the copy)``: the copy's time is
  paid whenever the copy completes, as it is in Spark and in the simulator (a backup holds a
  core of its source). With ``T = T_max`` a backup would look free on a stable executor and
  TR would back up everything. The peer's own risk ``C_P(Y)`` still stops at ``T_max`` (a peer
  copy only has to survive until the block is consumed).
* Remote concurrency: the cap share uses the remote backups in flight now.

And two that go beyond the paper: re-computation is weighted by the cores a loss holds up
(:mod:`trspark.engine.tr.stall`, ``spark.trspark.stallWeight``), and every backup cost carries a
price per byte copied, :math:`c \\cdot \\text{size}` with :math:`c` in core-seconds per GB
(``spark.trspark.backup.costPerGb``, 0 by default): what a copy takes beyond its own time (the
network and disk it shares with the job, or the store's bill), which the terms above leave out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from cost_model.backup import BackupCosts
from cost_model.backup_options import BackupCost, PeerPrices, RemoteOption
from cost_model.lifetimes.base import LifetimeModel
from cost_model.lineage import Lineage
from cost_model.recompute import Recompute
from cost_model.timegrid import TimeGrid
from trspark.engine.settings import TRConfig
from trspark.engine.state import JobState
from trspark.engine.tr.checkpointing import Costs
from trspark.engine.tr.knowledge import LifetimeKnowledge
from trspark.engine.views import MapOutput

#: Failure-table staleness (s) when exact deadlines are known (deterministic / fitted).
NOTICE_STALENESS = 0.25

#: Horizon standing for "the rest of the executor's life" in ``C_B2`` (s); ~3 years.
LIFE_HORIZON = 1e8

#: Mean lifetime (s) that sizes the time grid when every model is stable (never evicted).
DEFAULT_MEAN = 3600.0

#: ``C_B2`` values over an executor's life kept (:meth:`CostEstimator._life_b2`).
LIFE_B2_KEPT = 4096

Life = tuple[LifetimeModel, float] | None
"""A live executor's lifetime model and age (s), or None for no live executor."""


class CostEstimator:
    """``Recompute`` + ``BackupCosts`` of ``cost_model`` over a lineage the job state feeds.

    Parameters
    ----------
    config : TRConfig
        Grid size, recursion depth, period (failure-table staleness), bandwidths, targets.
    knowledge : LifetimeKnowledge
        Supplies each executor's lifetime model.
    lineage : Lineage
        The lineage :class:`~trspark.engine.state.JobState` keeps (this object only reads it).
    """

    def __init__(self, config: TRConfig, knowledge: LifetimeKnowledge, lineage: Lineage) -> None:
        self.config = config
        self.knowledge = knowledge
        self.lineage = lineage
        # The grid must reach the longest T_max we ask for; past it Er is held constant.
        horizon = max(1.0, 4.0 * knowledge.longest_mean(DEFAULT_MEAN))
        self.grid = TimeGrid.geometric(horizon, size=config.grid_size, first=min(0.05, horizon / 1e4))
        # Just under a period, so that every tick finds the table stale.
        self._period_staleness = config.period * 0.999
        self.recompute = Recompute(
            self.lineage, self.grid, depth=config.recursion_depth,
            max_staleness=NOTICE_STALENESS if knowledge.exact(False) else self._period_staleness
        )
        self.backup = BackupCosts(
            self.recompute, config.local_bandwidth, config.remote_bandwidth, config.remote_cap,
            latency=config.backup_latency,
        )
        self._first = True
        self._life_b2_kept: dict[tuple[LifetimeModel, float | None, float], float] = {}

    # ---- the clock ----------------------------------------------------------------------------
    def advance(self, now: float, *, tick: bool, forgotten: Sequence[int] = (), deadlines_pending: bool = False) -> None:
        """After an event is folded into the state: drop what was derived from ``forgotten`` shuffles, move the clock.

        With a distribution only, the failure table ages with the clock on ticks: its rebuild
        (O(executors x grid)) lands on the periodic re-plan, not inside a task's decision, and
        ages lag by at most one period. With exact deadlines a lag of a period would move deaths
        out of the window, so the clock follows every event and the table is rebuilt every
        :data:`NOTICE_STALENESS` seconds, while ``deadlines_pending`` (some alive executor's death
        time is known) or in the exact knowledge modes: as of that clock, when a decision next
        reads it, so that events deciding nothing do not pay for it.
        """
        for shuffle in forgotten:
            self.recompute.forget_shuffle(shuffle)
        exact = self.knowledge.exact(deadlines_pending)
        if exact and self.recompute.max_staleness > NOTICE_STALENESS:  # a deadline came
            self.recompute.max_staleness = NOTICE_STALENESS
            self.recompute.refresh(eager=tick)
        elif not exact and self.recompute.max_staleness < self._period_staleness:  # the last deadline passed
            self.recompute.max_staleness = self._period_staleness
        if tick or self._first or exact:
            self._first = False
            self.recompute.advance(now, eager=tick or not exact)

    def copy_seconds(self, size: float, bandwidth: float) -> float:
        """``BT`` (s) of one copy of ``size`` bytes at ``bandwidth`` bytes/s, the backup latency included."""
        return self.backup.copy_seconds(size, bandwidth)

    # ---- costs --------------------------------------------------------------------------
    def costs(self, block: MapOutput, state: JobState, t_max: float, *, weight: float,
              remote_in_flight: int, peer_loads: Mapping[str, int] | None = None,
              exclude: Collection[str] = (), exact_lowest: bool = True) -> Costs:
        """``C_Redo``, best ``C_BL`` and ``C_BR`` (s) of ``block`` consumed ``t_max`` s from now.

        Every re-computation term (``C_Redo``, ``C_R``, ``C_P``) is multiplied by ``weight``, the
        cores a loss holds up (:func:`~trspark.engine.tr.stall.stall_width`, or 1); the copy
        terms (``C_B1``, ``C_B2``) are not. ``remote_in_flight`` remote backups share the
        store's bandwidth with this one; ``peer_loads[y]`` copies share peer ``y``'s
        (:meth:`best_local`); the executors in ``exclude`` (told to go) receive no copy.
        ``state`` is only read (the holders' ages).

        When a floor of ``C_Redo`` (:meth:`Recompute.c_redo_floor`) already exceeds a backup's
        cost, that floor is reported for ``C_Redo``: Algorithm 2 decides the same. When ``C_Redo``
        is below a lower bound of every allowed backup cost -- ``C_B2`` alone,
        :math:`BT \\cdot P(BT < T_X \\le T)` -- no backup can win Algorithm 2, so the backup
        costs are not computed and reported as ``inf`` (same decision, a fraction of the work).
        Likewise a target is reported as ``inf`` when a lower bound of its cost exceeds both
        ``C_Redo`` and the other target's cost, priced first when its own bound is the lower:
        ``C_B2`` alone for ``C_BR`` (:meth:`_remote_cannot_win`), :meth:`_peers_floor` for
        ``C_BL``. Without ``exact_lowest`` (no caller reads the lowest cost), a store that
        certainly wins -- an upper bound of ``C_BR`` (:meth:`RemoteOption.ceiling`) below both
        floors -- is reported with that bound. ``C_BL`` and ``C_BR`` include the byte price
        :math:`c \\cdot \\text{size}` (core-seconds; ``backup.costPerGb``).
        """
        sid, idx = block.block_id
        price = self.config.backup_cost_per_gb * block.bytes / 1e9
        # The bound never exceeds the cheapest copy time, so only a small C_Redo can be pruned.
        bandwidths = self._allowed_bandwidths(remote_in_flight)
        fastest = self.backup.copy_seconds(block.bytes, max(bandwidths, default=0.0)) + price
        loads = peer_loads or {}
        self.backup.evaluate_ends(sid, idx, t_max, LIFE_HORIZON, remote_in_flight)
        redo_floor = weight * self.recompute.c_redo_floor(sid, idx, t_max)
        if redo_floor >= fastest:
            # C_Redo is priced only when its floor does not already lose to a copy.
            c_bl, peer, c_br = self._backups(block, state, t_max, weight, math.inf, remote_in_flight, loads, exclude,
                                             None if exact_lowest else redo_floor - price)
            beaten = _above(redo_floor - price, min(c_bl, c_br))
            c_redo = redo_floor if beaten else weight * self.recompute.c_redo(sid, idx, t_max)
            return Costs(c_redo=c_redo, c_bl=c_bl + price, c_br=c_br + price, peer=peer)
        c_redo = weight * self.recompute.c_redo(sid, idx, t_max)
        if c_redo < fastest and c_redo < self._backup_lower_bound(block, state, bandwidths) + price:
            return Costs(c_redo=c_redo, c_bl=math.inf, c_br=math.inf, peer=None)
        # The same price on both targets: it moves the line between copying and not, not the target.
        c_bl, peer, c_br = self._backups(block, state, t_max, weight, c_redo - price, remote_in_flight, loads, exclude)
        return Costs(c_redo=c_redo, c_bl=c_bl + price, c_br=c_br + price, peer=peer)

    def _backups(self, block: MapOutput, state: JobState, t_max: float, weight: float, best: float,
                 remote_in_flight: int, loads: Mapping[str, int], exclude: Collection[str],
                 redo_floor: float | None = None) -> tuple[float, str | None, float]:
        """``(C_BL, its peer, C_BR)`` (s, price left out); a cost is ``inf`` when it certainly exceeds ``best`` (s) or the other's.

        With ``redo_floor`` (a lower bound of ``C_Redo``, price left out), ``C_BR`` may be an upper
        bound of it that is certainly below that floor and every peer's.
        """
        targets = self.config.targets
        remote = None
        if targets != "local":
            remote = self.backup.remote_option(*block.block_id, LIFE_HORIZON, concurrent=remote_in_flight)
        loss_floor, copy_after = self._peers_floor(block, state, t_max, weight, loads, exclude) if targets != "remote" else (math.inf, _no_copy)
        c_bl, peer, c_br = math.inf, None, math.inf
        # The target with the lower floor is priced first; its cost may rule the other one out. The
        # peers' floor is their loss part plus C_B2, whose sum (``whole``) is evaluated only when
        # the loss part alone decides nothing: a cost above one bound is above every higher one.
        whole: float | None = None
        if remote is not None and (remote.floor < loss_floor or remote.floor < (whole := loss_floor + copy_after())):
            if redo_floor is not None and whole is None:
                ceiling = remote.ceiling(weight)
                if _above(redo_floor, ceiling) and _above(loss_floor, ceiling):
                    return math.inf, None, ceiling
            c_br = self._remote_cost(remote, weight, best)
            bar = min(best, c_br)
            if not _above(loss_floor, bar) and not _above(loss_floor + copy_after() if whole is None else whole, bar):
                c_bl, peer = self.best_local(block, state, t_max, weight, loads, exclude)
            return c_bl, peer, c_br
        if not _above(loss_floor + copy_after() if whole is None else whole, best):
            c_bl, peer = self.best_local(block, state, t_max, weight, loads, exclude)
        if remote is not None:
            c_br = self._remote_cost(remote, weight, min(best, c_bl))
        return c_bl, peer, c_br

    def _remote_cost(self, remote: RemoteOption, weight: float, best: float) -> float:
        """``C_BR`` (s, price left out), or ``inf`` when it certainly exceeds ``best`` (s)."""
        if self._remote_cannot_win(remote.floor, best):
            return math.inf
        option = remote.cost()
        return option.b1 + weight * option.redo + option.b2

    @staticmethod
    def _remote_cannot_win(floor: float, best: float) -> bool:
        """Whether ``C_BR``, at least ``floor`` (s, its ``C_B2``: :attr:`RemoteOption.floor`), is certainly above ``best`` (s).

        ``best`` is the lower of ``C_Redo`` and ``C_BL``, the price left out of both. Then
        Algorithm 2 picks the same target with ``C_BR = inf``, and ``min(C_Redo, C_BL, C_BR)`` is
        the same. The relative margin covers the rounding of the terms the floor leaves out.
        """
        return math.isfinite(best) and floor - best > 1e-9 * abs(floor)

    def _peers_floor(self, block: MapOutput, state: JobState, t_max: float, weight: float,
                     loads: Mapping[str, int], exclude: Collection[str]) -> tuple[float, Callable[[], float]]:
        """A lower bound (s) of every peer's ``C_BL`` (price left out), before any peer is priced, in two parts: ``(w C_P^floor, C_B2)``.

        :math:`C_{BL} = C_{B1} + w (C_R + C_P) + C_{B2} \\ge w \\, C_P^{floor} + C_{B2}`
        (:meth:`BackupCosts.peer_loss_floor`; :math:`C_{B1}, C_R \\ge 0` as sums of failure masses
        times non-negative values). :math:`C_{B2}` comes as a function, evaluated when asked. With
        no peer the first part is ``inf``. A peer receiving other copies gets a slower copy whose
        :math:`C_{B2}` this bound does not cover, so then the bound is 0.
        """
        if any(loads.values()):
            return 0.0, _no_copy
        sid, idx = block.block_id
        floor = self.backup.peer_loss_floor(sid, idx, t_max)
        if floor is None:
            return math.inf, _no_copy
        seconds, peer_loss = floor
        return weight * peer_loss, lambda: self._life_b2(self._life_of(block.backup_source(exclude), state), seconds)

    def best_local(self, block: MapOutput, state: JobState, t_max: float, weight: float,
                   loads: Mapping[str, int], exclude: Collection[str] = ()) -> tuple[float, str | None]:
        """The lowest ``C_BL`` (s) and its peer (none in ``exclude``), a peer receiving ``n`` other copies sharing its bandwidth.

        A copy to a peer that already receives ``n`` copies moves at ``local_bandwidth / (n + 1)``
        (the peer's link is shared): many evictable executors copying to one stable executor
        slow each other down, and the longer ``BT`` raises every copy term. Peers are priced in
        groups of equal load (ties: the lower load, then executor order); when the cheapest peer
        at full bandwidth receives nothing, no other peer can beat it and one group is enough.
        """
        sid, idx = block.block_id
        priced = self.backup.every_peer(sid, idx, t_max)
        if priced is None:
            return math.inf, None
        base, peers, peer_loss = priced.base, priced.peers, priced.peer_loss
        life = self._life_of(block.backup_source(exclude), state)  # the holder the copy is read from: its life prices C_B2
        first = int(peer_loss.argmin())
        first_id = peers.executors[first].executor_id
        if not loads.get(first_id) and first_id not in exclude:
            return self._c_bl(life, base, float(peer_loss[first]), weight), first_id
        # Within the grid a peer's C_P is its own row's: the unloaded group is a subset of the peers priced above.
        reuse = t_max <= self.grid.horizon
        size = self.lineage.output(sid, idx).size
        floor = self.backup.slower_copy_floor(priced)
        out: tuple[float, str | None] = (math.inf, None)
        # An excluded peer is left out of every group, as a holder is.
        for load, positions in peers.load_groups([*block.holders(), *exclude], loads):
            bandwidth = self.config.local_bandwidth / (load + 1)
            if load == 0 and reuse:
                terms, losses = base, peer_loss[positions]
                best = int(losses.argmin())
            elif load and self._loaded_cannot_win(priced, floor, positions, life, self.backup.copy_seconds(size, bandwidth), weight,
                                                  out[0]):
                continue
            else:
                option = self.backup.peer_option(sid, idx, t_max, peers.slots[positions], bandwidth)
                losses = option.peer_loss
                best = int(losses.argmin())
                if load and self._cannot_win(life, option.seconds, floor, weight, out[0], float(losses[best])):
                    continue
                terms = option.terms()
            if (cost := self._c_bl(life, terms, float(losses[best]), weight)) < out[0]:
                out = (cost, peers.executors[int(positions[best])].executor_id)
        return out

    def _loaded_cannot_win(self, priced: PeerPrices, floor: BackupCost, positions: NDArray[np.int64], life: Life,
                           seconds: float, weight: float, best: float) -> bool:
        """:meth:`_cannot_win` for the peers at ``positions`` copying in ``seconds``, before they are priced.

        First with :math:`C_P \\ge 0`, then with the floor of their :math:`C_P` at the slower copy
        from their prices at full bandwidth (:meth:`BackupCosts.slower_peer_loss_floor`).
        """
        if self._cannot_win(life, seconds, floor, weight, best):
            return True
        peer_floor = self.backup.slower_peer_loss_floor(priced, positions, seconds)
        return peer_floor > 0.0 and self._cannot_win(life, seconds, floor, weight, best, peer_floor)

    def _cannot_win(self, life: Life, seconds: float, floor: BackupCost, weight: float, best: float,
                    peer_loss: float | None = None) -> bool:
        """Whether every peer receiving copies that make this one last ``seconds`` costs at least ``best`` (s).

        A slower copy (longer ``BT``) has ``C_B1`` and ``C_R`` at least ``floor``'s
        (:meth:`BackupCosts.slower_copy_floor`: those of the copy at full bandwidth within the
        grid's horizon, where both discrete sums are non-decreasing in ``BT``) and ``C_P >= 0``,
        so ``C_BL >= C_B1(floor) + w C_R(floor) + C_B2(BT)``; with ``peer_loss``, the lowest ``C_P``
        of these peers at this ``BT``, ``C_BL >= C_B1(floor) + w (C_R(floor) + C_P) + C_B2(BT)``.
        The relative margin covers rounding.
        """
        if peer_loss is None:
            bound = floor.b1 + weight * floor.redo + self._life_b2(life, seconds)
        else:
            bound = floor.b1 + weight * (floor.redo + peer_loss) + self._life_b2(life, seconds)
        return bound - best > 1e-9 * abs(best)

    def _c_bl(self, life: Life, terms: BackupCost, peer_loss: float, weight: float) -> float:
        """``C_BL`` (s) of the copy priced by ``terms`` to a peer whose ``C_P`` is ``peer_loss``.

        ``terms.b2`` stops at T_max; over the source's ``life`` it is :meth:`_life_b2`.
        """
        return terms.b1 + weight * (terms.redo + peer_loss) + self._life_b2(life, terms.seconds)

    def _life_of(self, source: str | None, state: JobState) -> Life:
        """The lifetime model and age (s) of executor ``source`` now, or None when it is not alive."""
        holder = state.executors.get(source or "")
        return None if holder is None else (self.knowledge.model(holder), holder.age(state.now))

    def _life_b2(self, life: Life, seconds: float) -> float:
        """:math:`C_{B2} = BT \\cdot P(BT < T_X \\le T)` with ``T`` = the source's ``life`` (``LIFE_HORIZON``); ``BT`` without one.

        Kept per (model, age, ``BT``): a decision asks for the same copy time up to twice (the
        bound of a group of loaded peers, then its price), and copies of equal size repeat it.
        An age-free model (:attr:`LifetimeModel.age_free`) gives the same value at every age.
        """
        if life is None:
            return seconds
        model, age = life
        key = (model, None if model.age_free else age, seconds)
        value = self._life_b2_kept.get(key)
        if value is None:
            if len(self._life_b2_kept) >= LIFE_B2_KEPT:
                self._life_b2_kept = {}
            value = seconds * float(model.prob_fail(age, seconds, LIFE_HORIZON))
            self._life_b2_kept[key] = value
        return value

    def _allowed_bandwidths(self, remote_in_flight: int) -> list[float]:
        """The bandwidth (bytes/s) of a copy to each allowed target: the store's share with
        ``remote_in_flight`` other remote copies (:meth:`BackupCosts.remote_share`), a peer's."""
        out = []
        if self.config.targets in ("both", "remote"):
            out.append(self.backup.remote_share(remote_in_flight))
        if self.config.targets in ("both", "local"):
            out.append(self.config.local_bandwidth)
        return out

    def _backup_lower_bound(self, block: MapOutput, state: JobState, bandwidths: Sequence[float]) -> float:
        """:math:`\\min_x BT(x) \\cdot P(BT(x) < T_X \\le T)` over the allowed targets' ``bandwidths`` (s)."""
        holder = state.executors.get(block.holders()[0]) if block.holders() else None
        if holder is None:
            return 0.0
        model, age = self.knowledge.model(holder), holder.age(state.now)
        seconds = np.array([self.backup.copy_seconds(block.bytes, bw) for bw in bandwidths])
        return float(np.minimum.reduce(seconds * model.prob_fail(age, seconds, LIFE_HORIZON)))

    def best_peer(self, block: MapOutput, t_max: float) -> str | None:
        """The peer with the lowest ``C_BL`` (used by the safety belt in local-only mode)."""
        best = self.backup.best_local_destination(block.shuffle_id, block.map_index, t_max)
        return None if best is None else best.target


def _no_copy() -> float:
    """``C_B2`` (s) of no copy."""
    return 0.0


def _above(bound: float, best: float) -> bool:
    """Whether a cost of at least ``bound`` (s) is certainly above ``best`` (s); the relative margin covers rounding."""
    return math.isfinite(best) and bound - best > 1e-9 * abs(best)

