"""Kill schedules drawn from a lifetime model, replayed by :class:`~jobs.harness.chaos.EvictionInjector`.

Drawing one schedule and replaying it for every policy gives paired comparisons: the same
executors die at the same offsets whatever the policy does.
"""

from __future__ import annotations

import numpy as np

from cost_model.lifetimes import LifetimeModel, from_spec

Schedule = list[tuple[float, int]]
"""``(offset seconds after start, victim rank)`` pairs, in time order."""


def draw_schedule(
    model: LifetimeModel | str,
    executors: int,
    horizon: float,
    rng: np.random.Generator,
    *,
    replacement_delay: float = 0.0,
) -> Schedule:
    """A kill schedule that follows ``model`` on ``executors`` slots up to ``horizon`` seconds.

    Each slot is a renewal process: an executor lives :math:`L \\sim` ``model``, is killed, and
    its replacement starts ``replacement_delay`` seconds later with a fresh lifetime. The rank
    of each victim is its position by age among the executors alive at that moment (oldest =
    0), the rule :class:`EvictionInjector` applies when it replays the schedule.

    Parameters
    ----------
    model
        Lifetime model or its spec string (seconds).
    executors
        Number of executor slots (the ``N`` of ``local-cluster[N,...]``).
    horizon
        Kills after this many seconds are not included.
    rng
        Source of all randomness (same seed, same schedule).
    replacement_delay
        Seconds from a kill until its replacement counts as alive (7-17 s measured here).
    """
    lifetimes = from_spec(model) if isinstance(model, str) else model
    if executors < 1 or horizon <= 0:
        raise ValueError(f"need executors >= 1 and horizon > 0, got {executors} and {horizon}")
    births = [0.0] * executors  # when each slot's current executor started
    deaths = [float(x) for x in lifetimes.sample(executors, rng)]
    schedule: Schedule = []
    while True:
        slot = int(np.argmin(deaths))
        t = deaths[slot]
        if t > horizon:
            return schedule
        alive = sorted((births[i], i) for i in range(executors) if births[i] <= t)
        schedule.append((t, alive.index((births[slot], slot))))
        births[slot] = t + replacement_delay
        deaths[slot] = births[slot] + float(lifetimes.sample(1, rng)[0])
