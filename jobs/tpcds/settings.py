"""The settings of one TPC-DS benchmark, its progress callbacks and its result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from jobs.tpcds.results import RunRow

#: Policies whose executors can get each kill's termination notice (SIGPWR ``notice`` s ahead);
#: ``tr`` only with ``BenchSettings.tr_notices``.
NOTICED_POLICIES = frozenset({"decommission", "tr"})
#: When a run's kill offsets start counting: when the query is called, or when its first task has
#: finished (a query's first second or so is planning, when an executor holds nothing to lose).
KILL_CLOCKS = ("query", "first-task")

#: Which policies get stable (no-kill) runs, and when vanilla Spark's reference is measured
#: (:attr:`BenchSettings.stable_runs`).
STABLE_RUNS = ("all", "never", "rounds")


@dataclass(frozen=True)
class BenchSettings:
    """Everything one benchmark needs (the CLI's options, validated)."""

    sf: float
    queries: tuple[str, ...]
    policies: tuple[str, ...]
    out: Path
    lifetime: str | None = None
    """Lifetime spec for every query (e.g. ``exponential:mean=60``); or use ``stability``."""
    stability: float | None = 3.0
    """Mean lifetime as a multiple of the query's stable time (exponential); used if no lifetime."""
    executors: int = 3
    cores: int = 1
    memory_mb: int = 2048
    repeat: int = 1
    """Evicted runs per (query, policy): run ``r`` replays the kill schedule drawn from (seed, query, r)."""
    seed: int = 0
    time_cap: float = 600.0
    notice: float = 30.0
    replacement_delay: float = 10.0
    hold_replacements: bool = False
    """Start the replacements of a run's killed executors only once the run has ended. On a spot
    cluster a replacement VM boots for minutes, longer than these runs, and starts on its own
    cores; on one machine a replacement JVM starting mid-run takes the survivors' cores instead."""
    min_alive: int = 1
    max_kills: int | None = None
    """At most this many executors killed per run (None: as the schedule says)."""
    first_kill_within: float | None = None
    """Redraw a kill schedule until its first kill comes within this fraction of the query's stable
    time (None: keep every draw). A run the kills miss shows nothing of what they cost."""
    reclaim_within: tuple[float, float] | None = None
    """The spot pool is reclaimed at once: every spot executor is killed together, at a time drawn
    uniformly from this range of fractions of the query's stable time (None: each spot slot's kills
    follow the lifetime model). Spot capacity of one type and zone is often taken back together."""
    kill_clock: str = "query"
    """When a run's kill offsets start counting (:data:`KILL_CLOCKS`)."""
    master: str | None = None
    cache: Path | None = None
    rewarm: bool = True
    rewarm_passes: int = 1
    """Most unrecorded passes that warm replacement JVMs after a run with kills. Past the first,
    passes go on only while a pass takes more than ``jobs.tpcds.recorded_run.REWARM_WITHIN`` x the
    query's stable time: a JVM capped at a fraction of a core compiles slowly, and one pass may
    leave it cold."""
    spark_conf: tuple[tuple[str, str], ...] = ()
    """Extra Spark settings for every session (e.g. no broadcast joins, for bigger shuffles)."""
    warmup: int | None = None
    """Queries (the first ones) in each session's warm-up pass; None: all of them."""
    stable_runs: str = "all"
    """``all``: every policy gets stable runs (its overhead); ``never``: only vanilla Spark (the
    reference); ``rounds``: only vanilla Spark, also once in each round of evicted runs (needs
    ``interleave``), and the reference becomes the median of the round runs once every run is in."""
    reference: Path | None = None
    """A results CSV whose ``never`` stable runs give each query's stable time: no stable runs then,
    the policies run in the given order, and the kill schedules are the ones a run with that
    reference draws (a long benchmark can be continued or split this way)."""
    warmup_rounds: int = 1
    """Times the warm-up pass runs (short queries need more than one pass before the JIT settles)."""
    tr_notices: bool = True
    """Give ``tr`` the kills' notices too (``decommission`` always gets them)."""
    stable_repeat: int | None = None
    """Stable runs per (query, policy) when not ``repeat`` (None: ``repeat``), e.g. 3 for a steady
    reference with 2 kill schedules."""
    pools: tuple[tuple[str, int], ...] = ()
    """``(("ondemand", k), ("spot", n))``: the first k executor slots are on-demand, never killed
    (:mod:`jobs.tpcds.pools`); empty: every executor may be killed."""
    executor_cpus: float | None = None
    """Cap each executor JVM at this many cores (its own cgroup, :mod:`jobs.harness.cpucap`), as if
    every executor ran on its own VM; None: executors share the machine's cores."""
    usable_executors: float | None = None
    """Executors that can run at once when fewer than ``executors`` (uncapped JVMs sharing fewer
    cores): capacity is lost only when fewer than these are left (:class:`~jobs.tpcds.metrics.CapacityMeter`).
    None: every executor."""
    interleave: bool = False
    """Keep every policy's cluster up and let them take turns: run ``r`` of a query under each policy
    is made in one round, seconds apart (:mod:`jobs.tpcds.lockstep`), so the machine's drift over
    the minutes one policy's runs take does not enter the comparison. Clusters that do not run
    sit idle; vanilla Spark's reference is measured before the others start. Killed executors
    are replaced before the next policy's turn."""
    console_log: Path | None = None
    """Where each policy's driver JVM writes its console output (Spark's log, the engine's lines),
    appended (:func:`jobs.tpcds.session.jvm_console_to`); None: the console."""

    def __post_init__(self) -> None:
        if self.kill_clock not in KILL_CLOCKS:
            raise ValueError(f"kill clock must be one of {', '.join(KILL_CLOCKS)}, got {self.kill_clock!r}")
        if self.reclaim_within is not None and not 0 <= self.reclaim_within[0] <= self.reclaim_within[1]:
            raise ValueError(f"reclaim_within must be (low, high) with 0 <= low <= high, got {self.reclaim_within}")
        if self.usable_executors is not None and not self.usable_executors > 0:
            raise ValueError(f"usable executors must be > 0, got {self.usable_executors}")
        if self.stable_runs not in STABLE_RUNS:
            raise ValueError(f"stable_runs must be one of {', '.join(STABLE_RUNS)}, got {self.stable_runs!r}")
        if self.stable_runs == "rounds" and (not self.interleave or self.reference is not None):
            raise ValueError("stable_runs 'rounds' measures vanilla Spark's reference within each round of "
                             "interleaved runs: it needs interleave and no given reference")
        if self.interleave and self.master is not None:
            raise ValueError("interleaved policies need local clusters, one per policy; "
                             f"an existing cluster was given (master {self.master!r})")

    def runs(self, scenario: str) -> int:
        """Recorded runs per (query, policy) of ``scenario``."""
        return self.stable_repeat if scenario == "stable" and self.stable_repeat else self.repeat

    def noticed(self, policy: str) -> bool:
        """Does ``policy`` get a termination notice before each kill?"""
        return policy in NOTICED_POLICIES and (policy != "tr" or self.tr_notices) and self.master is None

    def any_noticed(self) -> bool:
        """Does some policy of this benchmark get notices (so kills come ``notice`` s after theirs)?"""
        return any(self.noticed(p) for p in self.policies)


@dataclass
class Progress:
    """Callbacks for a display: ``total`` runs announced once, then ``advance(label)`` per step."""

    start: Callable[[int], None] = lambda total: None
    step: Callable[[str], None] = lambda label: None
    advance: Callable[[], None] = lambda: None
    row: Callable[[RunRow], None] = lambda row: None
    """Called with every row as soon as it is written (rows survive a policy that crashes later)."""


@dataclass
class BenchResult:
    """The rows of a benchmark and the policies that could not run here, with the reason."""

    rows: list[RunRow]
    skipped: dict[str, str]
