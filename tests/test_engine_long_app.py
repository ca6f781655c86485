"""A long application (many jobs through one engine) keeps only the work in flight.

Live Spark runs one engine per application: a notebook or a SQL server sends it thousands of
jobs. Each job here is a map stage (6 tasks on 3 executors, 1 s each) and a reducer; executors
live 5 s on average, so the engine backs outputs up. After every job its backups must be
dropped, and after all jobs the engine must hold no stage, output, graph or lineage entry of
the finished jobs, with the application's mean task time still exact.
"""

from __future__ import annotations

import pytest

from trspark.config import TRConfig
from trspark.engine.protocol import (
    Backup,
    BlockBackedUp,
    Command,
    DropBackup,
    Event,
    ExecutorAdded,
    JobEnded,
    JobSubmitted,
    ShuffleConsumed,
    StageCompleted,
    StageSubmitted,
    TaskEnded,
    TaskStarted,
    Tick,
)
from trspark.engine.tr.policy import TRPolicy

JOBS = 40
MB = 1_000_000


def _job(j: int, t: float) -> list[Event]:
    """Job ``j`` at time ``t``: stage 2j writes shuffle j (6 maps), stage 2j+1 reads it (3 tasks)."""
    m, r = 2 * j, 2 * j + 1
    events: list[Event] = [
        JobSubmitted(t, j, (m, r), (6, 3), (j, None), ((), (m,))),
        StageSubmitted(t, m, 6, shuffle_id=j),
    ]
    for p in range(6):
        events += [TaskStarted(t, m, p, str(p % 3)),
                   TaskEnded(t + 1.0, m, p, str(p % 3), 1.0, shuffle_write_bytes=50 * MB, shuffle_id=j, map_id=p)]
        t += 1.0 if p % 3 == 2 else 0.0
    events += [StageCompleted(t + 1.0, m), StageSubmitted(t + 1.0, r, 3, parent_stage_ids=(m,), parent_shuffle_ids=(j,))]
    t += 1.0
    for p in range(3):
        events += [TaskStarted(t, r, p, str(p)), TaskEnded(t + 1.0, r, p, str(p), 1.0, shuffle_read_bytes=100 * MB)]
    t += 1.0
    return [*events, StageCompleted(t, r), ShuffleConsumed(t, j), JobEnded(t, True, job_id=j), Tick(t + 0.5)]


def test_many_jobs_leave_nothing_behind_but_their_statistics() -> None:
    policy = TRPolicy(TRConfig(lifetime="exponential:mean=5", remote_bandwidth=1e9, local_bandwidth=1e9))
    for i in range(3):
        policy.handle(ExecutorAdded(0.0, str(i), host=f"h{i}", cores=1))
    t, backed_up, dropped = 0.0, set(), set()
    for j in range(JOBS):
        for event in _job(j, t):
            commands: list[Command] = list(policy.handle(event))
            while commands:  # every copy finishes at once
                c = commands.pop(0)
                if isinstance(c, Backup):
                    backed_up.add((c.shuffle_id, c.map_index))
                    commands += policy.handle(BlockBackedUp(event.time, c.shuffle_id, c.map_index, c.target, c.bytes))
                elif isinstance(c, DropBackup):
                    dropped.add((c.shuffle_id, c.map_index))
            t = event.time
    assert len(backed_up) > JOBS  # the engine did protect outputs ...
    assert dropped == backed_up  # ... and dropped every copy once its shuffle was consumed
    state, lineage = policy.state, policy.costs.lineage
    assert (state.stages, state.outputs, state.planned, state.planned_readers, state.job_stages) == ({}, {}, {}, {}, {})
    assert (state.shuffle_stage, state.shuffle_readers) == ({}, {})
    assert lineage.shuffle_ids() == [] and len(lineage) == 0
    assert state.mean_task_seconds() == pytest.approx(1.0)
