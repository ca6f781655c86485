"""Applying backup commands: copies that hold a core of their source VM and share bandwidth.

A part of :class:`simulators.core.Simulator` (see :mod:`simulators.model`); it uses the
simulator's clock, heap, executors and block table.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from simulators.model import WorldModel
from simulators.state import XFER_DONE, Executor, Stage
from simulators.transfers import Transfer
from trspark.engine.commands import Backup, CancelBackup, DropBackup
from trspark.engine.events import REMOTE, BackupFailed, BlockBackedUp


class BackupDriver(WorldModel):
    """Backup, CancelBackup and DropBackup for the simulator (see :mod:`simulators.transfers`)."""

    def _block(self, shuffle_id: int, map_index: int) -> tuple[Stage, int] | None:
        stage = self.by_shuffle.get(shuffle_id)
        if stage is None or not 0 <= map_index < stage.n:
            return None
        return stage, map_index

    def _backup_failed(self, shuffle_id: int, map_index: int, target: str, reason: str) -> None:
        self.result.backups_failed += 1
        self._emit(BackupFailed(self.now, shuffle_id, map_index, target, reason))

    def _request_backup(self, cmd: Backup) -> None:
        idx = int(cmd.source) if cmd.source.isdigit() else -1
        if not 0 <= idx < len(self.executors) or not self.executors[idx].alive:
            self._backup_failed(cmd.shuffle_id, cmd.map_index, cmd.target, "source executor not alive")
            return
        source = self.executors[idx]
        if source.free > 0:
            source.free -= 1
            if not self._start_backup(cmd, source, core_taken=True):
                source.free += 1
        else:
            source.queue.append(cmd)

    def _start_backup(self, cmd: Backup, source: Executor, *, core_taken: bool = False) -> bool:
        """Start copying a block off ``source`` on one of its cores; False if it cannot start."""
        block = self._block(cmd.shuffle_id, cmd.map_index)
        if block is None:
            self._backup_failed(cmd.shuffle_id, cmd.map_index, cmd.target, "no such block")
            return False
        stage, p = block
        if stage.origin[p] is not source and stage.peer[p] is not source:
            self._backup_failed(cmd.shuffle_id, cmd.map_index, cmd.target, "source does not hold the block")
            return False
        target: Executor | None = None
        if cmd.target != REMOTE:
            idx = int(cmd.target) if cmd.target.isdigit() else -1
            if not 0 <= idx < len(self.executors) or not self.executors[idx].alive or self.executors[idx] is source:
                self._backup_failed(cmd.shuffle_id, cmd.map_index, cmd.target, "target executor not alive")
                return False
            target = self.executors[idx]
        if not core_taken:
            source.free -= 1
        tr = Transfer((stage.index, p), source, target, stage.writes[p], self.now, self.world.backup_latency)
        self._xfer_by_block.setdefault(tr.block, []).append(tr)
        for changed in self.transfers.start(tr, self.now):
            self._push(changed.done_at, XFER_DONE, (changed, changed.token))
        return True

    def _end_transfer(self, tr: Transfer) -> None:
        for changed in self.transfers.remove(tr, self.now):
            self._push(changed.done_at, XFER_DONE, (changed, changed.token))
        group = self._xfer_by_block.get(tr.block)
        if group is not None:
            group.remove(tr)
            if not group:
                del self._xfer_by_block[tr.block]
        if tr.source.alive:
            tr.source.free += 1
            self._release_slot(tr.source)

    def _fail_transfer(self, tr: Transfer, reason: str) -> None:
        self._end_transfer(tr)
        stage = self.stages[tr.block[0]]
        self._backup_failed(stage.spec.shuffle_id, tr.block[1], REMOTE if tr.target is None else tr.target.id, reason)  # type: ignore[arg-type]

    def _on_xfer_done(self, payload: Any) -> None:
        tr, token = payload
        if token != tr.token:
            return  # rescheduled or cancelled since
        self._end_transfer(tr)
        stage, p = self.stages[tr.block[0]], tr.block[1]
        if tr.target is None:
            stage.remote[p] = 1
            self.result.backups_remote += 1
            self.result.backup_bytes_remote += tr.bytes
        else:
            old = stage.peer[p]
            if old is not None:
                old.peer_blocks.discard(tr.block)
            stage.peer[p] = tr.target
            tr.target.peer_blocks.add(tr.block)
            self.result.backups_local += 1
            self.result.backup_bytes_local += tr.bytes
        self._refresh_block(stage, p)
        if not self._want_backed_up:
            return
        target = REMOTE if tr.target is None else tr.target.id
        self._emit(BlockBackedUp(self.now, stage.spec.shuffle_id, p, target, int(tr.bytes), self.now - tr.started))

    def _cancel_backup(self, cmd: CancelBackup) -> None:
        block = self._block(cmd.shuffle_id, cmd.map_index)
        if block is None:
            return
        key = (block[0].index, block[1])
        for tr in list(self._xfer_by_block.get(key, ())):
            self._end_transfer(tr)
        for e in self.executors:
            if e.queue:
                e.queue = deque(c for c in e.queue if (c.shuffle_id, c.map_index) != (cmd.shuffle_id, cmd.map_index))

    def _drop_backup(self, cmd: DropBackup) -> None:
        block = self._block(cmd.shuffle_id, cmd.map_index)
        if block is None:
            return
        stage, p = block
        peer = stage.peer[p]
        if peer is not None:
            peer.peer_blocks.discard((stage.index, p))
            stage.peer[p] = None
        stage.remote[p] = 0
        self._refresh_block(stage, p)
