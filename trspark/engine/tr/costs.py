"""The engine's window onto ``cost_model``: keeps its lineage in step with events, asks for costs.

All numbers (``Er``, ``C_Redo``, ``C_B1``, ``C_R``, ``C_B2``, the peer's own death risk, the
remote cap share) come from :mod:`cost_model.recompute` and :mod:`cost_model.backup`; this
module only feeds them events and picks their arguments.

Two readings of the paper that are ours, not the cost model's:

* ``T`` in ``C_B2`` (paper §4.3 writes ``T``, not ``T_max``). We take it as the executor's
  whole remaining life, so ``C_B2 = BT · P(the source outlives the copy)``: the copy's time is
  paid whenever the copy completes, as it is in Spark and in the simulator (a backup holds a
  core of its source). With ``T = T_max`` a backup would look free on a stable executor and
  TR would back up everything. The peer's own risk ``C_P(Y)`` still stops at ``T_max`` (a peer
  copy only has to survive until the block is consumed).
* Remote concurrency: the cap share uses the remote backups the stack has in flight now.

And one that goes beyond the paper: re-computation is weighted by the cores a loss holds up
(:mod:`trspark.engine.tr.stall`, ``spark.trspark.stallWeight``).
"""

from __future__ import annotations

import math

import numpy as np

from cost_model.backup import BackupCosts
from cost_model.lineage import Lineage
from cost_model.recompute import Recompute
from cost_model.timegrid import TimeGrid
from trspark.engine.protocol import (
    BlockBackedUp,
    Event,
    ExecutorAdded,
    ExecutorLost,
    ShuffleConsumed,
    TaskEnded,
    Tick,
)
from trspark.engine.settings import TRConfig
from trspark.engine.state import JobState, MapOutput
from trspark.engine.tr.checkpointing import Costs
from trspark.engine.tr.knowledge import LifetimeKnowledge
from trspark.engine.tr.stall import stall_width

#: Failure-table staleness (s) when exact deadlines are known (deterministic / fitted).
NOTICE_STALENESS = 0.25

#: Horizon standing for "the rest of the executor's life" in ``C_B2`` (s); ~3 years.
LIFE_HORIZON = 1e8


