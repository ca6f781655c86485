"""Run-time state of a simulation: VMs, stages, and what a run measured.

Plain classes with ``__slots__`` where they are hot; :mod:`simulators.core` mutates them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from simulators.dag import StageSpec
from trspark.engine.commands import Backup

# heap entry kinds == their tie priority (see the simulators.core docstring)
EVICT, NOTICE, XFER_DONE, TASK_DONE, VM_ADD, STAGE_READY, TICK = range(7)

# stage states
IDLE, WAITING, ACTIVE, COMPLETE = range(4)


class Executor:
    """One VM: its cores, the blocks it holds, its true death time, its pool (index in the world's pools)."""

    __slots__ = ("idx", "id", "cores", "free", "alive", "born", "death", "left", "pool", "tasks", "blocks",
                 "peer_blocks", "queue")

    def __init__(self, idx: int, cores: int, born: float, death: float, pool: int = 0) -> None:
        self.idx = idx
        self.pool = pool
        self.left: float | None = None
        """When it left the cluster (evicted or released; s), None while it is there."""
        self.id = str(idx)
        self.cores = cores
        self.free = cores
        self.alive = True
        self.born = born
        self.death = death
        self.tasks: set[int] = set()
        self.blocks: list[tuple[int, int]] = []
        self.peer_blocks: set[tuple[int, int]] = set()
        self.queue: deque[Backup] = deque()


class Stage:
    """Run-time state of one stage (``spec`` is the immutable description)."""

    def __init__(self, index: int, spec: StageSpec) -> None:
        n = spec.num_tasks
        self.index = index
        self.spec = spec
        self.id = spec.stage_id
        self.n = n
        self.seconds = spec.task_seconds.tolist()
        self.writes = spec.shuffle_write_bytes.tolist()
        self.inputs = spec.input_bytes.tolist() if spec.input_bytes is not None else [0.0] * n
        self.total_write = float(spec.shuffle_write_bytes.sum())
        self.read_bytes = 0.0  # shuffle bytes one task reads (set once parents are linked)
        self.parents: list[Stage] = []
        self.after: list[Stage] = []
        self.children: list[Stage] = []
        self.followers: list[Stage] = []
        self.state = IDLE
        self.attempt = -1
        self.failures = 0
        self.ever_completed = False
        self.consumed = False
        self.done = bytearray(n)
        self.ever_done = bytearray(n)
        self.running = [0] * n
        self.n_done = 0
        self.pending: deque[int] = deque()
        # map-output locations (map stages only)
        self.origin: list[Executor | None] = [None] * n
        self.peer: list[Executor | None] = [None] * n
        self.remote = bytearray(n)
        self.remote_read = bytearray(n)
        self.remote_bytes = 0.0

    def final(self) -> bool:
        """Complete and nothing will ever need to re-run it."""
        return self.state == COMPLETE and (self.spec.shuffle_id is None or self.consumed)


@dataclass
class RunResult:
    """What one simulated run measured (times in s, sizes in bytes)."""

    job_time: float
    succeeded: bool
    fail_reason: str = ""
    tasks_run: int = 0
    recomputed_tasks: int = 0
    killed_tasks: int = 0
    evictions: int = 0
    releases: int = 0
    """VMs let go before their death because the engine had nothing left for them (``ReleaseExecutor``)."""
    backups_local: int = 0
    backups_remote: int = 0
    backup_bytes_local: float = 0.0
    backup_bytes_remote: float = 0.0
    backups_failed: int = 0
    blocks_lost: int = 0
    stage_resubmissions: int = 0
    safety_belt_firings: int = 0
    advice: list[str] = field(default_factory=list)
    vm_seconds: dict[str, float] = field(default_factory=dict)
    """Pool -> seconds its VMs were up during the job (registration to eviction, release or job end)."""
    events: int = 0
    policy_summary: dict[str, object] = field(default_factory=dict)
