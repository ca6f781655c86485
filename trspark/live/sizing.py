"""Spark SQL partition settings from the lifetime rule (:mod:`trspark.engine.tr.sizing`).

With ``spark.trspark.sizing.rate`` = ``R`` (bytes of input one task processes per second) the
configured lifetimes give the longest task :math:`L^*` (s) and the partition size
:math:`B^* = L^* R` (bytes). Spark SQL sizes shuffle partitions through adaptive query execution:
a shuffle is cut into ``spark.sql.adaptive.coalescePartitions.initialPartitionNum`` partitions
and neighbours are merged up to ``spark.sql.adaptive.advisoryPartitionSizeInBytes``. AQE never
splits a partition that is too large, so :func:`sql_settings` sets both: the advisory size to
:math:`B^*`, and the initial number to :data:`INITIAL_PARTITIONS` so that a shuffle of up to
``INITIAL_PARTITIONS`` x :math:`B^*` bytes starts with partitions no larger than :math:`B^*`.
AQE also merges partitions up to ``spark.sql.adaptive.coalescePartitions.minPartitionSize``
(1 MiB by default) whatever the advisory size, so a :math:`B^*` below that lowers it too.

The user's own settings always win: a setting already present is never replaced, and nothing is
set when AQE or its coalescing is switched off, or when the user chose the advisory size.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable

import click

from trspark.engine.settings import TRConfig
from trspark.engine.tr.sizing import (
    MIN_PARTITION_SIZE_KEY,
    configured_limit,
    min_partition_bytes,
    percent,
    suggested_partition_bytes,
)

ADVISORY = "spark.sql.adaptive.advisoryPartitionSizeInBytes"
INITIAL = "spark.sql.adaptive.coalescePartitions.initialPartitionNum"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
AQE = "spark.sql.adaptive.enabled"
COALESCE = "spark.sql.adaptive.coalescePartitions.enabled"

INITIAL_PARTITIONS = 1000
"""Initial shuffle partitions set with the advisory size (AQE merges the small ones back)."""

log = logging.getLogger("trspark")


def sql_settings(config: TRConfig, existing: Callable[[str], str | None]) -> dict[str, str]:
    """The Spark SQL settings to add for ``config``, given the settings already chosen (``existing``).

    Empty without ``sizing.rate``, without a finite limit (stable capacity), with AQE or its
    coalescing off, or with an advisory size already set; ``initialPartitionNum`` only when neither
    it nor ``spark.sql.shuffle.partitions`` is set; ``minPartitionSize`` only when unset and
    Spark's default would exceed :math:`B^*`.
    """
    size = suggested_partition_bytes(config)
    if size is None:
        return {}
    for key in (AQE, COALESCE):
        if (existing(key) or "true").strip().lower() == "false":
            log.info("trspark: %s=false, so no partition size is suggested through AQE", key)
            return {}
    if existing(ADVISORY) is not None:
        log.info("trspark: %s is set by the user; the lifetime rule's %d bytes is not applied", ADVISORY, size)
        return {}
    out = {ADVISORY: str(size)}
    if existing(SHUFFLE_PARTITIONS) is None and existing(INITIAL) is None:
        out[INITIAL] = str(INITIAL_PARTITIONS)
    if (least := min_partition_bytes(size)) is not None and existing(MIN_PARTITION_SIZE_KEY) is None:
        out[MIN_PARTITION_SIZE_KEY] = str(least)
    log.info("trspark: tasks of at most %.1f s by the lifetime rule: %s", configured_limit(config),
             ", ".join(f"{k}={v}" for k, v in out.items()))
    return out


# The Spark keys the command's options stand for, as an error names them.
_OPTION_OF_KEY = ((re.compile(r"spark\.trspark\.pool\.([^.=\s]+)\.lifetime="), r"--pool \1="),
                  (re.compile(r"spark\.trspark\.sizing\.lossFraction="), "--fraction="),
                  (re.compile(r"spark\.trspark\.sizing\.rate="), "--rate="),
                  (re.compile(r"spark\.trspark\.lifetime="), "--lifetime="))


def _in_options(message: str) -> str:
    """``message`` with each ``spark.trspark.*=value`` of the command's options written as the option."""
    for pattern, option in _OPTION_OF_KEY:
        message = pattern.sub(option, message)
    return message


@click.command("size")
@click.option("--lifetime", default="exponential:mean=3600", show_default=True, help="Lifetime spec (spark.trspark.lifetime).")
@click.option("--pool", "pools", multiple=True, metavar="NAME=SPEC", help="A pool's lifetime (repeatable), e.g. ondemand=stable.")
@click.option("--fraction", default="0.05", show_default=True, help="spark.trspark.sizing.lossFraction.")
@click.option("--rate", default="0", show_default=True, help="spark.trspark.sizing.rate: bytes/s one task processes, e.g. 50m.")
def size_command(lifetime: str, pools: tuple[str, ...], fraction: str, rate: str) -> None:
    """Print the longest task the lifetimes allow and the Spark SQL settings it gives."""
    from trspark.keys import ConfigError
    from trspark.live.config import option_settings

    try:
        pairs = [tuple(p.split("=", 1)) for p in pools]
        if any(len(p) != 2 for p in pairs):
            raise ConfigError(f"--pool expects NAME=SPEC, got {', '.join(pools)}")
        counted = [p for p, (_name, spec) in zip(pools, pairs, strict=True) if re.match(r"\s*\d+\s*@", spec)]
        if counted:  # the simulator's NAME=COUNT@SPEC: a task's length does not depend on how many VMs a pool has
            raise ConfigError(f"--pool {counted[0]}: size takes NAME=SPEC, no VM count (that is simulate's "
                              "NAME=COUNT@SPEC), e.g. ondemand=stable")
        if len({name for name, _spec in pairs}) < len(pairs):
            raise ConfigError(f"--pool names a pool twice: {', '.join(pools)}")
        from trspark.live.config import check_sizing, from_spark_conf

        settings = option_settings(lifetime=lifetime, sizing_fraction=fraction, sizing_rate=rate, pool_lifetimes=pairs)
        config = from_spark_conf(settings)
        check_sizing(config)
    except ConfigError as exc:
        raise click.UsageError(_in_options(str(exc))) from None
    limit = configured_limit(config)
    longest = f"{limit:.1f} s" if math.isfinite(limit) else "no limit"
    click.echo(f"longest task: {longest} (expected loss <= {percent(config.sizing_fraction)} of its work)")
    size = suggested_partition_bytes(config)
    if size is None:
        if not math.isfinite(limit):
            click.echo("no partition size: the lifetimes set no limit")
        elif limit <= 0.0:
            click.echo("no partition size: even the shortest task loses more than that to evictions")
        else:
            click.echo("no partition size: give --rate (bytes/s per task)")
        return
    click.echo(f"partition size: {size} bytes")
    for key, value in sql_settings(config, lambda _key: None).items():
        click.echo(f"--conf {key}={value}")
