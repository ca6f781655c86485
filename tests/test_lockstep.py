"""Policies taking turns (``BenchSettings.interleave``): the order of their steps, and what is refused.

The coordinator's choice is replayed here on the steps the runner announces; the whole thing
runs live in ``test_tpcds_interleaved``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.tpcds.lockstep import step_key, turn_order
from jobs.tpcds.settings import BenchSettings

POLICIES = ["never", "always", "tr"]


def announced(policy: str, queries: int, stable_runs: int, evicted_runs: int) -> list[tuple[str, tuple[int, ...]]]:
    """The steps one policy's session asks a turn for, in its order (as ``runner._run_session``)."""
    steps = [("start", step_key(policy, "start")), ("warm-up", step_key(policy, "warm-up"))]
    steps += [(f"stable q{q} r{r}", step_key(policy, "stable", q, r)) for q in range(queries) for r in range(stable_runs)]
    steps += [(f"evicted q{q} r{r}", step_key(policy, "evicted", q, r))
              for q in range(queries) for r in range(evicted_runs)]
    return steps


def coordinate(queries: int = 2, stable_runs: int = 3, evicted_runs: int = 2) -> list[tuple[str, str]]:
    """The global order: each time every policy waits with its next step, the chosen one goes."""
    pending = {p: announced(p, queries, stable_runs, evicted_runs) for p in POLICIES}
    order = []
    while any(pending.values()):
        waiting = {p: steps[0][1] for p, steps in pending.items() if steps}
        chosen = turn_order(waiting, POLICIES)
        order.append((chosen, pending[chosen].pop(0)[0]))
    return order


def test_vanilla_spark_measures_the_reference_before_any_other_session_starts() -> None:
    order = coordinate()
    first_other = next(i for i, (policy, _) in enumerate(order) if policy != "never")
    assert order[first_other][1] == "start"
    assert [step for _, step in order[:first_other]] == ["start", "warm-up", *(
        f"stable q{q} r{r}" for q in range(2) for r in range(3))]
    # The other sessions start one after the other (two start-ups at once thrash 2 cores), then warm up.
    assert [step for _, step in order[first_other:first_other + 4]] == ["start", "start", "warm-up", "warm-up"]


def test_each_evicted_run_is_made_by_every_policy_in_one_round_in_rotating_order() -> None:
    order = coordinate()
    evicted = [(policy, step) for policy, step in order if step.startswith("evicted")]
    rounds = [evicted[i:i + 3] for i in range(0, len(evicted), 3)]
    assert len(rounds) == 4
    for one in rounds:
        assert {policy for policy, _ in one} == set(POLICIES) and len({step for _, step in one}) == 1
    assert len({one[0][0] for one in rounds}) > 1, "the same policy would always run first"
    # Nothing but evicted runs follows the first one: no session starts or warms up between rounds.
    first = order.index(evicted[0])
    assert order[first:] == evicted


def test_interleaving_needs_local_clusters() -> None:
    with pytest.raises(ValueError, match="interleaved policies need local clusters"):
        BenchSettings(sf=1, queries=("q3",), policies=("never",), out=Path("x.csv"), interleave=True,
                      master="spark://h:7077")
