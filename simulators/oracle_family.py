"""The family of clairvoyant strategies the ``oracle`` plays on each run, and :func:`best_run`, which keeps the best.

See :mod:`simulators.oracle` for the strategies themselves and why the best of a family is
a legitimate lower bound.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from simulators.oracle import INF, OraclePolicy, Strategy
from trspark.engine.baselines import AlwaysPolicy, NeverPolicy
from trspark.engine.interface import Policy
from trspark.engine.settings import TRConfig

#: The clairvoyant strategies :func:`best_run` plays on each run (the first is the lone heuristic).
FAMILY: tuple[Strategy, ...] = (
    Strategy("needed+sched", scheduling=True),
    Strategy("needed+sched/4", scheduling=True, parallel=4),
    Strategy("all+sched", window=INF, parallel=1_000_000, release_early=False, scheduling=True),
    Strategy("needed"),
    Strategy("all", window=INF, parallel=1_000_000, release_early=False),
)
#: Trivial baselines also played, so that the oracle is <= each of them on every run.
BASELINES: tuple[str, ...] = ("always", "never")


class _Sim(Protocol):
    """The part of :class:`simulators.core.Simulator` :func:`best_run` uses."""

    job: Any

    def death_time(self, executor_id: str) -> float: ...

    def run(self) -> Any: ...


def family_policies(config: TRConfig, horizon: float, scheduling: bool = True) -> list[tuple[str, Policy]]:
    """Fresh policies of the family, named (one run each); ``scheduling=False``: the members without it.

    Without scheduling the oracle is clairvoyant about *backups* only and places tasks as the
    driver does (policy ``oracle-backup-driver``): the bound for a policy that cannot know which VM dies
    next -- under a memoryless (exponential) belief every VM looks the same, so no placement
    rule of a non-clairvoyant policy can do what the γ rule with true death times does.
    """
    members: list[tuple[str, Policy]] = [(st.name, OraclePolicy(config, horizon, strategy=st))
                                         for st in FAMILY if scheduling or not st.scheduling]
    baselines: dict[str, Policy] = {"always": AlwaysPolicy(), "never": NeverPolicy()}
    return members + [(name, baselines[name]) for name in BASELINES]


def best_run(make_sim: Any, config: TRConfig, horizon: float, trace: Any = None, scheduling: bool = True,
             members: Callable[[], list[tuple[str, Policy]]] | None = None) -> Any:
    """Play every family member on the same world; return the best run's result.

    ``scheduling=False`` plays only the members without clairvoyant scheduling
    (``oracle-backup-driver``); ``members`` builds another family instead (``oracle-backup``,
    :mod:`simulators.oracle_backup`), fresh policies on each call.

    ``make_sim(policy, trace)`` builds a fresh simulator of the same world and seed for
    ``policy``. The best run is the successful one with the shortest job time (failed runs only
    if all fail; ties go to the earlier member). With ``trace``, the winner is replayed once more
    with it (runs are deterministic per seed), so the trace shows the run that is reported.
    """
    def family() -> list[tuple[str, Policy]]:
        return members() if members is not None else family_policies(config, horizon, scheduling)

    def play(policy: Policy, tracer: Any) -> Any:
        sim: _Sim = make_sim(policy, tracer)
        bind = getattr(policy, "bind", None)  # the clairvoyant members see the future
        if bind is not None:
            bind(sim)
        return sim.run()

    results = [(name, play(policy, None)) for name, policy in family()]
    order = sorted(range(len(results)), key=lambda i: (not results[i][1].succeeded, results[i][1].job_time, i))
    name, best = results[order[0]]
    if trace is not None:
        best = play(dict(family())[name], trace)
    best.policy_summary = {**best.policy_summary, "strategy": name,
                           "job_times": {n: r.job_time for n, r in results}}
    return best
