"""Conditional failure probabilities of many executors on a time grid, vectorised per lifetime model."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .lifetimes.base import FloatArray, LifetimeModel
from .lineage import Executor, Lineage

#: Floor of survival probabilities before taking logs (keeps ``log`` finite; exp(-690) ~ 0).
TINY = 1e-300


def cell_fail_probs(model: LifetimeModel, ages: FloatArray, edges: FloatArray) -> FloatArray:
    """Exact failure mass per cell, :math:`p_{e,i} = P(g_i < T_e - \\tau_e \\le g_{i+1} \\mid T_e > \\tau_e)`.

    Delegates to :meth:`LifetimeModel.cell_fail_probs`, which counts point masses (deterministic lifetimes),
    unlike ``cond_pdf * dt``.

    Parameters
    ----------
    model : LifetimeModel
    ages : ndarray, shape (P,)
        Current ages :math:`\\tau_e` in seconds.
    edges : ndarray, shape (n + 1,)
        Non-decreasing times from now in seconds.

    Returns
    -------
    ndarray, shape (P, n)
    """
    return model.cell_fail_probs(ages, edges)


def cond_cdf(model: LifetimeModel, ages: FloatArray, edges: FloatArray) -> FloatArray:
    """:math:`F_e(t) = P(T_e - \\tau_e \\le t \\mid T_e > \\tau_e)` at ``edges`` (``edges[0]`` must be 0).

    Accumulated from :func:`cell_fail_probs`, so ``diff(F)`` is exactly the cell failure mass.

    Returns
    -------
    ndarray, shape (P, n + 1)
        Dimensionless, non-decreasing along the last axis, ``F[:, 0] = 0``.
    """
    probs = cell_fail_probs(model, ages, edges)
    out = np.zeros((ages.size, edges.size))
    np.cumsum(probs, axis=1, out=out[:, 1:])
    return np.minimum(out, 1.0, out=out)


def executors_cdf(lineage: Lineage, executors: Sequence[Executor], now: float, edges: FloatArray) -> FloatArray:
    """:func:`cond_cdf` of ``executors`` (rows in the given order) at ages ``now - started``."""
    out = np.zeros((len(executors), edges.size))
    if not executors:
        return out
    row = {ex.executor_id: i for i, ex in enumerate(executors)}
    for model, group in lineage.executor_groups(ex.executor_id for ex in executors):
        ages = np.maximum(now - np.fromiter((ex.started for ex in group), float, len(group)), 0.0)
        rows = [row[ex.executor_id] for ex in group]
        out[rows] = cond_cdf(model, ages, edges)
    return out


class FailureTable:
    """:math:`F_e(g_i)` and :math:`\\ln(1 - F_e(g_i))` of every live executor at time ``now``.

    Row ``e`` is executor slot ``e`` of the lineage (rows of free slots are 0, i.e. never fail;
    they carry no outputs). Built once per refresh: O(#executors × #edges) model evaluations,
    one vectorised call per lifetime model.

    Attributes
    ----------
    now : float
        Driver time (s) the executors' ages were taken at.
    cdf : ndarray, shape (capacity, G + 1)
        :math:`F_e(g_i)`, dimensionless.
    log_sf : ndarray, shape (capacity, G + 1)
        :math:`\\ln \\max(1 - F_e(g_i), 10^{-300})`.
    """

    def __init__(self, lineage: Lineage, edges: FloatArray, now: float) -> None:
        self.now = float(now)
        self.edges = edges
        self.cdf = np.zeros((lineage.capacity, edges.size))
        executors = lineage.executors()
        if executors:
            slots = [ex.slot for ex in executors]
            self.cdf[slots] = executors_cdf(lineage, executors, self.now, edges)
        self.log_sf = np.log(np.maximum(1.0 - self.cdf, TINY))
