"""Executor lifetime models (one interface: :class:`LifetimeModel`) and spec parsing."""

from .base import LifetimeModel
from .bathtub import Bathtub
from .capped import Capped
from .deterministic import Deterministic
from .empirical import Empirical
from .exponential import Exponential
from .lognormal import LogNormal
from .notice import Notice, with_notice
from .rebalanced import Raised
from .spec import from_spec
from .stable import Stable
from .weibull import Weibull

__all__ = [
    "Bathtub",
    "Capped",
    "Deterministic",
    "Empirical",
    "Exponential",
    "LifetimeModel",
    "LogNormal",
    "Notice",
    "Raised",
    "Stable",
    "Weibull",
    "from_spec",
    "with_notice",
]
