"""Parse lifetime specs such as ``"weibull:shape=0.8,scale=3600"`` (used by config and the CLI).

Grammar (whitespace around tokens is ignored, names are case-insensitive)::

    spec    := NAME [":" params]          e.g. exponential:mean=600   bathtub
    params  := KEY "=" value ("," KEY "=" value)*
    value   := NUMBER (";" NUMBER)*       a ";"-list only where a model takes a list
    notice  := "notice:deadline_age=" NUMBER "|" spec

Models and their parameters (seconds unless stated):

* ``exponential:mean=…`` or ``exponential:rate=…`` (1/s)
* ``weibull:shape=…,scale=…``
* ``lognormal:median=…,sigma=…``
* ``deterministic:at=…``
* ``bathtub[:early_prob=…,early_mean=…,mid_rate=…,late_prob=…,late_scale=…,cap=…]`` (all optional)
* ``empirical:durations=d1;d2;…[,observed=1;0;…]`` -- inline data only: ``cost_model`` does no
  I/O, so reading lifetime history files is the caller's job (then use :class:`Empirical` directly).
* ``stable`` -- never evicted (on-demand or reserved capacity)
* ``notice:deadline_age=…|<spec of the base model>``

Every model's ``spec()`` output parses back to an equal model.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from importlib import import_module

from .base import LifetimeModel
from .notice import Notice

#: Model name (also its module in this package) -> class. Imported on first use: the Weibull and
#: log-normal laws need scipy.special, which an engine that never uses them should not pay for.
_REGISTRY = {
    "exponential": "Exponential",
    "weibull": "Weibull",
    "lognormal": "LogNormal",
    "deterministic": "Deterministic",
    "bathtub": "Bathtub",
    "empirical": "Empirical",
    "stable": "Stable",
}

_Value = float | list[float]

#: The models whose parameters can put the mean past float range, and what brings it back.
_FINITE_MEAN = {"weibull": "a larger shape or a smaller scale (a shape of 0.006 or more keeps it finite at any scale up to a year)",
                "lognormal": "a smaller sigma or median (a sigma of 35 or less keeps it finite at any median up to a year)"}


def from_spec(spec: str) -> LifetimeModel:
    """Build a lifetime model from its spec string (grammar in the module docstring).

    Raises
    ------
    ValueError
        With one line naming the model or parameter at fault and what is allowed.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(
            f"lifetime spec must be a non-empty string like 'weibull:shape=0.8,scale=3600', got {spec!r}"
        )
    name, _, args = spec.strip().partition(":")
    name = name.strip().lower()
    if name == Notice.name:
        return _notice(spec, args)
    if name not in _REGISTRY:
        known = ", ".join([*sorted(_REGISTRY), f"{Notice.name} (as {Notice.name}:deadline_age=<s>|<spec>)"])
        raise ValueError(f"unknown lifetime model {name!r} in spec {spec!r}; known: {known}")
    factory: Callable[..., LifetimeModel] = getattr(import_module(f".{name}", __package__), _REGISTRY[name])
    kwargs = _parse_params(spec, args)
    _check_names(spec, name, factory, kwargs)
    model = factory(**kwargs)
    # A mean past float range (a tiny Weibull shape, a huge log-normal sigma) is no spot market:
    # nearly every VM dies at once and the rest never do, and the costs lose every digit.
    if name in _FINITE_MEAN and not math.isfinite(model.mean()):
        raise ValueError(f"lifetime spec {spec!r}: the mean lifetime is beyond float range; allowed: "
                         f"{_FINITE_MEAN[name]}")
    return model


def _notice(spec: str, args: str) -> LifetimeModel:
    own, bar, base_spec = args.partition("|")
    if not bar or not base_spec.strip():
        raise ValueError(f"lifetime spec {spec!r}: notice needs 'notice:deadline_age=<s>|<base spec>'")
    kwargs = _parse_params(spec, own)
    if set(kwargs) != {"deadline_age"}:
        raise ValueError(f"lifetime spec {spec!r}: notice takes exactly one parameter, deadline_age")
    deadline = kwargs["deadline_age"]
    if isinstance(deadline, list):
        raise ValueError(f"lifetime spec {spec!r}: notice 'deadline_age' must be one number (seconds)")
    return Notice(from_spec(base_spec), deadline)


def _parse_params(spec: str, args: str) -> dict[str, _Value]:
    kwargs: dict[str, _Value] = {}
    for part in filter(None, (p.strip() for p in args.split(","))):
        key, eq, raw = part.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ValueError(f"lifetime spec {spec!r}: expected key=value, got {part!r}")
        if key in kwargs:
            raise ValueError(f"lifetime spec {spec!r}: parameter {key!r} given twice")
        try:
            numbers = [float(item) for item in raw.split(";")]
        except ValueError:
            raise ValueError(
                f"lifetime spec {spec!r}: parameter {key!r} must be a number, got {raw.strip()!r}"
            ) from None
        kwargs[key] = numbers if len(numbers) > 1 or ";" in raw else numbers[0]
    return kwargs


def _check_names(
    spec: str, name: str, factory: Callable[..., LifetimeModel], kwargs: dict[str, _Value]
) -> None:
    params = inspect.signature(factory).parameters
    unknown = sorted(set(kwargs) - set(params))
    if unknown:
        raise ValueError(
            f"lifetime spec {spec!r}: unknown parameter {unknown[0]!r} for {name}; allowed: {', '.join(params)}"
        )
    missing = [p for p, info in params.items() if info.default is inspect.Parameter.empty and p not in kwargs]
    if missing:
        raise ValueError(f"lifetime spec {spec!r}: {name} needs parameter(s) {', '.join(missing)}")
