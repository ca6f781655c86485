"""Policies by name: the one place drivers (simulator, live engine, CLI) build a policy from config."""

from __future__ import annotations

from collections.abc import Callable, Collection

from cost_model.lifetimes import from_spec
from trspark.engine.baselines import AlwaysPolicy, IntervalPolicy, NeverPolicy, StagePolicy
from trspark.engine.interface import Policy
from trspark.engine.pool_baselines import ON_DEMAND_POOLS, EFMPolicy, PadoPolicy
from trspark.engine.settings import TRConfig


def _stage(config: TRConfig) -> Policy:
    return StagePolicy(from_spec(config.lifetime), alpha=config.alpha)


def _interval(config: TRConfig) -> Policy:
    return IntervalPolicy(from_spec(config.lifetime), config.remote_bandwidth, config.remote_cap)


def _tr(**overrides: str) -> Callable[[TRConfig], Policy]:
    """TR-Spark with some config fields forced (the named variants of paper §6.1.1)."""

    def build(config: TRConfig) -> Policy:
        from trspark.engine.tr.policy import TRPolicy

        return TRPolicy(config.with_options(**overrides) if overrides else config)

    return build


# name -> factory(config) ; the TR policy and further baselines register here.
POLICIES: dict[str, Callable[[TRConfig], Policy]] = {
    "never": lambda config: NeverPolicy(),
    "always": lambda config: AlwaysPolicy(),
    "stage": _stage,
    "interval": _interval,
    # TR-Spark as configured (spark.trspark.lifetime.knowledge / backup.targets) ...
    "tr": _tr(),
    # ... and the paper's named variants, whatever the config says.
    "tr-det": _tr(knowledge="deterministic"),
    "tr-local": _tr(targets="local"),
    "tr-remote": _tr(targets="remote"),
    "tr-fitted": _tr(knowledge="fitted"),
}


# name -> factory(config, on-demand pool names): the baselines that tell stable capacity apart.
POOL_POLICIES: dict[str, Callable[[TRConfig, Collection[str]], Policy]] = {
    "efm": lambda config, pools: EFMPolicy(pools),
    "pado": lambda config, pools: PadoPolicy(pools),
}


def policy_names() -> list[str]:
    return sorted(POLICIES.keys() | POOL_POLICIES.keys())


def make_policy(name: str, config: TRConfig | None = None, on_demand_pools: Collection[str] = ON_DEMAND_POOLS) -> Policy:
    """Build the policy ``name`` (``never``, ``always``, ...) configured by ``config``.

    ``on_demand_pools`` names the pools of stable executors, for the policies that need it.
    """
    if name in POOL_POLICIES:
        return POOL_POLICIES[name](config or TRConfig(), on_demand_pools)
    try:
        factory = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(policy_names())}") from None
    return factory(config or TRConfig())
