"""One shuffle's contribution to ``Er(t, k)``, before and after conditioning on the failing executor X.

The equations are in :mod:`cost_model.recompute`; this module holds their per-shuffle pieces:
:class:`ShuffleTerms` (independent of X, cached per failure table and shuffle version) and
:class:`GivenFailure` (the same terms given that X failed: O(G) corrections for X's row and for
the multi-location groups that include X, plus the O(#executors × G) need-weighted sums).
All arrays are on the grid edges (shape ``G + 1`` or ``(#slots, G + 1)``).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .failure import TINY, FailureTable
from .lifetimes.base import FloatArray
from .lineage import ShuffleState

_LOG_TINY = float(np.log(TINY))


@dataclass(frozen=True, slots=True)
class ShuffleTerms:
    """What one shuffle contributes before conditioning on the failing executor X (on the grid edges).

    Notation: :math:`h_e` -- the shuffle has outputs living only on executor e;
    :math:`\\ell_e = \\ln(1 - F_e)`. Built once per (failure table, shuffle version).
    """

    loss: FloatArray
    """:math:`\\sum_e F_e C_{s,e} + \\sum_L P_L C_{s,L} + C_{s,\\varnothing}` (s)."""
    multi_lost: FloatArray
    """:math:`P_L = \\prod_{l \\in L} F_l` per multi-location group, shape (M, G + 1)."""
    log_keep: FloatArray
    """:math:`\\ell_e` clipped at :math:`\\ln 10^{-300}`, shape (E, G + 1)."""
    clear_base: FloatArray
    """:math:`\\sum_e h_e \\ell_e + \\sum_L \\ln(1 - P_L)` (+ ln 0 if some output is lost): ln P(nothing lost)."""
    clear_swap: FloatArray
    """:math:`h_e (\\ln 0 - \\ell_e)`: the change when e is known to have failed, shape (E, G + 1)."""
    multi_free: NDArray[np.bool_]
    """Multi-location groups none of whose executors holds a single-location output of the shuffle.

    Only these enter "is some output lost": a group with a copy on executor e is lost only if e
    failed, and then e's own outputs are lost anyway -- counting it again as an independent
    event over-stated the need of ancestors by 2-5 % against the Monte-Carlo.
    """
    other_loss: FloatArray
    """:math:`C_{s,\\varnothing} + \\sum_L P_L C_{s,L}` (s): the loss of what is not on one executor."""
    slots: NDArray[np.int64]
    """The slot sets of the multi-location groups (:meth:`ShuffleState.multi_arrays`) these terms were built on."""
    rows_by_slot: tuple[NDArray[np.intp], list[int]]
    """Multi-location rows grouped by slot: slot x's rows, ascending, are ``rows[bounds[x]:bounds[x + 1]]``."""
    held_rows: NDArray[np.intp]
    """The slots e with :math:`h_e` (single-location outputs), ascending."""
    free_rows: NDArray[np.intp]
    """The rows of :attr:`multi_free`, ascending."""
    clear_weights: FloatArray
    """:math:`h_e` as 1.0 / 0.0 per slot."""
    need_rows: NDArray[np.intp]
    """Rows of a need :math:`\\nu` that :meth:`GivenFailure.needed_loss` and :meth:`GivenFailure.needed_log_clear`
    read: :attr:`held_rows`, then "no e"; the others only meet zero weights."""

    held: NDArray[np.bool_]
    """:math:`h_e` per slot."""
    free_clear: FloatArray
    """:math:`\\sum_L \\ln(1 - P_L)` over the groups of :attr:`multi_free`."""
    held_clear: FloatArray
    """:math:`\\sum_e h_e \\ell_e`."""

    @classmethod
    def build(
        cls, state: ShuffleState, table: FailureTable, previous: ShuffleTerms | None = None, log_keep: FloatArray | None = None
    ) -> ShuffleTerms:
        """The terms of ``state`` on ``table``.

        ``previous``: terms of the same shuffle on a table with the same grid values for every
        slot in a multi-location group (same :meth:`Recompute._terms_stamp`); what depends only
        on the slot sets, on which slots hold single-location outputs and on those values is
        taken from it when they are the same. ``log_keep``: :attr:`log_keep` of ``table`` if
        known (the same object for the same table lets ``previous``'s row sums be kept too).
        """
        n_slots = table.cdf.shape[0]
        if log_keep is None:
            log_keep = np.log(np.maximum(1.0 - table.cdf, TINY))
        held = state.single_count[:n_slots] > 0
        _slots, costs = state.multi_arrays()
        same_slots = previous is not None and previous.slots is _slots and previous.log_keep.shape[0] == n_slots
        same_held = previous is not None and np.array_equal(previous.held, held)
        if same_slots:
            assert previous is not None
            multi_lost, rows_by_slot = previous.multi_lost, previous.rows_by_slot
        else:
            multi_lost, rows_by_slot = _multi_lost(state, table.cdf_padded), _rows_by_slot(_slots, n_slots)
            multi_lost.setflags(write=False)
        if same_held:
            assert previous is not None
            held, held_rows, clear_weights, need_rows = previous.held, previous.held_rows, previous.clear_weights, previous.need_rows
        else:
            held_rows = np.flatnonzero(held)
            clear_weights, need_rows = held.astype(np.float64), np.append(held_rows, n_slots)
        if same_slots and same_held:
            assert previous is not None
            multi_free, free_rows, free_clear = previous.multi_free, previous.free_rows, previous.free_clear
        else:
            multi_free = ~np.logical_or.reduce(np.append(held, False)[_slots], axis=1)  # padding -1 -> False
            free_rows = np.flatnonzero(multi_free)
            free_clear = np.add.reduce(np.log(np.maximum(1.0 - multi_lost[multi_free], TINY)), axis=0)
        if same_held and previous is not None and previous.log_keep is log_keep:
            held_clear, clear_swap = previous.held_clear, previous.clear_swap
        else:
            held_clear = clear_weights @ log_keep
            clear_swap = np.where(held[:, None], _LOG_TINY - log_keep, 0.0)
        multi_loss = costs @ multi_lost
        loss = state.single_cost[:n_slots] @ table.cdf + state.lost_cost + multi_loss
        clear_base = held_clear + free_clear
        if state.lost_count:
            clear_base = clear_base + _LOG_TINY
        other_loss = state.lost_cost + multi_loss
        return cls(
            loss, multi_lost, log_keep, clear_base, clear_swap, multi_free, other_loss, _slots, rows_by_slot,
            held_rows, free_rows, clear_weights, need_rows, held, free_clear, held_clear,
        )


