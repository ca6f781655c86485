"""Lineage of map outputs, kept as per-shuffle, per-executor aggregates (bookkeeping only, no probabilities).

Spark's shuffle dependencies are all-to-all: every task of a stage reads *every* map output of
each shuffle it depends on. So the parents of a map output are not stored per output (that would
be O(N²) edges for N outputs) but per shuffle: shuffle ``s`` lists the shuffles its map stage
reads, and "the parents of output (s, i)" means "all outputs of those shuffles".

For the cost model what matters about an output ``j`` is its run time :math:`C_j` (s) and where
it lives. Outputs are therefore aggregated by *location signature*:

* ``single[e]``   -- live only on executor ``e`` (the common case): :math:`\\sum C_j` and a count;
* ``multi[L]``    -- live on every executor of the set ``L`` (``|L| >= 2``, e.g. after a peer
  backup): lost only when all of ``L`` have failed;
* ``lost``        -- on no executor and not backed up (already lost; will certainly be re-run);
* *excluded*      -- backed up to remote storage (never lost) or *consumed* (will never be read
  again, not even to re-compute a descendant): contributes nothing.

Every mutation updates the aggregates of one shuffle in O(1) (O(#outputs on the executor) for an
executor loss) and bumps that shuffle's :attr:`ShuffleState.version`, which the cost model uses to
invalidate what it derived from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Iterator

from .aggregates import LOST, Executor, Group, Output, ShuffleState
from .lifetimes.base import LifetimeModel

#: Backup target meaning "remote reliable storage" (same string as ``trspark.engine.events.REMOTE``).
REMOTE = "remote"

OutputKey = tuple[Hashable, int]
"""``(shuffle_id, map_index)`` of one map output."""

__all__ = ["REMOTE", "Executor", "Lineage", "Output", "OutputKey", "ShuffleState"]

class Lineage:
    """Map outputs, their locations and the shuffle graph, with incremental aggregates.

    Times are seconds on the driver's clock; run times are seconds; sizes are bytes.
    """

    def __init__(self) -> None:
        self._executors: dict[str, Executor] = {}
        self._free_slots: list[int] = []
        self._next_slot = 0
        self._capacity = 0
        self._shuffles: dict[Hashable, ShuffleState] = {}
        self._on_executor: dict[str, set[OutputKey]] = {}
        self._read: set[Hashable] = set()
        #: Bumped when executors come or go (the failure table must be rebuilt).
        self.executors_version = 0
        #: Bumped when the shuffle graph (``parents``) changes.
        self.structure_version = 0
        #: Bumped by every change to an output's aggregates (any shuffle): keys what is derived per output.
        self.outputs_version = 0
        #: Bumped by those of the shuffles another one reads: what an output's ancestors contribute depends on these alone.
        self.read_outputs_version = 0

    # ---- executors ---------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        """Number of executor slots (rows of the per-shuffle arrays)."""
        return self._capacity

    def add_executor(self, executor_id: str, model: LifetimeModel, started: float = 0.0) -> None:
        """Register a live executor whose lifetime clock started at ``started`` (s) and follows ``model``."""
        if executor_id in self._executors:
            raise ValueError(f"executor {executor_id!r} is already registered")
        if not math.isfinite(started):
            raise ValueError(f"executor {executor_id!r}: 'started' must be a finite time in seconds, got {started!r}")
        if not isinstance(model, LifetimeModel):
            raise ValueError(f"executor {executor_id!r}: 'model' must be a LifetimeModel, got {type(model).__name__}")
        if self._free_slots:
            slot = self._free_slots.pop()
        else:
            slot = self._next_slot
            self._next_slot += 1
            if slot >= self._capacity:
                self._capacity = max(8, 2 * self._capacity)
                for state in self._shuffles.values():
                    state._grow(self._capacity)
        self._executors[executor_id] = Executor(executor_id, slot, float(started), model)
        self._on_executor[executor_id] = set()
        self.executors_version += 1

    def remove_executor(self, executor_id: str) -> None:
        """The executor is gone: every copy it held is lost (outputs left nowhere become *lost*)."""
        executor = self._executor(executor_id)
        for key in list(self._on_executor[executor_id]):
            out = self._shuffles[key[0]].outputs[key[1]]
            self._update(out, lambda o: o.locations.discard(executor_id))
        del self._on_executor[executor_id]
        del self._executors[executor_id]
        self._free_slots.append(executor.slot)
        self.executors_version += 1

    def set_model(self, executor_id: str, model: LifetimeModel) -> None:
        """The executor's lifetime law changed (a termination notice, a refit): use ``model`` from now on."""
        if not isinstance(model, LifetimeModel):
            raise ValueError(f"executor {executor_id!r}: 'model' must be a LifetimeModel, got {type(model).__name__}")
        executor = self._executor(executor_id)
        if executor.model is not model:
            executor.model = model
            self.executors_version += 1

    def has_executor(self, executor_id: str) -> bool:
        return executor_id in self._executors

    def executor(self, executor_id: str) -> Executor:
        """The live executor ``executor_id`` (``ValueError`` if unknown)."""
        return self._executor(executor_id)

    def executors(self) -> list[Executor]:
        """Live executors, in registration order."""
        return list(self._executors.values())

    def executor_groups(self, executor_ids: Iterable[str] | None = None) -> Iterator[tuple[LifetimeModel, list[Executor]]]:
        """Executors grouped by lifetime-model object, so each group is evaluated in one vectorised call."""
        groups: dict[int, tuple[LifetimeModel, list[Executor]]] = {}
        chosen = self._executors.values() if executor_ids is None else (self._executor(e) for e in executor_ids)
        for ex in chosen:
            groups.setdefault(id(ex.model), (ex.model, []))[1].append(ex)
        yield from groups.values()

    # ---- outputs -----------------------------------------------------------------------------
    def add_output(
        self,
        shuffle_id: Hashable,
        map_index: int,
        executor_id: str,
        run_time: float,
        size: float,
        parents: Iterable[Hashable] = (),
    ) -> None:
        """A map task of ``shuffle_id`` finished on ``executor_id`` in ``run_time`` s, writing ``size`` bytes.

        ``parents`` are the shuffles its stage read (all their outputs are its parents). A second
        output for the same key (a re-run) replaces the first.
        """
        self._executor(executor_id)
        if not (math.isfinite(run_time) and run_time >= 0.0):
            raise ValueError(f"output {(shuffle_id, map_index)!r}: 'run_time' must be a finite number >= 0 seconds, got {run_time!r}")
        if not (math.isfinite(size) and size >= 0.0):
            raise ValueError(f"output {(shuffle_id, map_index)!r}: 'size' must be a finite number >= 0 bytes, got {size!r}")
        state = self._shuffle_state(shuffle_id)
        new_parents = set(parents) - state.parents
        if shuffle_id in new_parents:
            raise ValueError(f"shuffle {shuffle_id!r} cannot read itself")
        if new_parents:
            for parent in new_parents:
                self._shuffle_state(parent)
                self._read.add(parent)
            state.parents |= new_parents
            self.structure_version += 1
        if map_index in state.outputs:
            self.remove_output(shuffle_id, map_index)
        out = Output(shuffle_id, int(map_index), executor_id, float(run_time), float(size), {executor_id})
        state.outputs[out.map_index] = out
        self._attach(state, out)

    def remove_output(self, shuffle_id: Hashable, map_index: int) -> None:
        """Forget an output (e.g. its shuffle was cleaned up)."""
        state = self._shuffle_state_known(shuffle_id)
        out = self._output(shuffle_id, map_index)
        self._detach(state, out)
        del state.outputs[map_index]

    def has_output(self, shuffle_id: Hashable, map_index: int) -> bool:
        state = self._shuffles.get(shuffle_id)
        return state is not None and map_index in state.outputs

    def output(self, shuffle_id: Hashable, map_index: int) -> Output:
        """The output record (read it, do not mutate it: use the methods of this class)."""
        return self._output(shuffle_id, map_index)

    def add_location(self, shuffle_id: Hashable, map_index: int, target: str) -> None:
        """A backup finished: the output is now also at ``target`` (a peer executor id or ``"remote"``)."""
        out = self._output(shuffle_id, map_index)
        if target == REMOTE:
            self._update(out, lambda o: setattr(o, "remote", True))
        else:
            self._executor(target)
            self._update(out, lambda o: o.locations.add(target))

    def remove_location(self, shuffle_id: Hashable, map_index: int, target: str) -> None:
        """A copy was dropped (a backup deleted, or a peer copy found missing)."""
        out = self._output(shuffle_id, map_index)
        if target == REMOTE:
            self._update(out, lambda o: setattr(o, "remote", False))
        else:
            self._update(out, lambda o: o.locations.discard(target))

    def mark_consumed(self, shuffle_id: Hashable, map_index: int | None = None, consumed: bool = True) -> None:
        """Mark one output (or, with ``map_index=None``, the whole shuffle) as consumed / not consumed."""
        state = self._shuffle_state_known(shuffle_id)
        outs = list(state.outputs.values()) if map_index is None else [self._output(shuffle_id, map_index)]
        for out in outs:
            self._update(out, lambda o: setattr(o, "consumed", consumed))

    def forget_shuffle(self, shuffle_id: Hashable) -> None:
        """Forget a shuffle that no stage will read again, with its outputs.

        For every ``Er`` this equals marking it consumed (a consumed output is never charged),
        and shuffles that read it stop listing it as a parent: a long application keeps only
        the shuffles still in play. Unknown ids are ignored.
        """
        state = self._shuffles.pop(shuffle_id, None)
        if state is None:
            return
        for out in list(state.outputs.values()):
            self._detach(state, out)
        self._read.discard(shuffle_id)
        for other in self._shuffles.values():
            other.parents.discard(shuffle_id)
        self.structure_version += 1

    # ---- shuffles ----------------------------------------------------------------------------
    def shuffle(self, shuffle_id: Hashable) -> ShuffleState:
        """Aggregates of ``shuffle_id`` (``ValueError`` if unknown)."""
        return self._shuffle_state_known(shuffle_id)

    def has_shuffle(self, shuffle_id: Hashable) -> bool:
        return shuffle_id in self._shuffles

    def shuffle_ids(self) -> list[Hashable]:
        """Every shuffle seen (written by an output or read by one)."""
        return list(self._shuffles)

    def is_read(self, shuffle_id: Hashable) -> bool:
        """Whether some known stage reads ``shuffle_id``."""
        return shuffle_id in self._read

    def parents(self, shuffle_id: Hashable) -> set[Hashable]:
        """Shuffles read by the stage that writes ``shuffle_id``."""
        return self._shuffle_state_known(shuffle_id).parents

    def __len__(self) -> int:
        return sum(len(s.outputs) for s in self._shuffles.values())

    # ---- internals ---------------------------------------------------------------------------
    def _executor(self, executor_id: str) -> Executor:
        try:
            return self._executors[executor_id]
        except KeyError:
            raise ValueError(f"unknown executor {executor_id!r}") from None

    def _shuffle_state(self, shuffle_id: Hashable) -> ShuffleState:
        state = self._shuffles.get(shuffle_id)
        if state is None:
            state = ShuffleState()
            state._grow(self._capacity)
            self._shuffles[shuffle_id] = state
            self.structure_version += 1
        return state

    def _shuffle_state_known(self, shuffle_id: Hashable) -> ShuffleState:
        try:
            return self._shuffles[shuffle_id]
        except KeyError:
            raise ValueError(f"unknown shuffle {shuffle_id!r}") from None

    def _output(self, shuffle_id: Hashable, map_index: int) -> Output:
        try:
            return self._shuffle_state_known(shuffle_id).outputs[map_index]
        except KeyError:
            raise ValueError(f"unknown map output {(shuffle_id, map_index)!r}") from None

    def _update(self, out: Output, change: Callable[[Output], object]) -> None:
        state = self._shuffles[out.shuffle_id]
        group, versions = out.group, (state.version, state.multi_version)
        aggregate = _aggregate_of(state, group)
        self._detach(state, out)
        change(out)
        self._attach(state, out)
        if out.group == group and aggregate is not None and _aggregate_of(state, group) == aggregate:
            # The aggregates are bit for bit what they were (e.g. a consumed output gained a copy):
            # what the cost model derived from the old versions is still valid.
            state.version, state.multi_version = versions

    def _group_of(self, out: Output) -> Group:
        if out.remote or out.consumed:
            return None
        if len(out.locations) == 1:
            for executor_id in out.locations:
                return self._executors[executor_id].slot
        slots = frozenset(self._executors[e].slot for e in out.locations)
        if not slots:
            return LOST
        if len(slots) == 1:
            return next(iter(slots))
        return slots

    def _attach(self, state: ShuffleState, out: Output) -> None:
        group = self._group_of(out)
        out.group = group
        for e in out.locations:
            self._on_executor[e].add((out.shuffle_id, out.map_index))
        if group is None:
            pass
        elif isinstance(group, frozenset):
            entry = state.multi.get(group)
            if entry is None:
                entry = state.multi[group] = [0.0, 0.0]
                state.multi_keys_version += 1
            entry[0] += out.run_time
            entry[1] += 1.0
            state.multi_version += 1
            state.multi_touched.add(group)
            for slot in group:
                state.multi_by_slot.setdefault(slot, set()).add(group)
        elif group == LOST:
            state.lost_cost += out.run_time
            state.lost_count += 1
        else:
            state.single_cost[group] += out.run_time
            state.single_count[group] += 1
        state.version += 1
        self.outputs_version += 1
        if out.shuffle_id in self._read:
            self.read_outputs_version += 1

    def _detach(self, state: ShuffleState, out: Output) -> None:
        group = out.group
        for e in out.locations:
            self._on_executor[e].discard((out.shuffle_id, out.map_index))
        if group is None:
            pass
        elif isinstance(group, frozenset):
            entry = state.multi[group]
            entry[0] -= out.run_time
            entry[1] -= 1.0
            state.multi_version += 1
            state.multi_touched.add(group)
            if entry[1] <= 0.0:
                del state.multi[group]
                state.multi_keys_version += 1
                for slot in group:
                    state.multi_by_slot[slot].discard(group)
        elif group == LOST:
            state.lost_count -= 1
            # Exact zero when empty, so float residue never makes a shuffle look non-empty.
            state.lost_cost = state.lost_cost - out.run_time if state.lost_count else 0.0
        else:
            state.single_count[group] -= 1
            state.single_cost[group] = state.single_cost[group] - out.run_time if state.single_count[group] else 0.0
        out.group = None
        state.version += 1
        self.outputs_version += 1
        if out.shuffle_id in self._read:
            self.read_outputs_version += 1


def _aggregate_of(state: ShuffleState, group: Group) -> tuple[float, float] | None:
    """What ``group`` holds in ``state`` -- (run time sum, count) -- or None if a change to it may reorder :attr:`ShuffleState.multi`."""
    if group is None:
        return (0.0, 0.0)
    if isinstance(group, frozenset):
        entry = state.multi[group]
        # The last output of a group leaves and re-enters it at the end of the dict: the order changes.
        return (entry[0], entry[1]) if entry[1] > 1.0 else None
    if group == LOST:
        return (state.lost_cost, float(state.lost_count))
    return (float(state.single_cost[group]), float(state.single_count[group]))
