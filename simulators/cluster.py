"""The cluster of the world model: VMs of each pool join, get notices, die or are released.

A part of :class:`simulators.core.Simulator` (see :mod:`simulators.model`). Each VM's lifetime
comes from its pool's sampler; an evicted or released VM is replaced in its pool after the
world's ``replace_delay``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from cost_model.lifetimes import from_spec
from simulators.model import WorldModel
from simulators.state import EVICT, NOTICE, VM_ADD, Executor, Stage
from simulators.world import LifetimeSampler
from trspark.engine.commands import ReleaseExecutor
from trspark.engine.events import ExecutorAdded, ExecutorLost, ExecutorNotice


def pool_generators(rng: np.random.Generator, count: int) -> list[np.random.Generator]:
    """The first ``count`` children of the seed behind ``rng``, the same however often it was used before.

    ``Generator.spawn`` counts the children its seed sequence has handed out, so a second
    simulator built from the same seed would get other children, hence other lifetimes. Runs
    that must meet the same world (the policies of a paired comparison, an oracle's family
    members, a replay with a trace) build their simulators from one seed, so the children are
    made here from the seed's entropy and key, as its first ``spawn`` makes them.
    """
    seed = getattr(rng.bit_generator, "seed_seq", None)
    if not isinstance(seed, np.random.SeedSequence):
        return rng.spawn(count)
    return [np.random.default_rng(np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, child),
                                                         pool_size=seed.pool_size))
            for child in range(count)]


class ClusterDriver(WorldModel):
    """VMs joining and leaving, and the seconds each pool's VMs were up."""

    _next_lifetime: list[Callable[[], float]]

    def _init_lifetimes(self, rng: np.random.Generator, lifetimes: Iterable[float] | None) -> None:
        """One lifetime source per pool (see the :mod:`simulators.core` docstring)."""
        self._pools = self.world.pool_table()
        if lifetimes is not None:
            explicit = iter(lifetimes)
            self._next_lifetime = [lambda: float(next(explicit, float("inf")))] * len(self._pools)
        elif not self.world.pools:  # the homogeneous world draws from the run's own generator
            self._next_lifetime = [LifetimeSampler(self.world.lifetime_model(), rng).next]
        else:
            self._next_lifetime = [
                LifetimeSampler(None if spec is None else from_spec(spec), pool_rng).next
                for (_, _, spec), pool_rng in zip(self._pools, pool_generators(rng, len(self._pools)), strict=True)
            ]

    def _count_vm_time(self) -> None:
        """Seconds each pool's VMs were up until now (what a cloud bills, per second)."""
        seconds = dict.fromkeys((name for name, _, _ in self._pools), 0.0)
        for e in self.executors:
            seconds[self._pools[e.pool][0]] += (self.now if e.left is None else e.left) - e.born
        self.result.vm_seconds = seconds

    def _add_executor(self, pool: int) -> None:
        e = Executor(len(self.executors), self.world.cores, self.now, self.now + self._next_lifetime[pool](), pool)
        self.executors.append(e)
        self._emit(ExecutorAdded(self.now, e.id, host=f"vm-{e.idx}", cores=e.cores, pool=self._pools[pool][0]))
        if self.world.knowledge == "deterministic" and e.death < float("inf"):
            self._emit(ExecutorNotice(self.now, e.id, deadline=e.death, kind="lifetime"))
        if e.death < float("inf"):
            self._push(e.death, EVICT, e)
            if self.world.notice is not None:
                self._push(max(self.now, e.death - self.world.notice), NOTICE, e)
        for _ in range(e.cores):
            self._release_slot(e)

    def _on_vm_add(self, pool: Any) -> None:
        self._add_executor(pool)

    def _on_notice(self, e: Any) -> None:
        if e.alive:
            self._emit(ExecutorNotice(self.now, e.id, deadline=e.death))

    def _on_evict(self, e: Any) -> None:
        if e.alive:  # a VM released before its death is already gone
            self.result.evictions += 1
            self._remove_executor(e, "evicted")

    def _release(self, cmd: ReleaseExecutor) -> None:
        """The engine lets a noticed VM go before its death: it leaves now and is replaced from now."""
        e = next((x for x in self.executors if x.id == cmd.executor_id), None)
        if e is not None and e.alive:
            self.result.releases += 1
            self._remove_executor(e, "released")

    def _remove_executor(self, e: Any, reason: str) -> None:
        e.alive = False
        e.left = self.now
        self._emit(ExecutorLost(self.now, e.id, reason=reason))
        for tid in sorted(e.tasks):
            self._end_task_unsuccessfully(tid, "executor_lost")
        for tr in self.transfers.all():
            if tr.source is e or tr.target is e:
                self._fail_transfer(tr, "executor lost")
        while e.queue:
            cmd = e.queue.popleft()
            self._backup_failed(cmd.shuffle_id, cmd.map_index, cmd.target, "source executor lost")
        lost: dict[Stage, list[int]] = {}
        for si, p in sorted(e.peer_blocks):
            stage = self.stages[si]
            stage.peer[p] = None
            self._refresh_block(stage, p, lost)
        for si, p in e.blocks:
            stage = self.stages[si]
            if stage.origin[p] is e:
                stage.origin[p] = None
                self._refresh_block(stage, p, lost)
        e.blocks = []
        e.peer_blocks = set()
        for stage, parts in lost.items():
            self._outputs_lost(stage, parts)
        self._push(self.now + self.world.replace_delay, VM_ADD, e.pool)

    def _release_slot(self, e: Executor) -> None:
        """A core of ``e`` became free: queued backups first, else it waits for a task."""
        while e.queue:
            if self._start_backup(e.queue.popleft(), e):
                return
        self._free.append(e)
