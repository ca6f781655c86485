"""Backup transfers and how they share bandwidth.

Rates (bytes/s) of the transfers in flight, recomputed whenever one starts or ends:

.. math::

    r_\\text{local} = \\frac{B_\\text{local}}{n_\\text{local}(v)}, \\qquad
    r_\\text{remote} = \\frac{\\min(B_\\text{remote},\\ B_\\text{cap} / m)}{n_\\text{remote}(v)}

where ``v`` is the transfer's source VM, ``n_local(v)`` / ``n_remote(v)`` count its concurrent
peer / remote transfers and ``m`` counts the VMs with at least one remote transfer: the total
remote cap is shared fairly among the uploading VMs, and each VM's share among its transfers.
Each transfer first spends a fixed ``latency`` (s; opening, committing, registering a copy)
before its bytes move; it already counts as sharing its VM's bandwidth meanwhile (a copy's
setup and its stream overlap with the others' in a real block manager).
(Sharing the cap per VM rather than per transfer keeps a start or end from re-rating every
transfer in the cluster unless ``m`` changes while the cap binds.) A transfer's progress is
integrated piecewise between rate changes.
"""

from __future__ import annotations

from typing import Any


class Transfer:
    """One block being copied from ``source`` to ``target`` (an executor object or None = remote)."""

    __slots__ = ("block", "source", "target", "bytes", "remaining", "setup", "rate", "since", "started", "token",
                 "done_at")

    def __init__(self, block: tuple[int, int], source: Any, target: Any, nbytes: float, now: float,
                 latency: float = 0.0) -> None:
        self.block = block
        self.source = source
        self.target = target
        self.bytes = nbytes
        self.remaining = nbytes
        self.setup = latency
        """Seconds of the fixed per-copy latency still to spend before bytes move."""
        self.rate = 0.0
        self.since = now
        self.started = now
        self.token = 0
        self.done_at = now

    @property
    def remote(self) -> bool:
        return self.target is None


class TransferSet:
    """All transfers in flight and their fair-share rates (see module docstring)."""

    def __init__(self, local_bandwidth: float, remote_bandwidth: float, remote_cap: float) -> None:
        self.local_bandwidth = local_bandwidth
        self.remote_bandwidth = remote_bandwidth
        self.remote_cap = remote_cap
        self._by_source: dict[Any, set[Transfer]] = {}
        self._remote: set[Transfer] = set()
        self._remote_count: dict[Any, int] = {}

    def __len__(self) -> int:
        return sum(len(s) for s in self._by_source.values())

    def _uplink(self) -> float:
        """Remote bandwidth of one uploading VM (bytes/s)."""
        m = len(self._remote_count)
        if m == 0:
            return self.remote_bandwidth
        share = self.remote_cap / m  # min(bandwidth, share), written out: it runs on every transfer
        return share if share < self.remote_bandwidth else self.remote_bandwidth

    def _affected(self, source: Any, uplink_before: float) -> set[Transfer]:
        affected = set(self._by_source.get(source, ()))
        if self._uplink() != uplink_before:
            affected |= self._remote
        return affected

    def _rerate(self, transfers: set[Transfer], now: float) -> list[Transfer]:
        """Bring progress up to ``now``, set new rates and completion times; return them sorted."""
        uplink = self._uplink()
        changed = sorted(transfers, key=_order)
        for t in changed:
            elapsed = now - t.since
            if t.setup > 0.0:
                spent = min(t.setup, elapsed)
                t.setup -= spent
                elapsed -= spent
            remaining = t.remaining - t.rate * elapsed
            t.remaining = remaining if remaining > 0.0 else 0.0
            t.since = now
            n_remote = self._remote_count.get(t.source, 0)
            if t.target is None:
                t.rate = uplink / n_remote
            else:
                t.rate = self.local_bandwidth / (len(self._by_source[t.source]) - n_remote)
            t.token += 1
            t.done_at = now + t.setup + t.remaining / t.rate
        return changed

    def start(self, transfer: Transfer, now: float) -> list[Transfer]:
        """Add a transfer; return every transfer whose completion time changed (it included)."""
        uplink_before = self._uplink()
        self._by_source.setdefault(transfer.source, set()).add(transfer)
        if transfer.target is None:
            self._remote.add(transfer)
            self._remote_count[transfer.source] = self._remote_count.get(transfer.source, 0) + 1
        return self._rerate(self._affected(transfer.source, uplink_before), now)

    def remove(self, transfer: Transfer, now: float) -> list[Transfer]:
        """Remove a finished / failed / cancelled transfer; return the others whose rate changed."""
        uplink_before = self._uplink()
        group = self._by_source.get(transfer.source)
        if group is None or transfer not in group:
            return []
        group.discard(transfer)
        if not group:
            del self._by_source[transfer.source]
        if transfer.target is None:
            self._remote.discard(transfer)
            left = self._remote_count[transfer.source] - 1
            if left:
                self._remote_count[transfer.source] = left
            else:
                del self._remote_count[transfer.source]
        transfer.token += 1  # invalidates its pending completion event
        return self._rerate(self._affected(transfer.source, uplink_before), now)

    def all(self) -> list[Transfer]:
        return sorted((t for group in self._by_source.values() for t in group), key=_order)


def _order(t: Transfer) -> tuple[float, tuple[int, int], int]:
    """A deterministic order (never object ids), so runs replay identically in any process."""
    return (t.started, t.block, -1 if t.target is None else t.target.idx)
