"""One backup option of a map output: its cost terms, with the equations of :mod:`cost_model.backup`.

:class:`BackupCost` holds the terms of one option. :class:`RemoteOption` and :class:`PeerOption`
are copies with X's failure law read at their ends and the other terms left to
:func:`source_terms`, so that a caller can rule an option out from a bound first;
:class:`PeerPrices` is every peer priced at one bandwidth.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .lifetimes.base import FloatArray
from .lineage import REMOTE
from .peer_sets import Peers
from .recompute import Recompute


@dataclass(frozen=True, slots=True)
class BackupCost:
    """Expected cost (s) of one backup option; ``total`` is what TR-Checkpointing compares."""

    target: str
    """``"remote"`` or the peer executor id."""
    seconds: float
    """:math:`BT`: copy time in seconds."""
    b1: float
    """:math:`C_{B1}` (s)."""
    redo: float
    """:math:`C_R` (s)."""
    b2: float
    """:math:`C_{B2}` (s)."""
    peer_loss: float = 0.0
    """:math:`C_P(Y)` (s); 0 for remote."""

    @property
    def total(self) -> float:
        """:math:`C_B = C_{B1} + C_R + C_{B2} + C_P` in seconds."""
        return self.b1 + self.redo + self.b2 + self.peer_loss


@dataclass(frozen=True, slots=True)
class PeerPrices:
    """Every peer that could receive a copy of one block, priced at one bandwidth (:meth:`BackupCosts.every_peer`)."""

    peers: Peers
    """Live executors not holding the block."""
    base: BackupCost
    """:math:`C_{B1}`, :math:`C_R`, :math:`C_{B2}` (s), the same for every peer; target ``"peer"``."""
    peer_loss: FloatArray
    """:math:`C_P(Y)` (s) per peer."""
    block: PricedBlock
    """The block priced, with :math:`BT` and :math:`T`."""
    f_x: tuple[float, float]
    """:math:`F_X(BT)`, :math:`F_X(T)` as the prices used them."""
    er: FloatArray
    """:math:`Er(t, k)` on the grid edges (s), as the prices used it."""


class RemoteOption:
    """The copy of one block to remote storage (:meth:`BackupCosts.remote_option`), read before anything changes.

    :attr:`floor` is a lower bound of the option's ``total`` from the two values of X's
    failure law already evaluated; :meth:`cost` adds the two windows and the ``Er``
    interpolation, which a caller can skip when the bound already rules the option out.
    """

    __slots__ = ("_recompute", "_block", "_f_bt", "_f_t")

    def __init__(self, recompute: Recompute, block: PricedBlock, f_bt: float, f_t: float) -> None:
        self._recompute, self._block, self._f_bt, self._f_t = recompute, block, f_bt, f_t

    @property
    def floor(self) -> float:
        """:math:`C_{B2}` alone (s), as :meth:`cost` computes it.

        :math:`C_{B1}` and :math:`C_R` are sums of failure masses times non-negative times, so
        only rounding (~1e-16 relative) can take them below 0.
        """
        return copy_after(self._block.seconds, self._f_bt, self._f_t)

    def ceiling(self, weight: float) -> float:
        """An upper bound (s) of :meth:`cost`'s :math:`C_{B1} + w\\, C_R + C_{B2}`, for ``weight`` :math:`w \\ge 0`, without its windows.

        The window's cell masses add up to :math:`F_X(BT)` (to :math:`F_X(T) \\le F_X(BT)` when
        :math:`T < BT`), each cell's midpoint is at most :math:`BT`, and its mean ``Er`` at most
        ``Er`` at the first grid edge :math:`g \\ge BT` (``Er`` is non-decreasing), so

        .. math::

            C_{B1} + w\\, C_R \\le (BT + w\\, Er(g))\\, F_X(BT).

        ``Er(g)`` is raised by 1e-9 of :math:`\\max Er`, the mass by 1e-9 of itself and by 1e-12
        (the table's values and :math:`F_X(BT)` are evaluated apart), against rounding.
        """
        block = self._block
        er = self._recompute.er(block.shuffle_id, block.map_index)
        edge = self._recompute.windows.split(block.seconds, block.seconds)[1]
        edge = er.size - 1 if edge > er.size - 1 else edge  # min(edge, last), inlined on every decision
        er_top = float(er[edge]) + 1e-9 * float(er[-1])
        return self.floor + (block.seconds + weight * er_top) * (self._f_bt * (1.0 + 1e-9) + 1e-12)

    def cost(self) -> BackupCost:
        """:math:`C_{BR}` (s): :math:`C_{B1}`, :math:`C_R`, :math:`C_{B2}` of the copy."""
        block = self._block
        er = self._recompute.er(block.shuffle_id, block.map_index)
        return source_terms(self._recompute, block, self._f_bt, self._f_t, er, REMOTE)


class PeerOption:
    """Copies of one block to some peers at one bandwidth (:meth:`BackupCosts.peer_option`), read before anything changes.

    :attr:`peer_loss` holds :math:`C_P(Y)` (s) per peer; :meth:`terms` adds the terms the same
    for every peer, which a caller can skip when a bound already rules every peer out.
    """

    __slots__ = ("_recompute", "block", "f_x", "er", "peer_loss")

    def __init__(self, recompute: Recompute, block: PricedBlock, f_bt: float, f_t: float, er: FloatArray, peer_loss: FloatArray) -> None:
        self._recompute = recompute
        self.block = block
        """The block priced, with :math:`BT` and :math:`T`."""
        self.f_x = (f_bt, f_t)
        """:math:`F_X(BT)`, :math:`F_X(T)` as the prices used them."""
        self.er = er
        """:math:`Er(t, k)` on the grid edges (s), as the prices used it."""
        self.peer_loss = peer_loss

    @property
    def seconds(self) -> float:
        """:math:`BT` (s) of the copy."""
        return self.block.seconds

    def terms(self) -> BackupCost:
        """:math:`C_{B1}`, :math:`C_R`, :math:`C_{B2}` (s) of the copy, target ``"peer"``."""
        return source_terms(self._recompute, self.block, *self.f_x, self.er, "peer")


def source_terms(recompute: Recompute, block: PricedBlock, f_bt: float, f_t: float, er: FloatArray, target: str) -> BackupCost:
    """:math:`C_{B1}`, :math:`C_R`, :math:`C_{B2}`; :math:`F_X(BT) =` ``f_bt``, :math:`F_X(T) =` ``f_t``, ``er`` on the grid."""
    seconds, t_max, slot = block.seconds, block.t_max, block.slot
    table, windows = recompute.table, recompute.windows
    # C_B1 and C_R share the window [0, BT] (C_R stops at T).
    edges, cdf = windows.row(table, slot, 0.0, seconds, 0.0, f_bt)
    probs = cdf[1:] - cdf[:-1]
    b1 = float(probs @ (0.5 * (edges[:-1] + edges[1:])))
    if seconds > t_max:
        edges, cdf = windows.row(table, slot, 0.0, t_max, 0.0, f_t)
        probs = cdf[1:] - cdf[:-1]
    er_at = np.interp(edges, recompute.grid.edges, er)
    redo = float(probs @ (0.5 * (er_at[:-1] + er_at[1:])))
    return BackupCost(target, seconds, b1, redo, copy_after(seconds, f_bt, f_t))


class PricedBlock(NamedTuple):
    """The block being priced: its key, :math:`T_{max}`, :math:`BT` (s) and the slot of X."""

    shuffle_id: Hashable
    map_index: int
    t_max: float
    seconds: float
    slot: int


def copy_after(seconds: float, f_bt: float, f_t: float) -> float:
    """:math:`C_{B2} = BT \\cdot P(BT < T_X \\le T) = BT \\cdot \\max(F_X(T) - F_X(BT), 0)` (s)."""
    gap = f_t - f_bt
    return seconds * (0.0 if gap < 0.0 else gap)  # max(gap, 0), inlined: two of these per decision


def with_peer(base: BackupCost, peer: str, peer_loss: float) -> BackupCost:
    """``base`` (the peer-independent terms) as the option of copying to ``peer``, whose ``C_P`` is ``peer_loss`` (s)."""
    return BackupCost(peer, base.seconds, base.b1, base.redo, base.b2, peer_loss)
