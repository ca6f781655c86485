"""Bootstrap intervals of trspark.stats: fixed seed, degenerate samples, paired ratios."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trspark.stats import bootstrap_ci, mean_ratio_ci


def test_equal_values_give_the_degenerate_interval() -> None:
    assert bootstrap_ci(([1.5] * 5,), np.mean) == (1.5, 1.5)
    assert all(math.isnan(x) for x in bootstrap_ci(([1.5],), np.mean))


def test_mean_interval_holds_the_mean_and_repeats_exactly() -> None:
    data = [1.0, 1.2, 1.1, 1.9, 1.3, 1.05, 1.4]
    low, high = bootstrap_ci((data,), np.mean)
    assert low < float(np.mean(data)) < high
    assert bootstrap_ci((data,), np.mean) == (low, high)  # the bootstrap's own seed


def test_paired_ratio_of_means() -> None:
    # a is exactly half of b run by run: every resample of the pairs gives 0.5
    b = [1.0, 2.0, 3.0, 4.0, 7.0]
    ratio, low, high = mean_ratio_ci([x / 2 for x in b], b)
    assert (ratio, low, high) == pytest.approx((0.5, 0.5, 0.5))
    ratio, low, high = mean_ratio_ci([1.0, 1.3, 0.9, 1.2], [1.1, 1.2, 1.0, 1.4])
    assert low <= ratio <= high
    with pytest.raises(ValueError, match="same, non-zero size"):
        mean_ratio_ci([1.0], [1.0, 2.0])
