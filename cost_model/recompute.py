"""Cascading re-computation cost ``Er(t, k)`` and the expected re-computation cost ``C_Redo(b_k)`` (paper §4.2).

Notation (seconds; ``t`` measured from *now*):

* :math:`X` -- the executor whose failure at time :math:`t` loses output :math:`k` (its producer);
* :math:`F_e(t)` -- probability that executor :math:`e` (alive now at age :math:`\\tau_e`) has failed
  by :math:`t`;
* :math:`P_j(t \\mid X) = \\prod_{l \\in L_j \\setminus \\{X\\}} F_l(t)` -- probability that output :math:`j`
  with live copies on the executors :math:`L_j` is lost by :math:`t` given :math:`X` failed at
  :math:`t`: 1 for outputs that lived only on :math:`X` or are already lost (the paper's
  :math:`Set_N`), :math:`F_e(t)` for outputs on another executor :math:`e` (:math:`Set_A`), 0 for
  outputs backed up remotely or consumed.

The paper's recursion

.. math:: Er(t,k) = C_k + \\sum_{i \\in Set_N} Er(t,i) + \\sum_{j \\in Set_A} F_j(t)\\,Er(t,j)

charges an ancestor once *per lost descendant*. With Spark's all-to-all shuffles every output of a
stage is an ancestor of every output of the next, so a lost ancestor would be charged once for
each of the (possibly thousands of) lost outputs that read it, although Spark re-runs it once.
We therefore use the same quantities -- run times, :math:`Set_N`, :math:`Set_A`, :math:`F` -- but
charge each lost ancestor once, weighted by the probability :math:`\\nu` that it is *needed*
(some needed output that reads it is lost too):

.. math::

    Er(t,k) = C_k + \\sum_{s \\in \\mathrm{anc}_D(k)} \\Bigl[ \\sum_e \\nu_s(t \\mid e)\\, P_e(t \\mid X)\\, C_{s,e}
        + \\nu_s(t) \\bigl(C_{s,\\varnothing} + \\textstyle\\sum_{L} P_L(t \\mid X)\\, C_{s,L}\\bigr) \\Bigr],

    \\nu_s(t \\mid e) = 1 - \\prod_{c \\text{ reads } s} \\; \\prod_{g \\in c}
        \\bigl(1 - \\nu_c(t \\mid g)\\, P_g(t \\mid X, e)\\bigr),
    \\qquad P_g(t \\mid X, e) = \\begin{cases} 1 & g \\in \\{X, e\\} \\\\ P_g(t \\mid X) & \\text{else,} \\end{cases}

and :math:`\\nu_s \\equiv 1` for the shuffles :math:`k`'s own stage reads. :math:`C_{s,e}` sums the run
times of the outputs of :math:`s` living only on executor :math:`e`, :math:`C_{s,L}` those living on
every executor of a set :math:`L`, :math:`C_{s,\\varnothing}` those already lost; :math:`g` runs over
these location groups; :math:`\\nu_s(t)` is :math:`\\nu_s(t \\mid e)` without the extra condition on
:math:`e`. Conditioning the need on the executor :math:`e` that lost the ancestor keeps the strong
correlation of real lineages: an executor that held outputs of two consecutive stages loses both
(without it the estimate came out 14 % low against a Monte-Carlo of a 4-executor, 2-stage lineage).
:math:`\\mathrm{anc}_D(k)` are the shuffles at most :math:`D` (the recursion depth) shuffle reads above
:math:`k`. On a tree-shaped lineage over distinct executors (a chain, one shuffle level) this equals
the paper's recursion exactly; on a diamond it removes the double count. Executors fail
independently; we condition on :math:`X` and on one ancestor holder :math:`e` at a time.

Cost: the sums over outputs are aggregated per (shuffle, executor) by :class:`Lineage`, so an
ancestor shuffle costs O(#executors × G) array work -- a reduce output with thousands of parents
costs O(#executors × G), not O(#parents × G). For the shuffles read directly the product
:math:`\\sum_e F_e(t) C_{s,e}` is cached per shuffle and a query adds O(G); everything above
``C_k`` is memoised per (shuffle of k, executor X) until a shuffle in the ancestry or the failure
table changes.

Past the grid's horizon ``Er`` is held at its horizon value (failure masses are still exact):
choose a horizon that covers the consumption times ``T_max`` asked for.

The failure table and when it is rebuilt: :mod:`cost_model.failure_clock`; a rebuild that
leaves the grid values unchanged (a memoryless law) keeps every derived term. Output changes
invalidate only the derived terms of their own shuffle (and the cached ``Er`` of shuffles below
it, through version numbers).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence

import numpy as np

from .ancestry import Ancestry, build_ancestry
from .failure import TINY, FailureTable
from .failure_clock import FailureClock
from .lifetimes.base import FloatArray
from .lineage import Lineage, Output, ShuffleState
from .shuffle_terms import GivenFailure, ShuffleTerms, need_of
from .timegrid import TimeGrid
from .windows import Windows


class Recompute:
    """``Er(t, k)`` on a :class:`TimeGrid` and ``C_Redo(b_k)`` for the outputs of a :class:`Lineage`.

    Parameters
    ----------
    lineage : Lineage
        The outputs, their locations and executors (mutated by the caller; this object only reads).
    grid : TimeGrid
        Where ``Er`` is tabulated (its horizon should cover the ``T_max`` values asked for).
    depth : int
        Recursion depth limit :math:`D \\ge 0`: ancestors at most ``depth`` shuffle reads up are
        charged (0 = only the output's own run time).
    now : float
        Driver time (s) of the first failure table.
    max_staleness : float
        Seconds the clock may advance before the failure table is rebuilt (> 0).
    """

    def __init__(
        self, lineage: Lineage, grid: TimeGrid, depth: int = 8, now: float = 0.0, max_staleness: float = 1.0
    ) -> None:
        if not (isinstance(depth, int) and depth >= 0):
            raise ValueError(f"Recompute: 'depth' must be an integer >= 0, got {depth!r}")
        self.lineage = lineage
        self.grid = grid
        self.depth = depth
        self.clock = FailureClock(lineage, grid, now, max_staleness)
        self._shared: dict[Hashable, tuple[tuple[int, int, int], ShuffleTerms]] = {}
        self._given: dict[tuple[Hashable, int | None], tuple[int, GivenFailure]] = {}
        self._given_stamp: tuple[int, int] | None = None
        self._log_keep: tuple[FailureTable, FloatArray] | None = None
        self._ancestry: dict[Hashable, tuple[int, Ancestry]] = {}
        self._rest: dict[tuple[Hashable, int | None], tuple[tuple[int, ...], FloatArray, tuple[int, int, int]]] = {}
        # The last output's Er and the last ends-free window: one decision asks for each several times.
        self._er_memo: tuple[tuple[object, ...], FloatArray] | None = None
        self.windows = Windows(grid)
        """Windows of the failure table, kept per table: read by :meth:`window` and by the backup terms."""

    def forget_shuffle(self, shuffle_id: Hashable) -> None:
        """Drop the memoised terms of a shuffle the lineage forgot (:meth:`Lineage.forget_shuffle`)."""
        self._shared.pop(shuffle_id, None)
        self._ancestry.pop(shuffle_id, None)
        for cache in (self._rest, self._given):
            for key in [k for k in cache if k[0] == shuffle_id]:
                del cache[key]

    # ---- clock and failure table ---------------------------------------------------------------
    def advance(self, now: float, eager: bool = True) -> bool:
        """Move the clock to ``now`` (s); :meth:`refresh` when the table is ``max_staleness`` old.

        Returns whether it refreshed, so a caller can account for the (periodic) cost.
        """
        if self.clock.move_to(now):
            self.refresh(eager)
            return True
        return False

    def refresh(self, eager: bool = True) -> None:
        """Rebuild the failure table at the current clock and the per-shuffle products that read it.

        O(#executors × G) model evaluations plus one O(#executors × G) product per shuffle that
        some stage reads. ``eager``: all is built here, on a clock tick, rather than inside the
        next decision. Otherwise the table is built as of this clock when it is next read, and
        each product when a decision first reads it (the same values), so a refresh on every
        event costs nothing until some decision needs it.
        """
        self.clock.rebuild(eager)
        if eager:
            self.build_pending()

    def build_pending(self, read_next: Iterable[Hashable] = ()) -> None:
        """Build now, at the same clock, what the next decisions would otherwise build inside a task's decision.

        That is the table, when executors came or went, and the per-shuffle products of the
        shuffles some stage reads, plus those of ``read_next`` (the inputs of a stage just
        submitted) and their ancestors. The values are the ones a decision would build; only the
        moment they are paid for moves, to an executor's or a stage's event.
        """
        self.table  # noqa: B018 -- the read rebuilds it when executors came or went
        lineage = self.lineage
        wanted = [sid for sid in lineage.shuffle_ids() if lineage.is_read(sid)]
        for parent in read_next:
            if lineage.has_shuffle(parent):
                wanted += (parent, *self._ancestry_of(parent).order)
        for sid in dict.fromkeys(wanted):
            if lineage.has_shuffle(sid):
                self._shared_of(sid, lineage.shuffle(sid))

    @property
    def table(self) -> FailureTable:
        """The current failure table (:attr:`FailureClock.table`)."""
        return self.clock.table

    @property
    def max_staleness(self) -> float:
        """Seconds the clock may advance before the failure table is rebuilt."""
        return self.clock.max_staleness

    @max_staleness.setter
    def max_staleness(self, seconds: float) -> None:
        self.clock.max_staleness = seconds

    @property
    def now_of_table(self) -> float:
        """Driver time (s) at which the executors' ages in the failure table were taken."""
        return self.table.now

    def age(self, executor_id: str) -> float:
        """Age (s) of a live executor at :attr:`now_of_table`."""
        return max(self.table.now - self.lineage.executor(executor_id).started, 0.0)

    def window(
        self, slots: Sequence[int] | None, lo: float, hi: float, ends: FloatArray | None = None
    ) -> tuple[FloatArray, FloatArray]:
        """The grid restricted to the window ``[lo, hi]`` (s from now) and :math:`F_e` on it.

        Edges are the grid's clipped into ``[lo, hi]`` (:meth:`TimeGrid.edges_to`, so ``diff(F)``
        is the exact failure mass of each part-cell, 0 for cells outside the window). Inside the
        horizon the values come from the failure table and only :math:`F_e(lo)`, :math:`F_e(hi)`
        are evaluated (or taken from ``ends``, shape ``(P, 2)``); past it the window is evaluated.

        Parameters
        ----------
        slots : sequence of int or None
            Executor slots (rows of the result), or None for every slot of the table.

        Returns
        -------
        edges : ndarray, shape (n + 1,)
        cdf : ndarray, shape (P, n + 1)
        """
        return self.windows.get(self.table, slots, lo, hi, ends)

    # ---- Er and C_Redo ---------------------------------------------------------------------------
    def failing_executor(self, out: Output) -> str | None:
        """The executor whose failure we charge for ``out``: its producer while it holds a copy, else any holder."""
        if out.producer in out.locations:
            return out.producer
        return min(out.locations) if out.locations else None

    def er(self, shuffle_id: Hashable, map_index: int) -> FloatArray:
        """:math:`Er(g_i, k)` in seconds at every grid edge, shape ``(G + 1,)``.

        0 for an output that is backed up remotely or consumed. The last answer is kept until the
        lineage or the failure table changes (a decision asks for the same output's ``Er`` up to
        four times).
        """
        table = self.table  # first: rebuilding it (executors changed) bumps the table version
        lineage = self.lineage
        key = (shuffle_id, map_index, lineage.outputs_version, lineage.executors_version,
               lineage.structure_version, self.clock.version, id(table))
        memo = self._er_memo
        if memo is not None and memo[0] == key:
            return memo[1]
        er = self._er(shuffle_id, map_index)
        er.setflags(write=False)
        self._er_memo = (key, er)
        return er

    def _er(self, shuffle_id: Hashable, map_index: int) -> FloatArray:
        out = self.lineage.output(shuffle_id, map_index)
        if out.remote or out.consumed:
            return np.zeros(self.grid.edges.size)
        failing = self.failing_executor(out)
        slot = None if failing is None else self.lineage.executor(failing).slot
        return out.run_time + self._rest_of(shuffle_id, slot)

    def er_at(self, shuffle_id: Hashable, map_index: int, times: FloatArray) -> FloatArray:
        """``Er(t, k)`` (s) at arbitrary ``times`` (s from now): linear between edges, constant past the horizon."""
        return np.interp(times, self.grid.edges, self.er(shuffle_id, map_index))

    def c_redo(self, shuffle_id: Hashable, map_index: int, t_max: float) -> float:
        """Expected re-computation cost (s) of output ``k`` if it is not backed up.

        .. math::

            C_{Redo}(b_k) = \\int_0^{T_{max}} f(\\tau_k, t)\\,Er(t,k)\\,dt
            \\approx \\sum_i p_i \\, \\tfrac12\\bigl(Er(g_i,k) + Er(g_{i+1},k)\\bigr)

        over the grid clipped at :math:`T_{max}`, with :math:`p_i` the exact probability that the
        block is lost in cell *i* (all its copies gone; for one copy, the failure mass of its
        executor -- point masses included). An output already lost costs :math:`Er(0, k)`;
        a remotely backed-up or consumed one costs 0.

        Parameters
        ----------
        t_max : float
            :math:`T_{max}`: estimated time (s from now) when the output is consumed (>= 0).
        """
        if not (math.isfinite(t_max) and t_max >= 0.0):
            raise ValueError(f"c_redo: 't_max' must be a finite number >= 0 seconds, got {t_max!r}")
        out = self.lineage.output(shuffle_id, map_index)
        if out.remote or out.consumed:
            return 0.0
        er = self.er(shuffle_id, map_index)
        if not out.locations:
            return float(er[0])
        holders = [self.lineage.executor(e).slot for e in sorted(out.locations)]
        edges, holders_cdf = self.window(holders, 0.0, t_max)
        # One holder (the usual case): its row is the product over the holders.
        lost_cdf = holders_cdf[0] if len(holders) == 1 else np.multiply.reduce(holders_cdf, axis=0)
        er_at = np.interp(edges, self.grid.edges, er)
        return float((lost_cdf[1:] - lost_cdf[:-1]) @ (0.5 * (er_at[:-1] + er_at[1:])))

    def c_redo_floor(self, shuffle_id: Hashable, map_index: int, t_max: float) -> float:
        """A lower bound (s) of :meth:`c_redo` for an output with one live copy, without its window.

        :math:`C_{Redo} = \\sum_i p_i \\overline{Er}_i \\ge Er(0, k)\\, F_X(T_{max})`: the cell masses
        add up to :math:`F_X(T_{max})` and ``Er`` is non-decreasing in :math:`t` (shown in
        :meth:`cost_model.backup.BackupCosts.slower_copy_floor`). :math:`Er(0)` is lowered by 1e-9
        of :math:`\\max Er` against rounding. 0 for any other output.
        """
        out = self.lineage.output(shuffle_id, map_index)
        if out.remote or out.consumed or len(out.locations) != 1 or not (math.isfinite(t_max) and t_max >= 0.0):
            return 0.0
        er = self.er(shuffle_id, map_index)
        (holder,) = out.locations
        (f_t,) = self.table.cdf_points(self.lineage.executor(holder).slot, (t_max,))
        floor = (float(er[0]) - 1e-9 * float(er[-1])) * f_t
        return 0.0 if floor < 0.0 else floor  # max(floor, 0), inlined on every decision

    # ---- the ancestors' part of Er, memoised per (shuffle, failing executor) --------------------
    def _rest_of(self, shuffle_id: Hashable, slot: int | None) -> FloatArray:
        """:math:`Er(t,k) - C_k` (s, on the grid edges) for outputs of ``shuffle_id`` lost with executor slot ``slot``."""
        table = self.table  # first: rebuilding it (executors changed) bumps the table version
        lineage = self.lineage
        # No ancestor (a shuffle read by another) changed since the entry was last checked: no need to list their versions.
        stamp = (self.clock.version, lineage.structure_version, lineage.read_outputs_version)
        cached = self._rest.get((shuffle_id, slot))
        if cached is not None and cached[2] == stamp:
            return cached[1]
        ancestry = self._ancestry_of(shuffle_id)
        states = [lineage.shuffle(s) for s in ancestry.order]
        key = (self.clock.version, lineage.structure_version, *(st.version for st in states))
        if cached is not None and cached[0] == key:
            self._rest[(shuffle_id, slot)] = (key, cached[1], stamp)
            return cached[1]
        rest = np.zeros(self.grid.edges.size)
        # log P(no output of c is lost-and-needed | X, e), row e per executor slot, last row: no e.
        log_clear: dict[Hashable, FloatArray] = {}
        for sid, state in zip(ancestry.order, states, strict=True):
            given = self._given_of(sid, state, table, slot)
            if sid in ancestry.direct:
                need = None  # read by k's own stage: needed whenever lost
                rest += given.direct_loss()
            else:
                need = need_of(log_clear, ancestry.readers[sid], given.need_rows)
                rest += given.needed_loss(need)
            if ancestry.has_parents[sid]:
                log_clear[sid] = given.direct_log_clear() if need is None else given.needed_log_clear(need)
        rest.setflags(write=False)
        self._rest[(shuffle_id, slot)] = (key, rest, stamp)
        return rest

    def _given_of(self, sid: Hashable, state: ShuffleState, table: FailureTable, slot: int | None) -> GivenFailure:
        """One ancestor's terms given X, cached per (shuffle, X) until the table or the shuffle changes.

        Shared by every shuffle below it and kept when another ancestor changes, so a miss of
        the memoised ``Er`` recomputes only what depends on what changed. Emptied when a grid
        value they can have read changed (:meth:`_terms_stamp`).
        """
        stamp = self._terms_stamp()
        if self._given_stamp != stamp:
            self._given.clear()
            self._given_stamp = stamp
        cached = self._given.get((sid, slot))
        if cached is not None and cached[0] == state.version:
            return cached[1]
        given = GivenFailure(self._shared_of(sid, state), state, table, slot, None if cached is None else cached[1])
        self._given[(sid, slot)] = (state.version, given)
        return given

    def _shared_of(self, sid: Hashable, state: ShuffleState) -> ShuffleTerms:
        """The failing-executor-independent terms of a shuffle, cached per (:meth:`_terms_stamp`, shuffle version)."""
        key = (*self._terms_stamp(), state.version)
        cached = self._shared.get(sid)
        if cached is not None and cached[0] == key:
            return cached[1]
        previous = cached[1] if cached is not None and cached[0][:2] == key[:2] else None
        shared = ShuffleTerms.build(state, self.table, previous, self._log_keep_of(self.table))
        self._shared[sid] = (key, shared)
        return shared

    def _log_keep_of(self, table: FailureTable) -> FloatArray:
        """:math:`\\ln(1 - F_e)` clipped at :math:`\\ln 10^{-300}` of every slot of ``table`` (one array per table)."""
        if self._log_keep is None or self._log_keep[0] is not table:
            log_keep = np.log(np.maximum(1.0 - table.cdf, TINY))
            log_keep.setflags(write=False)
            self._log_keep = (table, log_keep)
        return self._log_keep[1]

    def _terms_stamp(self) -> tuple[int, int]:
        """What the per-shuffle terms read of the table: ``(table version, rows)``.

        A shuffle's terms read the rows of the slots holding its outputs (and X's row only when
        X holds some), each weighted by what the slot holds, so, like ``Er``
        (:meth:`FailureClock._rebuild_table`), they stay valid while those rows keep their values; the arrays
        they keep are as long as the table.
        """
        return self.clock.version, self.table.cdf.shape[0]

    def _ancestry_of(self, shuffle_id: Hashable) -> Ancestry:
        cached = self._ancestry.get(shuffle_id)
        if cached is not None and cached[0] == self.lineage.structure_version:
            return cached[1]
        ancestry = build_ancestry(self.lineage.parents, shuffle_id, self.depth)
        self._ancestry[shuffle_id] = (self.lineage.structure_version, ancestry)
        return ancestry

