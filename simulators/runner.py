"""Run one experiment -- a job, a world, a policy -- R times in parallel, and summarise.

Run ``i`` draws its VM lifetimes from ``SeedSequence(seed).spawn(R)[i]``, so results depend only
on ``(seed, i)`` and are identical whatever the number of worker processes, and a run lost with a
dead worker process is redone with the same result.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from simulators import unnoticed
from simulators.core import RunResult, Simulator
from simulators.dag import JobSpec
from simulators.metrics import run_row, summarize
from simulators.oracle import OraclePolicy
from simulators.oracle_backup import BACKUP_FAMILY, ClairvoyantBackups, backup_family
from simulators.oracle_family import FAMILY, best_run
from simulators.world import WorldSpec
from trspark.engine.interface import Policy
from trspark.engine.registry import make_policy, policy_names
from trspark.engine.settings import TRConfig

CLAIRVOYANT_POLICIES = ("oracle", "oracle-backup", "oracle-backup-driver")
SIMULATOR_POLICIES = (*CLAIRVOYANT_POLICIES, unnoticed.NAME)


def all_policy_names() -> list[str]:
    """Registry policies plus the simulator-only ones."""
    return sorted(set(policy_names()) | set(SIMULATOR_POLICIES))


@dataclass(frozen=True)
class Experiment:
    """What to simulate. ``config`` is the policy's belief; ``world`` is the truth."""

    job: JobSpec
    world: WorldSpec
    policy: str
    config: TRConfig = field(default_factory=TRConfig)
    runs: int = 50
    seed: int = 0

    def policy_config(self) -> TRConfig:
        """The config the policy gets: cluster bandwidths, knowledge and each pool's lifetime from the world.

        Each pool's believed lifetime is its true one; when the policy was told to believe
        another model than the world's default belief, every evictable pool believes that one
        (which pools are on-demand is known either way). A world that announces each death at
        registration makes the policy ``deterministic``; otherwise the config's knowledge holds.
        """
        w = self.world
        pools = self.config.pool_lifetimes
        if w.pools and not pools:
            told = self.config.lifetime != w.default_belief()
            pools = tuple((name, "stable" if not w.evictable(spec) else self.config.lifetime if told else str(spec))
                          for name, _, spec in w.pool_table())
        return self.config.with_options(
            knowledge="deterministic" if w.knowledge == "deterministic" else self.config.knowledge,
            local_bandwidth=w.local_bandwidth,
            remote_bandwidth=w.remote_bandwidth,
            remote_cap=w.remote_cap,
            backup_latency=w.backup_latency,
            pool_lifetimes=pools,
        )


def stable_job_time(job: JobSpec, world: WorldSpec, period: float = 5.0) -> float:
    """Job time under ``never`` with no evictions (s) -- the slowdown's denominator."""
    sim = Simulator(job, world.stable(), make_policy("never"), np.random.default_rng(0), period=period)
    result = sim.run()
    if not result.succeeded:
        raise RuntimeError(f"the stable run of {job.name!r} failed: {result.fail_reason}")
    return result.job_time


def build_policy(name: str, config: TRConfig, stable_time: float, on_demand_pools: tuple[str, ...] = ()) -> Policy:
    """``on_demand_pools``: the world's pools that are never evicted (for ``efm`` and ``pado``)."""
    # the simulator-only policies: the lone heuristic; simulate_run plays the whole family
    if name == "oracle-backup":
        return ClairvoyantBackups(make_policy("tr", config, on_demand_pools),
                                  OraclePolicy(config, horizon=stable_time, strategy=BACKUP_FAMILY[0]))
    if name == unnoticed.NAME:
        return unnoticed.WithoutNotices(make_policy("tr", config, on_demand_pools))
    if name in CLAIRVOYANT_POLICIES:
        strategy = FAMILY[0] if name == "oracle" else next(st for st in FAMILY if not st.scheduling)
        return OraclePolicy(config, horizon=stable_time, strategy=strategy)
    return make_policy(name, config, on_demand_pools)


def simulate_run(exp: Experiment, seed: np.random.SeedSequence, stable_time: float,
                 trace: Callable[[Any], None] | None = None) -> RunResult:
    """One run of ``exp`` with its own seed.

    ``oracle`` is the best of its family of clairvoyant strategies on this very world
    (:func:`simulators.oracle_family.best_run`): every member gets a fresh generator from ``seed``.
    ``oracle-backup`` is the best of clairvoyant backup strategies under ``tr``'s own scheduling
    (:mod:`simulators.oracle_backup`); ``oracle-backup-driver`` the best of the oracle's members
    that place tasks as the driver does. ``tr-without-notices`` is ``tr`` deaf to termination
    notices (:mod:`simulators.unnoticed`).
    """
    config = exp.policy_config()
    stall = exp.world.stall_seconds if exp.world.stall_seconds is not None else max(stable_time, 60.0)

    def make_sim(policy: Policy, tracer: Callable[[Any], None] | None) -> Simulator:
        return Simulator(
            exp.job, exp.world, policy, np.random.default_rng(seed), period=config.period,
            deadline=exp.world.max_slowdown * stable_time, stall_seconds=stall, trace=tracer,
        )

    pools = exp.world.stable_pools()
    if exp.policy == "oracle-backup":
        members = backup_family(config, stable_time, lambda: make_policy("tr", config, pools))
        result: RunResult = best_run(make_sim, config, stable_time, trace, members=members)
        return result
    if exp.policy in CLAIRVOYANT_POLICIES:
        result = best_run(make_sim, config, stable_time, trace, scheduling=exp.policy == "oracle")
        return result
    return make_sim(build_policy(exp.policy, config, stable_time, pools), trace).run()