class GivenFailure:
    """One shuffle's terms given that executor slot X failed at t (X = None: no executor conditioned on).

    Everything is the shared, unconditioned term plus an O(G) correction for X's row and for
    the multi-location groups that include X: :math:`P_X \\to 1`.
    """

    def __init__(
        self,
        shared: ShuffleTerms,
        state: ShuffleState,
        table: FailureTable,
        slot: int | None,
        previous: GivenFailure | None = None,
    ) -> None:
        """``previous``: the same shuffle's terms given the same X on a table with the same grid values
        for the slots of its multi-location groups; X's groups are taken from it when the slot sets are the same."""
        self.shared, self.state, self.table, self.slot = shared, state, table, slot
        self.n_slots = table.cdf.shape[0]
        self.f_x = table.cdf[slot] if slot is not None else np.zeros(table.cdf.shape[1])
        self.held_x = slot is not None and bool(state.single_count[slot] > 0)
        slots, costs = shared.slots, state.multi_arrays()[1]
        self.rows_x: NDArray[np.intp]
        self.multi_x: FloatArray
        self.shift_x: FloatArray
        """:math:`P_L(t|X) - P_L(t)` of X's multi-location rows."""
        if previous is not None and previous.shared.slots is slots and previous.slot == slot:
            self.rows_x, self.multi_x, self.shift_x = previous.rows_x, previous.multi_x, previous.shift_x
        else:
            self.rows_x, self.multi_x = _groups_with(shared, table, slot)
            self.shift_x = self.multi_x - shared.multi_lost[self.rows_x]
        self.costs_x = costs[self.rows_x]
        self.need_rows = shared.need_rows
        self._direct_loss: FloatArray | None = None

    def direct_loss(self) -> FloatArray:
        """:math:`\\sum_j P_j(t|X) C_j` (s): outputs only on X are lost for sure (Set_N). Computed once."""
        if self._direct_loss is None:
            self._direct_loss = self._compute_direct_loss()
            self._direct_loss.setflags(write=False)
        return self._direct_loss

    def _compute_direct_loss(self) -> FloatArray:
        loss = self.shared.loss
        if self.held_x:
            assert self.slot is not None
            loss = loss + self.state.single_cost[self.slot] * (1.0 - self.f_x)
        if self.rows_x.size:
            loss = loss + self.costs_x @ self.shift_x
        return np.asarray(loss)

    def needed_loss(self, need: FloatArray) -> FloatArray:
        """:math:`\\sum_e \\nu(t|e) P_e(t|X) C_{s,e} + \\nu(t)(C_{s,\\varnothing} + \\sum_L P_L(t|X) C_{s,L})` (s)."""
        n = self.n_slots
        state, shared = self.state, self.shared
        loss = state.single_cost[:n] @ (need[:n] * self.table.cdf)
        if self.held_x:
            assert self.slot is not None
            loss = loss + state.single_cost[self.slot] * need[self.slot] * (1.0 - self.f_x)
        other = shared.other_loss
        if self.rows_x.size:
            other = other + self.costs_x @ self.shift_x
        return np.asarray(loss + need[n] * other)

    def direct_log_clear(self) -> FloatArray:
        """ln P(no output is lost | X, e) for a shuffle that is needed whenever lost; rows e, last row no e."""
        shared = self.shared
        base = shared.clear_base
        if self.held_x:
            assert self.slot is not None
            base = base + (_LOG_TINY - shared.log_keep[self.slot])
        free = shared.multi_free[self.rows_x]
        if np.logical_or.reduce(free):
            rows = self.rows_x[free]
            base = base + np.add.reduce(
                np.log(np.maximum(1.0 - self.multi_x[free], TINY)) - np.log(np.maximum(1.0 - shared.multi_lost[rows], TINY)),
                axis=0,
            )
        out = np.empty((self.n_slots + 1, base.size))
        out[: self.n_slots] = shared.clear_swap
        out[self.n_slots] = 0.0
        if self.slot is not None:
            out[self.slot] = 0.0  # X's outputs are already counted as lost
        out += base
        return out

    def needed_log_clear(self, need: FloatArray) -> FloatArray:
        """ln P(no output is lost-and-needed | X, e) with need :math:`\\nu(t|e)`; rows e, last row no e.

        Only the rows :attr:`need_rows` of ``need`` are read. Rows of slots without single-location
        outputs enter the sums with weight 0 and are left at 0: that changes no value but the sign
        of a zero, which the need computed from these logs (a sum started at +0) does not see.
        """
        n, slot = self.n_slots, self.slot
        p_lost = self.table.cdf
        shared = self.shared
        held_rows = shared.held_rows
        log_keep = np.zeros(p_lost.shape)
        if held_rows.size:
            log_keep[held_rows] = np.log(np.maximum(1.0 - need[held_rows] * p_lost[held_rows], TINY))
        if self.held_x:
            assert slot is not None
            log_keep[slot] = np.log(np.maximum(1.0 - need[slot], TINY))
        base = shared.clear_weights @ log_keep if held_rows.size else np.zeros(p_lost.shape[1])
        if self.state.lost_count:
            base = base + np.log(np.maximum(1.0 - need[n], TINY))
        free_rows = shared.free_rows
        if free_rows.size:
            multi = shared.multi_lost[free_rows]
            free_x = shared.multi_free[self.rows_x]
            if np.logical_or.reduce(free_x):
                multi[np.searchsorted(free_rows, self.rows_x[free_x])] = self.multi_x[free_x]
            base = base + np.add.reduce(np.log(np.maximum(1.0 - need[n] * multi, TINY)), axis=0)
        out = np.empty((n + 1, base.size))
        out[:] = base
        # Given e failed, e's outputs of this shuffle are lost: P_e -> 1 (X's already are).
        rows = held_rows[held_rows != slot] if self.held_x else held_rows
        if rows.size:
            out[rows] += np.log(np.maximum(1.0 - need[rows], TINY)) - log_keep[rows]
        return out


