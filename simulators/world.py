"""The simulated cluster: VMs, their true lifetimes, bandwidths (paper §6, Table 2 defaults).

The world draws each VM's lifetime from the *true* lifetime model with a seeded
``numpy.random.Generator``; what the policy *believes* is separate (``TRConfig.lifetime``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cost_model.lifetimes import LifetimeModel, from_spec

KNOWLEDGE = ("indeterministic", "deterministic")


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
        Total remote-store bandwidth shared fairly by all concurrent remote transfers (bytes/s;
        Table 2: 10 GB/s).
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
        if self.replace_delay < 0:
            raise ValueError("replace_delay must be >= 0 seconds")
        if self.lifetime is not None:
            from_spec(self.lifetime)

    def lifetime_model(self) -> LifetimeModel | None:
        return None if self.lifetime is None else from_spec(self.lifetime)

    def stable(self) -> WorldSpec:
        """The same cluster with no evictions (for the stable job time)."""
        from dataclasses import replace

        return replace(self, lifetime=None, notice=None)


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
