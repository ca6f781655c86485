"""When will the next stage start (and so consume the current map outputs)? Paper §4.3."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike


def next_stage_start(unfinished: ArrayLike, mean_task_seconds: ArrayLike, cores: int, alpha: float = 1.0) -> float:
    """Estimated seconds from now until the consuming stage starts, :math:`T_{max}`.

    .. math:: T_{max} = \\alpha \\, \\frac{\\sum_i N_i \\, T_i}{\\#\\text{cores}}

    Parameters
    ----------
    unfinished : array_like
        :math:`N_i`: tasks not yet finished in each stage *i* still to run before the consumer
        (>= 0).
    mean_task_seconds : array_like
        :math:`T_i`: mean task run time of stage *i* in seconds (>= 0), same shape.
    cores : int
        Cores available to run them (>= 1).
    alpha : float
        :math:`\\alpha \\ge 1`: inflation for unstable capacity (evictions slow stages down).

    Returns
    -------
    float
        Seconds (>= 0).
    """
    n = np.asarray(unfinished, dtype=np.float64)
    t = np.asarray(mean_task_seconds, dtype=np.float64)
    if n.shape != t.shape:
        raise ValueError(f"next_stage_start: 'unfinished' {n.shape} and 'mean_task_seconds' {t.shape} must have the same shape")
    if not (np.all(np.isfinite(n)) and np.all(n >= 0.0)):
        raise ValueError("next_stage_start: 'unfinished' must be finite task counts >= 0")
    if not (np.all(np.isfinite(t)) and np.all(t >= 0.0)):
        raise ValueError("next_stage_start: 'mean_task_seconds' must be finite numbers >= 0 seconds")
    if not (isinstance(cores, int | np.integer) and cores >= 1):
        raise ValueError(f"next_stage_start: 'cores' must be an integer >= 1, got {cores!r}")
    if not (math.isfinite(alpha) and alpha >= 1.0):
        raise ValueError(f"next_stage_start: 'alpha' must be a finite number >= 1, got {alpha!r}")
    return float(alpha * float(np.sum(n * t)) / int(cores))
