"""The live plugin's settings: ``spark.trspark.*`` entries of a Spark conf -> the engine's settings.

One check for every way the settings arrive: ``trspark.spark_conf`` / ``trspark.configure``
(options in Python, :func:`option_settings`), the JVM plugin's start-up check and the engine
process (a JSON object in the environment variable ``TRSPARK_CONF``, :func:`read_env`). Each
rejects an unknown key, a value its key does not allow (:mod:`trspark.keys`), contradicting
settings, and a ``spark.trspark.history.url`` the driver cannot write
(:func:`trspark.live.history.check_url`), with a :class:`~trspark.keys.ConfigError` naming the
key and what is allowed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from trspark.engine.interface import Policy
from trspark.engine.pool_baselines import ON_DEMAND_POOLS
from trspark.engine.registry import make_policy
from trspark.engine.settings import TRConfig
from trspark.keys import (
    BY_FULL,
    KEYS,
    PREFIX,
    ConfigError,
    did_you_mean,
    is_pool_key,
    key_for_option,
    parse_pool_lifetime,
    parse_value,
    pool_settings,
    spark_text,
    validate,
)

ENV_VAR = "TRSPARK_CONF"
"""Environment variable holding every ``spark.trspark.*`` setting (and ``spark.app.id``) as JSON."""


def from_spark_conf(conf: Mapping[str, str], base: TRConfig | None = None) -> TRConfig:
    """The settings of ``spark.trspark.*`` entries over ``base`` (default: the defaults); other keys
    ignored, unknown trspark keys rejected. A pool's lifetime replaces only that pool's in ``base``.

    Raises
    ------
    ConfigError
        An unknown ``spark.trspark.*`` key, a value its key does not allow, or contradicting settings.
    """
    base = base or TRConfig()
    values: dict[str, Any] = {}
    pools = dict(base.pool_lifetimes)
    for full, raw in conf.items():
        if not full.startswith(PREFIX):
            continue
        if is_pool_key(full):
            name, spec = parse_pool_lifetime(full, raw)
            pools[name] = spec
            continue
        key = BY_FULL.get(full)
        if key is None:
            known = ", ".join(k.full for k in KEYS)
            close = did_you_mean(full, [k.name for k in KEYS], prefix=PREFIX)
            raise ConfigError(f"unknown setting {full!r}{close}; known settings: {known}")
        values[key.field] = parse_value(key, raw)
    return validate(base.with_options(**values, pool_lifetimes=tuple(sorted(pools.items()))))


def check_settings(settings: Mapping[str, str]) -> TRConfig:
    """The validated settings of ``settings`` (Spark keys -> string values), history URL included.

    At run time an unreachable history store only degrades (with a warning); this check runs
    before Spark starts, so a URL that is already unusable fails the application instead.

    Raises
    ------
    ConfigError
        As :func:`from_spark_conf`, or a history URL the driver cannot write.
    """
    config = from_spark_conf(settings)
    check_sizing(config)
    try:  # values each key allows may still, together, leave the engine no finite time grid
        build_policy(config)
    except (ValueError, ArithmeticError) as exc:
        raise ConfigError(f"these spark.trspark settings leave the engine unable to start ({exc}); "
                          "allowed: lifetimes whose times stay finite") from exc
    if config.history_url:
        from trspark.live.history import HistoryError, check_url

        try:
            check_url(config.history_url)
        except HistoryError as exc:
            raise ConfigError(str(exc)) from exc
    return config


def build_policy(config: TRConfig) -> Policy:
    """The policy ``config.mode``; ``efm`` and ``pado`` count the pools whose lifetime is
    ``stable`` as on-demand (the default on-demand pool name when no pool is stable)."""
    return make_policy(config.mode, config, config.stable_pools() or ON_DEMAND_POOLS)


def check_sizing(config: TRConfig) -> None:
    """Raise :class:`ConfigError` unless ``sizing.lossFraction`` is below the peak loss fraction of every evictable
    lifetime, or some configured lifetime is ``stable``."""
    from cost_model.task_size import FractionTooLarge, check_fraction
    from trspark.engine.tr.sizing import configured_models
    from trspark.engine.views import never_evicted

    keys = [(PREFIX + "lifetime", config.lifetime)]
    keys += [(f"{PREFIX}pool.{pool}.lifetime", spec) for pool, spec in config.pool_lifetimes]
    models = configured_models(config)
    if any(never_evicted(model) for model in models):
        return  # a task lost again and again on evictable executors ends on a stable one: no limit
    for (key, spec), model in zip(keys, models, strict=True):
        try:
            check_fraction(model, config.sizing_fraction)
        except FractionTooLarge as exc:
            default = " (its default)" if config.sizing_fraction == TRConfig().sizing_fraction else ""
            raise ConfigError(
                f"spark.trspark.sizing.lossFraction={exc.fraction:g}{default} is not below the largest expected loss "
                f"fraction {key}={spec!r} gives ({exc.peak:.3f}); allowed: a number in (0, {exc.peak:.3f}), "
                "or a lifetime that loses less of a task's work") from None


def option_settings(**options: Any) -> dict[str, str]:
    """``spark.trspark.*`` settings for ``options`` (key suffixes, in snake_case or not, or field names), checked.

    An option given as ``None`` is left unset (its default holds), as a Python caller means it.

    Raises
    ------
    ConfigError
        An unknown option, one given twice, or anything :func:`check_settings` rejects.
    """
    out = unchecked_option_settings(**options)
    check_settings(out)
    return out


def unchecked_option_settings(**options: Any) -> dict[str, str]:
    """:func:`option_settings` without :func:`check_settings`, for a caller that checks them with
    settings of its own (ConfigError still for an unknown option or one given twice)."""
    out: dict[str, str] = {}
    for option, value in options.items():
        if value is None:
            if option != "pool_lifetimes":
                key_for_option(option.removeprefix(PREFIX))  # an unknown option still fails
            continue
        if option == "pool_lifetimes":  # {pool: spec}: one spark.trspark.pool.<name>.lifetime each
            out.update(pool_settings(value))
            continue
        key = key_for_option(option.removeprefix(PREFIX))
        if key.full in out:
            raise ConfigError(f"{key.full} is given twice (as {option!r} and another spelling)")
        out[key.full] = spark_text(value)
    return out


def read_env(environ: Mapping[str, str]) -> dict[str, str]:
    """``TRSPARK_CONF`` as Spark settings; raises ``ConfigError`` when it is not a JSON object."""
    try:
        data = json.loads(environ.get(ENV_VAR, "{}"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{ENV_VAR} is not JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{ENV_VAR} must be a JSON object of Spark settings")
    # Spark conf values are strings; accept JSON numbers/booleans spelled as Spark would.
    return {str(k): spark_text(v) for k, v in data.items()}
