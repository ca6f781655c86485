"""Percentile-bootstrap intervals shared by the benchmark reports and the simulator sweep.

An interval comes from ``scipy.stats.bootstrap`` (percentile method, a fixed seed: the same
numbers always give the same interval). The percentile method, because BCa's jackknife is
undefined on the small, tied samples a benchmark gives (3 seeds); samples whose statistic cannot
vary (every value equal) give the degenerate interval ``[v, v]``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 9999
SEED = 0
"""The bootstrap's own seed: the same data always give the same intervals."""


@dataclass(frozen=True)
class Interval:
    """A median and its bootstrap interval over ``n`` values (``low``/``high`` NaN when ``n < 2``)."""

    median: float
    low: float
    high: float
    n: int

    @property
    def significant(self) -> bool:
        """Does the interval exclude 1 (the value of "no difference" for a ratio or a slowdown)?"""
        return math.isfinite(self.low) and math.isfinite(self.high) and not self.low <= 1.0 <= self.high

    def text(self, unit: str = "x") -> str:
        """``1.23x [1.10, 1.40]``, with "not significant" when the interval contains 1."""
        if not math.isfinite(self.median):
            return "-"
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return f"{self.median:.2f}{unit} (n={self.n}, no interval)"
        verdict = "" if self.significant else " not significant"
        return f"{self.median:.2f}{unit} [{self.low:.2f}, {self.high:.2f}]{verdict}"


def bootstrap_ci(samples: Sequence[Sequence[float] | np.ndarray], statistic: Callable[..., np.ndarray], *, paired: bool = False,
                 confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float]:
    """The percentile bootstrap interval of ``statistic(*samples, axis=-1)``.

    ``paired``: the samples are resampled together (pair ``i`` is ``samples[k][i]`` for every
    ``k``, e.g. two policies' runs on the same world). NaN bounds with fewer than two values.
    """
    from scipy.stats import bootstrap

    data = tuple(np.asarray(s, dtype=float) for s in samples)
    if min(d.size for d in data) < 2:
        return math.nan, math.nan
    if all(np.all(d == d[0]) for d in data):
        value = float(statistic(*data, axis=-1))
        return value, value
    result = bootstrap(data, statistic, paired=paired, vectorized=True, confidence_level=confidence,
                       n_resamples=resamples, method="percentile", random_state=np.random.default_rng(seed))
    ci = result.confidence_interval
    return float(ci.low), float(ci.high)


def median_interval(values: list[float], *, confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                    seed: int = SEED) -> Interval:
    """The median of the finite ``values`` with its percentile bootstrap interval."""
    data = np.asarray([v for v in values if math.isfinite(v)], dtype=float)
    if data.size == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    low, high = bootstrap_ci((data,), np.median, confidence=confidence, resamples=resamples, seed=seed)
    return Interval(float(np.median(data)), low, high, int(data.size))


def _ratio_of_means(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray(np.mean(a, axis=axis) / np.mean(b, axis=axis))


def mean_ratio_ci(a: Sequence[float], b: Sequence[float], **options: float) -> tuple[float, float, float]:
    """``mean(a) / mean(b)`` over pairs ``(a_i, b_i)`` with its paired bootstrap interval."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.size != y.size or x.size == 0:
        raise ValueError(f"paired samples must have the same, non-zero size: {x.size} and {y.size}")
    low, high = bootstrap_ci((x, y), _ratio_of_means, paired=True, **options)  # type: ignore[arg-type]
    return float(x.mean() / y.mean()), low, high
