"""Executor lifetime models (one interface: :class:`LifetimeModel`) and spec parsing."""

from .base import LifetimeModel
from .exponential import Exponential
from .spec import from_spec

__all__ = ["Exponential", "LifetimeModel", "from_spec"]
