"""The options of ``trspark simulate`` / ``whatif``, their checks, and the world and config they build.

Bad input gives one ``Error: ...`` line naming the option and what is allowed, exit code 2.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Collection
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

import click

from trspark.engine.settings import TRConfig
from trspark.keys import ConfigError, key_for_option, parse_value, validate
from trspark.setting_parsers import parse_bandwidth

F = Callable[..., Any]


class OneLineError(click.UsageError):
    """A usage error printed as a single line (no usage block, no traceback)."""

    def show(self, file: Any = None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True)


class FiniteFloatRange(click.FloatRange):
    """click's ``FloatRange`` without NaN and the infinities: it checks its bounds by comparison, and
    every comparison with NaN is false, so NaN passes any range (and inf any open one)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):  # before the bounds, so that the message says what is wrong
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)


def can_write_in(folder: Path) -> bool:
    """Whether files can be made in ``folder``: a probe folder is made and removed at once, since
    ``os.access`` says yes to root where nothing can be made (``/proc``)."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".trspark-probe-", dir=folder))
    except OSError:
        return False
    return True


def fail(message: str) -> NoReturn:
    raise OneLineError(message)


class _OneLineParse:
    """Mixin: click's own parse errors (bad int, unknown option) also become one line."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)  # type: ignore[misc, no-any-return]
        except OneLineError:
            raise
        except click.UsageError as exc:
            raise OneLineError(exc.format_message(), exc.ctx) from None

    def invoke(self, ctx: click.Context) -> Any:
        from simulators.runner import WorkerDied

        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except WorkerDied as exc:  # not bad input: one line, exit 1
            raise click.ClickException(str(exc)) from None


class Command(_OneLineParse, click.Command):
    pass


class Group(_OneLineParse, click.Group):
    command_class = Command


