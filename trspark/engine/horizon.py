"""Paper §4.3 :math:`T_{max}`: how long until the next stage starts, for the ``stage`` baseline.

.. math:: T_{max} = \\max\\Bigl(\\bar T,\\; \\alpha \\sum_i N_i T_i / \\#cores\\Bigr)

over the active stages :math:`i` (:math:`N_i` unfinished tasks of mean time :math:`T_i`),
plus, for a given block, the work of its reader stages not yet active; :math:`\\bar T` is the
job's mean task time (a block just written is not consumed at once). Units: seconds.
TR-Checkpointing uses the longer "until no longer needed" horizon of :mod:`trspark.engine.tr.horizon`.
"""

from __future__ import annotations

from cost_model.stage_estimate import next_stage_start
from trspark.engine.state import JobState
from trspark.engine.views import MapOutput, StageView


def consumption_horizon(state: JobState, alpha: float, block: MapOutput | None = None) -> float:
    """Paper §4.3 :math:`T_{max}` (s from now): the next stage's start, plus the block's readers' work."""
    default = state.mean_task_seconds()
    active = state.active_stages()
    work = sum(s.unfinished * s.mean_task_seconds(default) for s in active)
    if block is not None:
        work += _readers_work(state, block.shuffle_id, {s.stage_id for s in active}, default)
    cores = max(1, state.total_cores())
    return max(default, next_stage_start([work], [1.0], cores, alpha))


def stand_in_writer(state: JobState, shuffle_id: int) -> StageView | None:
    """The stage a not-yet-submitted reader of ``shuffle_id`` is taken to be as large as.

    Spark submits a reader only when all its inputs exist, so until then the stage that writes
    the shuffle stands in for it. None when readers were known once, or the writer is unknown.
    """
    if shuffle_id in state.shuffle_readers:
        return None
    return state.writer_stage(shuffle_id)


def _readers_work(state: JobState, shuffle_id: int, active: set[int], default: float) -> float:
    """Task-seconds of the reader stages of ``shuffle_id`` that are not active yet."""
    readers = state.reader_stages(shuffle_id)
    if not readers:
        writer = stand_in_writer(state, shuffle_id)
        return 0.0 if writer is None else writer.num_tasks * writer.mean_task_seconds(default)
    return sum(r.unfinished * r.mean_task_seconds(default) for r in readers if r.stage_id not in active)