class CostEstimator:
    """Lineage + ``Recompute`` + ``BackupCosts`` of ``cost_model``, driven by engine events.

    Parameters
    ----------
    config : TRConfig
        Grid size, recursion depth, period (failure-table staleness), bandwidths, targets.
    knowledge : LifetimeKnowledge
        Supplies each executor's lifetime model.
    """

    def __init__(self, config: TRConfig, knowledge: LifetimeKnowledge) -> None:
        self.config = config
        self.knowledge = knowledge
        self.lineage = Lineage()
        # The grid must reach the longest T_max we ask for; past it Er is held constant.
        horizon = max(1.0, 4.0 * knowledge.prior.mean())
        self.grid = TimeGrid.geometric(horizon, size=config.grid_size, first=min(0.05, horizon / 1e4))
        self.recompute = Recompute(
            self.lineage, self.grid, depth=config.recursion_depth,
            max_staleness=NOTICE_STALENESS if knowledge.uses_notices else config.period * 0.999
        )
        self.backup = BackupCosts(
            self.recompute, config.local_bandwidth, config.remote_bandwidth, config.remote_cap,
            latency=config.backup_latency,
        )
        self.remote_in_flight = 0
        self._first = True

    # ---- keeping the lineage in step --------------------------------------------------------
    def apply(self, event: Event, state: JobState) -> None:
        """Mirror one event (already folded into ``state``) into the cost model's lineage."""
        lineage = self.lineage
        if isinstance(event, ExecutorAdded):
            ex = state.executors[event.executor_id]
            if event.executor_id not in {e.executor_id for e in lineage.executors()}:
                lineage.add_executor(event.executor_id, self.knowledge.model(ex), started=ex.started)
        elif isinstance(event, ExecutorLost):
            if any(e.executor_id == event.executor_id for e in lineage.executors()):
                lineage.remove_executor(event.executor_id)
        elif isinstance(event, TaskEnded) and event.successful:
            stage = state.stages.get(event.stage_id)
            shuffle = event.shuffle_id if event.shuffle_id is not None else (stage.shuffle_id if stage else None)
            if stage is not None and shuffle is not None and (shuffle, event.partition) in state.outputs:
                lineage.add_output(
                    shuffle, event.partition, event.executor_id, event.duration,
                    float(event.shuffle_write_bytes), parents=stage.parent_shuffle_ids,
                )
                if shuffle in state.consumed_shuffles:
                    lineage.mark_consumed(shuffle, event.partition)
        elif isinstance(event, BlockBackedUp):
            block = state.outputs.get((event.shuffle_id, event.map_index))
            if block is not None and event.target in block.backups and lineage.has_shuffle(event.shuffle_id):
                lineage.add_location(event.shuffle_id, event.map_index, event.target)
        elif isinstance(event, ShuffleConsumed):
            # Consumed outputs are never charged: forgetting the shuffle is the same for every
            # Er, and keeps a long application's lineage to the shuffles in play.
            for shuffle in state.consumed_now:
                lineage.forget_shuffle(shuffle)
                self.recompute.forget_shuffle(shuffle)
        if isinstance(event, Tick) or self._first or self.knowledge.uses_notices:
            # With a distribution only, the failure table ages with the clock on ticks: its
            # rebuild (O(executors x grid)) lands on the periodic re-plan, not inside a task's
            # decision, and ages lag by at most one period. With exact deadlines a lag of a
            # period would move deaths out of the window, so the clock follows every event and
            # the table is rebuilt every NOTICE_STALENESS seconds.
            self._first = False
            self.recompute.advance(state.now)

    def drop_copy(self, block_id: tuple[int, int], holder: str) -> None:
        """A copy the lineage counted is gone (the driver said the holder does not have it)."""
        if not self.lineage.has_shuffle(block_id[0]):
            return
        try:
            out = self.lineage.output(*block_id)
        except ValueError:
            return
        if holder in out.locations:
            self.lineage.remove_location(block_id[0], block_id[1], holder)

    def refresh_models(self, state: JobState) -> None:
        """Executors' lifetime models changed (a notice, a refit): point the lineage at the new ones."""
        changed = False
        for executor in self.lineage.executors():
            view = state.executors.get(executor.executor_id)
            if view is None:
                continue
            model = self.knowledge.model(view)
            if model is not executor.model:
                # Lineage has no setter for a model; its failure table is rebuilt on the
                # executors_version bump, which tells it the models changed.
                executor.model = model
                changed = True
        if changed:
            self.lineage.executors_version += 1

    # ---- costs --------------------------------------------------------------------------
    def costs(self, block: MapOutput, state: JobState, t_max: float) -> Costs:
        """``C_Redo``, best ``C_BL`` and ``C_BR`` (s) of ``block`` consumed ``t_max`` s from now.

        With ``stall_weight`` every re-computation term (``C_Redo``, ``C_R``, ``C_P``) is
        weighted by the cores a loss holds up, :func:`~trspark.engine.tr.stall.stall_width`;
        the copy terms (``C_B1``, ``C_B2``) are not.

        When ``C_Redo`` is below a lower bound of every allowed backup cost -- ``C_B2`` alone,
        :math:`BT \\cdot P(BT < T_X \\le T)` -- no backup can win Algorithm 2, so the backup
        costs are not computed and reported as ``inf`` (same decision, a fraction of the work).
        """
        sid, idx = block.block_id
        weight = float(stall_width(state, sid)) if self.config.stall_weight else 1.0
        c_redo = weight * self.recompute.c_redo(sid, idx, t_max)
        # The bound never exceeds the cheapest copy time, so only a small C_Redo can be pruned.
        fastest = self.backup.copy_seconds(block.bytes, self._fastest_bandwidth())
        if c_redo < fastest and c_redo < self._backup_lower_bound(block, state):
            return Costs(c_redo=c_redo, c_bl=math.inf, c_br=math.inf, peer=None)
        targets = self.config.targets
        c_br = math.inf
        if targets in ("both", "remote"):
            remote = self.backup.remote(sid, idx, LIFE_HORIZON, concurrent=self.remote_in_flight)
            c_br = remote.b1 + weight * remote.redo + remote.b2
        c_bl, peer = math.inf, None
        if targets in ("both", "local"):
            best = self.backup.best_local_destination(sid, idx, t_max)
            if best is not None:
                # best.b2 stops at T_max; C_B2 over the source's life is the same term with T -> life.
                life_b2 = self._life_b2(block, state, best.seconds)
                c_bl, peer = best.b1 + weight * (best.redo + best.peer_loss) + life_b2, best.target
        return Costs(c_redo=c_redo, c_bl=c_bl, c_br=c_br, peer=peer)

    def _life_b2(self, block: MapOutput, state: JobState, seconds: float) -> float:
        """:math:`C_{B2} = BT \\cdot P(BT < T_X \\le T)` with ``T`` = the source's life (``LIFE_HORIZON``)."""
        holder = state.executors.get(block.backup_source() or "")
        if holder is None:
            return seconds
        model = self.knowledge.model(holder)
        return seconds * float(model.prob_fail(holder.age(state.now), seconds, LIFE_HORIZON))

    def _fastest_bandwidth(self) -> float:
        out = 0.0
        if self.config.targets in ("both", "remote"):
            out = max(out, min(self.config.remote_bandwidth, self.config.remote_cap / (self.remote_in_flight + 1)))
        if self.config.targets in ("both", "local"):
            out = max(out, self.config.local_bandwidth)
        return out

    def _backup_lower_bound(self, block: MapOutput, state: JobState) -> float:
        """:math:`\\min_x BT(x) \\cdot P(BT(x) < T_X \\le T)` over the allowed targets (s)."""
        holder = state.executors.get(block.holders()[0]) if block.holders() else None
        if holder is None:
            return 0.0
        model, age = self.knowledge.model(holder), holder.age(state.now)
        bandwidths = []
        if self.config.targets in ("both", "remote"):
            bandwidths.append(min(self.config.remote_bandwidth, self.config.remote_cap / (self.remote_in_flight + 1)))
        if self.config.targets in ("both", "local"):
            bandwidths.append(self.config.local_bandwidth)
        seconds = np.array([self.backup.copy_seconds(block.bytes, bw) for bw in bandwidths])
        return float(np.min(seconds * model.prob_fail(age, seconds, LIFE_HORIZON)))

    def best_peer(self, block: MapOutput, state: JobState, t_max: float) -> str | None:
        """The peer with the lowest ``C_BL`` (used by the safety belt in local-only mode)."""
        best = self.backup.best_local_destination(block.shuffle_id, block.map_index, t_max)
        return None if best is None else best.target