def _bw(name: str) -> Callable[[click.Context, click.Parameter, str | None], float | None]:
    def parse(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
        if value is None:
            return None
        try:
            return parse_bandwidth(value)
        except (ValueError, IndexError):
            fail(f"--{name}={value!r} is not a bandwidth; allowed: bytes/s > 0, e.g. 400m, 1.5g, 100000000")
    return parse


def world_options(command: str) -> Callable[[F], F]:
    """Cluster, lifetime and policy-belief options shared by simulate, sweep and whatif (``command``: their help differs)."""
    def decorate(f: F) -> F:
        return _with_world_options(f, command)
    return decorate


def _with_world_options(f: F, command: str) -> F:
    from_log = command == "whatif"
    vms_default = "the log's executors" if from_log else "100"
    point = ("each --stabilities point (so --pool ondemand=2@stable --pool spot=8 --stabilities 20 scales only the spot pool)"
             if command == "sweep" else
             "--stability/--lambda/--lifetime (so --pool ondemand=2@stable --pool spot=8 --stability 20 scales only the spot pool)")
    options = [
        click.option("--vms", type=int, default=None,
                     help=f"Number of VMs (default {vms_default}, or the sum of the --pool counts)."),
        click.option("--pool", "pools", multiple=True, metavar="NAME=COUNT[@SPEC]",
                     help="A pool of VMs with its own true lifetime, repeatable, e.g. --pool ondemand=2@stable "
                          "--pool spot=8@weibull:shape=0.6,scale=33. An evicted VM is replaced in its pool. A pool "
                          f"without @SPEC takes the lifetime of {point}. tr believes each pool's own lifetime "
                          "(stable pools: never evicted); --believed-lifetime replaces the evictable pools' belief."),
        click.option("--cores", type=int, default=None, help=f"Cores per VM (default {'from the log' if from_log else '4'})."),
        click.option("--local-bw", callback=_bw("local-bw"), default=None, help="Peer bandwidth per VM, e.g. 400m (bytes/s)."),
        click.option("--remote-bw", callback=_bw("remote-bw"), default=None, help="Remote bandwidth per VM, e.g. 100m."),
        click.option("--remote-cap", callback=_bw("remote-cap"), default=None, help="Total remote bandwidth, e.g. 10g."),
        click.option("--backup-latency", type=float, default=0.0, show_default=True,
                     help="Fixed seconds of every backup copy before its bytes move (the engine is told the same)."),
        click.option("--believed-lifetime", default=None, help="Lifetime model the policy believes (default: the true one)."),
        click.option("--knowledge", type=click.Choice(["indeterministic", "deterministic"]), default="indeterministic",
                     help="deterministic: each VM's death time is announced when it registers (tr then uses "
                          "lifetime.knowledge=deterministic; otherwise its --conf lifetime.knowledge holds)."),
        click.option("--notice", type=float, default=None, help="Also announce each death N seconds ahead."),
        click.option("--replace-delay", type=float, default=0.0, show_default=True, help="Seconds until an evicted VM is replaced."),
        click.option("--max-slowdown", type=float, default=20.0, show_default=True, help="A run beyond this x stable time fails."),
        click.option("--stall-seconds", type=float, default=None,
                     help="A run with no successful task for this long fails (default: the stable job time, >= 60 s)."),
        click.option("--max-stage-attempts", type=int, default=None, help="Fail the job after N consecutive stage failures (Spark: 4)."),
        click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE", help="Policy setting, e.g. beta=0.3 (see trspark conf)."),
        click.option("--runs", type=int, default=50, show_default=True, help="Runs per experiment."),
        click.option("--seed", type=click.IntRange(0), default=0, show_default=True, help="Base seed (run i uses SeedSequence(seed).spawn(R)[i])."),
        click.option("--workers", type=int, default=None, help="Worker processes (default: all cores); results do not depend on it."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def workload_options(f: F) -> F:
    options = [
        click.option("--scale", type=float, default=1.0, show_default=True, help="Tasks-per-stage multiplier."),
        click.option("--task-seconds", type=float, default=1.0, show_default=True, help="Mean task compute time (s)."),
        click.option("--write-mb", type=float, default=24.0, show_default=True, help="Mean first-stage map output (MB)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def build_prices(kw: dict[str, Any], pools: Collection[str]) -> Any:
    """The prices of ``--price`` and the store's price options; a price for a pool not in ``pools`` is an error."""
    from simulators.pricing import Prices

    vm: dict[str, float] = {}
    for item in kw["prices"]:
        name, eq, raw = item.partition("=")
        pool = name.strip()
        if pool in vm:
            fail(f"--price {item!r}: pool {pool!r} is priced twice; give one --price per pool")
        try:
            vm[pool] = float(raw)
        except ValueError:
            fail(f"--price {item!r}: expected POOL=USD_PER_VM_HOUR, e.g. spot=0.08")
        if not eq or not pool:
            fail(f"--price {item!r}: expected POOL=USD_PER_VM_HOUR, e.g. spot=0.08")
        if pool not in pools:
            fail(f"--price {item!r}: no pool {pool!r} in this world; pools: {', '.join(sorted(pools))}")
    for option, value in (("--remote-gb-price", kw["remote_gb_price"]), ("--remote-request-price", kw["remote_request_price"])):
        if not (math.isfinite(value) and value >= 0.0):
            fail(f"{option}={value!r} is not valid; allowed: a finite number of USD >= 0")
    try:
        return Prices(vm=vm, remote_gb=kw["remote_gb_price"], remote_1k_requests=kw["remote_request_price"])
    except ValueError as exc:
        fail(f"--price: {exc}")


def lifetime_options(f: F) -> F:
    options = [
        click.option("--stability", type=float, default=None,
                     help="Mean VM lifetime / mean task time (exponential); with --pool, for the pools without @SPEC. "
                          "Default 100 when neither --lambda nor --lifetime is given."),
        click.option("--lambda", "lambda_", type=float, default=None, help="Evictions per second per VM (exponential)."),
        click.option("--lifetime", default=None, help="Any true lifetime model, e.g. weibull:shape=0.8,scale=300."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


# ----------------------------------------------------------------------------------- builders
def _check_spec(option: str, spec: str | None) -> None:
    if spec is None:
        return
    from cost_model.lifetimes import from_spec

    try:
        from_spec(spec)
    except ValueError as exc:
        fail(f"{option}={spec!r}: {exc}")


def positive(option: str, value: float | None, integer: bool = False) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        fail(f"{option}={value!r} is not valid; allowed: {'an integer' if integer else 'a finite number'} > 0")


def picture_format_problem(path: Path) -> str | None:
    """Why ``path`` names no picture format matplotlib writes (by its extension), or None when it names one."""
    from matplotlib.figure import Figure

    formats = Figure().canvas.get_supported_filetypes()
    if path.suffix.lower().lstrip(".") in formats:
        return None
    return f"no picture format named by its extension; allowed: {', '.join('.' + f for f in sorted(formats))}"


#: The smallest Weibull shape a stability may set: below about 0.0058, Γ(1 + 1/shape) (the mean's factor) is past float range.
MIN_WEIBULL_SHAPE = 0.006


def weibull_shape(option: str, value: float | None) -> None:
    """Fail unless ``value`` is None or a Weibull shape of finite mean, at least :data:`MIN_WEIBULL_SHAPE`."""
    positive(option, value)
    if value is not None and value < MIN_WEIBULL_SHAPE:
        fail(f"{option}={value!r} is not valid; allowed: a Weibull shape >= {MIN_WEIBULL_SHAPE} "
             "(below it the mean lifetime is past float range)")


def _pools(kw: dict[str, Any]) -> tuple[Any, ...]:
    from simulators.world import parse_pool

    try:
        pools = tuple(parse_pool(text) for text in kw.get("pools") or ())
    except ValueError as exc:
        fail(f"--pool {exc}")
    total = sum(p.count for p in pools)
    if pools and kw["vms"] is not None and kw["vms"] != total:
        fail(f"--vms={kw['vms']} but the pools hold {total} VMs; give counts that add up, or drop --vms")
    if len({p.name for p in pools}) < len(pools):
        fail(f"--pool names must differ, got {', '.join(p.name for p in pools)}")
    return pools


def build_world(kw: dict[str, Any], *, vms: int = 100, cores: int = 4) -> Any:
    from simulators.world import WorldSpec

    for name in ("vms", "cores", "runs", "max_stage_attempts", "workers", "stall_seconds"):
        positive("--" + name.replace("_", "-"), kw.get(name), integer=name != "stall_seconds")
    cap = kw.get("max_slowdown")
    if cap is not None and not (math.isfinite(cap) and cap > 1.0):  # no run could finish under a cap of 1 or less
        fail(f"--max-slowdown={cap!r} is not valid; allowed: a finite number > 1 (times the stable job time)")
    for name, value in (("replace-delay", kw["replace_delay"]), ("backup-latency", kw.get("backup_latency", 0.0)),
                        ("notice", kw["notice"])):
        if value is not None and not (math.isfinite(value) and value >= 0):
            fail(f"--{name}={value!r} is not valid; allowed: seconds >= 0")
    _check_spec("--believed-lifetime", kw["believed_lifetime"])
    pools = _pools(kw)
    defaults = WorldSpec()
    return WorldSpec(
        vms=sum(p.count for p in pools) if pools else kw["vms"] or vms,
        pools=pools,
        cores=kw["cores"] or cores,
        local_bandwidth=kw["local_bw"] or defaults.local_bandwidth,
        remote_bandwidth=kw["remote_bw"] or defaults.remote_bandwidth,
        remote_cap=kw["remote_cap"] or defaults.remote_cap,
        backup_latency=kw.get("backup_latency", 0.0),
        lifetime=None,
        replace_delay=kw["replace_delay"],
        knowledge=kw["knowledge"],
        notice=kw["notice"],
        max_slowdown=kw["max_slowdown"],
        max_stage_attempts=kw["max_stage_attempts"],
        stall_seconds=kw["stall_seconds"],
    )


#: Settings another option sets (the world tells the policy its own, ``Experiment.policy_config``), and that
#: option: a ``--conf`` value for them would be replaced without a word.
SET_BY_OPTIONS = {
    "mode": "--policy (--policies in a sweep)",
    "lifetime": "--believed-lifetime",
    "local_bandwidth": "--local-bw",
    "remote_bandwidth": "--remote-bw",
    "remote_cap": "--remote-cap",
    "backup_latency": "--backup-latency",
}

#: Settings only the live adapter reads (the engine process, its bridge, the shim): the simulator has none of them.
LIVE_ONLY_SETTINGS = frozenset({
    "remote_path", "python", "engine_timeout", "engine_start_timeout", "engine_queue_capacity", "history_url", "notice_source",
    "notice_url", "notice_interval", "notice_signal", "backup_throttle", "pool",
})
_NO_DYNAMIC_ALLOCATION = "idle executors are released only under Spark's dynamic allocation, which the simulator does not model"
#: Engine settings whose events no simulated world sends: why each would change nothing there.
UNUSED_BY_SIMULATOR = {
    "release_idle": _NO_DYNAMIC_ALLOCATION,
    "release_min_executors": _NO_DYNAMIC_ALLOCATION,
    "rebalance_hazard_factor": "rebalance recommendations come from AWS instance metadata, which no simulated VM sends",
}


def check_notices_expected(config: TRConfig, notice: float | None) -> None:
    """``notice.expected=true`` leaves outputs to notices: in a world without ``--notice`` none comes."""
    if config.notice_expected and notice is None:
        fail("--conf notice.expected=true waits for termination notices, and this world gives none; "
             "add --notice SECONDS")


def build_config(confs: tuple[str, ...]) -> TRConfig:
    """The policy settings of ``--conf KEY=VALUE`` items; a key the simulator would not use is an error."""
    values: dict[str, Any] = {}
    for item in confs:
        name, eq, raw = item.partition("=")
        if not eq:
            fail(f"--conf {item!r}: expected KEY=VALUE, e.g. beta=0.3")
        if name.strip().removeprefix("spark.trspark.").startswith("pool."):
            fail(f"--conf {name.strip()}: the simulator's pools and their lifetimes come from --pool NAME=COUNT@SPEC; "
                 "use that option")
        try:
            key = key_for_option(name.strip().removeprefix("spark.trspark."))
        except ConfigError as exc:
            fail(f"--conf: {exc}")
        # before the value: fixing the value of a key the simulator refuses anyway would be wasted
        if key.field in SET_BY_OPTIONS:
            fail(f"--conf {name.strip()}: the simulator sets this from {SET_BY_OPTIONS[key.field]}; use that option")
        if key.field in LIVE_ONLY_SETTINGS:
            fail(f"--conf {name.strip()}: only a live Spark application reads this; the simulator has no such setting")
        if key.field in UNUSED_BY_SIMULATOR:
            fail(f"--conf {name.strip()}: would change nothing here: {UNUSED_BY_SIMULATOR[key.field]}")
        try:
            values[key.field] = parse_value(key, raw)
        except ConfigError as exc:
            fail(f"--conf: {exc}")
    try:
        return validate(TRConfig(**values))
    except ConfigError as exc:
        fail(f"--conf: {exc}")


def check_lifetime_options(world: Any, stability: float | None, lambda_: float | None, lifetime: str | None) -> None:
    """Fail unless at most one of --stability / --lambda / --lifetime is given, valid, and applies to some pool."""
    given = [n for n, v in (("--stability", stability), ("--lambda", lambda_), ("--lifetime", lifetime)) if v is not None]
    if len(given) > 1:
        fail(f"give only one of --stability, --lambda, --lifetime (got {', '.join(given)})")
    positive("--stability", stability)
    positive("--lambda", lambda_)
    _check_spec("--lifetime", lifetime)
    if given and world.pools and all(p.lifetime is not None for p in world.pools):
        fail(f"every --pool has its own lifetime (@SPEC), so {given[0]} applies to none; drop it or give "
             "a pool without @SPEC")


def true_lifetime(job: Any, world: Any, stability: float | None, lambda_: float | None, lifetime: str | None,
                  default_stability: float | None = 100.0) -> Any:
    """Apply exactly one of --stability / --lambda / --lifetime (default: --stability 100)."""
    from simulators.runner import with_stability

    check_lifetime_options(world, stability, lambda_, lifetime)
    if world.pools and all(p.lifetime is not None for p in world.pools):
        return replace(world, lifetime=None)
    if lifetime is not None:
        return replace(world, lifetime=lifetime)
    if lambda_ is not None:
        return replace(world, lifetime=f"exponential:rate={lambda_:.17g}")
    if stability is None and default_stability is None:
        return replace(world, lifetime=None)
    return with_stability(world, job, stability if stability is not None else float(default_stability or 100.0))
