"""Pure cost math of TR-Spark (§4): lifetimes, cascading recomputation, backup costs. No Spark, no I/O."""

from .lifetimes import LifetimeModel, from_spec

__all__ = ["LifetimeModel", "from_spec"]
