"""When will a map output be consumed? The next-stage start estimate of paper §4.3."""

from __future__ import annotations

from trspark.engine.state import JobState


def consumption_horizon(state: JobState, alpha: float) -> float:
    """Seconds from now until the consuming stage starts: :math:`\\alpha \\sum_i N_i T_i / \\#cores`.

    ``N_i`` = unfinished tasks of active stage ``i``, ``T_i`` = its mean task time (s), ``#cores``
    = cores of alive executors, ``alpha >= 1`` stretches the estimate on unstable capacity.
    At least one mean task time, so a just-written block is never taken as consumed instantly.
    """
    cores = max(1, state.total_cores())
    default = state.mean_task_seconds()
    work = sum(s.unfinished * s.mean_task_seconds(default) for s in state.active_stages())
    return max(default, alpha * work / cores)
