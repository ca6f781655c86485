"""A simulated Spark job: stages, their shuffle dependencies and per-task work.

A :class:`JobSpec` is pure data (numpy arrays, tuples) so it pickles cheaply to worker processes.
Workload generators (:mod:`simulators.workloads`) and event-log replay (:mod:`simulators.eventlog`)
both produce one; the simulator (:mod:`simulators.core`) only reads it.

Units: seconds for times, bytes for sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class StageSpec:
    """One stage of ``num_tasks`` tasks.

    Parameters
    ----------
    stage_id : int
        Spark stage id (unique in the job).
    task_seconds : array of float, shape (num_tasks,)
        Compute time of each partition's task (s), excluding its shuffle read, which the
        simulator adds from the bytes read and where they are read from.
    shuffle_write_bytes : array of float, shape (num_tasks,)
        Bytes of map output each task writes (all zeros for a result stage).
    parents : tuple of int
        Stage ids whose shuffles this stage reads (each must be a map stage).
    shuffle_id : int or None
        Shuffle this stage writes (None = result stage).
    after : tuple of int
        Stages that must have completed once before this one may start, without a data
        dependency (used by event-log replay to keep Spark jobs of one application in order).
    input_bytes : array of float or None
        Bytes read from the job's input by each task (reported only).
    overhead_seconds : float
        Driver-side time (s) between the stage's submission and its tasks becoming runnable
        (Spark's task serialisation and launch; measured per stage by event-log replay).
    """

    stage_id: int
    task_seconds: FloatArray
    shuffle_write_bytes: FloatArray
    parents: tuple[int, ...] = ()
    shuffle_id: int | None = None
    after: tuple[int, ...] = ()
    name: str = ""
    input_bytes: FloatArray | None = None
    overhead_seconds: float = 0.0

    @property
    def num_tasks(self) -> int:
        return int(self.task_seconds.shape[0])


@dataclass(frozen=True)
class JobSpec:
    """A DAG of stages listed in a topological order (parents before children)."""

    name: str
    stages: tuple[StageSpec, ...]
    meta: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        seen: dict[int, StageSpec] = {}
        shuffles: set[int] = set()
        for stage in self.stages:
            if stage.stage_id in seen:
                raise ValueError(f"job {self.name!r}: duplicate stage id {stage.stage_id}")
            if stage.num_tasks < 1:
                raise ValueError(f"job {self.name!r}: stage {stage.stage_id} has no tasks")
            if stage.shuffle_write_bytes.shape != stage.task_seconds.shape:
                raise ValueError(f"job {self.name!r}: stage {stage.stage_id} size arrays differ in length")
            for parent in stage.parents + stage.after:
                if parent not in seen:
                    raise ValueError(f"job {self.name!r}: stage {stage.stage_id} depends on {parent}, not listed before it")
            for parent in stage.parents:
                if seen[parent].shuffle_id is None:
                    raise ValueError(f"job {self.name!r}: stage {stage.stage_id} reads stage {parent}, which writes no shuffle")
            if stage.shuffle_id is not None:
                if stage.shuffle_id in shuffles:
                    raise ValueError(f"job {self.name!r}: shuffle {stage.shuffle_id} written twice")
                shuffles.add(stage.shuffle_id)
            seen[stage.stage_id] = stage

    @property
    def num_tasks(self) -> int:
        return sum(s.num_tasks for s in self.stages)

    def mean_task_seconds(self) -> float:
        """Mean compute time of one task over the whole job (s): the denominator of stability."""
        total = sum(float(s.task_seconds.sum()) for s in self.stages)
        return total / self.num_tasks

    def shuffle_bytes(self) -> float:
        return sum(float(s.shuffle_write_bytes.sum()) for s in self.stages)
