"""When will a map output be consumed? ``T_max`` of paper §4.3, from ``cost_model.stage_estimate``.

The paper estimates the next stage's *start*, :math:`\\alpha \\sum_i N_i T_i / \\#cores` over the
stages still to run. A block is read when its reader's *tasks* run, which is spread over the
reader's whole run, and Spark needs every block until the last reader task has read it. So we
feed the same estimate with the active stages' unfinished work *plus the reader stage's own
work*:

.. math:: T_{max} = \\alpha \\, \\frac{\\sum_{i \\in active} N_i T_i + \\sum_{r \\in readers} N_r T_r}{\\#cores}

where readers not submitted yet count with the block's own stage size as a stand-in
(:math:`N_s T_s`: the size of the reader is not known before it is submitted). At least one
mean task time, so a just-written block is never taken as consumed at once.
"""

from __future__ import annotations

from cost_model.stage_estimate import next_stage_start
from trspark.engine.state import JobState, MapOutput, StageView


def consumption_horizon(state: JobState, alpha: float, block: MapOutput | None = None) -> float:
    """:math:`T_{max}` in seconds from now for ``block`` (None: the next stage's start only)."""
    default = state.mean_task_seconds()
    active = state.active_stages()
    counts = [float(s.unfinished) for s in active]
    times = [s.mean_task_seconds(default) for s in active]
    return _with_readers(state, alpha, block, default, active, counts, times)


def _with_readers(state: JobState, alpha: float, block: MapOutput | None, default: float,
                  active: list[StageView], counts: list[float], times: list[float]) -> float:
    counts, times = list(counts), list(times)
    if block is not None:
        counted = {s.stage_id for s in active}
        readers = [r for r in state.reader_stages(block.shuffle_id) if r.stage_id not in counted]
        own = state.stages.get(block.stage_id)
        if readers:
            counts += [float(r.unfinished) for r in readers]
            times += [r.mean_task_seconds(default) for r in readers]
        elif not state.shuffle_readers.get(block.shuffle_id) and own is not None:
            counts.append(float(own.num_tasks))
            times.append(own.mean_task_seconds(default))
    cores = max(1, state.total_cores())
    return max(default, next_stage_start(counts, times, cores, alpha))
