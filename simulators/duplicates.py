"""Task copies of the world model: ``DuplicateTask`` and ``KillDuplicate``, as the live shim runs them.

A part of :class:`simulators.core.Simulator` (see :mod:`simulators.model`). The shim's
``TaskDuplication`` keeps a wanted copy until its executor has a free slot after Spark placed
its own pending tasks, and drops the request once it was tried on such a slot or its task no
longer runs. The simulator does the same: a copy asked for on a busy core (the engine may ask
at the very event that frees it, before the world has freed it) is launched after the next
placement that leaves that executor a free core. The engine counts a copy it asked for as
running until its task ends, so a copy the world dropped would never be asked for again.
"""

from __future__ import annotations

from simulators.model import WorldModel
from simulators.state import ACTIVE
from trspark.engine.commands import DuplicateTask, KillDuplicate


class DuplicateDriver(WorldModel):
    """Copies of running tasks on chosen executors, and the copies wanted but not started yet."""

    def _duplicate(self, cmd: DuplicateTask) -> None:
        """Want a copy of ``(stage, partition)`` on ``cmd.executor_id`` (one per task: the latest wins)."""
        self._wanted[(cmd.stage_id, cmd.partition)] = cmd.executor_id

    def _kill_duplicate(self, cmd: KillDuplicate) -> None:
        if self._wanted.get((cmd.stage_id, cmd.partition)) == cmd.executor_id:
            del self._wanted[(cmd.stage_id, cmd.partition)]
        for tid in self._find_task(cmd.stage_id, cmd.partition, cmd.executor_id):
            if len(self._find_task(cmd.stage_id, cmd.partition)) > 1:
                self._end_task_unsuccessfully(tid, "killed")

    def _find_task(self, stage_id: int, partition: int, executor_id: str | None = None) -> list[int]:
        """Task ids of the running attempts of ``(stage, partition)`` (on ``executor_id`` only, if given)."""
        return sorted(
            tid for tid, rec in self._tasks.items()
            if rec[0].id == stage_id and rec[1] == partition
            and (executor_id is None or rec[2].id == executor_id)
        )

    def _launch_wanted(self) -> bool:
        """Start the wanted copies whose executor has a free core now (after the placement of pending tasks).

        Returns whether a copy's fetch failed (its stage's attempt failed and its parents were re-submitted).
        """
        failed = False
        for key, executor_id in list(self._wanted.items()):
            running = self._find_task(*key)
            idx = int(executor_id) if executor_id.isdigit() else -1
            if not running or not 0 <= idx < len(self.executors) or not self.executors[idx].alive:
                del self._wanted[key]  # finished, failed or never ran; or its executor is gone
                continue
            e = self.executors[idx]
            if e.free <= 0:
                continue
            del self._wanted[key]
            stage = self._tasks[running[0]][0]
            if len(running) > 1 or any(self._tasks[tid][2] is e for tid in running):
                continue  # as the shim: one attempt running, none on that executor already
            if self._parent_missing(stage):
                # The copy would fetch a block lost since the original read its input.
                if stage.state == ACTIVE:
                    self._fetch_failed(stage)
                    failed = True
                continue
            tid = self._start_task(stage, key[1], e, speculative=True)
            self._dups.setdefault((stage.index, key[1]), set()).update(running + [tid])
        return failed