def _multi_lost(state: ShuffleState, p_lost: FloatArray) -> FloatArray:
    """:math:`P_L(t) = \\prod_{l \\in L} P_l(t)` per multi-location group, shape ``(M, G + 1)``.

    ``p_lost`` has one row per slot plus a last row of ones, which the -1 padding selects.
    """
    slots, _costs = state.multi_arrays()
    if slots.size == 0:
        return np.zeros((slots.shape[0], p_lost.shape[1]))
    if slots.shape[1] == 2:
        return p_lost[slots[:, 0]] * p_lost[slots[:, 1]]  # the product over a pair, as np.prod forms it
    return np.asarray(np.multiply.reduce(p_lost[slots], axis=1))


def _rows_by_slot(slots: NDArray[np.int64], n_slots: int) -> tuple[NDArray[np.intp], list[int]]:
    """The rows of ``slots`` (``(M, L)``, padded with -1) grouped by the slot they contain (see :attr:`ShuffleTerms.rows_by_slot`)."""
    flat = slots.ravel()
    order = np.argsort(flat, kind="stable")  # stable: each slot's rows stay ascending
    bounds = np.searchsorted(flat[order], np.arange(n_slots + 1)).tolist()
    return order // max(slots.shape[1], 1), bounds


def _groups_with(shared: ShuffleTerms, table: FailureTable, slot: int | None) -> tuple[NDArray[np.intp], FloatArray]:
    """The multi-location rows with a copy on ``slot`` and their loss probability without ``slot``'s factor, ``(K, G + 1)``."""
    if slot is None or not shared.slots.size:
        return np.zeros(0, dtype=np.intp), np.zeros((0, table.cdf.shape[1]))
    rows, bounds = shared.rows_by_slot
    rows_x = rows[bounds[slot] : bounds[slot + 1]]
    if not rows_x.size:
        return rows_x, np.zeros((0, table.cdf.shape[1]))
    others = shared.slots[rows_x]
    if others.shape[1] == 2:
        # A pair's product without X's factor is the other member's F, exactly (x * 1 = x).
        return rows_x, table.cdf_padded[np.where(others[:, 0] == slot, others[:, 1], others[:, 0])]
    others = others.copy()
    others[others == slot] = -1
    return rows_x, np.multiply.reduce(table.cdf_padded[others], axis=1)


