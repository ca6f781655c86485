"""The ancestor shuffles an ``Er`` charges, in the order :class:`~cost_model.recompute.Recompute` visits them.

For the shuffle written by the output's stage (the *root*): every shuffle at most ``depth``
shuffle reads above it, each after all the ancestors that read it (so an ancestor's need is
known from its readers' when it is reached), with who reads whom inside that set.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Ancestry:
    """The ancestor shuffles of one root shuffle, as :class:`~cost_model.recompute.Recompute` walks them."""

    order: tuple[Hashable, ...]
    """Ancestor shuffles within the depth limit, every shuffle after all shuffles that read it."""
    readers: dict[Hashable, tuple[Hashable, ...]]
    """Ancestor -> the ancestors (not the root's shuffle) that read it."""
    direct: frozenset[Hashable]
    """Shuffles the root's stage reads."""
    has_parents: dict[Hashable, bool]
    """Ancestor -> whether any shuffle it reads is in the ancestry too."""


def build_ancestry(parents: Callable[[Hashable], set[Hashable]], root: Hashable, depth: int) -> Ancestry:
    """The ancestry of ``root`` up to ``depth`` shuffle reads; ``parents(s)`` are the shuffles ``s``'s stage reads.

    Raises ``ValueError`` if the shuffle graph above ``root`` has a cycle.
    """
    # Each shuffle's parents are asked for once: the walk and the reader lists below reuse them.
    parents_of: dict[Hashable, set[Hashable]] = {root: parents(root)}
    frontier = [root]
    for _level in range(depth):
        nxt = []
        for sid in frontier:
            for parent in parents_of[sid]:
                if parent not in parents_of:
                    parents_of[parent] = parents(parent)
                    nxt.append(parent)
        frontier = nxt
    members = [s for s in parents_of if s != root]
    member_set = set(members)
    readers_of: dict[Hashable, list[Hashable]] = {s: [] for s in members}
    for reader in members:  # in member order, so each reader list is too
        for parent in parents_of[reader]:
            if parent in member_set:
                readers_of[parent].append(reader)
    readers = {s: tuple(readers_of[s]) for s in members}
    # Kahn's algorithm: a shuffle is ready once every ancestor that reads it is placed.
    pending = {s: len(readers[s]) for s in members}
    ready = [s for s in members if pending[s] == 0]
    order: list[Hashable] = []
    while ready:
        sid = ready.pop()
        order.append(sid)
        for parent in parents_of[sid]:
            if parent in member_set:
                pending[parent] -= 1
                if pending[parent] == 0:
                    ready.append(parent)
    if len(order) != len(members):
        raise ValueError(f"the shuffle graph above {root!r} has a cycle")
    direct = frozenset(parents_of[root]) & member_set
    has_parents = {s: bool(parents_of[s] & member_set) for s in members}
    return Ancestry(tuple(order), readers, direct, has_parents)
