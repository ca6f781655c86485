"""Paired statistics: bootstrap intervals of the median, pairing by kill schedule, the significance rule."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from jobs.tpcds import stats
from jobs.tpcds.results import RunRow, append
from trspark.cli import cli


def run(query: str, policy: str, seconds: float, *, repeat: int = 0, seed: int = 0, failed: bool = False,
        lost: float = 0.0, scenario: str = "evicted", backups: int = 0) -> RunRow:
    return RunRow(query=query, policy=policy, sf=1.0, seed=seed, repeat=repeat, scenario=scenario,
                  seconds=seconds, stable_seconds=10.0, slowdown=seconds / 10.0, capacity_lost_seconds=lost,
                  executors_killed=1, backups_bytes=backups, failed=failed, result_ok=not failed)


def test_three_distinct_values_give_min_to_max() -> None:
    # The resampled median is the smallest value with probability 7/27 > 2.5 %, so the percentile
    # interval of three values is [min, max] exactly.
    interval = stats.median_interval([1.3, 2.0, 1.1])
    assert (interval.median, interval.low, interval.high, interval.n) == (1.3, 1.1, 2.0, 3)
    assert interval.significant


def test_interval_matches_the_exact_bootstrap_distribution_of_the_median() -> None:
    # For n (odd) distinct values the resampled median is <= the j-th smallest exactly when at
    # least (n + 1) / 2 of the n draws are: P = P(Binomial(n, j / n) >= (n + 1) / 2). The 2.5 % and
    # 97.5 % points of that distribution are the ideal percentile interval; 9999 resamples land
    # within one order statistic of them.
    from scipy.stats import binom

    data = np.sort(np.random.default_rng(7).normal(5.0, 1.0, 101))
    n, half = data.size, (data.size + 1) // 2
    cdf = [binom.sf(half - 1, n, j / n) for j in range(1, n + 1)]
    low_j = next(j for j, p in enumerate(cdf) if p >= 0.025)
    high_j = next(j for j, p in enumerate(cdf) if p >= 0.975)
    interval = stats.median_interval(list(data))
    assert data[low_j - 1] <= interval.low <= data[low_j + 1]
    assert data[high_j - 1] <= interval.high <= data[high_j + 1]
    assert interval.median == data[half - 1]


def test_degenerate_and_tiny_samples() -> None:
    same = stats.median_interval([1.2] * 4)
    assert (same.median, same.low, same.high) == (1.2, 1.2, 1.2) and same.significant
    assert not stats.median_interval([1.0] * 4).significant  # exactly 1: no difference
    one = stats.median_interval([1.5, math.inf, math.nan])  # only finite values count
    assert one.n == 1 and math.isnan(one.low) and not one.significant
    assert "no interval" in one.text()
    assert stats.median_interval([]).text() == "-"


def test_interval_containing_one_is_not_significant() -> None:
    assert stats.Interval(0.95, 0.9, 1.0, 3).text() == "0.95x [0.90, 1.00] not significant"
    assert stats.Interval(1.02, 0.97, 1.10, 3).text() == "1.02x [0.97, 1.10] not significant"
    assert stats.Interval(0.85, 0.80, 0.99, 3).text() == "0.85x [0.80, 0.99]"
    assert stats.Interval(1.40, 1.01, 1.90, 3).significant


def test_runs_pair_by_query_seed_and_repeat_only() -> None:
    rows = [
        run("q3", "tr", 12.0, repeat=0), run("q3", "always", 15.0, repeat=0),
        run("q3", "tr", 11.0, repeat=1), run("q3", "always", 22.0, repeat=1),
        run("q3", "tr", 30.0, repeat=2),  # always has no repeat 2: no pair
        run("q7", "tr", 10.0, repeat=0, seed=1), run("q7", "always", 20.0, repeat=0, seed=2),  # other seeds
        run("q7", "tr", 9.0, repeat=1), run("q7", "always", 10.0, repeat=1, failed=True),  # failed: no pair
        run("q7", "tr", 10.0, repeat=1, scenario="stable"), run("q7", "always", 5.0, repeat=1, scenario="stable"),
    ]
    assert stats.pairs(rows, "tr", "always") == {("q3", 0, 0): 0.8, ("q3", 0, 1): 0.5}
    assert stats.pairs(rows, "tr", "always", scenario="stable") == {("q7", 0, 1): 2.0}
    assert stats.paired_ratio(rows, "tr", "always").median == pytest.approx(0.65)


def test_floor_excess_and_the_excess_target() -> None:
    rows = [run("q3", "never", 25.0, lost=15.0), run("q3", "tr", 16.0, lost=15.0, repeat=0),
            run("q3", "tr", 18.0, lost=15.0, repeat=1), run("q3", "tr", 99.0, repeat=2, failed=True),
            run("q7", "never", 12.0, lost=3.0), run("q7", "tr", 11.0, lost=3.0)]
    assert stats.capacity_floor(rows[1], 3) == pytest.approx(1.5)  # 1 + 15 / (3 x 10)
    assert stats.excess(rows[1], 3) == pytest.approx(0.1)
    assert math.isnan(stats.excess(rows[3], 3))
    # q3 hurts vanilla Spark (2.5x); tr's median excess there is 0.2; q7 (1.2x) is not judged.
    assert stats.excess_target(rows, 3) == {"q3": (2.5, pytest.approx(0.2))}
    with pytest.raises(ValueError, match="executors must be >= 1"):
        stats.capacity_floor(rows[0], 0)


def test_excess_is_split_by_whether_the_run_met_a_kill() -> None:
    spared = [dataclasses.replace(run("q3", "tr", seconds, repeat=r), executors_killed=0)
              for r, seconds in enumerate((13.0, 14.0, 15.0))]
    killed = [run("q3", "tr", 16.0, lost=15.0, repeat=3), run("q3", "tr", 20.0, lost=15.0, repeat=4),
              run("q3", "tr", 99.0, lost=15.0, repeat=5, failed=True)]  # a failed run has no excess
    rows = [*spared, *killed, run("q3", "never", 25.0, lost=15.0), run("q3", "tr", 9.0, scenario="stable")]
    split = stats.excess_by_kills(rows, 3)
    assert list(split) == ["never", "tr"]
    with_kills, without = split["tr"]
    # With kills: 1.6 - 1.5 and 2.0 - 1.5; without (floor 1): 0.3, 0.4, 0.5.
    assert (with_kills.n, with_kills.median) == (2, pytest.approx(0.3))
    assert (without.n, without.median, without.low, without.high) == (3, pytest.approx(0.4), pytest.approx(0.3),
                                                                       pytest.approx(0.5))
    assert split["never"][1].n == 0
    text = stats.markdown(rows, 3)
    assert "| tr | 2 | +0.30 [+0.10, +0.50] | 3 | +0.40 [+0.30, +0.50] |" in text
    assert "| never | 1 | +1.00 (no interval) | 0 | - |" in text  # 2.5 - 1.5


def test_targets_command_prints_intervals_ratios_and_floors(tmp_path: Path) -> None:
    rows = []
    for r, (never, always, tr) in enumerate([(30.0, 14.0, 12.0), (28.0, 15.0, 12.5), (35.0, 13.0, 12.2)]):
        rows += [run("q3", "never", never, repeat=r, lost=6.0), run("q3", "always", always, repeat=r, lost=6.0,
                                                                     backups=2 * 2**20),
                 run("q3", "tr", tr, repeat=r, lost=6.0, backups=2**20),
                 run("q3", "decommission", tr * (1.05 if r else 0.95), repeat=r, lost=6.0)]
    out = tmp_path / "r.csv"
    for row in rows:
        append(out, row)
    result = CliRunner().invoke(cli, ["bench", "targets", str(out), "--executors", "3"])
    assert result.exit_code == 0, result.output
    text = result.output
    assert "| tr | 3 | 0 | 1.22x [1.20, 1.25] | 3 | 0 |" in text
    assert "| tr/always | 3 | 0.86x [0.83, 0.94] | 3.0 MiB / 6.0 MiB |" in text
    assert "| tr/decommission | 3 | 0.95x [0.95, 1.05] not significant | 3.0 MiB / not measured |" in text
    assert "| q3 | 0 | 0 | tr | 1 | 1.20x | 1.20x | +0.00 |" in text
    assert "* q3 (never 3.00x): tr's median excess over the floor +0.02 (bound 0.10) -> **met**" in text


def test_plot_draws_interval_whiskers_and_paired_ratios(tmp_path: Path) -> None:
    from jobs.tpcds import plot

    rows = [run("q3", p, t * f, repeat=r) for r, f in enumerate((1.0, 1.1, 0.9))
            for p, t in (("never", 30.0), ("always", 14.0), ("tr", 12.0 + r))]
    low, high = plot._whiskers(rows, "evicted", ["q3"], "never", [3.0])
    assert (low, high) == ([pytest.approx(0.3)], [pytest.approx(0.3)])  # three runs: [min, max]
    ratios = plot._ratios(rows)
    assert set(ratios) == {"tr/always", "tr/never"}  # no decommission runs: no such ratio
    out = tmp_path / "r.csv"
    for row in rows:
        append(out, row)
    assert plot.plot(out, tmp_path / "s.png").stat().st_size > 0


def test_sweep_totals_count_kills_wrong_answers_and_failed_jobs_per_policy() -> None:
    rows = [run("q3", "tr", 12.0), run("q7", "tr", 12.0, repeat=1), run("q3", "never", 99.0, failed=True),
            run("q7", "never", 20.0), run("q3", "never", 10.0, scenario="stable")]
    rows[1].result_ok = False
    assert stats.sweep_totals(rows) == {"never": (2, 2, 0, 1), "tr": (2, 2, 1, 0)}


def test_a_two_pool_run_is_priced_per_pool_and_lost_spot_seconds_are_free() -> None:
    from jobs.tpcds.pools import run_cost_usd
    from simulators.pricing import ON_DEMAND_USD_PER_HOUR, REMOTE_USD_PER_1K_REQUESTS, SPOT_USD_PER_HOUR

    pools = (("ondemand", 1), ("spot", 3))
    row = dataclasses.replace(run("q1", "tr", 36.0, lost=18.0), backups_remote=4)
    # 36 s of the on-demand VM, 3 x 36 - 18 = 90 s of spot VMs, 4 PUTs.
    expected = 36 / 3600 * ON_DEMAND_USD_PER_HOUR + 90 / 3600 * SPOT_USD_PER_HOUR + 4 * REMOTE_USD_PER_1K_REQUESTS / 1000
    assert run_cost_usd(row, pools) == pytest.approx(expected)


def test_targets_with_pools_pair_the_runs_costs() -> None:
    pools = (("ondemand", 1), ("spot", 3))
    rows = [run(q, p, s, repeat=r) for r in range(3) for q, p, s in
            (("q1", "efm", 40.0), ("q1", "tr", 30.0), ("q2", "efm", 20.0), ("q2", "tr", 15.0))]
    text = "\n".join(stats.cost_section(rows, pools))
    # Without lost capacity every run costs in proportion to its seconds: tr/efm is 0.75 in every pair.
    assert "| tr/efm | 6 | 0.75x [0.75, 0.75] |" in text
    assert "| efm | 6 |" in text and "| tr | 6 |" in text


def test_the_lowest_median_target_allows_a_paired_interval_reaching_one_and_needs_fewer_bytes() -> None:
    def rows(tr: list[float], tr_bytes: int) -> list[RunRow]:
        out = []
        for r, (d, t) in enumerate(zip((20.0, 21.0, 30.0, 22.0), tr, strict=True)):
            out += [run("q1", "decommission", d, repeat=r), run("q1", "tr", t, repeat=r, backups=tr_bytes),
                    run("q1", "always", 40.0, repeat=r, backups=100), run("q1", "efm", 40.0, repeat=r, backups=50)]
        return out

    def target(runs: list[RunRow]) -> str:
        return stats.lowest_median_target(runs, stats.policy_intervals(runs))

    # tr/decommission per pair 0.9, 1.1, 0.8, 1.2: the interval reaches below 1, so within it.
    assert target(rows([18.0, 23.1, 24.0, 26.4], 10)).endswith("-> **met**")
    # Slower in every pair: tr/decommission > 1 throughout.
    assert target(rows([30.0, 31.5, 45.0, 33.0], 10)).endswith("-> **missed**")
    # Lowest median, but more bytes than efm.
    text = target(rows([10.0, 10.0, 10.0, 10.0], 60))
    assert "tr's median 1.00x is the lowest" in text and text.endswith("-> **missed**")


