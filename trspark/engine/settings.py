"""The engine's settings: one plain frozen dataclass, built and validated by the adapters.

The live adapter parses ``spark.trspark.*`` keys into it (:mod:`trspark.keys`), the simulator
builds it from its options; the engine only reads it. Field names match the keys' snake_case
names (``spark.trspark.recursionDepth`` -> ``recursion_depth``). Units: seconds and bytes/s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


def is_stable_spec(spec: str) -> bool:
    """Whether a lifetime spec is ``stable``: never evicted (on-demand capacity)."""
    return spec.strip().lower() == "stable"


@dataclass(frozen=True)
class TRConfig:
    """Engine/plugin configuration; each field's meaning and allowed values are in ``trspark.keys.KEYS``."""

    mode: str = "tr"
    lifetime: str = "exponential:mean=3600"
    knowledge: str = "notices"
    targets: str = "both"
    beta: float = 0.5
    gamma: float = 1.0
    alpha: float = 1.5
    recursion_depth: int = 8
    grid_size: int = 64
    period: float = 5.0
    local_bandwidth: float = 400e6
    remote_bandwidth: float = 100e6
    remote_cap: float = 10e9
    backup_latency: float = 0.05
    backup_cost_per_gb: float = 0.0
    stall_weight: bool = True
    scheduling: bool = True
    scheduling_order: str = "reduction"
    warm_first: bool = False
    safety_belt: bool = True
    duplication: bool = True
    remote_path: str = ""
    python: str = ""
    engine_timeout: float = 2.0
    engine_start_timeout: float = 120.0
    engine_queue_capacity: int = 10000
    history_url: str = ""
    pool: str = "default"
    backup_throttle: float = 0.0
    notice_source: str = "none"
    notice_url: str = ""
    notice_interval: float = 1.0
    notice_window: float = 30.0
    notice_margin: float = 3.0
    notice_expected: bool = False
    notice_release: bool = True
    notice_signal: str = "PWR"
    rebalance_hazard_factor: float = 10.0
    sizing_fraction: float = 0.05
    sizing_rate: float = 0.0
    release_idle: float = 0.0
    release_min_executors: int = 0
    pool_lifetimes: tuple[tuple[str, str], ...] = ()
    """(pool, lifetime spec) from ``spark.trspark.pool.<name>.lifetime``; spec ``stable`` = on-demand."""

    def stable_pools(self) -> tuple[str, ...]:
        """Pools whose executors are never evicted (lifetime ``stable``)."""
        return tuple(pool for pool, spec in self.pool_lifetimes if is_stable_spec(spec))

    def with_options(self, **options: Any) -> TRConfig:
        return dataclasses.replace(self, **options)
