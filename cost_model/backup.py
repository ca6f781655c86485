"""Expected cost of backing up a map output to remote storage (``C_BR``) or to a peer (``C_BL``), paper §4.3.

For output :math:`k` on executor :math:`X` (failure law :math:`f(\\tau, t)`, cdf :math:`F_X`), consumed at
:math:`T = T_{max}` (s from now), copied in :math:`BT(x) = L + \\text{size} / \\text{bandwidth}(x)` seconds
(:math:`L` = a fixed per-copy latency: opening, committing and registering a copy costs time
whatever its size -- a blob-store PUT, an RPC to the driver; it keeps tiny outputs from looking free):

.. math::

    C_{B1}(x) &= \\int_0^{BT} f(\\tau,t)\\, t \\, dt
        && \\text{backup time spent when } X \\text{ fails during the copy}

    C_R(x) &= \\int_0^{\\min(BT, T)} f(\\tau,t)\\, Er(t,k)\\, dt
        && \\text{re-computation when } X \\text{ fails before the copy is done}

    C_{B2}(x) &= BT \\cdot P(BT < T_X \\le T)
        && \\text{backup time when } X \\text{ fails after the copy}

    C_B(x) &= C_{B1} + C_R + C_{B2} \\; (+\\, C_P(Y) \\text{ for a peer } Y)

:math:`C_R` stops at :math:`T`: a failure after consumption costs no re-computation. Each integral is
:math:`\\sum_i p_i\\, g(t_i^*)` with the exact cell failure mass :math:`p_i`, :math:`t_i^*` the cell
midpoint for :math:`t` and the mean of the edge values for :math:`Er`.

**Peer destination.** A copy on peer :math:`Y` is itself transient: the block is lost when both
:math:`X` and :math:`Y` have failed before :math:`T` (:math:`X` failing after the copy is done).
If :math:`X` fails at :math:`t \\in (BT, T]` the loss happens at :math:`t` when :math:`Y` already
failed (during or after the copy), else at :math:`Y`'s later failure :math:`u \\in (t, T]`:

.. math::

    C_P(Y) = \\int_{BT}^{T} f_X(t) \\Bigl[ F_Y(t)\\, Er(t,k) + \\int_t^{T} f_Y(u)\\, Er(u,k)\\, du \\Bigr] dt
    \\approx \\sum_i p^X_i \\Bigl[F_Y(g_{i+1})\\, \\overline{Er}_i + \\sum_{j > i} p^Y_j\\, \\overline{Er}_j\\Bigr]

on the grid clipped to :math:`[BT, T]` (a failure of :math:`Y` in the same cell as :math:`X`'s is
charged :math:`\\overline{Er}_i`). ``Er`` is the one conditioned on :math:`X`'s failure, as in
:mod:`cost_model.recompute`. Vectorised over candidate peers.

**Remote bandwidth.** :math:`\\min(b_{remote}, \\; \\text{cap} / (n + 1))` with :math:`n` other remote
backups in flight: the store's total bandwidth is shared.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np
from numpy.typing import NDArray

from .backup_options import BackupCost, PeerOption, PeerPrices, PricedBlock, RemoteOption, with_peer
from .lifetimes.base import FloatArray
from .peer_sets import PeerSets
from .recompute import Recompute

_NUMBER = (int, float)

__all__ = ["BackupCost", "BackupCosts", "PeerOption", "PeerPrices", "RemoteOption", "shared_remote_bandwidth", "with_peer"]


def shared_remote_bandwidth(per_executor: float, total_cap: float, concurrent: int) -> float:
    """Bandwidth (bytes/s) of one more remote backup: :math:`\\min(b, \\text{cap} / (n + 1))`.

    Parameters
    ----------
    per_executor : float
        One executor's write bandwidth to the store (bytes/s, > 0).
    total_cap : float
        The store's total bandwidth (bytes/s, > 0).
    concurrent : int
        Other remote backups in flight (>= 0).
    """
    _check_bandwidth("per_executor", per_executor)
    _check_bandwidth("total_cap", total_cap)
    return _shared(per_executor, total_cap, concurrent)


def _shared(per_executor: float, total_cap: float, concurrent: int) -> float:
    """:func:`shared_remote_bandwidth` of bandwidths already checked."""
    if not (isinstance(concurrent, int) and concurrent >= 0):
        raise ValueError(f"shared_remote_bandwidth: 'concurrent' must be an integer >= 0, got {concurrent!r}")
    share = total_cap / (concurrent + 1)
    return share if share < per_executor else per_executor  # min(), written out: it runs on every price


class BackupCosts:
    """``C_BR`` and ``C_BL`` for the outputs known to a :class:`Recompute`.

    Parameters
    ----------
    recompute : Recompute
        Supplies the lineage, the grid, the failure table and ``Er``.
    local_bandwidth : float
        Peer-to-peer copy bandwidth (bytes/s, > 0).
    remote_bandwidth : float
        One executor's write bandwidth to the remote store (bytes/s, > 0).
    remote_cap : float
        Total remote-store bandwidth shared by concurrent backups (bytes/s, > 0).
    latency : float
        :math:`L`, fixed time of one copy whatever its size (s, >= 0; 0 = the paper's model).
    """

    def __init__(
        self, recompute: Recompute, local_bandwidth: float, remote_bandwidth: float, remote_cap: float,
        latency: float = 0.0,
    ) -> None:
        self.recompute = recompute
        self.local_bandwidth = _check_bandwidth("local_bandwidth", local_bandwidth)
        self.remote_bandwidth = _check_bandwidth("remote_bandwidth", remote_bandwidth)
        self.remote_cap = _check_bandwidth("remote_cap", remote_cap)
        if not (isinstance(latency, _NUMBER) and math.isfinite(latency) and latency >= 0.0):
            raise ValueError(f"backup cost: 'latency' must be a finite number >= 0 seconds, got {latency!r}")
        self.latency = float(latency)
        self._peer_sets = PeerSets(recompute.lineage)

    def copy_seconds(self, size: float, bandwidth: float) -> float:
        """:math:`BT = L + \\text{size} / \\text{bandwidth}` (s) of one copy of ``size`` bytes."""
        return self.latency + size / bandwidth

    def remote_share(self, concurrent: int) -> float:
        """Bandwidth (bytes/s) of one more copy to the store with ``concurrent`` others in flight (:func:`shared_remote_bandwidth`)."""
        return _shared(self.remote_bandwidth, self.remote_cap, concurrent)

    def remote(self, shuffle_id: Hashable, map_index: int, t_max: float, concurrent: int = 0) -> BackupCost:
        """:math:`C_{BR}`: copy to remote storage with ``concurrent`` other remote copies in flight."""
        return self.remote_option(shuffle_id, map_index, t_max, concurrent).cost()

    def remote_option(self, shuffle_id: Hashable, map_index: int, t_max: float, concurrent: int = 0) -> RemoteOption:
        """The copy to remote storage, its :math:`F_X(BT)` and :math:`F_X(T)` evaluated and the rest left to :meth:`RemoteOption.cost`."""
        bandwidth = self.remote_share(concurrent)
        return RemoteOption(self.recompute, *self._block_and_ends(shuffle_id, map_index, t_max, bandwidth))

    def evaluate_ends(self, shuffle_id: Hashable, map_index: int, t_max: float, remote_t_max: float, concurrent: int = 0) -> None:
        """Evaluate :math:`F_X` at every end the prices of one decision read, in one model call; the table keeps them.

        The ends: :math:`T` (``t_max``), :math:`BT` to a peer and to the store (``concurrent``
        other remote copies in flight), and ``remote_t_max``, the store copy's :math:`T`. Nothing
        when the block has no live copy.
        """
        rc = self.recompute
        out = rc.lineage.output(shuffle_id, map_index)
        failing = rc.failing_executor(out)
        if failing is None:
            return
        remote = self.remote_share(concurrent)
        times = (t_max, self.copy_seconds(out.size, self.local_bandwidth), self.copy_seconds(out.size, remote), remote_t_max)
        rc.table.cdf_points(rc.lineage.executor(failing).slot, times)

    def local(self, shuffle_id: Hashable, map_index: int, t_max: float, peers: Sequence[str]) -> list[BackupCost]:
        """:math:`C_{BL}(Y)` for each peer ``Y`` in ``peers`` (live executors other than the block's)."""
        out = self.recompute.lineage.output(shuffle_id, map_index)
        for peer in peers:
            if peer in out.locations:
                raise ValueError(f"backup cost: peer {peer!r} already holds map output {(shuffle_id, map_index)!r}")
        executors = [self.recompute.lineage.executor(p) for p in peers]
        base, peer_loss, *_read = self._local_costs(shuffle_id, map_index, t_max, [ex.slot for ex in executors])
        return [with_peer(base, peer, float(loss)) for peer, loss in zip(peers, peer_loss, strict=True)]

    def best_local_destination(
        self, shuffle_id: Hashable, map_index: int, t_max: float, candidates: Sequence[str] | None = None,
        bandwidth: float | None = None,
    ) -> BackupCost | None:
        """The peer with the lowest :math:`C_{BL}` (ties: first in order), or None if there is none.

        ``candidates`` defaults to every live executor; the executors already holding the
        block are never candidates. Only :math:`C_P` differs between peers (same bandwidth:
        ``bandwidth`` bytes/s, default the local bandwidth; less for peers that already receive
        other copies).
        """
        if candidates is None:
            priced = self.every_peer(shuffle_id, map_index, t_max, bandwidth)
            if priced is None:
                return None
            base, peers, peer_loss = priced.base, priced.peers.executors, priced.peer_loss
        else:
            lineage = self.recompute.lineage
            out = lineage.output(shuffle_id, map_index)
            peers = [ex for ex in (lineage.executor(c) for c in candidates) if ex.executor_id not in out.locations]
            if not peers:
                return None
            slots = np.array([ex.slot for ex in peers], dtype=np.int64)
            base, peer_loss, *_read = self._local_costs(shuffle_id, map_index, t_max, slots, bandwidth)
        best = int(np.argmin(peer_loss))
        return with_peer(base, peers[best].executor_id, float(peer_loss[best]))

    def every_peer(
        self, shuffle_id: Hashable, map_index: int, t_max: float, bandwidth: float | None = None,
    ) -> PeerPrices | None:
        """Every live executor ``Y`` not holding the block and its :math:`C_P(Y)`, copying at ``bandwidth``.

        ``bandwidth`` in bytes/s, default the local bandwidth. Within the grid's horizon a peer's
        :math:`C_P` depends only on its own row of the failure table, so any subset of the peers
        is priced by these values. None when there is no such executor.
        """
        out = self.recompute.lineage.output(shuffle_id, map_index)
        peers = self._peer_sets.without(frozenset(out.locations))
        if not peers.executors:
            return None
        return PeerPrices(peers, *self._local_costs(shuffle_id, map_index, t_max, peers.slots, bandwidth))

    def peer_loss_floor(self, shuffle_id: Hashable, map_index: int, t_max: float) -> tuple[float, float] | None:
        """``(BT, floor)``: the copy time (s) at the local bandwidth and a lower bound (s) of every peer's :math:`C_P(Y)` at it.

        With :math:`\\overline{Er}` non-decreasing (:meth:`slower_copy_floor`) and :math:`p^Y_j \\ge 0`,
        each bracket of the module docstring's sum is at least
        :math:`\\overline{Er}_i F_Y(g_{i+1}) + \\overline{Er}_{i+1} (F_Y(T) - F_Y(g_{i+1})) \\ge \\overline{Er}_i F_Y(T)`, so

        .. math::

            C_P(Y) \\ge Er(BT)\\, \\min_Y F_Y(T)\\, (F_X(T) - F_X(BT)).

        :math:`Er(BT)` is taken at the grid edge at or below :math:`BT` and lowered by 1e-9 of
        :math:`\\max Er = Er(H)` against rounding (every term of the sum is at most
        :math:`\\max Er\\, F_Y(T) (F_X(T) - F_X(BT))`); the minimum runs over every live executor,
        the holders too, and is itself bounded below (:meth:`Windows.lowest_at`). Computed for
        ``T`` inside the grid past its first cell with continuous laws only, where :math:`F_Y(T)`
        is the interpolated column as :meth:`_peer_loss` reads it; 0 otherwise. None when no live
        executor but the block's holders could receive the copy, as for :meth:`every_peer`.
        """
        live = self._peer_sets.live_slots(self.recompute.lineage.output(shuffle_id, map_index).locations)
        if live is None:
            return None
        block, f_bt, f_t = self._block_and_ends(shuffle_id, map_index, t_max, self.local_bandwidth)
        table, windows = self.recompute.table, self.recompute.windows
        if not (table.all_continuous and windows.grid.edges[1] <= t_max <= windows.grid.horizon and block.seconds < t_max):
            return block.seconds, 0.0
        er = self.recompute.er(shuffle_id, map_index)
        below = windows.split(block.seconds, t_max)[0]  # the edges [:below] are <= BT
        er_floor = float(er[below - 1]) - 1e-9 * float(er[-1])
        f_peers = windows.lowest_at(table, live, t_max)
        floor = er_floor * f_peers * (f_t - f_bt)
        return block.seconds, (0.0 if floor < 0.0 else floor)  # max(floor, 0), inlined on every decision

    def slower_peer_loss_floor(self, priced: PeerPrices, positions: NDArray[np.int64], seconds: float) -> float:
        """A lower bound (s) of the lowest :math:`C_P(Y)` of the peers ``priced.peers[positions]`` copied in ``seconds`` (>= ``priced``'s BT).

        With the terms :math:`h_i(Y) = F_Y(e_{i+1}) \\overline{Er}_i + \\sum_{j>i} p^Y_j \\overline{Er}_j`
        of the module docstring, :math:`C_P = \\sum_i p^X_i h_i` and :math:`0 \\le h_i \\le F_Y(T) \\max Er`.
        A slower copy :math:`BT' > BT` keeps every cell of the window right of :math:`g`, the first grid
        edge past :math:`BT'`, and its cell :math:`[BT', g]` adds a term :math:`\\ge 0`, so

        .. math::

            C_P(Y; BT') \\ge C_P(Y; BT) - (F_X(g) - F_X(BT))\\, F_Y(T) \\max_{[BT, T]} Er

        (:math:`F_X(T)` for :math:`g` when no edge lies in :math:`(BT', T)`). The bound is lowered by
        1e-9 of :math:`(F_X(T) - F_X(BT)) F_Y(T) \\max Er`, a bound of every term, against rounding.
        Computed for ``T`` inside the grid past its first cell with continuous laws only (the
        common case, :math:`F_Y(T)` then the interpolated column), 0 otherwise.
        """
        block, table, windows = priced.block, self.recompute.table, self.recompute.windows
        t_max = block.t_max
        if not (table.all_continuous and windows.grid.edges[1] <= t_max <= windows.grid.horizon and seconds < t_max):
            return 0.0
        f_bt, f_t = priced.f_x
        after_bt, at_t = windows.split(block.seconds, t_max)
        past = windows.split(seconds, t_max)[0]
        f_g = float(table.cdf[block.slot, past]) if past < at_t else f_t
        er_max = float(np.maximum.reduce(priced.er[after_bt - 1:at_t + 1]))
        drop = (f_g - f_bt + 1e-9 * (f_t - f_bt)) * er_max
        peer_cdf = windows.column(table, t_max)[priced.peers.slots[positions]]
        return float(np.minimum.reduce(priced.peer_loss[positions] - drop * peer_cdf))

    def slower_copy_floor(self, priced: PeerPrices) -> BackupCost:
        """``priced.base`` with :math:`C_{B1}` and :math:`C_R` at most those of every slower copy (:math:`BT' > BT`).

        Within the horizon both discrete sums are non-decreasing in :math:`BT`, so these are
        ``priced.base``'s: the window :math:`[0, BT']` keeps the full cells of :math:`[0, BT]`, its
        last cell :math:`[g_k, BT]` grows (more mass: table rows accumulate masses :math:`\\ge 0`;
        a later midpoint; a higher mean of ``Er`` at its ends) and the cells added hold terms
        :math:`\\ge 0`. ``Er`` is non-decreasing in :math:`t`: :math:`C_k` plus sums of products
        of non-negative, non-decreasing functions of the :math:`F_e` (:math:`F_e`, :math:`P_L`,
        these with X's factor 1, and the need :math:`1 - \\prod (1 - \\nu_c P_g)` by induction over
        the readers); in floating point it can drop by an ulp, far inside the callers' margins.
        Past the horizon the cells are laid out per window end (:meth:`TimeGrid.edges_to`) and a
        slower copy's midpoint sum there can be lower: :math:`C_{B1}` is then the grid's cells
        plus :math:`H (F_X(BT) - F_X(H))` (every cell past :math:`H` has its midpoint
        :math:`\\ge H`; together they hold :math:`F_X(BT') - F_X(H)`). :math:`C_R` is kept: ``Er``
        is constant past :math:`H`, so its cells there sum to
        :math:`Er(H) (F_X(\\min(BT', T)) - F_X(H))` whatever they are.
        """
        base, horizon = priced.base, self.recompute.grid.horizon
        if base.seconds <= horizon:
            return base
        edges, row = self.recompute.grid.edges, self.recompute.table.cdf[priced.block.slot]
        inside = float((row[1:] - row[:-1]) @ (0.5 * (edges[:-1] + edges[1:])))
        b1 = inside + horizon * max(priced.f_x[0] - float(row[-1]), 0.0)
        return BackupCost(base.target, base.seconds, b1, base.redo, base.b2)

    def peer_option(
        self, shuffle_id: Hashable, map_index: int, t_max: float, slots: NDArray[np.int64], bandwidth: float | None = None,
    ) -> PeerOption:
        """The copy to each live executor in ``slots`` (none holding the block, e.g. some of :attr:`Peers.slots`).

        At ``bandwidth`` bytes/s, default the local bandwidth. :math:`C_P(Y)` is evaluated, the
        peer-independent terms are left to :meth:`PeerOption.terms`.
        """
        rate = self.local_bandwidth if bandwidth is None else _check_bandwidth("bandwidth", bandwidth)
        block, f_bt, f_t = self._block_and_ends(shuffle_id, map_index, t_max, rate)
        er = self.recompute.er(shuffle_id, map_index)
        return PeerOption(self.recompute, block, f_bt, f_t, er, self._peer_loss(block, np.asarray(slots, dtype=np.int64), f_bt, f_t, er))

    # ---- terms -----------------------------------------------------------------------------
    def _block(self, shuffle_id: Hashable, map_index: int, t_max: float, bandwidth: float) -> PricedBlock:
        rc = self.recompute
        if not (math.isfinite(t_max) and t_max >= 0.0):
            raise ValueError(f"backup cost: 't_max' must be a finite number >= 0 seconds, got {t_max!r}")
        out = rc.lineage.output(shuffle_id, map_index)
        seconds = self.copy_seconds(out.size, bandwidth)
        if not math.isfinite(seconds):
            raise ValueError(f"backup cost: copy time {out.size!r} B / {bandwidth!r} B/s is not finite")
        failing = rc.failing_executor(out)
        if failing is None:
            raise ValueError(f"backup cost: map output {(shuffle_id, map_index)!r} has no live copy to back up")
        return PricedBlock(shuffle_id, map_index, t_max, seconds, rc.lineage.executor(failing).slot)

    def _block_and_ends(self, shuffle_id: Hashable, map_index: int, t_max: float, bandwidth: float) -> tuple[PricedBlock, float, float]:
        """The block copied at ``bandwidth`` (bytes/s) and :math:`F_X(BT)`, :math:`F_X(T)` of its executor X."""
        block = self._block(shuffle_id, map_index, t_max, bandwidth)
        f_bt, f_t = self.recompute.table.cdf_points(block.slot, (block.seconds, t_max))
        return block, f_bt, f_t

    def _local_costs(
        self, shuffle_id: Hashable, map_index: int, t_max: float, peer_slots: Sequence[int] | NDArray[np.int64],
        bandwidth: float | None = None,
    ) -> tuple[BackupCost, FloatArray, PricedBlock, tuple[float, float], FloatArray]:
        """The peer-independent terms, :math:`C_P(Y)` per peer slot, copying at ``bandwidth`` (bytes/s), and what they read (:class:`PeerPrices`)."""
        option = self.peer_option(shuffle_id, map_index, t_max, np.asarray(peer_slots, dtype=np.int64), bandwidth)
        return option.terms(), option.peer_loss, option.block, option.f_x, option.er

    def _peer_loss(self, block: PricedBlock, peer_slots: NDArray[np.int64], f_bt: float, f_t: float, er: FloatArray) -> FloatArray:
        """:math:`C_P(Y)` (s) for the peers in ``peer_slots``, see the module docstring; X's ends and ``er`` as for :func:`~cost_model.backup_options.source_terms`.

        The double sum is linear in :math:`F_Y` at the window edges,

        .. math::

            C_P(Y) = \\sum_i p^X_i \\overline{Er}_i F_Y(g_{i+1})
                   + \\sum_j p^Y_j \\overline{Er}_j \\sum_{i<j} p^X_i = \\sum_m w_m F_Y(g_m),

        so every peer costs one dot product with the same weights :math:`w` (one matrix-vector
        product with the failure table for all of them). Inside the horizon a peer's :math:`F_Y`
        at the window edges is :math:`F_Y(BT)`, table values, then :math:`F_Y(T)`, the ends
        interpolated from the table (:meth:`FailureTable.cdf_interpolated`) unless ``T`` lies
        in the grid's first cell: :math:`F_Y(BT)` only bounds cells that X cannot fail in.
        """
        seconds, t_max = block.seconds, block.t_max
        if t_max <= seconds:
            return np.zeros(peer_slots.size)
        rc = self.recompute
        table, grid, windows = rc.table, rc.grid, rc.windows
        window, f_x = windows.row(table, block.slot, seconds, t_max, f_bt, f_t)
        er_cell = np.interp(window, grid.edges, er)
        er_cell = 0.5 * (er_cell[:-1] + er_cell[1:])
        # Cumulated X masses: through[i] = sum_{j<=i} p^X_j, so "before" cell i is through[i-1] (0 for i = 0).
        through = np.add.accumulate(f_x[1:] - f_x[:-1])
        weights = np.zeros(window.size)
        weights[1:] += er_cell * through
        weights[1:-1] -= er_cell[1:] * through[:-1]
        if t_max > grid.horizon:  # the window is evaluated past the horizon, for the peers as for X
            return np.asarray(table.cdf_at(window, peer_slots) @ weights)
        low, high = windows.split(seconds, t_max)  # edges [:low] are <= BT, edges [high:] >= T
        inner = weights.copy()
        inner[:low] = 0.0
        inner[high:] = 0.0
        every = table.cdf @ inner
        low_sum, high_sum = np.add.reduce(weights[:low]), np.add.reduce(weights[high:])
        if t_max < grid.edges[1] or not table.all_continuous:
            peers_cdf = table.cdf_interpolated if t_max >= grid.edges[1] else table.cdf_at
            ends = peers_cdf(np.array([seconds, t_max]), peer_slots)
            return np.asarray(every[peer_slots] + ends[:, 0] * low_sum + ends[:, 1] * high_sum)
        if low_sum == 0.0:  # X cannot fail before BT: F_Y(BT) * low_sum is low_sum (F_Y is finite, >= 0)
            every += low_sum
        else:
            ends_part = windows.interpolated(table, seconds)
            ends_part *= low_sum
            every += ends_part
        every += windows.column(table, t_max) * high_sum
        return every[peer_slots]


def _check_bandwidth(name: str, value: float) -> float:
    if not (isinstance(value, _NUMBER) and math.isfinite(value) and value > 0.0):
        raise ValueError(f"backup cost: {name!r} must be a finite number > 0 bytes/s, got {value!r}")
    return float(value)
