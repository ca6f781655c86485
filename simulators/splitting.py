"""Lifetime-aware task splitting of a simulated job (the task-size rule of :mod:`cost_model.task_size`).

The rule gives the longest task :math:`L^*` (s) whose expected loss to an eviction stays within a
fraction ``f`` of its work, from the world's lifetimes: every pool's model weighted by its VM
count, a pool that is never evicted losing nothing, executors taken at age 0 (the least stable
age of a decreasing hazard; exponential lifetimes do not depend on it). A stage's task of ``t``
seconds longer than :math:`L^*` becomes :math:`k = \\lceil t / L^* \\rceil` tasks of ``t/k`` seconds
(plus ``overhead`` seconds each: launch and deserialisation a real task pays) writing ``w/k``
bytes each, so a stage keeps its total work and bytes. Readers of a split map stage read the same
bytes in total; a split reduce stage's tasks each read a smaller share (the simulator divides a
shuffle's bytes among its readers).

What this stands for in Spark: more shuffle partitions (SQL: AQE's advisory partition size), or
more input splits, chosen from the lifetimes before the job runs.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import click
import numpy as np

from cost_model.lifetimes import Stable, from_spec
from cost_model.task_size import FractionTooLarge, Placement, largest_task_seconds
from simulators.dag import JobSpec, StageSpec
from simulators.options import FiniteFloatRange, fail
from simulators.world import WorldSpec

SPLITS = ("none", "lifetime")
DEFAULT_FRACTION = 0.05
"""``f``: the expected loss per second of task work the rule accepts (as ``spark.trspark.sizing.lossFraction``)."""


def lifetime_limit(world: WorldSpec, fraction: float) -> float:
    """:math:`L^*` (s) of the world's true lifetimes, per pool weighted by VM count (``inf``: no limit)."""
    models, weights = [], []
    for _name, count, spec in world.pool_table():
        models.append(Stable() if spec is None else from_spec(spec))
        weights.append(float(count))
    return largest_task_seconds(Placement(models, weights=weights), fraction)


def split_stage(stage: StageSpec, limit: float, overhead: float = 0.0) -> StageSpec:
    """``stage`` with each task longer than ``limit`` s cut into ``ceil(t / limit)`` equal pieces."""
    if not math.isfinite(limit):
        return stage
    pieces = np.maximum(np.ceil(stage.task_seconds / limit), 1.0).astype(np.int64)
    if not (pieces > 1).any():
        return stage
    seconds = np.repeat(stage.task_seconds / pieces, pieces) + np.repeat(np.where(pieces > 1, overhead, 0.0), pieces)
    inputs = None if stage.input_bytes is None else np.repeat(stage.input_bytes / pieces, pieces)
    return replace(stage, task_seconds=seconds, shuffle_write_bytes=np.repeat(stage.shuffle_write_bytes / pieces, pieces),
                   input_bytes=inputs)


def split_job(job: JobSpec, limit: float, overhead: float = 0.0) -> JobSpec:
    """Every stage of ``job`` split by :func:`split_stage`; ``meta['split_limit']`` records ``limit``."""
    if not limit > 0.0:
        raise ValueError(f"split limit must be > 0 seconds, got {limit!r}")
    if overhead < 0.0:
        raise ValueError(f"split overhead must be >= 0 seconds, got {overhead!r}")
    stages = tuple(split_stage(stage, limit, overhead) for stage in job.stages)
    return JobSpec(name=job.name, stages=stages, meta={**job.meta, "split_limit": limit})


def apply_split(job: JobSpec, world: WorldSpec, split: str, fraction: float, overhead: float) -> JobSpec:
    """The job as the ``--split`` option asks: unchanged for ``none``, else split by the world's :math:`L^*`."""
    if split == "none":
        return job
    try:
        limit = lifetime_limit(world, fraction)
    except FractionTooLarge as exc:
        fail(f"--split-fraction={fraction:g} is not below the largest expected loss fraction the world's lifetimes "
             f"give ({exc.peak:.3f}); allowed: a number in (0, {exc.peak:.3f})")
    return job if limit == 0.0 or not math.isfinite(limit) else split_job(job, limit, overhead)


def split_options(f: Any) -> Any:
    """``--split``, ``--split-fraction``, ``--split-overhead`` of ``trspark simulate``."""
    options = [
        click.option("--split", type=click.Choice(SPLITS), default="none", show_default=True,
                     help="lifetime: cut tasks longer than the lifetime rule's L* into equal pieces "
                          "(cost_model.task_size; the slowdown stays relative to the unsplit job's stable time)."),
        click.option("--split-fraction", type=FiniteFloatRange(0.0, 1.0, min_open=True, max_open=True),
                     default=DEFAULT_FRACTION, show_default=True,
                     help="f: expected loss to evictions per second of task work the rule accepts."),
        click.option("--split-overhead", type=FiniteFloatRange(0.0), default=0.05, show_default=True,
                     help="Seconds each piece of a split task adds (task launch)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f
