"""Kill schedules of a benchmark run: one per (query, repeat), the same for every policy.

A schedule is a list of ``(seconds after the run's start, victim rank)`` pairs drawn by
:func:`jobs.harness.kill_schedule.draw_schedule` from the query's lifetime model over the spot slots
(on-demand slots are never killed), or, with ``reclaim_within``, one reclamation of the whole
spot pool at a time drawn uniformly from that range of the stable time.
"""

from __future__ import annotations

import logging
import math
import zlib

import numpy as np

from jobs.tpcds import pools
from jobs.tpcds.settings import BenchSettings

log = logging.getLogger("trspark.bench")

Schedule = list[tuple[float, int]]

MAX_REDRAWS = 100
"""Draws of one schedule at most while its first kill is later than ``first_kill_within`` asks."""


def draw_all(s: BenchSettings, stable: dict[str, float]) -> dict[tuple[str, int], Schedule]:
    """One kill schedule per (query, repeat), from a generator seeded by (seed, query, repeat).

    The query enters the seed by name (CRC-32), not by position, so a run over a subset of the
    queries draws the same schedules as the full run. ``stable``: each query's stable seconds.
    """
    out: dict[tuple[str, int], Schedule] = {}
    spot = s.executors - pools.on_demand_slots(s.pools)  # on-demand slots are never killed
    # A reclamation not before a notice could be given: a noticed policy's kill would come later than the others'.
    earliest = s.notice if s.any_noticed() else 0.0
    for name in s.queries:
        spec = lifetime_spec(s, stable, name)
        if spec is None:
            log.warning("%s has no stable time (every stable run failed): its evicted runs get no kills", name)
        for r in range(s.repeat):
            if spec is None or not spot:
                out[(name, r)] = []
                continue
            rng = np.random.default_rng([s.seed, zlib.crc32(name.encode()), r])
            if s.reclaim_within is not None:
                seconds = stable.get(name, math.nan)
                out[(name, r)] = (reclaim_pool(spot, s.reclaim_within, rng, seconds, earliest=earliest)
                                  if math.isfinite(seconds) else [])
            else:
                out[(name, r)] = _draw(spec, spot, s, rng, stable.get(name, math.nan))
    return out


def _draw(spec: str, spot: int, s: BenchSettings, rng: np.random.Generator, stable: float) -> Schedule:
    """A schedule for ``spot`` killable slots; with ``first_kill_within``, redrawn from the same
    generator (so still one schedule per seed) until its first kill is within that fraction of ``stable``."""
    from jobs.harness.kill_schedule import draw_schedule

    within = s.first_kill_within * stable if s.first_kill_within is not None and math.isfinite(stable) else math.inf
    for _ in range(MAX_REDRAWS):
        schedule = draw_schedule(spec, spot, s.time_cap, rng, replacement_delay=s.replacement_delay)
        if math.isinf(within) or (schedule and schedule[0][0] <= within):
            break
    return schedule


def reclaim_pool(spot: int, within: tuple[float, float], rng: np.random.Generator, stable: float, *,
                 earliest: float = 0.0) -> Schedule:
    """Every spot slot killed at one time :math:`t = \\max(u S, t_0)`, :math:`u \\sim U(\\text{low}, \\text{high})`
    (``S`` the stable seconds, :math:`t_0` = ``earliest``): rank 0 each time, as each kill takes the
    oldest spot executor left."""
    t = max(float(rng.uniform(*within)) * stable, earliest)
    return [(t, 0)] * spot


def lifetime_spec(s: BenchSettings, stable: dict[str, float], name: str) -> str | None:
    """The query's lifetime model: ``--lifetime``, else exponential with mean stability x stable time.

    None when the model depends on a stable time that could not be measured.
    """
    if s.lifetime:
        return s.lifetime
    seconds = stable.get(name, float("nan"))
    if s.stability is None or not math.isfinite(seconds):
        return None
    return f"exponential:mean={s.stability * seconds:.6g}"