# Worker state: the experiment is sent once per worker (fork inherits it), not once per run.
_WORKER: dict[str, Any] = {}


def _init_worker(exp: Experiment, stable_time: float, seeds: list[np.random.SeedSequence]) -> None:
    _WORKER.update(exp=exp, stable=stable_time, seeds=seeds)


def _init_pool_worker(exp: Experiment, stable_time: float, seeds: list[np.random.SeedSequence]) -> None:
    # The parent alone handles Ctrl-C and stops its workers; SIGTERM must end a worker at once (a
    # handler inherited from the CLI would turn it into an exception the pool's worker loop survives).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _init_worker(exp, stable_time, seeds)


class WorkerDied(RuntimeError):
    """A simulator worker process died (killed, or out of memory) twice while running runs."""


def _run_pool(exp: Experiment, stable: float, seeds: list[np.random.SeedSequence], indexes: Sequence[int],
              workers: int, rows: dict[int, dict[str, Any]], on_run: Callable[[], None] | None = None) -> None:
    """Run ``indexes`` on a fresh pool of ``workers`` processes, storing each row in ``rows`` as it ends
    (then calling ``on_run``).

    Raises ``BrokenProcessPool`` soon after a worker dies. On any exception (Ctrl-C and SIGTERM
    included) the workers are killed and reaped before it propagates, so none is left behind.
    """
    pool = ProcessPoolExecutor(min(workers, len(indexes)), mp_context=multiprocessing.get_context("fork"),
                               initializer=_init_pool_worker, initargs=(exp, stable, seeds))
    try:
        futures = {pool.submit(_run_index, i): i for i in indexes}
        for future in as_completed(futures):
            rows[futures[future]] = future.result()
            if on_run is not None:
                on_run()
    except BaseException:
        for process in list((pool._processes or {}).values()):
            process.kill()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _pool_rows(exp: Experiment, stable: float, seeds: list[np.random.SeedSequence], workers: int,
               on_run: Callable[[], None] | None = None) -> list[dict[str, Any]]:
    """Every run's row in run order; the runs lost with a dead worker are redone once on a new pool."""
    rows: dict[int, dict[str, Any]] = {}
    for attempt in (1, 2):
        try:
            _run_pool(exp, stable, seeds, [i for i in range(exp.runs) if i not in rows], workers, rows, on_run)
            break
        except BrokenProcessPool:
            if attempt == 2:
                raise WorkerDied(f"a simulator worker process died twice ({len(rows)} of {exp.runs} runs of "
                                 f"{exp.job.name!r} done); see the system log (out of memory?) or use --workers 1") from None
    return [rows[i] for i in range(exp.runs)]


def _run_index(i: int) -> dict[str, Any]:
    result = simulate_run(_WORKER["exp"], _WORKER["seeds"][i], _WORKER["stable"])
    return run_row(result, _WORKER["stable"])


def run_experiment(exp: Experiment, workers: int | None = None, stable_time: float | None = None,
                   on_run: Callable[[], None] | None = None) -> dict[str, Any]:
    """Simulate ``exp.runs`` runs on ``workers`` processes (default: all cores); ``on_run`` is called
    as each run ends (for a progress display; it does not change the runs).

    Returns the summary (see :func:`simulators.metrics.summarize`) with ``rows`` (one per run,
    in run order) and the experiment's identity (workload, policy, lifetimes, seed).
    """
    if exp.policy not in all_policy_names():
        raise ValueError(f"unknown policy {exp.policy!r}; known: {', '.join(all_policy_names())}")
    stable = stable_time if stable_time is not None else stable_job_time(exp.job, exp.world, exp.config.period)
    seeds = np.random.SeedSequence(exp.seed).spawn(exp.runs)
    workers = max(1, min(workers or os.cpu_count() or 1, exp.runs))
    if workers == 1:
        _init_worker(exp, stable, seeds)
        rows = []
        for i in range(exp.runs):
            rows.append(_run_index(i))
            if on_run is not None:
                on_run()
    else:
        rows = _pool_rows(exp, stable, seeds, workers, on_run)
    summary = summarize(rows)
    summary = {
        "workload": exp.job.name,
        "policy": exp.policy,
        "lifetime": exp.world.label(),
        "believed_lifetime": exp.config.lifetime,
        "knowledge": exp.world.knowledge,
        "seed": exp.seed,
        "tasks": exp.job.num_tasks,
        **summary,
        "rows": rows,
    }
    return summary


def with_stability(world: WorldSpec, job: JobSpec, stability: float, shape: float | None = None) -> WorldSpec:
    """Lifetimes with mean = ``stability`` x the job's mean task time (paper §6).

    Exponential by default; with ``shape`` k, Weibull with that mean,
    :math:`\\text{scale} = \\text{mean} / \\Gamma(1 + 1/k)`.
    """
    if not stability > 0:
        raise ValueError(f"stability must be > 0, got {stability!r}")
    mean = stability * job.mean_task_seconds()
    if shape is None:
        return replace(world, lifetime=f"exponential:mean={mean:.17g}")
    if not shape > 0:
        raise ValueError(f"shape must be > 0, got {shape!r}")
    return replace(world, lifetime=f"weibull:shape={float(shape)!r},scale={mean / math.gamma(1.0 + 1.0 / shape)!r}")
