"""Synthetic job DAGs with the shapes of the paper's four workloads (Figure 6), seeded.

Each generator takes a :class:`WorkloadParams` (tasks-per-stage scale, mean task time, task-time
and size spread, map-output size) and a ``numpy.random.Generator``. Per-task compute times and
map-output sizes are log-normal with the stage's mean:

.. math:: X \\sim \\mathrm{LogNormal}(\\ln m - \\sigma^2/2,\\ \\sigma), \\qquad E[X] = m .

Shapes (stage: tasks x scale, parents):

* ``tpcds`` -- SQL plan: four scans, three joins, two aggregations, a final sort; output sizes
  shrink downstream (data reduction). 20,100 tasks at scale 1 (the paper's default setting).
* ``bing`` -- Bing-API-like production pipeline: an eight-stage chain with gradual reduction.
* ``cortana`` -- Cortana-session-like: two three-stage branches joined, then three aggregations.
* ``pagerank`` -- iterative PageRank: a links stage, ``iterations`` rank stages each reading
  the previous one (long lineage: a lost block cascades back through iterations), a result stage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simulators.dag import JobSpec, StageSpec

MB = 1e6


@dataclass(frozen=True)
class WorkloadParams:
    """Knobs shared by every generator.

    Parameters
    ----------
    scale : float
        Multiplies every stage's task count (at least 1 task per stage).
    task_seconds : float
        Mean compute time of a task of weight 1 (s); stages scale it by their own weight.
    task_sigma : float
        Log-normal shape of task times within a stage (0 = all equal).
    write_mb : float
        Mean map-output size of a first-stage task (MB = 10^6 bytes); later stages shrink it.
    size_sigma : float
        Log-normal shape of map-output sizes.
    iterations : int
        PageRank iterations.
    """

    scale: float = 1.0
    task_seconds: float = 1.0
    task_sigma: float = 0.5
    write_mb: float = 24.0
    size_sigma: float = 0.3
    iterations: int = 10


# (name, tasks at scale 1, relative task time, relative map-output size (0 = result), parent names)
_Plan = list[tuple[str, int, float, float, tuple[str, ...]]]

_TPCDS: _Plan = [
    ("scan_store_sales", 6000, 1.0, 1.0, ()),
    ("scan_date_dim", 200, 0.5, 0.2, ()),
    ("scan_item", 400, 0.6, 0.4, ()),
    ("scan_customer", 1000, 0.8, 0.6, ()),
    ("join_sales_date", 4000, 1.3, 0.7, ("scan_store_sales", "scan_date_dim")),
    ("join_item", 3000, 1.2, 0.5, ("join_sales_date", "scan_item")),
    ("join_customer", 2500, 1.2, 0.4, ("join_item", "scan_customer")),
    ("aggregate", 2000, 0.9, 0.15, ("join_customer",)),
    ("aggregate_final", 800, 0.7, 0.05, ("aggregate",)),
    ("sort_result", 200, 0.5, 0.0, ("aggregate_final",)),
]

_BING: _Plan = [
    ("extract", 3000, 1.0, 1.0, ()),
    ("parse", 2000, 1.2, 0.8, ("extract",)),
    ("enrich", 2000, 1.3, 0.7, ("parse",)),
    ("filter", 1500, 0.8, 0.5, ("enrich",)),
    ("sessionize", 1000, 1.4, 0.35, ("filter",)),
    ("score", 800, 1.1, 0.2, ("sessionize",)),
    ("rollup", 400, 0.8, 0.08, ("score",)),
    ("publish", 100, 0.5, 0.0, ("rollup",)),
]

_CORTANA: _Plan = [
    ("sessions_scan", 2500, 1.0, 1.0, ()),
    ("sessions_clean", 1500, 1.1, 0.6, ("sessions_scan",)),
    ("sessions_keyed", 1200, 0.9, 0.5, ("sessions_clean",)),
    ("events_scan", 2000, 1.0, 0.9, ()),
    ("events_clean", 1200, 1.0, 0.5, ("events_scan",)),
    ("events_keyed", 1000, 0.9, 0.4, ("events_clean",)),
    ("join_sessions_events", 1500, 1.5, 0.4, ("sessions_keyed", "events_keyed")),
    ("aggregate_user", 800, 1.0, 0.15, ("join_sessions_events",)),
    ("aggregate_day", 300, 0.8, 0.05, ("aggregate_user",)),
    ("report", 50, 0.5, 0.0, ("aggregate_day",)),
]


def _pagerank_plan(iterations: int) -> _Plan:
    plan: _Plan = [("links", 2000, 1.2, 1.0, ())]
    previous = "links"
    for i in range(1, iterations + 1):
        name = f"rank_{i}"
        plan.append((name, 1000, 0.8, 0.35, (previous,)))
        previous = name
    plan.append(("collect", 100, 0.3, 0.0, (previous,)))
    return plan


def _lognormal(rng: np.random.Generator, mean: float, sigma: float, n: int) -> np.ndarray:
    if sigma <= 0.0:
        return np.full(n, mean)
    return rng.lognormal(np.log(mean) - sigma * sigma / 2.0, sigma, size=n)


def build(name: str, plan: _Plan, params: WorkloadParams, rng: np.random.Generator) -> JobSpec:
    """Turn a stage plan into a :class:`JobSpec` with seeded per-task times and sizes."""
    ids = {stage_name: i for i, (stage_name, *_rest) in enumerate(plan)}
    stages = []
    for i, (stage_name, tasks, time_weight, size_weight, parents) in enumerate(plan):
        n = max(1, round(tasks * params.scale))
        seconds = _lognormal(rng, params.task_seconds * time_weight, params.task_sigma, n)
        if size_weight > 0.0:
            writes = _lognormal(rng, params.write_mb * MB * size_weight, params.size_sigma, n)
            shuffle_id: int | None = i
        else:
            writes = np.zeros(n)
            shuffle_id = None
        stages.append(
            StageSpec(
                stage_id=i, task_seconds=seconds, shuffle_write_bytes=writes,
                parents=tuple(ids[p] for p in parents), shuffle_id=shuffle_id, name=stage_name,
            )
        )
    return JobSpec(name=name, stages=tuple(stages))


WORKLOADS: dict[str, Callable[[WorkloadParams, np.random.Generator], JobSpec]] = {
    "tpcds": lambda p, rng: build("tpcds", _TPCDS, p, rng),
    "bing": lambda p, rng: build("bing", _BING, p, rng),
    "cortana": lambda p, rng: build("cortana", _CORTANA, p, rng),
    "pagerank": lambda p, rng: build("pagerank", _pagerank_plan(p.iterations), p, rng),
}


def workload_names() -> list[str]:
    return sorted(WORKLOADS)


def make_workload(name: str, params: WorkloadParams | None = None, seed: int = 0) -> JobSpec:
    """The job ``name`` (``tpcds``, ``bing``, ``cortana``, ``pagerank``) drawn with ``seed``."""
    try:
        factory = WORKLOADS[name]
    except KeyError:
        raise ValueError(f"unknown workload {name!r}; known: {', '.join(workload_names())}") from None
    return factory(params or WorkloadParams(), np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(7,))))
