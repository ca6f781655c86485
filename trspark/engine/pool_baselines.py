"""Baselines for clusters that mix stable (on-demand) and evictable (spot) executors.

* ``efm``: every map output is copied to an on-demand peer as soon as it exists, the way
  Dataproc's Enhanced Flexibility Mode keeps shuffle data on primary (non-preemptible) workers;
  to the remote store when no on-demand peer is alive. Outputs written on an on-demand executor
  stay where they are.
* ``pado``: lineage-critical tasks run on on-demand executors and nothing is backed up (Yang et
  al., "Pado", EuroSys'17). "Lineage-critical" is the cost rule of :class:`PadoPolicy`.

An executor is on-demand when its pool (``ExecutorAdded.pool``) is one of ``on_demand_pools``
(default ``ondemand``, the pool name cloud metadata maps to); every other executor counts as
evictable. Both policies are pure functions of the events, like ``never`` and ``always``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from trspark.engine.commands import Advice, Backup, Command, SchedulingHints
from trspark.engine.events import (
    REMOTE,
    BlockBackedUp,
    Event,
    ExecutorAdded,
    ExecutorLost,
    JobEnded,
    JobSubmitted,
    StageCompleted,
    StageSubmitted,
    TaskEnded,
    TaskStarted,
    Tick,
)
from trspark.engine.interface import Policy
from trspark.engine.placement import gamma_hints

#: Pools counted as on-demand unless a driver names others.
ON_DEMAND_POOLS: tuple[str, ...] = ("ondemand",)


class _Pools:
    """Alive executors by kind (on-demand or evictable), in registration order."""

    def __init__(self, on_demand_pools: Collection[str]) -> None:
        self.on_demand_pools = frozenset(on_demand_pools)
        self.on_demand: dict[str, int] = {}
        """on-demand executor -> cores."""
        self.evictable: dict[str, int] = {}

    def apply(self, event: Event) -> bool:
        """Track adds and losses; True when the set of alive executors changed."""
        if isinstance(event, ExecutorAdded):
            # A repeated ExecutorAdded (the live driver learns the pool after registration) moves it.
            self.on_demand.pop(event.executor_id, None)
            self.evictable.pop(event.executor_id, None)
            group = self.on_demand if event.pool in self.on_demand_pools else self.evictable
            group[event.executor_id] = max(1, event.cores)
            return True
        if isinstance(event, ExecutorLost):
            found = self.on_demand.pop(event.executor_id, None) or self.evictable.pop(event.executor_id, None)
            return found is not None
        return False

    def on_demand_share(self) -> float:
        """Fraction of alive cores that are on-demand (0 with no executor)."""
        od, total = sum(self.on_demand.values()), sum(self.on_demand.values()) + sum(self.evictable.values())
        return od / total if total else 0.0


class EFMPolicy(Policy):
    """Copy every map output written on an evictable executor to an on-demand peer (else remote).

    The peer is the alive on-demand executor that has been sent the fewest bytes so far (ties:
    the earliest registered), which spreads the copies over the on-demand disks and network.
    """

    name = "efm"

    def __init__(self, on_demand_pools: Collection[str] = ON_DEMAND_POOLS) -> None:
        self.pools = _Pools(on_demand_pools)
        self.sent: dict[str, int] = {}
        """on-demand executor -> bytes of the copies sent to it."""
        self.to_peer = 0
        self.to_remote = 0

    def handle(self, event: Event) -> Sequence[Command]:
        self.pools.apply(event)
        if not (isinstance(event, TaskEnded) and event.successful and event.shuffle_id is not None):
            return ()
        if event.executor_id in self.pools.on_demand:
            return ()  # already on stable capacity
        target = min(self.pools.on_demand, key=lambda e: self.sent.get(e, 0), default=REMOTE)
        advice: tuple[Command, ...] = ()
        if target == REMOTE:
            if not self.to_remote:  # said once: efm then copies what always-checkpoint copies
                advice = (Advice("info", "efm: no on-demand executor is alive, so map outputs are copied to the remote "
                                         f"store (on-demand pools: {', '.join(sorted(self.pools.on_demand_pools))})"),)
            self.to_remote += 1
        else:
            self.to_peer += 1
            self.sent[target] = self.sent.get(target, 0) + event.shuffle_write_bytes
        return (*advice, Backup(shuffle_id=event.shuffle_id, map_index=event.partition, source=event.executor_id,
                                target=target, bytes=event.shuffle_write_bytes, map_id=event.map_id))

    def wants(self, event_type: type) -> bool:
        return event_type not in (TaskStarted, BlockBackedUp)

    def summary(self) -> dict[str, object]:
        return {"backups_planned": self.to_peer + self.to_remote, "to_on_demand_peer": self.to_peer,
                "to_remote": self.to_remote}


class PadoPolicy(Policy):
    """Place lineage-critical tasks on on-demand executors; back nothing up.

    Cost rule. Each stage :math:`s` of the job graph has a lineage cost

    .. math:: C(s) = w(s) + \\sum_{a \\in \\text{anc}(s)} w(a), \\qquad w(x) = n_x\\,\\bar t_x ,

    with :math:`n_x` its task count and :math:`\\bar t_x` the mean run time of its finished tasks
    (s; the job-wide mean before any, 1 s before any task at all), so :math:`C(s)` is the
    task-seconds Spark re-runs in the worst case when the outputs of :math:`s` and of its whole
    lineage are lost (cascading recomputation). Map stages are taken in decreasing
    :math:`C(s)` (ties: lower stage id) and marked *critical* while their own work fits the
    stable capacity: a stage joins when :math:`\\sum_\\text{critical} w + w(s) \\le \\rho \\sum_x w(x)`,
    with :math:`\\rho` the on-demand share of the alive cores and the sum over every stage of
    the graph; a stage too large to fit is passed over for the next. Result stages write no
    shuffle and are never critical.

    Placement goes through :class:`~trspark.engine.commands.SchedulingHints` and
    :mod:`trspark.engine.placement`: critical stages come first in ``stage_order``, and every
    evictable executor is forbidden for them (:func:`~trspark.engine.placement.gamma_hints`
    with limit 0), so it starts no critical task (unless the stage would otherwise starve). The restriction is sent only
    while an on-demand executor is alive.
    """

    name = "pado"

    def __init__(self, on_demand_pools: Collection[str] = ON_DEMAND_POOLS) -> None:
        self.pools = _Pools(on_demand_pools)
        self.graph: dict[int, tuple[int, bool, tuple[int, ...]]] = {}
        """stage -> (tasks, writes a shuffle, parent stages), from ``JobSubmitted``."""
        self.seconds: dict[int, tuple[int, float]] = {}
        """stage -> (finished tasks, their total run time in s)."""
        self.job_stages: dict[int, tuple[int, ...]] = {}
        """job -> its stages, until the job ends (then the stages no running job lists are forgotten)."""
        self.critical: tuple[int, ...] = ()
        self.hints: SchedulingHints | None = None
        self.limits: tuple[tuple[int, ...], dict[str, float], dict[int, float]] | None = None
        self.hints_sent = 0

    def handle(self, event: Event) -> Sequence[Command]:
        changed = self.pools.apply(event)
        if isinstance(event, JobSubmitted):
            for sid, n, shuffle, parents in zip(event.stage_ids, event.num_tasks, event.shuffle_ids, event.parents,
                                                strict=True):
                self.graph[sid] = (n, shuffle is not None, tuple(parents))
            self.job_stages[event.job_id] = tuple(event.stage_ids)
            changed = True
        elif isinstance(event, JobEnded) and event.job_id is not None:
            self._forget_job(event.job_id)  # the hints follow at the next change; the job's are harmless
        elif isinstance(event, StageSubmitted) and event.stage_id not in self.graph:
            self.graph[event.stage_id] = (event.num_tasks, event.shuffle_id is not None, tuple(event.parent_stage_ids))
            changed = True
        elif isinstance(event, TaskEnded) and event.successful:
            done, total = self.seconds.get(event.stage_id, (0, 0.0))
            self.seconds[event.stage_id] = (done + 1, total + event.duration)
        elif isinstance(event, (StageCompleted, Tick)):
            changed = True  # task times seen since may re-rank the stages
        return self._hints() if changed else ()

    def _forget_job(self, job_id: int) -> None:
        """An ended job's stages leave the graph unless a running job lists them: a long application
        would otherwise weigh every stage it ever ran."""
        ended = self.job_stages.pop(job_id, ())
        still_listed = {s for stages in self.job_stages.values() for s in stages}
        for sid in ended:
            if sid not in still_listed:
                self.graph.pop(sid, None)
                self.seconds.pop(sid, None)

    def stage_work(self) -> dict[int, float]:
        """:math:`w(x) = n_x \\bar t_x` (task-seconds) of every stage of the graph."""
        done = sum(n for n, _ in self.seconds.values())
        default = sum(t for _, t in self.seconds.values()) / done if done else 1.0
        out = {}
        for sid, (n, _, _) in self.graph.items():
            finished, total = self.seconds.get(sid, (0, 0.0))
            out[sid] = n * (total / finished if finished else default)
        return out

    def lineage_cost(self, work: dict[int, float]) -> dict[int, float]:
        """:math:`C(s)`: own work plus the work of every ancestor (each counted once)."""
        ancestors = self._ancestors()
        return {sid: work[sid] + sum(work[a] for a in ancestors[sid]) for sid in self.graph}

    def _ancestors(self) -> dict[int, frozenset[int]]:
        """Every stage's ancestors in the graph, depth first with a stack of its own: a chain of
        stages can be longer than Python's recursion limit. The stack is the path from the stage
        being resolved; an edge back onto it (a malformed graph) is ignored."""
        ancestors: dict[int, frozenset[int]] = {}
        for root in self.graph:
            if root in ancestors:
                continue
            path, on_path = [root], {root}
            while path:
                sid = path[-1]
                parents = [p for p in self.graph[sid][2] if p in self.graph and p not in on_path]
                unresolved = next((p for p in parents if p not in ancestors), None)
                if unresolved is not None:
                    path.append(unresolved)
                    on_path.add(unresolved)
                    continue
                ancestors[sid] = frozenset(parents).union(*(ancestors[p] for p in parents))
                path.pop()
                on_path.discard(sid)
        return ancestors

    def critical_stages(self) -> tuple[int, ...]:
        """Map stages marked critical by the cost rule (class docstring), costliest first."""
        work = self.stage_work()
        budget = self.pools.on_demand_share() * sum(work.values())
        cost = self.lineage_cost(work)
        used, out = 0.0, []
        for sid in sorted((s for s, (_, maps, _) in self.graph.items() if maps), key=lambda s: (-cost[s], s)):
            if used + work[sid] <= budget:
                used += work[sid]
                out.append(sid)
        return tuple(out)

    def _hints(self) -> Sequence[Command]:
        self.critical = self.critical_stages() if self.pools.on_demand else ()
        work = self.stage_work()
        # The numbers behind the hints decide whether they changed (as the tr policy's limits do).
        limits = (
            self.critical,
            dict.fromkeys(self.pools.evictable, 0.0) if self.critical else {},
            {s: max(work[s] / self.graph[s][0], 1e-9) for s in self.critical if self.graph[s][0] > 0},
        )
        if limits == self.limits:
            return ()
        self.limits = limits
        self.hints = gamma_hints(*limits)
        self.hints_sent += 1
        return (self.hints,)

    def wants(self, event_type: type) -> bool:
        return event_type not in (TaskStarted, BlockBackedUp)

    def summary(self) -> dict[str, object]:
        return {"critical_stages": list(self.critical), "hints_sent": self.hints_sent}
