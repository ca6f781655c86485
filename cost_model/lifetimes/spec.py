"""Parse ``"name:key=value,key=value"`` lifetime specs used by config and the CLI."""

from __future__ import annotations

from collections.abc import Callable

from .base import LifetimeModel
from .exponential import Exponential

_REGISTRY: dict[str, Callable[..., LifetimeModel]] = {
    "exponential": Exponential,
}


def from_spec(spec: str) -> LifetimeModel:
    """Build a model from e.g. ``"weibull:shape=0.8,scale=3600"`` or ``"exponential:mean=600"``.

    Raises ``ValueError`` naming the model or the parameter when the spec is malformed.
    """
    name, _, args = spec.strip().partition(":")
    name = name.strip().lower()
    if name not in _REGISTRY:
        raise ValueError(f"unknown lifetime model {name!r} in spec {spec!r}; known: {', '.join(sorted(_REGISTRY))}")
    kwargs: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in args.split(","))):
        key, eq, value = part.partition("=")
        if not eq:
            raise ValueError(f"lifetime spec {spec!r}: expected key=value, got {part!r}")
        try:
            kwargs[key.strip()] = float(value)
        except ValueError as exc:
            raise ValueError(f"lifetime spec {spec!r}: parameter {key.strip()!r} must be a number, got {value!r}") from exc
    try:
        return _REGISTRY[name](**kwargs)
    except TypeError as exc:
        raise ValueError(f"lifetime spec {spec!r}: bad parameters for {name}: {exc}") from exc
