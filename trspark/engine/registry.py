"""Policies by name: the one place drivers (simulator, live engine, CLI) build a policy from config."""

from __future__ import annotations

from collections.abc import Callable

from trspark.config import TRConfig
from trspark.engine.baselines import AlwaysPolicy, NeverPolicy
from trspark.engine.policy import Policy

# name -> factory(config) ; the TR policy and further baselines register here.
POLICIES: dict[str, Callable[[TRConfig], Policy]] = {
    "never": lambda config: NeverPolicy(),
    "always": lambda config: AlwaysPolicy(),
}


def policy_names() -> list[str]:
    return sorted(POLICIES)


def make_policy(name: str, config: TRConfig | None = None) -> Policy:
    """Build the policy ``name`` (``never``, ``always``, ...) configured by ``config``."""
    try:
        factory = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(policy_names())}") from None
    return factory(config or TRConfig())
