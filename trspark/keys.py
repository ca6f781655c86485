"""Every ``spark.trspark.*`` setting in one table: name, default, parser, allowed values, doc.

The same names are used by the live plugin (Spark conf, :mod:`trspark.live.config`), the
simulator's ``--conf`` and the CLI; each key fills one field of the engine's settings
(:class:`trspark.engine.settings.TRConfig`). Each key is parsed by one helper
(:mod:`trspark.setting_parsers`); a bad value raises
:class:`ConfigError` naming the key and what is allowed -- before any job starts.

To add a key: append a :class:`Key` to ``KEYS`` and a field of the same (snake_case) name to
:class:`~trspark.engine.settings.TRConfig`. The table in ``docs/configure.md`` is generated from ``KEYS``
(``trspark conf --markdown``); keep them in step.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from trspark.engine.settings import TRConfig
from trspark.setting_parsers import (
    POOL_NAME_RULE,
    SECONDS_EXAMPLE,
    SIGNALS,
    boolean,
    choice,
    filesystem_url,
    http_url,
    integer,
    is_pool_name,
    lifetime_spec,
    number,
    open_fraction,
    parse_bandwidth,
    pool_name,
    rate_or_zero,
    seconds,
    signal_name,
    stripped,
)

PREFIX = "spark.trspark."


class ConfigError(ValueError):
    """A ``spark.trspark.*`` value that cannot be used."""


@dataclass(frozen=True)
class Key:
    name: str
    """Suffix after ``spark.trspark.`` (camelCase like Spark's own keys)."""
    field: str
    """Field of :class:`TRConfig`."""
    default: Any
    parse: Callable[[str], Any]
    allowed: str
    doc: str

    @property
    def full(self) -> str:
        return PREFIX + self.name


NOTICE_SOURCES = ("none", "aws", "gcp", "azure")

MODES = ("tr", "always", "never", "stage", "interval", "efm", "pado")

POOL_KEY_PREFIX, POOL_KEY_SUFFIX = PREFIX + "pool.", ".lifetime"
POOL_LIFETIME_ALLOWED = "stable (never evicted) or a lifetime spec as for spark.trspark.lifetime"
POOL_LIFETIME_DOC = (
    f"Lifetime model of the executors of pool <name> ({POOL_NAME_RULE}); stable = on-demand capacity, "
    "never evicted. An executor's pool: TRSPARK_POOL in its environment, else its cloud's instance metadata "
    "(notice.source: spot or ondemand), else spark.trspark.pool.")

KEYS: tuple[Key, ...] = (
    Key("mode", "mode", "tr", choice(*MODES), " | ".join(MODES),
        "Checkpointing policy: TR-Spark, or a baseline (never = vanilla Spark, always = every map output to remote)."),
    Key("lifetime", "lifetime", "exponential:mean=3600", lifetime_spec,
        "stable (never evicted) or a lifetime spec: exponential:mean=S (or rate=1/S), weibull:shape=K,scale=S, "
        "lognormal:median=S,sigma=X, "
        "deterministic:at=S, bathtub[:early_prob=P,early_mean=S,mid_rate=R,late_prob=P,late_scale=S,cap=S], "
        "empirical:durations=S;S;…,observed=1;0;…",
        "Executor lifetime model the engine starts from (seconds)."),
    Key("lifetime.knowledge", "knowledge", "notices", choice("notices", "indeterministic", "deterministic", "fitted"),
        "notices | indeterministic | deterministic | fitted",
        "What the engine knows of lifetimes: each pool's distribution, and an executor's exact end once a termination "
        "notice or spot block names it (notices); only the distributions, notices ignored in the costs "
        "(indeterministic); as notices with exact-lifetime scheduling, gamma = 1 (deterministic); or distributions "
        "fitted online from each pool's observed evictions (fitted)."),
    Key("backup.targets", "targets", "both", choice("both", "local", "remote"), "both | local | remote",
        "Where backups may go: peer executors, remote storage, or both."),
    Key("beta", "beta", 0.5, number(0.0, None, lo_open=True), "a number > 0",
        "Safety belt: switch to always-checkpoint once re-computation exceeds beta x the job's time before re-computation started."),
    Key("gamma", "gamma", 1.0, number(0.0, None, lo_open=True), "a number > 0",
        "TR-Scheduling: start a task on executor v only if ET / v.E(t,T) < gamma."),
    Key("alpha", "alpha", 1.5, number(1.0, 1e6), "a number 1..1000000",
        "Next-stage start estimate alpha * sum(N_i * T_i) / #cores; larger on less stable capacity."),
    Key("recursionDepth", "recursion_depth", 8, integer(0, 64), "an integer 0..64",
        "Depth limit of the cascading re-computation estimate Er."),
    Key("gridSize", "grid_size", 64, integer(4, 4096), "an integer 4..4096",
        "Time-grid points used to integrate C_Redo and the backup costs."),
    Key("period", "period", 5.0, seconds(0.0, lo_open=True), f"seconds > 0: {SECONDS_EXAMPLE}",
        "Periodic re-planning interval (seconds)."),
    Key("bandwidth.local", "local_bandwidth", 400e6, parse_bandwidth, "bytes/s >= 1, e.g. 400m",
        "Peer-to-peer copy bandwidth per executor (bytes/s)."),
    Key("bandwidth.remote", "remote_bandwidth", 100e6, parse_bandwidth, "bytes/s >= 1, e.g. 100m",
        "Remote-store write bandwidth per executor (bytes/s)."),
    Key("bandwidth.remoteCap", "remote_cap", 10e9, parse_bandwidth, "bytes/s >= 1, e.g. 10g",
        "Total remote-store bandwidth shared by all concurrent backups (bytes/s)."),
    Key("backup.latency", "backup_latency", 0.05, seconds(0.0), f"seconds >= 0: {SECONDS_EXAMPLE}",
        "Fixed time of one backup copy whatever its size (open, commit, register with the driver); "
        "priced into every backup so that tiny outputs are copied only when their loss is likely."),
    Key("backup.costPerGb", "backup_cost_per_gb", 0.0, number(0.0), "core-seconds >= 0",
        "What one GB copied costs beyond the copy's own time, in core-seconds (the network and disk a copy takes "
        "from the job, or the store's bill at the price of a core-second); added to every backup's cost, so fewer "
        "bytes are copied for a little more expected re-computation. 0 = the paper's rule."),
    Key("stallWeight", "stall_weight", True, boolean, "true | false",
        "TR-Checkpointing: weight a lost output's re-computation by the cores it holds up (its readers' waiting tasks, "
        "up to the cluster's cores; beyond the paper, see trspark/engine/tr/stall.py). false = the paper's task-seconds."),
    Key("scheduling", "scheduling", True, boolean, "true | false", "TR-Scheduling (stage order and the gamma rule) on/off."),
    Key("scheduling.order", "scheduling_order", "reduction", choice("reduction", "fifo"), "reduction | fifo",
        "With TR-Scheduling: which runnable stage gets a free core first. reduction = the paper's Algorithm 1, largest "
        "data-size reduction rate first; fifo = Spark's own order, which did better on the simulator's synthetic "
        "tpcds DAG at stability <= 20 (docs/results/engine.md)."),
    Key("scheduling.warmFirst", "warm_first", False, boolean, "true | false",
        "With TR-Scheduling: an executor that has not finished a task yet (a fresh JVM, several times slower at first) "
        "takes a task only when no other executor has a free slot for it (off by default: it leaves a fresh executor idle while tasks wait)."),
    Key("safetyBelt", "safety_belt", True, boolean, "true | false", "Safety belt on/off."),
    Key("duplication", "duplication", True, boolean, "true | false", "Duplicate running tasks on idle executors (paper §5)."),
    Key("remote.path", "remote_path", "", filesystem_url, "a Hadoop FileSystem URL (file://, hdfs://, s3a://, abfs://)",
        "Where remote backups are written; empty = file://<spark.local.dir (made absolute), else java.io.tmpdir>/trspark-backups, "
        "a folder on each executor's own host: shared only by executors on one host (local-cluster)."),
    Key("python", "python", "", stripped, "path to a Python interpreter",
        "Interpreter that runs the engine (python -m trspark.live); empty = the PySpark driver's."),
    Key("engine.timeout", "engine_timeout", 2.0, seconds(0.0, lo_open=True), f"seconds > 0: {SECONDS_EXAMPLE}",
        "Longest wait for the engine's answer to an event before the shim falls back to always-checkpoint, "
        "checked every spark.trspark.period (start-up has its own limit, engine.startTimeout)."),
    Key("engine.startTimeout", "engine_start_timeout", 120.0, seconds(0.0, lo_open=True), f"seconds > 0: {SECONDS_EXAMPLE}",
        "Longest wait for the engine process to start, connect and say Hello (it imports numpy, and scipy when it fits "
        "the lifetime history: slow on a loaded machine) before the shim falls back to always-checkpoint for the application."),
    Key("engine.queueCapacity", "engine_queue_capacity", 10000, integer(1, 10_000_000), "an integer 1..10000000 (events)",
        "Events the shim holds for the engine (while it starts, or when it falls behind) before it falls back to "
        "always-checkpoint for the application; raise it when many tasks end in the engine's first seconds."),
    Key("history.url", "history_url", "", stripped, "an fsspec URL (local path, file://, abfs://...)",
        "Lifetime history store: the engine appends observed executor lifetimes here and fits the next application's "
        "models to them (every mode but never and always, which run no engine)."),
    Key("pool", "pool", "default", pool_name, f"a pool name: {POOL_NAME_RULE}",
        "Pool of the executors that name none themselves (TRSPARK_POOL, instance metadata); the lifetime history is kept per pool."),
    Key("backup.throttle", "backup_throttle", 0.0, rate_or_zero, "bytes/s >= 0 (0 = unlimited), e.g. 50m",
        "Cap on the speed of each backup copy (bytes/s), to a peer or to the remote store; stands for a slow "
        "blob store or network in tests and benchmarks."),
    Key("notice.source", "notice_source", "none", choice(*NOTICE_SOURCES), " | ".join(NOTICE_SOURCES),
        "Cloud metadata service each executor polls for termination notices (AWS spot instance-action, "
        "GCP preempted, Azure Scheduled Events); none = only the signal."),
    Key("notice.url", "notice_url", "", http_url, "an http:// or https:// base URL, e.g. http://169.254.169.254 (empty = the cloud's default)",
        "Base URL of that metadata service; empty = http://169.254.169.254 (AWS, Azure) or http://metadata.google.internal (GCP). "
        "{executorId} in it becomes the executor's id (tests: executors on one host standing for different VMs)."),
    Key("notice.interval", "notice_interval", 1.0, seconds(0.0, lo_open=True), f"seconds > 0: {SECONDS_EXAMPLE}",
        "Seconds between two polls of the metadata service (a poll is one link-local HTTP request)."),
    Key("notice.window", "notice_window", 30.0, seconds(0.0, lo_open=True), f"seconds > 0: {SECONDS_EXAMPLE}",
        "Seconds between a notice and the end when the source gives no time (GCP, the signal, an Azure event without NotBefore)."),
    Key("notice.margin", "notice_margin", 3.0, seconds(0.0), f"seconds >= 0: {SECONDS_EXAMPLE}",
        "Backups of an executor with a termination notice start this long (plus one period and their copy time) "
        "before its deadline, not at the notice: outputs consumed meanwhile are not copied. It covers a notice seen "
        "late (up to notice.interval) and the time from a decision to a finished copy (0.8 s at most, measured "
        "live). A value as long as the notice window copies at once."),
    Key("notice.expected", "notice_expected", False, boolean, "true | false",
        "Every eviction comes with a termination notice at least notice.window seconds ahead (needs "
        "lifetime.knowledge other than indeterministic): an output is not backed up before its executor's notice "
        "while everything that executor holds could still be copied within the window, less notice.margin."),
    Key("notice.release", "notice_release", True, boolean, "true | false",
        "Let an executor with a termination notice go once no task fits before its deadline, none runs there "
        "and it holds nothing still needed that is not saved elsewhere, so its replacement can start before the deadline. "
        "Never the last executors: while every executor has a notice, none is let go."),
    Key("notice.signal", "notice_signal", "PWR", signal_name, f"none or a signal name: {', '.join(SIGNALS)}",
        "POSIX signal an executor takes as a termination notice (chained with Spark's own decommission handler); none = ignore signals."),
    Key("rebalance.hazardFactor", "rebalance_hazard_factor", 10.0, number(0.0, None, lo_open=True), "a number > 0",
        "An executor with a rebalance recommendation (AWS) has its eviction hazard multiplied by this from when the "
        "recommendation was posted: its outputs are backed up sooner and long or lineage-critical tasks avoid it. "
        "1 = ignore recommendations."),
    Key("sizing.lossFraction", "sizing_fraction", 0.05, open_fraction, "a number in (0, 1)",
        "Task sizing: the longest task whose expected loss to its executor's eviction stays within this fraction "
        "of its work sets the suggested partition size (docs/task-sizing.md); stages with longer tasks get advice."),
    Key("sizing.rate", "sizing_rate", 0.0, rate_or_zero, "bytes/s >= 0 (0 = not known), e.g. 50m",
        "Task sizing: bytes of input one task processes per second. With it, trspark.configure sets "
        "spark.sql.adaptive.advisoryPartitionSizeInBytes (and a larger initial partition number) unless you set "
        "them; 0 = the engine advises from the rate it measures."),
    Key("release.idle", "release_idle", 0.0, seconds(0.0), f"seconds >= 0 (0 = off): {SECONDS_EXAMPLE}",
        "With dynamic allocation: release an executor idle this long once every output it holds that may still be read "
        "is saved elsewhere, instead of keeping it for its shuffle data. The plugin sets it to "
        "spark.dynamicAllocation.executorIdleTimeout, unless you set it, when dynamic allocation and shuffle tracking "
        "are on and the external shuffle service is off."),
    Key("release.minExecutors", "release_min_executors", 0, integer(0, 1 << 20), "an integer >= 0",
        "Executors release.idle never goes below; the plugin sets it to spark.dynamicAllocation.minExecutors, "
        "unless you set it, when it sets release.idle."),
)

BY_FULL = {k.full: k for k in KEYS}
"""Each key by its full Spark name (``spark.trspark.beta``)."""


def is_pool_key(full: str) -> bool:
    """True for a per-pool setting ``spark.trspark.pool.<anything>`` (``spark.trspark.pool`` itself is not)."""
    return full.startswith(POOL_KEY_PREFIX)


def parse_pool_lifetime(full: str, raw: str) -> tuple[str, str]:
    """``(pool, spec)`` of ``spark.trspark.pool.<name>.lifetime=<spec>``.

    Raises
    ------
    ConfigError
        Not a ``.lifetime`` key, a pool name :func:`is_pool_name` refuses, or a spec that is
        neither ``stable`` nor a lifetime spec (names the key and what is allowed).
    """
    rest = full.removeprefix(POOL_KEY_PREFIX)  # the suffix must follow a name: "spark.trspark.pool.lifetime" has none
    name = rest.removesuffix(POOL_KEY_SUFFIX)
    if not rest.endswith(POOL_KEY_SUFFIX) or not is_pool_name(name):
        raise ConfigError(f"{full!r} is not a valid pool setting; allowed: {POOL_KEY_PREFIX}<name>{POOL_KEY_SUFFIX} "
                          f"with <name> of {POOL_NAME_RULE}")
    try:
        return name, lifetime_spec(raw)
    except (ValueError, TypeError) as exc:
        detail = f" ({exc})" if str(exc) else ""
        raise ConfigError(f"{full}={raw!r} is not valid{detail}; allowed: {POOL_LIFETIME_ALLOWED}") from exc


def pool_settings(pool_lifetimes: Any) -> dict[str, str]:
    """Spark settings of ``{pool: spec}`` or ``((pool, spec), ...)``; anything else is a :class:`ConfigError`."""
    try:
        if isinstance(pool_lifetimes, str):
            raise TypeError
        pairs = list(pool_lifetimes.items() if isinstance(pool_lifetimes, Mapping) else pool_lifetimes)
        settings = {f"{POOL_KEY_PREFIX}{name}{POOL_KEY_SUFFIX}": str(spec) for name, spec in pairs}
    except (TypeError, ValueError):
        raise ConfigError(f"pool_lifetimes={pool_lifetimes!r} is not valid; allowed: a mapping {{pool: lifetime spec}} "
                          "or (pool, spec) pairs, e.g. {'ondemand': 'stable', 'spot': 'exponential:mean=600'}") from None
    if len(settings) < len(pairs):  # the last would silently win
        names = [name for name, _spec in pairs]
        twice = next(name for name in names if names.count(name) > 1)
        raise ConfigError(f"pool_lifetimes names pool {twice!r} twice; allowed: one lifetime per pool")
    return settings


def spark_text(value: Any) -> str:
    """A setting's value spelled as Spark conf spells it (``true``, not ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def validate(config: TRConfig) -> TRConfig:
    """``config`` itself when every field holds a value its key allows, so that
    ``TRConfig(beta=-1)`` fails like ``spark.trspark.beta=-1``.

    Raises
    ------
    ConfigError
        A field its key does not allow, or settings that contradict each other (the message
        names the key and what is allowed).
    """
    for key in KEYS:
        parse_value(key, spark_text(getattr(config, key.field)))
    for full, spec in pool_settings(config.pool_lifetimes).items():
        parse_pool_lifetime(full, spec)
    if config.notice_expected and config.knowledge == "indeterministic":
        raise ConfigError(
            f"{PREFIX}notice.expected=true needs {PREFIX}lifetime.knowledge notices, deterministic or fitted "
            "(with indeterministic the engine ignores notices); got indeterministic")
    return config


#: Python's words for text that is not a number: the key's "allowed" says it better.
_NOT_A_NUMBER = ("could not convert string to float", "invalid literal for int()")


def parse_value(key: Key, raw: str) -> Any:
    try:
        return key.parse(raw)
    except (ValueError, TypeError) as exc:
        detail = f" ({exc})" if str(exc) and not str(exc).startswith(_NOT_A_NUMBER) else ""
        raise ConfigError(f"{key.full}={raw!r} is not valid{detail}; allowed: {key.allowed}") from exc


def key_for_option(option: str) -> Key:
    """Look up a key by its Spark suffix (``sizing.lossFraction``), that suffix in snake_case
    (``sizing_loss_fraction``, a Python keyword argument) or its TRConfig field (``sizing_fraction``)."""
    for key in KEYS:
        if option in (key.field, key.name, _snake_case(key.name)):
            return key
    if option.startswith("pool.") or option.startswith("pool_") and option != "pool":
        raise ConfigError(f"unknown trspark option {option!r}: a pool's lifetime is set with "
                          "pool_lifetimes=[(NAME, SPEC), ...] (spark.trspark.pool.NAME.lifetime)")
    raise ConfigError(f"unknown trspark option {option!r}{did_you_mean(option, _option_spellings())}; "
                      f"known: {', '.join(k.name for k in KEYS)} "
                      "(in Python, dots and capitals as underscores: lifetime.knowledge = lifetime_knowledge)")


def did_you_mean(given: str, names: list[str], prefix: str = "") -> str:
    """`` (did you mean 'x'?)`` for the name of ``names`` closest to ``given`` (``prefix`` put
    before it, not compared: a long common prefix would make every name look close), or empty."""
    close = difflib.get_close_matches(given.removeprefix(prefix), names, n=1, cutoff=0.75)
    return f" (did you mean {prefix + close[0]!r}?)" if close else ""


def _option_spellings() -> list[str]:
    return [spelling for key in KEYS for spelling in dict.fromkeys((key.name, _snake_case(key.name)))]


def _snake_case(name: str) -> str:
    """``sizing.lossFraction`` -> ``sizing_loss_fraction``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).replace(".", "_").lower()


def markdown_table() -> str:
    rows = ["| key | default | allowed | meaning |", "|---|---|---|---|"]
    for key in KEYS:
        cells = (f"`{key.full}`", f"`{spark_text(key.default)}`", key.allowed, key.doc)
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        if key.name == "pool":
            cells = (f"`{POOL_KEY_PREFIX}<name>{POOL_KEY_SUFFIX}`", "(unset)", POOL_LIFETIME_ALLOWED, POOL_LIFETIME_DOC)
            rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)
