"""Decision cost and memory of the TR engine over a long application (thousands of jobs).

Live Spark runs one engine per application; a notebook or a SQL server sends it job after job.
This feeds the real engine (``TRPolicy``) a stream of small sequential jobs -- a map stage of
``--maps`` tasks writing a shuffle, a reducer reading it, as Spark's listener reports them
(``JobSubmitted`` ... ``ShuffleConsumed``, ``JobEnded`` with the job id, a ``Tick``) -- on
``--executors`` one-core executors, one of which is replaced every ``--churn`` jobs (a spot
eviction). Every ``Backup`` the engine asks for finishes at once.

Per window of ``--window`` jobs it prints the p50 / p99 wall time of ``Policy.handle`` and the
traced Python memory (``tracemalloc``; it slows every call alike), and at the end the ratio of
the last window's p99 to the first's: about 1 when the engine's cost follows the work in flight
rather than the application's history. No assertions: it prints figures.

Run: ``python bench/engine_long_app.py [--jobs 5000]``.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Sequence

import numpy as np

from trspark.engine.commands import Backup
from trspark.engine.events import (
    BlockBackedUp,
    Event,
    ExecutorAdded,
    ExecutorLost,
    JobEnded,
    JobSubmitted,
    ShuffleConsumed,
    StageCompleted,
    StageSubmitted,
    TaskEnded,
    TaskStarted,
    Tick,
)
from trspark.engine.settings import TRConfig
from trspark.engine.tr.policy import TRPolicy

MB = 1_000_000


def job_events(job: int, t: float, maps: int, executors: list[str]) -> list[Event]:
    """One job at time ``t`` (s): stage 2j writes shuffle j with ``maps`` 0.1-s tasks, stage 2j+1 reads it."""
    m, r, n = 2 * job, 2 * job + 1, len(executors)
    reducers = max(1, maps // 2)
    events: list[Event] = [JobSubmitted(t, job, (m, r), (maps, reducers), (job, None), ((), (m,))),
                           StageSubmitted(t, m, maps, shuffle_id=job)]
    for p in range(maps):
        ex = executors[p % n]
        events += [TaskStarted(t, m, p, ex),
                   TaskEnded(t + 0.1, m, p, ex, 0.1, shuffle_write_bytes=8 * MB, shuffle_id=job, map_id=p)]
        t += 0.1 if p % n == n - 1 else 0.0
    t += 0.1
    events += [StageCompleted(t, m), StageSubmitted(t, r, reducers, parent_stage_ids=(m,), parent_shuffle_ids=(job,))]
    for p in range(reducers):
        ex = executors[p % n]
        events += [TaskStarted(t, r, p, ex), TaskEnded(t + 0.1, r, p, ex, 0.1, shuffle_read_bytes=8 * MB)]
        t += 0.1 if p % n == n - 1 else 0.0
    t += 0.1
    return [*events, StageCompleted(t, r), ShuffleConsumed(t, job), JobEnded(t, True, job_id=job), Tick(t)]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--window", type=int, default=500, help="jobs per printed window")
    parser.add_argument("--maps", type=int, default=6, help="map tasks per job")
    parser.add_argument("--executors", type=int, default=3)
    parser.add_argument("--churn", type=int, default=50, help="jobs between two executor replacements (0: none)")
    parser.add_argument("--lifetime", default="exponential:mean=120", help="the engine's lifetime belief")
    args = parser.parse_args(argv)

    policy = TRPolicy(TRConfig(lifetime=args.lifetime))
    executors = [str(i) for i in range(args.executors)]
    for ex in executors:
        policy.handle(ExecutorAdded(0.0, ex, host=f"h{ex}", cores=1))
    next_id, t = args.executors, 0.0
    tracemalloc.start()
    windows: list[float] = []
    seconds: list[float] = []
    print(f"{'jobs':>6s} {'events':>8s} {'p50 ms':>8s} {'p99 ms':>8s} {'memory MB':>10s}")
    for job in range(args.jobs):
        if args.churn and job and job % args.churn == 0:  # a spot eviction and its replacement
            gone = executors.pop(0)
            fresh = str(next_id)
            next_id += 1
            executors.append(fresh)
            for churn in (ExecutorLost(t, gone), ExecutorAdded(t, fresh, host=f"h{fresh}", cores=1)):
                policy.handle(churn)
        for event in job_events(job, t, args.maps, executors):
            start = time.perf_counter()
            commands = list(policy.handle(event))
            while commands:
                c = commands.pop()
                if isinstance(c, Backup):
                    commands += policy.handle(BlockBackedUp(event.time, c.shuffle_id, c.map_index, c.target, c.bytes))
            seconds.append(time.perf_counter() - start)
            t = event.time
        if (job + 1) % args.window == 0:
            ms = np.array(seconds) * 1e3
            p99 = float(np.percentile(ms, 99))
            windows.append(p99)
            print(f"{job + 1:6d} {len(ms):8d} {np.percentile(ms, 50):8.3f} {p99:8.3f} "
                  f"{tracemalloc.get_traced_memory()[0] / 1e6:10.1f}", flush=True)
            seconds.clear()
    if len(windows) >= 2:
        print(f"p99 last window / first window: {windows[-1] / windows[0]:.2f}")
    state = policy.state
    print(f"held at the end: stages {len(state.stages)}, outputs {len(state.outputs)}, planned {len(state.planned)}, "
          f"lineage shuffles {len(policy.costs.lineage.shuffle_ids())}, executors {len(state.executors)}")


if __name__ == "__main__":
    main()
