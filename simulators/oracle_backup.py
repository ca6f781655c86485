"""The simulator-only ``oracle-backup``: clairvoyant backups under ``tr``'s own scheduling.

It is the bound for a policy that schedules as ``tr`` does but does not know which VM dies
next: tasks are placed by a fresh ``tr`` (its TR-Scheduling hints, task duplication and
whatever else it commands), while every backup comes from a clairvoyant
:class:`~simulators.oracle.OraclePolicy` without its own scheduling. That oracle knows each
VM's true death time and copies a map output only when its holder dies while the output's
shuffle is still needed, to the cheapest safe target: a peer that outlives the danger window by
the stable job time (a VM of a stable pool never dies, so it is chosen first and the outputs
it holds are never copied), else the remote store.

:class:`ClairvoyantBackups` joins the two: both see every event (``tr`` keeps its whole state,
including the copies the oracle made, which it counts as safe); ``tr``'s backup commands
(``Backup``, ``CancelBackup``, ``DropBackup``) are dropped and so is ``ReleaseExecutor`` (an
executor released before its true death time would make the oracle's knowledge wrong); the
oracle's commands are only backups. What a run reports, as for ``oracle``, is the best of a
small family per run (:func:`backup_family`): the ``needed`` heuristic with one and four copies
in flight per VM, every needed block at once, and no backups at all -- each under ``tr``'s
scheduling on the very same world.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from simulators.oracle import INF, FutureView, OraclePolicy, Strategy
from trspark.engine.commands import Backup, CancelBackup, Command, DropBackup, ReleaseExecutor
from trspark.engine.events import Event
from trspark.engine.interface import Policy
from trspark.engine.settings import TRConfig

#: Commands of the scheduler that a clairvoyant backup policy replaces or must not see happen.
DROPPED = (Backup, CancelBackup, DropBackup, ReleaseExecutor)

#: Backup strategies played under ``tr``'s scheduling (none of them schedules by itself).
BACKUP_FAMILY: tuple[Strategy, ...] = (
    Strategy("needed"),
    Strategy("needed/4", parallel=4),
    Strategy("all", window=INF, parallel=1_000_000, release_early=False),
)


class ClairvoyantBackups(Policy):
    """``scheduler``'s commands without its backups, plus ``backups``' commands (if any).

    Parameters
    ----------
    scheduler : Policy
        Places the tasks (``tr``); its backup and release commands are dropped.
    backups : OraclePolicy, optional
        Decides every backup from the true death times; ``None``: no backups at all.
    """

    name = "oracle-backup"

    def __init__(self, scheduler: Policy, backups: OraclePolicy | None) -> None:
        if backups is not None and backups.strategy.scheduling:
            raise ValueError(f"the backup strategy {backups.strategy.name!r} schedules tasks itself")
        self.scheduler = scheduler
        self.backups = backups

    def bind(self, future: FutureView) -> None:
        if self.backups is not None:
            self.backups.bind(future)

    def handle(self, event: Event) -> Sequence[Command]:
        out: list[Command] = []
        if self.scheduler.wants(type(event)):
            out += [c for c in self.scheduler.handle(event) if not isinstance(c, DROPPED)]
        if self.backups is not None and self.backups.wants(type(event)):
            out += self.backups.handle(event)
        return out

    def wants(self, event_type: type) -> bool:
        return self.scheduler.wants(event_type) or (self.backups is not None and self.backups.wants(event_type))

    def summary(self) -> dict[str, object]:
        planned = self.backups.summary() if self.backups is not None else {"backups_planned": 0}
        return {**planned, "scheduler": self.scheduler.name}


def backup_family(config: TRConfig, horizon: float,
                  scheduler: Callable[[], Policy]) -> Callable[[], list[tuple[str, Policy]]]:
    """Fresh members of the ``oracle-backup`` family, each under a fresh ``scheduler()``."""

    def members() -> list[tuple[str, Policy]]:
        played: list[tuple[str, Policy]] = [
            (st.name, ClairvoyantBackups(scheduler(), OraclePolicy(config, horizon, strategy=st))) for st in BACKUP_FAMILY]
        return played + [("none", ClairvoyantBackups(scheduler(), None))]

    return members
