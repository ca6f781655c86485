"""The simulated cluster: VMs, their true lifetimes, bandwidths (paper §6, Table 2 defaults).

The world draws each VM's lifetime from the *true* lifetime model with a seeded
``numpy.random.Generator``; what the policy *believes* is separate (``TRConfig.lifetime``).

A world is homogeneous (one lifetime model for every VM, the paper's setting) or made of
*pools*: groups of VMs with their own true lifetime model, such as an on-demand core
(``stable``) beside spot workers. An evicted VM is replaced within its own pool.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

import numpy as np

from cost_model.lifetimes import LifetimeModel, from_spec

KNOWLEDGE = ("indeterministic", "deterministic")

#: Pool name of every VM of a homogeneous world (``ExecutorAdded.pool``'s default).
DEFAULT_POOL = "default"
_POOL_NAME = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class Pool:
    """``count`` VMs named ``name`` whose lifetimes follow ``lifetime``.

    ``lifetime`` is a ``cost_model.lifetimes.from_spec`` string (``stable``: never evicted), or
    None to take the world's ``lifetime`` (what ``--stability`` / ``--stabilities`` set).
    """

    name: str
    count: int
    lifetime: str | None = None

    def __post_init__(self) -> None:
        if not _POOL_NAME.fullmatch(self.name):
            raise ValueError(f"pool name {self.name!r} is not valid; allowed: letters, digits, '_', '-', '.'")
        if self.count < 1:
            raise ValueError(f"pool {self.name!r}: count must be >= 1, got {self.count}")
        if self.lifetime is not None:
            from_spec(self.lifetime)

    def label(self) -> str:
        return f"{self.name}={self.count}" + ("" if self.lifetime is None else f"@{self.lifetime}")


def parse_pool(text: str) -> Pool:
    """``NAME=COUNT[@SPEC]`` (e.g. ``spot=8@weibull:shape=0.6,scale=33``) as a :class:`Pool`."""
    name, eq, rest = text.partition("=")
    count, at, spec = rest.partition("@")
    if not eq or not count.strip():
        raise ValueError(f"{text!r} is not NAME=COUNT[@SPEC], e.g. ondemand=2@stable or spot=8")
    try:
        number = int(count)
    except ValueError:
        raise ValueError(f"{text!r}: COUNT must be an integer >= 1, got {count.strip()!r}") from None
    if number < 1:
        raise ValueError(f"{text!r}: COUNT must be an integer >= 1, got {number}")
    if at and not spec.strip():
        raise ValueError(f"{text!r}: a lifetime spec must follow '@'")
    try:
        return Pool(name.strip(), number, spec.strip() if at else None)
    except ValueError as exc:  # a bad name or lifetime spec: say which --pool it came from
        raise ValueError(f"{text!r}: {exc}") from None


@dataclass(frozen=True)
class WorldSpec:
    """Cluster and eviction settings of one simulated run.

    Parameters
    ----------
    vms, cores : int
        Number of VMs (executors) and cores per VM (Table 2: 100 x 4).
    local_bandwidth, remote_bandwidth : float
        Per-VM peer copy and remote-store bandwidth (bytes/s; Table 2: 400 MB/s, 100 MB/s).
    remote_cap : float
        Total remote-store bandwidth (bytes/s; Table 2: 10 GB/s), shared equally by the VMs
        uploading at the time, each VM's share then equally by its own remote transfers.
    backup_latency : float
        Fixed seconds of every backup copy before its bytes move (0 = the paper's model).
    lifetime : str or None
        True lifetime model spec (``cost_model.lifetimes.from_spec``); None = VMs never die.
    replace_delay : float
        Seconds from a VM's eviction until its replacement registers.
    knowledge : str
        ``deterministic``: each VM's true death time is announced (``ExecutorNotice``) when it
        registers; ``indeterministic``: only the distribution is known.
    notice : float or None
        If set, an ``ExecutorNotice`` is also sent this many seconds before each death.
    max_slowdown : float
        A run whose job time exceeds ``max_slowdown`` x the stable job time counts as failed.
    stall_seconds : float or None
        A run with no successful task for this long counts as failed (None = the stable job time).
    max_stage_attempts : int or None
        Like ``spark.stage.maxConsecutiveAttempts`` (4 in Spark): a stage whose attempts fail this
        many times in a row (lost parent outputs) fails the job. None (default) = no limit, so
        slowdowns are measured rather than cut short, as in the paper's Figure 7.
    pools : tuple of Pool
        Empty (default): one pool, ``default``, of ``vms`` VMs with ``lifetime``. Else the VMs
        of each pool in turn (their counts must add up to ``vms``).
    """

    vms: int = 100
    cores: int = 4
    local_bandwidth: float = 400e6
    remote_bandwidth: float = 100e6
    remote_cap: float = 10e9
    backup_latency: float = 0.0
    lifetime: str | None = "exponential:mean=60"
    replace_delay: float = 0.0
    knowledge: str = "indeterministic"
    notice: float | None = None
    max_slowdown: float = 20.0
    stall_seconds: float | None = None
    max_stage_attempts: int | None = None
    pools: tuple[Pool, ...] = ()

    def __post_init__(self) -> None:
        if self.vms < 1 or self.cores < 1:
            raise ValueError("vms and cores must be >= 1")
        for name in ("local_bandwidth", "remote_bandwidth", "remote_cap"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0 bytes/s")
        if self.knowledge not in KNOWLEDGE:
            raise ValueError(f"knowledge must be one of {', '.join(KNOWLEDGE)}, got {self.knowledge!r}")
        if not self.backup_latency >= 0:
            raise ValueError("backup_latency must be >= 0 seconds")
        if not (math.isfinite(self.replace_delay) and self.replace_delay >= 0):
            raise ValueError("replace_delay must be >= 0 seconds")
        if self.notice is not None and not (math.isfinite(self.notice) and self.notice >= 0):
            raise ValueError("notice must be >= 0 seconds")
        if self.lifetime is not None:
            from_spec(self.lifetime)
        if self.pools:
            names = [p.name for p in self.pools]
            if len(set(names)) < len(names):
                raise ValueError(f"pool names must differ, got {', '.join(names)}")
            if sum(p.count for p in self.pools) != self.vms:
                raise ValueError(f"the pools hold {sum(p.count for p in self.pools)} VMs but vms is {self.vms}")

    def lifetime_model(self) -> LifetimeModel | None:
        return None if self.lifetime is None else from_spec(self.lifetime)

    def pool_table(self) -> tuple[tuple[str, int, str | None], ...]:
        """``(name, count, true lifetime spec or None = never evicted)`` of every pool, in VM order."""
        if not self.pools:
            return ((DEFAULT_POOL, self.vms, self.lifetime),)
        return tuple((p.name, p.count, self.lifetime if p.lifetime is None else p.lifetime) for p in self.pools)

    def pool_names(self) -> tuple[str, ...]:
        """Names of every pool, in VM order (``default`` without ``--pool``)."""
        return tuple(name for name, _, _ in self.pool_table())

    @staticmethod
    def evictable(spec: str | None) -> bool:
        """Can a VM with lifetime ``spec`` be evicted, :math:`S(\\infty) < 1`? (None and ``stable`` cannot.)"""
        if spec is None:
            return False
        with np.errstate(over="ignore"):  # a very short lifetime: rate x 1e300 overflows to S = 0, as it should
            return float(from_spec(spec).sf(1e300)) < 1.0

    def stable_pools(self) -> tuple[str, ...]:
        """Names of the pools whose VMs are never evicted (the on-demand capacity)."""
        return tuple(name for name, _, spec in self.pool_table() if self.pools and not self.evictable(spec))

    def label(self) -> str | None:
        """The true lifetimes in one line: the spec (None: no evictions), or ``pool=count@spec ...``."""
        if not self.pools:
            return self.lifetime
        return " ".join(f"{name}={count}@{spec or 'stable'}" for name, count, spec in self.pool_table())

    def default_belief(self) -> str | None:
        """The shared lifetime model a policy believes unless told otherwise.

        A homogeneous world: its own. With pools: the model of the evictable pool with the most
        VMs (the first such pool on a tie), for executors of a pool the policy has no model of
        (each pool's own model reaches tr through ``TRConfig.pool_lifetimes``); ``stable`` when
        no VM can be evicted.
        """
        if not self.pools:
            return self.lifetime
        evictable = [(count, -i, spec) for i, (_, count, spec) in enumerate(self.pool_table()) if self.evictable(spec)]
        return max(evictable)[2] if evictable else "stable"

    def stable(self) -> WorldSpec:
        """The same cluster with no evictions (for the stable job time)."""
        return replace(self, lifetime=None, notice=None, pools=tuple(replace(p, lifetime="stable") for p in self.pools))


class LifetimeSampler:
    """Draws VM lifetimes in batches (one numpy call per batch keeps the event loop lean)."""

    def __init__(self, model: LifetimeModel | None, rng: np.random.Generator, batch: int = 256) -> None:
        self._model = model
        self._rng = rng
        self._batch = batch
        self._buffer: list[float] = []

    def next(self) -> float:
        """One lifetime in seconds (``inf`` when there is no lifetime model)."""
        if self._model is None:
            return float("inf")
        if not self._buffer:
            draws = self._model.sample(self._batch, self._rng)
            # reversed so pop() hands them out in draw order
            self._buffer = [float(x) for x in draws[::-1]]
        return self._buffer.pop()
