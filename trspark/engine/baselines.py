"""Baseline policies behind the engine interface; the TR-Spark policy is in ``trspark.engine.tr``.

* ``never``: vanilla Spark (no backups).
* ``always``: every map output to remote as soon as it exists.
* ``stage``: Flint-like stage granularity -- a whole stage's outputs go to remote once any
  executor holding or producing them is at risk of dying before they are consumed.
* ``interval``: periodic checkpointing with the Young/Daly period :math:`\\sqrt{2\\delta\\,MTTF}`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from cost_model.lifetimes import LifetimeModel
from trspark.engine.commands import Backup, Command
from trspark.engine.events import REMOTE, BackupFailed, BlockBackedUp, Event, TaskEnded, TaskStarted, Tick
from trspark.engine.horizon import consumption_horizon
from trspark.engine.interface import Policy
from trspark.engine.state import JobState
from trspark.engine.views import MapOutput


class NeverPolicy(Policy):
    """Vanilla Spark: no backups; lost map outputs are recomputed by Spark's lineage."""

    name = "never"

    def handle(self, event: Event) -> Sequence[Command]:
        return ()

    def wants(self, event_type: type) -> bool:
        return event_type not in (TaskStarted, TaskEnded, BlockBackedUp)


class AlwaysPolicy(Policy):
    """Always-checkpoint: back up every successful map output to remote storage as soon as it exists."""

    name = "always"

    def __init__(self) -> None:
        self.backups = 0

    def handle(self, event: Event) -> Sequence[Command]:
        if isinstance(event, TaskEnded) and event.successful and event.shuffle_id is not None:
            self.backups += 1
            return (
                Backup(
                    shuffle_id=event.shuffle_id,
                    map_index=event.partition,
                    source=event.executor_id,
                    target=REMOTE,
                    bytes=event.shuffle_write_bytes,
                    map_id=event.map_id,
                ),
            )
        return ()

    def wants(self, event_type: type) -> bool:
        return event_type not in (TaskStarted, BlockBackedUp)

    def summary(self) -> dict[str, object]:
        return {"backups_planned": self.backups}


def _forget_released(event: Event, released: set[tuple[int, int]], consumed: Sequence[int]) -> None:
    """A re-created or failed block may be released again; a consumed shuffle's blocks never are."""
    if isinstance(event, TaskEnded) and event.successful and event.shuffle_id is not None:
        released.discard((event.shuffle_id, event.partition))
    elif isinstance(event, BackupFailed):
        released.discard((event.shuffle_id, event.map_index))
    if consumed:  # an application that runs for days would otherwise keep every block it backed up
        gone = set(consumed)
        released.difference_update([block for block in released if block[0] in gone])


def _remote_backups(blocks: Iterable[MapOutput], released: set[tuple[int, int]]) -> list[Command]:
    """Backup-to-remote commands for blocks not yet safe and not already released."""
    out: list[Command] = []
    for block in blocks:
        source = block.backup_source()
        if block.consumed or block.on_remote or block.block_id in released or source is None:
            continue
        released.add(block.block_id)
        out.append(
            Backup(
                shuffle_id=block.shuffle_id,
                map_index=block.map_index,
                source=source,
                target=REMOTE,
                bytes=block.bytes,
                map_id=block.map_id,
            )
        )
    return out


