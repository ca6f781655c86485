"""What the parts of the Spark world model share: its state and the calls between parts.

:class:`simulators.core.Simulator` is assembled from parts -- the cluster
(:mod:`simulators.cluster`), the stage lifecycle (:mod:`simulators.stages`), backups
(:mod:`simulators.backups`), task copies (:mod:`simulators.duplicates`) and the task scheduler
(:mod:`simulators.core`) -- on top of the event kernel (:mod:`simulators.kernel`).
:class:`WorldModel` declares, for type checking, the state they share and the methods one part
calls on another; ``Simulator`` supplies them all.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from simulators.dag import JobSpec
from simulators.kernel import EventKernel
from simulators.state import Executor, RunResult, Stage
from simulators.transfers import Transfer, TransferSet
from simulators.world import WorldSpec
from trspark.engine.events import Event
from trspark.engine.interface import Policy


class WorldModel(EventKernel):
    """Shared state of one simulated run (set by ``Simulator.__init__``) and cross-part calls."""

    job: JobSpec
    world: WorldSpec
    policy: Policy
    result: RunResult
    executors: list[Executor]
    stages: list[Stage]
    by_shuffle: dict[int, Stage]
    transfers: TransferSet
    _xfer_by_block: dict[tuple[int, int], list[Transfer]]
    _free: deque[Executor]
    _tasks: dict[int, list[Any]]
    _active: set[Stage]
    _order_dirty: bool
    _sinks_left: int
    _pools: tuple[tuple[str, int, str | None], ...]
    _want_backed_up: bool
    _dups: dict[tuple[int, int], set[int]]
    _wanted: dict[tuple[int, int], str]

    def _emit(self, event: Event) -> None:
        raise NotImplementedError

    def _fail(self, reason: str) -> None:
        raise NotImplementedError

    def _release_slot(self, e: Executor) -> None:
        raise NotImplementedError

    def _refresh_block(self, stage: Stage, p: int, lost: dict[Stage, list[int]] | None = None) -> None:
        raise NotImplementedError

    def _outputs_lost(self, stage: Stage, parts: list[int]) -> None:
        raise NotImplementedError

    def _requeue(self, stage: Stage, parts: list[int]) -> None:
        raise NotImplementedError

    def _parent_missing(self, stage: Stage) -> bool:
        raise NotImplementedError

    def _fetch_failed(self, stage: Stage) -> None:
        raise NotImplementedError

    def _count_vm_time(self) -> None:
        raise NotImplementedError

    def _end_task_unsuccessfully(self, tid: int, reason: str) -> None:
        raise NotImplementedError

    def _start_backup(self, cmd: Any, source: Executor, *, core_taken: bool = False) -> bool:
        raise NotImplementedError

    def _start_task(self, stage: Stage, p: int, e: Executor, *, speculative: bool) -> int:
        raise NotImplementedError

    def _backup_failed(self, shuffle_id: int, map_index: int, target: str, reason: str) -> None:
        raise NotImplementedError

    def _fail_transfer(self, tr: Transfer, reason: str) -> None:
        raise NotImplementedError