def need_of(log_clear: dict[Hashable, FloatArray], readers: tuple[Hashable, ...], rows: NDArray[np.intp] | None = None) -> FloatArray:
    """:math:`\\nu = 1 - \\prod_c P(\\text{nothing of } c \\text{ lost and needed}) = -\\mathrm{expm1}(\\min(\\sum_c \\ln P_c, 0))`.

    Computed in one buffer, in the order ``0 + l_1 + l_2 + ...`` of Python's ``sum``, so every
    element is rounded exactly as the plain expression would round it. ``rows``: only these rows
    are computed (the ones the ancestor's terms read, :attr:`GivenFailure.need_rows`); the
    others are 0.
    """
    if not readers:
        return np.asarray(-np.expm1(np.minimum(0.0, 0.0)))
    first = log_clear[readers[0]]
    if rows is None or 2 * rows.size > first.shape[0]:
        return _need_rows(log_clear, readers, slice(None))
    need = np.zeros(first.shape)
    need[rows] = _need_rows(log_clear, readers, rows)
    return need


def _need_rows(log_clear: dict[Hashable, FloatArray], readers: tuple[Hashable, ...], rows: NDArray[np.intp] | slice) -> FloatArray:
    total = np.add(0.0, log_clear[readers[0]][rows])
    for reader in readers[1:]:
        np.add(total, log_clear[reader][rows], out=total)
    np.minimum(total, 0.0, out=total)
    np.expm1(total, out=total)
    return np.negative(total, out=total)
