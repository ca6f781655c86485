"""The options ``trspark bench``'s commands share, and their checks.

Each check runs when click parses the command line, before any Spark session starts, and its
error names the option and what it allows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import click

from jobs.tpcds.session import parse_policies
from simulators.options import FiniteFloatRange, can_write_in, picture_format_problem


def check_policies(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    """``--policies``: comma-separated names of known policies."""
    try:
        return parse_policies(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


def check_queries(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    """``--queries``: TPC-DS query names and chain jobs, ``default``, ``all``, or ``verified`` (those that passed ``bench verify``)."""
    from jobs.tpcds.queries import QueryError, parse_list

    if value.strip().lower() == "verified":  # the queries that passed `trspark bench verify`
        from jobs.tpcds.verify import passed

        try:
            return passed(Path(__file__).with_name("QUERIES.md"))
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from exc
    try:
        return parse_list(value)
    except QueryError as exc:
        raise click.BadParameter(str(exc).removeprefix("--queries: ")) from exc


def check_lifetime(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--lifetime``: any lifetime spec that :func:`cost_model.lifetimes.from_spec` accepts."""
    if value is None:
        return None
    from cost_model.lifetimes import from_spec

    try:
        from_spec(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    return value


def check_sf(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """``--sf``: a TPC-DS scale factor > 0."""
    if not (math.isfinite(value) and value > 0):
        raise click.BadParameter(f"{value} is not a scale factor; allowed: a number > 0 (0.1 for tests, 1 for benchmarks)")
    return value


POSITIVE = FiniteFloatRange(min=0, min_open=True)
"""A number of seconds (or a stability) > 0."""


def check_fractions(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[float, float] | None:
    """``LOW,HIGH`` fractions of the stable time, ``0 <= LOW <= HIGH``."""
    if value is None:
        return None
    try:
        low, high = (float(part) for part in value.split(","))
    except ValueError:
        low = high = -1.0
    if not 0 <= low <= high < float("inf"):
        raise click.BadParameter(f"{value!r}: allowed: LOW,HIGH with 0 <= LOW <= HIGH (fractions of the stable time), e.g. 0.3,0.6")
    return low, high


def check_confs(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``--conf KEY=VALUE`` pairs with ``spark.*`` keys; ``spark.trspark.*`` ones checked as the plugin checks them."""
    pairs = []
    for value in values:
        key, eq, setting = value.partition("=")
        if not eq or not key.strip().startswith("spark."):
            raise click.BadParameter(f"{value!r}; allowed: KEY=VALUE with a spark.* key, e.g. "
                                     "spark.sql.autoBroadcastJoinThreshold=-1")
        pairs.append((key.strip(), setting.strip()))
    _check_trspark_confs(pairs)
    return tuple(pairs)


def _check_trspark_confs(pairs: list[tuple[str, str]]) -> None:
    """The ``spark.trspark.*`` settings are checked now, not after the data is generated; the
    policy and the pools are the benchmark's."""
    from trspark.keys import PREFIX, ConfigError, is_pool_key
    from trspark.live.config import from_spark_conf

    for key, setting in pairs:
        if key == PREFIX + "mode":
            raise click.BadParameter(f"'{key}={setting}': the policy of each row is set by --policies")
        if is_pool_key(key):
            raise click.BadParameter(f"'{key}={setting}': the executors' pools are set by --pool")
    try:
        from_spark_conf(dict(pairs))
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None


def check_pools(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    """``--pool ondemand=1@stable --pool spot=3`` -> ``(("ondemand", 1), ("spot", 3))``, on-demand first."""
    from jobs.tpcds.pools import POOL_KINDS

    pools: dict[str, int] = {}
    for value in values:
        name, eq, rest = value.partition("=")
        count, _, spec = rest.partition("@")
        name, spec = name.strip(), spec.strip() or "spot"
        if not eq or not count.strip().isdigit() or int(count) < 1 or POOL_KINDS.get(name) != spec or name in pools:
            raise click.BadParameter(
                f"{value!r}; allowed: ondemand=COUNT@stable (never killed) or spot=COUNT (killed), each once: "
                "each executor learns its pool from its own imitated AWS metadata, which names only these two")
        pools[name] = int(count)
    if pools and "spot" not in pools:
        raise click.BadParameter("no spot pool, so nothing would be killed; allowed: spot=COUNT, with or without "
                                 "ondemand=COUNT@stable")
    if sum(pools.values()) > MAX_EXECUTORS:
        raise click.BadParameter(f"{sum(pools.values())} executors in all; allowed: at most {MAX_EXECUTORS}, "
                                 "as for --executors")
    return tuple(sorted(pools.items(), key=lambda kv: kv[0] != "ondemand"))


def executors_of_pools(pools: tuple[tuple[str, int], ...], executors: int) -> int:
    """The executor count ``pools`` make; an ``--executors`` given on the command line with another count is refused."""
    from jobs.tpcds.pools import executor_count

    count = executor_count(pools)
    given = click.get_current_context().get_parameter_source("executors")
    if given not in (None, click.core.ParameterSource.DEFAULT) and executors != count:
        raise click.BadParameter(f"{executors}, but the pools hold {count} executors: the pools set the count; "
                                 "drop --executors or make them agree", param_hint="'--executors'")
    return count


#: Master URLs of a running cluster, as Spark spells them (``yarn`` alone, the others with an address).
CLUSTER_MASTERS = ("spark://", "spark-tr://", "k8s://", "yarn")


def check_master(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--master``: a running cluster's master URL; Spark itself would only refuse it once the data is generated."""
    if value is None:
        return None
    url = value.strip()
    if url == "yarn" or any(url.startswith(prefix) and len(url) > len(prefix) for prefix in CLUSTER_MASTERS[:3]):
        return url
    raise click.BadParameter(f"{value!r}; allowed: a running cluster's master URL, spark://HOST:PORT, "
                             "spark-tr://HOST:PORT, k8s://https://HOST:PORT or yarn (without --master: a local-cluster)")


#: Executor JVMs a local cluster on this host may have.
MAX_EXECUTORS = 16


def cluster_options(command: Callable[..., None]) -> Callable[..., None]:
    """``--executors``, ``--cores`` and ``--memory`` of a local cluster (every live command has them)."""
    options = (
        click.option("--executors", type=click.IntRange(1, MAX_EXECUTORS), default=3, show_default=True,
                     help="Executor JVMs of the local cluster."),
        click.option("--cores", type=click.IntRange(1, 8), default=1, show_default=True, help="Cores per executor."),
        click.option("--memory", "memory_mb", type=click.IntRange(512, 65536), default=2048, show_default=True,
                     help="Memory per executor (MB)."),
    )
    for option in reversed(options):
        command = option(command)
    return command


def picture_path(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """:func:`writable_path` for a chart: its extension must name a format matplotlib writes."""
    value = writable_path(ctx, param, value)
    if value is not None and (problem := picture_format_problem(value)) is not None:
        raise click.BadParameter(f"{str(value)!r}: {problem}")
    return value


def check_distinct_outputs(**paths: Path | None) -> None:
    """Fail when two outputs (option name -> path) are one file: the later write would replace or mix into the other."""
    seen: dict[Path, str] = {}
    for option, path in paths.items():
        if path is None:
            continue
        if (other := seen.get(path.resolve())) is not None:
            raise click.BadParameter(f"{str(path)!r} is also {other}'s path; give each output its own", param_hint=f"'{option}'")
        seen[path.resolve()] = option


def writable_path(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """An output path whose folder exists or can be made (its nearest existing ancestor is a
    writable folder): checked before data generation and clusters, not at the first write. For
    ``--out-dir`` the path is that folder itself."""
    if value is None:
        return None
    if param.name != "out_dir" and (str(value) in ("", ".") or value.is_dir()):  # Path("") is "."
        raise click.BadParameter(f"{str(value)!r} is a folder; allowed: a file's path")
    try:
        ancestor = value.resolve() if param.name == "out_dir" else value.resolve().parent
        while not ancestor.exists():
            ancestor = ancestor.parent
    except (OSError, ValueError):  # ValueError: a NUL in the path
        raise click.BadParameter(f"{str(value)!r}: nothing can be written in that path") from None
    if not can_write_in(ancestor):
        raise click.BadParameter(f"{str(value)!r}: nothing can be written in {str(ancestor)!r}")
    return value
