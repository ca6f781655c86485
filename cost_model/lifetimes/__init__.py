"""Executor lifetime models (one interface: :class:`LifetimeModel`) and spec parsing.

:class:`LogNormal` and :class:`Weibull` are imported on first use: they need scipy.special,
which an engine whose models never use them should not pay for at start-up.
"""

from importlib import import_module
from typing import TYPE_CHECKING

from .base import LifetimeModel
from .bathtub import Bathtub
from .capped import Capped
from .deterministic import Deterministic
from .empirical import Empirical
from .exponential import Exponential
from .notice import Notice, with_notice
from .rebalanced import Raised
from .spec import from_spec
from .stable import Stable

if TYPE_CHECKING:
    from .lognormal import LogNormal
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


def __getattr__(name: str) -> object:
    if name in ("LogNormal", "Weibull"):
        return getattr(import_module(f".{name.lower()}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
