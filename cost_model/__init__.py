"""Pure cost math of TR-Spark (§4): lifetimes, cascading recomputation, backup costs. No Spark, no I/O."""

from .lifetimes import (
    Bathtub,
    Capped,
    Deterministic,
    Empirical,
    Exponential,
    LifetimeModel,
    LogNormal,
    Notice,
    Weibull,
    from_spec,
    with_notice,
)

__all__ = [
    "Bathtub",
    "Capped",
    "Deterministic",
    "Empirical",
    "Exponential",
    "LifetimeModel",
    "LogNormal",
    "Notice",
    "Weibull",
    "from_spec",
    "with_notice",
]