class StagePolicy(Policy):
    """Flint-like stage-granularity checkpointing (Sharma et al., EuroSys'16; TR-Spark Fig. 7c).

    A map stage is *flagged* once any alive executor that holds one of its outputs (or runs one
    of its tasks) would die before the stage's outputs are consumed with probability at least
    ``risk``:

    .. math:: P(\\text{fail in } [\\tau_e, \\tau_e + H] \\mid T > \\tau_e) \\ge risk,

    where :math:`H` is the consumption horizon (the next-stage start estimate
    :math:`\\alpha\\sum N_i T_i / \\#cores`, s). From then on every output of the stage, present
    and future, is backed up to remote. Checked on every task end and tick.

    Parameters
    ----------
    lifetime : LifetimeModel
        The lifetime distribution the policy believes (s).
    alpha : float
        The ``α`` of the horizon estimate (>= 1).
    risk : float
        Failure probability above which an executor counts as at risk (0..1).
    """

    name = "stage"

    def __init__(self, lifetime: LifetimeModel, alpha: float = 1.5, risk: float = 0.01) -> None:
        self.lifetime = lifetime
        self.alpha = alpha
        self.risk = risk
        self.state = JobState()
        self.flagged: set[int] = set()
        self.released: set[tuple[int, int]] = set()
        self.planned = 0
        self.stages_flagged = 0
        self.holders: dict[int, set[str]] = {}
        """stage -> executors that ran (or run) its tasks, i.e. hold or will hold its outputs."""

    def handle(self, event: Event) -> Sequence[Command]:
        self.state.apply(event)
        _forget_released(event, self.released, self.state.consumed_now)
        if isinstance(event, TaskStarted):
            self.holders.setdefault(event.stage_id, set()).add(event.executor_id)
        elif isinstance(event, TaskEnded) and event.successful and event.shuffle_id is not None:
            if event.stage_id not in self.flagged:
                # Only the new holder's risk is new; the others were checked before (and on ticks).
                return self._flag_if_risky(event.stage_id, {event.executor_id})
            return self._backups(self._stage_outputs(event.stage_id))
        elif isinstance(event, Tick):
            # Stages the state retired (their shuffle consumed) are checked no more.
            for stage_id in [s for s in self.holders if s not in self.state.stages]:
                del self.holders[stage_id]
                self.flagged.discard(stage_id)
            out: list[Command] = []
            for stage_id, holders in list(self.holders.items()):
                if stage_id not in self.flagged:
                    out += self._flag_if_risky(stage_id, holders)
            return out
        return ()

    def _backups(self, blocks: Iterable[MapOutput]) -> list[Command]:
        out = _remote_backups(blocks, self.released)
        self.planned += len(out)
        return out

    def _stage_outputs(self, stage_id: int) -> list[MapOutput]:
        stage = self.state.stages.get(stage_id)
        if stage is None or stage.shuffle_id is None:  # a result stage, or one retired (all consumed)
            return []
        return [b for p in stage.finished if (b := self.state.outputs.get((stage.shuffle_id, p))) is not None]

    def _flag_if_risky(self, stage_id: int, executors: set[str]) -> list[Command]:
        state = self.state
        stage = state.stages.get(stage_id)
        if stage is None or stage.shuffle_id is None or stage.shuffle_id in state.consumed_shuffles:
            return []
        alive = [state.executors[e] for e in executors if e in state.executors and state.executors[e].alive]
        if not alive:
            return []
        horizon = consumption_horizon(state, self.alpha)
        risk = self.lifetime.prob_fail([e.age(state.now) for e in alive], 0.0, horizon)
        if float(np.max(risk)) < self.risk:
            return []
        self.flagged.add(stage_id)
        self.stages_flagged += 1
        return self._backups(self._stage_outputs(stage_id))

    def summary(self) -> dict[str, object]:
        return {"backups_planned": self.planned, "stages_flagged": self.stages_flagged}


class IntervalPolicy(Policy):
    """Periodic checkpointing with the Young/Daly period (Young 1974, Daly 2006).

    Every period :math:`P` all map outputs that exist, are not yet on remote storage and are
    not consumed are backed up to remote:

    .. math:: P = \\sqrt{2\\,\\delta\\,MTTF}, \\qquad
              \\delta = \\frac{\\bar b \\cdot c}{\\min(B_r, B_{cap}/n)},

    with :math:`MTTF` the mean executor lifetime of the believed model (s), and the checkpoint
    cost :math:`\\delta` (s) the time one executor needs to write one wave of outputs: the mean
    map-output size :math:`\\bar b` (bytes) times its cores :math:`c`, at its share of the remote
    bandwidth (per-executor :math:`B_r`, total cap :math:`B_{cap}` over :math:`n` executors, bytes/s).
    :math:`\\delta` is re-estimated from the outputs seen so far at every checkpoint.
    """

    name = "interval"

    def __init__(self, lifetime: LifetimeModel, remote_bandwidth: float, remote_cap: float) -> None:
        self.mttf = lifetime.mean()
        self.remote_bandwidth = remote_bandwidth
        self.remote_cap = remote_cap
        self.state = JobState()
        self.released: set[tuple[int, int]] = set()
        self.planned = 0
        self.last_checkpoint = 0.0
        self.checkpoints = 0
        self.period: float | None = None
        self._output_bytes = 0.0
        self._outputs = 0

    def checkpoint_seconds(self) -> float | None:
        """δ: seconds to write one wave of outputs from one executor (None before any output)."""
        executors = self.state.alive_executors()
        if not self._outputs or not executors:
            return None
        cores = sum(e.cores for e in executors) / len(executors)
        share = min(self.remote_bandwidth, self.remote_cap / len(executors))
        return (self._output_bytes / self._outputs) * cores / share

    def handle(self, event: Event) -> Sequence[Command]:
        self.state.apply(event)
        _forget_released(event, self.released, self.state.consumed_now)
        if isinstance(event, TaskEnded) and event.successful and event.shuffle_id is not None:
            self._output_bytes += event.shuffle_write_bytes
            self._outputs += 1
        if not isinstance(event, (TaskEnded, Tick)):
            return ()
        delta = self.checkpoint_seconds()
        if delta is None:
            return ()
        self.period = math.sqrt(2.0 * delta * self.mttf)
        if self.state.now - self.last_checkpoint < self.period:
            return ()
        self.last_checkpoint = self.state.now
        self.checkpoints += 1
        out = _remote_backups(list(self.state.live_outputs()), self.released)
        self.planned += len(out)
        return out

    def summary(self) -> dict[str, object]:
        return {"backups_planned": self.planned, "checkpoints": self.checkpoints, "period_s": self.period}
