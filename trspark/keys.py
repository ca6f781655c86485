"""Every ``spark.trspark.*`` setting in one table: name, default, parser, allowed values, doc.

The same names are used by the live plugin (Spark conf, :mod:`trspark.live.config`), the
simulator's ``--conf`` and the CLI; each key fills one field of the engine's settings
(:class:`trspark.engine.settings.TRConfig`). Each key is parsed by one helper; a bad value raises
:class:`ConfigError` naming the key and what is allowed -- before any job starts.

To add a key: append a :class:`Key` to ``KEYS`` and a field of the same (snake_case) name to
:class:`~trspark.engine.settings.TRConfig`. The table in ``docs/configure.md`` is generated from ``KEYS``
(``trspark conf --markdown``); keep them in step.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from trspark.engine.settings import TRConfig

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


def _choice(*options: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in options:
            raise ValueError
        return value

    return parse


def _java_number(raw: str) -> str:
    """``raw`` unless the plugin's JVM would not read it as a number: Python takes ``1_0``, Java does not."""
    if "_" in raw:
        raise ValueError
    return raw


def _number(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False) -> Callable[[str], float]:
    def parse(raw: str) -> float:
        value = float(_java_number(raw))
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError
        if lo is not None and (value < lo or (lo_open and value == lo)):
            raise ValueError
        if hi is not None and value > hi:
            raise ValueError
        return value

    return parse


def _int(lo: int, hi: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        value = int(_java_number(raw))
        if not lo <= value <= hi:
            raise ValueError
        return value

    return parse


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError


def _lifetime(raw: str) -> str:
    from cost_model.lifetimes import from_spec

    from_spec(raw)  # validates; raises ValueError with the reason
    return raw.strip()


def _text(raw: str) -> str:
    return raw.strip()


def _filesystem_url(raw: str) -> str:
    """A URL with a scheme (``file:///mnt/b``, ``s3a://bucket/p``), or empty (= the default); as the plugin checks it."""
    text = raw.strip()
    if text and not urlsplit(text).scheme:
        raise ValueError("a URL with a scheme, e.g. file:///mnt/backups")
    return text


def _pool_name(raw: str) -> str:
    """A pool name (:func:`is_pool_name`)."""
    text = raw.strip()
    if not is_pool_name(text):
        raise ValueError
    return text


def is_pool_name(name: str) -> bool:
    """Letters, digits, ``_``, ``-`` and ``.``, not first: a pool name is part of a key and of a folder name."""
    return bool(name) and set(name) <= POOL_NAME_CHARS and not name.startswith(".")


def _bytes_per_second(raw: str) -> float:
    """Bytes/s >= 0 from ``"100m"``, ``"1.5g"``, ``"400000000"`` (k/m/g = 10^3/10^6/10^9 bytes/s); finite."""
    text = _java_number(raw).strip().lower().removesuffix("b/s").removesuffix("/s")
    scale = {"k": 1e3, "m": 1e6, "g": 1e9}.get(text[-1:], 1.0)
    value = float(text[:-1] if scale != 1.0 else text) * scale
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError
    return value


def parse_bandwidth(raw: str) -> float:
    """Bytes/s >= 1 from ``"100m"``, ``"1.5g"``, ``"400000000"`` (k/m/g = 10^3/10^6/10^9 bytes/s).

    Below a byte a second no network moves data, and a copy's time in the cost model would
    overflow to infinity.
    """
    value = _bytes_per_second(raw)
    if not value >= 1.0:
        raise ValueError
    return value


def _rate_or_zero(raw: str) -> float:
    """Like :func:`parse_bandwidth` but 0 (= unlimited, or not known) is allowed."""
    return _bytes_per_second(raw)


def _open_fraction(raw: str) -> float:
    """A number strictly between 0 and 1."""
    value = float(_java_number(raw))
    if not 0.0 < value < 1.0:
        raise ValueError
    return value


def _http_url(raw: str) -> str:
    """An ``http(s)://host[:port]`` base URL without a trailing slash, or empty (= the default)."""
    from urllib.parse import urlsplit

    text = raw.strip().rstrip("/")
    if text and (urlsplit(text).scheme not in ("http", "https") or not urlsplit(text).hostname):
        raise ValueError
    return text


#: Linux signals (executors run Linux JVMs) an executor can take as a notice, named as the JVM
#: names them. The rest kill or stop the JVM, or the JVM needs them itself; the list does not
#: depend on the driver's OS.
SIGNALS = ("ALRM", "CONT", "HUP", "INT", "IO", "PIPE", "POLL", "PROF", "PWR", "STKFLT", "TERM", "TSTP", "TTIN",
           "TTOU", "URG", "USR1", "USR2", "VTALRM", "WINCH", "XCPU", "XFSZ")


def _signal_name(raw: str) -> str:
    """A POSIX signal name as the JVM spells it (``PWR`` for ``SIGPWR``), or ``none``."""
    text = raw.strip().upper().removeprefix("SIG")
    if text == "NONE":
        return "none"
    if text not in SIGNALS:
        raise ValueError
    return text


NOTICE_SOURCES = ("none", "aws", "gcp", "azure")

MODES = ("tr", "always", "never", "stage", "interval", "efm", "pado")

POOL_KEY_PREFIX, POOL_KEY_SUFFIX = PREFIX + "pool.", ".lifetime"
POOL_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
POOL_NAME_RULE = "letters, digits, _, - and . (not first)"
POOL_LIFETIME_ALLOWED = "stable (never evicted) or a lifetime spec as for spark.trspark.lifetime"
POOL_LIFETIME_DOC = (
    f"Lifetime model of the executors of pool <name> ({POOL_NAME_RULE}); stable = on-demand capacity, "
    "never evicted. An executor's pool: TRSPARK_POOL in its environment, else its cloud's instance metadata "
    "(notice.source: spot or ondemand), else spark.trspark.pool.")

KEYS: tuple[Key, ...] = (
    Key("mode", "mode", "tr", _choice(*MODES), " | ".join(MODES),
        "Checkpointing policy: TR-Spark, or a baseline (never = vanilla Spark, always = every map output to remote)."),
    Key("lifetime", "lifetime", "exponential:mean=3600", _lifetime,
        "stable (never evicted) or a lifetime spec: exponential:mean=S (or rate=1/S), weibull:shape=K,scale=S, "
        "lognormal:median=S,sigma=X, "
        "deterministic:at=S, bathtub[:early_prob=P,early_mean=S,mid_rate=R,late_prob=P,late_scale=S,cap=S], "
        "empirical:durations=S;S;…,observed=1;0;…",
        "Executor lifetime model the engine starts from (seconds)."),
    Key("lifetime.knowledge", "knowledge", "notices", _choice("notices", "indeterministic", "deterministic", "fitted"),
        "notices | indeterministic | deterministic | fitted",
        "What the engine knows of lifetimes: each pool's distribution, and an executor's exact end once a termination "
        "notice or spot block names it (notices); only the distributions, notices ignored in the costs "
        "(indeterministic); as notices with exact-lifetime scheduling, gamma = 1 (deterministic); or distributions "
        "fitted online from each pool's observed evictions (fitted)."),
    Key("backup.targets", "targets", "both", _choice("both", "local", "remote"), "both | local | remote",
        "Where backups may go: peer executors, remote storage, or both."),
    Key("beta", "beta", 0.5, _number(0.0, None, lo_open=True), "a number > 0",
        "Safety belt: switch to always-checkpoint once re-computation exceeds beta x the job's time before re-computation started."),
    Key("gamma", "gamma", 1.0, _number(0.0, None, lo_open=True), "a number > 0",
        "TR-Scheduling: start a task on executor v only if ET / v.E(t,T) < gamma."),
    Key("alpha", "alpha", 1.5, _number(1.0, 1e6), "a number 1..1000000",
        "Next-stage start estimate alpha * sum(N_i * T_i) / #cores; larger on less stable capacity."),
    Key("recursionDepth", "recursion_depth", 8, _int(0, 64), "an integer 0..64",
        "Depth limit of the cascading re-computation estimate Er."),
    Key("gridSize", "grid_size", 64, _int(4, 4096), "an integer 4..4096",
        "Time-grid points used to integrate C_Redo and the backup costs."),
    Key("period", "period", 5.0, _number(0.0, None, lo_open=True), "seconds > 0",
        "Periodic re-planning interval (seconds)."),
    Key("bandwidth.local", "local_bandwidth", 400e6, parse_bandwidth, "bytes/s >= 1, e.g. 400m",
        "Peer-to-peer copy bandwidth per executor (bytes/s)."),
    Key("bandwidth.remote", "remote_bandwidth", 100e6, parse_bandwidth, "bytes/s >= 1, e.g. 100m",
        "Remote-store write bandwidth per executor (bytes/s)."),
    Key("bandwidth.remoteCap", "remote_cap", 10e9, parse_bandwidth, "bytes/s >= 1, e.g. 10g",
        "Total remote-store bandwidth shared by all concurrent backups (bytes/s)."),
    Key("backup.latency", "backup_latency", 0.05, _number(0.0), "seconds >= 0",
        "Fixed time of one backup copy whatever its size (open, commit, register with the driver); "
        "priced into every backup so that tiny outputs are copied only when their loss is likely."),
    Key("backup.costPerGb", "backup_cost_per_gb", 0.0, _number(0.0), "core-seconds >= 0",
        "What one GB copied costs beyond the copy's own time, in core-seconds (the network and disk a copy takes "
        "from the job, or the store's bill at the price of a core-second); added to every backup's cost, so fewer "
        "bytes are copied for a little more expected re-computation. 0 = the paper's rule."),
    Key("stallWeight", "stall_weight", True, _bool, "true | false",
        "TR-Checkpointing: weight a lost output's re-computation by the cores it holds up (its readers' waiting tasks, "
        "up to the cluster's cores; beyond the paper, see trspark/engine/tr/stall.py). false = the paper's task-seconds."),
    Key("scheduling", "scheduling", True, _bool, "true | false", "TR-Scheduling (stage order and the gamma rule) on/off."),
    Key("scheduling.order", "scheduling_order", "reduction", _choice("reduction", "fifo"), "reduction | fifo",
        "With TR-Scheduling: which runnable stage gets a free core first. reduction = the paper's Algorithm 1, largest "
        "data-size reduction rate first; fifo = Spark's own order, which did better on the simulator's synthetic "
        "tpcds DAG at stability <= 20 (docs/results/engine.md)."),
    Key("scheduling.warmFirst", "warm_first", False, _bool, "true | false",
        "With TR-Scheduling: an executor that has not finished a task yet (a fresh JVM, several times slower at first) "
        "takes a task only when no other executor has a free slot for it (off by default: it leaves a fresh executor idle while tasks wait)."),
    Key("safetyBelt", "safety_belt", True, _bool, "true | false", "Safety belt on/off."),
    Key("duplication", "duplication", True, _bool, "true | false", "Duplicate running tasks on idle executors (paper §5)."),
    Key("remote.path", "remote_path", "", _filesystem_url, "a Hadoop FileSystem URL (file://, hdfs://, s3a://, abfs://)",
        "Where remote backups are written; empty = file://<spark.local.dir, else java.io.tmpdir>/trspark-backups, "
        "a folder on each executor's own host: shared only by executors on one host (local-cluster)."),
    Key("python", "python", "", _text, "path to a Python interpreter",
        "Interpreter that runs the engine (python -m trspark.live); empty = the PySpark driver's."),
    Key("engine.timeout", "engine_timeout", 2.0, _number(0.0, None, lo_open=True), "seconds > 0",
        "Longest wait for the engine's answer to an event before the shim falls back to always-checkpoint, "
        "checked every spark.trspark.period (start-up has its own limit, engine.startTimeout)."),
    Key("engine.startTimeout", "engine_start_timeout", 120.0, _number(0.0, None, lo_open=True), "seconds > 0",
        "Longest wait for the engine process to start, connect and say Hello (it imports numpy, and scipy when it fits "
        "the lifetime history: slow on a loaded machine) before the shim falls back to always-checkpoint for the application."),
    Key("history.url", "history_url", "", _text, "an fsspec URL (local path, file://, abfs://...)",
        "Lifetime history store: the engine appends observed executor lifetimes here and fits the next application's "
        "models to them (every mode but never and always, which run no engine)."),
    Key("pool", "pool", "default", _pool_name, f"a pool name: {POOL_NAME_RULE}",
        "Pool of the executors that name none themselves (TRSPARK_POOL, instance metadata); the lifetime history is kept per pool."),
    Key("backup.throttle", "backup_throttle", 0.0, _rate_or_zero, "bytes/s >= 0 (0 = unlimited), e.g. 50m",
        "Cap on the speed of each backup copy (bytes/s), to a peer or to the remote store; stands for a slow "
        "blob store or network in tests and benchmarks."),
    Key("notice.source", "notice_source", "none", _choice(*NOTICE_SOURCES), " | ".join(NOTICE_SOURCES),
        "Cloud metadata service each executor polls for termination notices (AWS spot instance-action, "
        "GCP preempted, Azure Scheduled Events); none = only the signal."),
    Key("notice.url", "notice_url", "", _http_url, "an http:// base URL, e.g. http://169.254.169.254 (empty = the cloud's default)",
        "Base URL of that metadata service; empty = http://169.254.169.254 (AWS, Azure) or http://metadata.google.internal (GCP). "
        "{executorId} in it becomes the executor's id (tests: executors on one host standing for different VMs)."),
    Key("notice.interval", "notice_interval", 1.0, _number(0.0, None, lo_open=True), "seconds > 0",
        "Seconds between two polls of the metadata service (a poll is one link-local HTTP request)."),
    Key("notice.window", "notice_window", 30.0, _number(0.0, None, lo_open=True), "seconds > 0",
        "Seconds between a notice and the end when the source gives no time (GCP, the signal, an Azure event without NotBefore)."),
    Key("notice.margin", "notice_margin", 3.0, _number(0.0), "seconds >= 0",
        "Backups of an executor with a termination notice start this long (plus one period and their copy time) "
        "before its deadline, not at the notice: outputs consumed meanwhile are not copied. It covers a notice seen "
        "late (up to notice.interval) and the time from a decision to a finished copy (0.8 s at most, measured "
        "live). A value as long as the notice window copies at once."),
    Key("notice.expected", "notice_expected", False, _bool, "true | false",
        "Every eviction comes with a termination notice at least notice.window seconds ahead (needs "
        "lifetime.knowledge other than indeterministic): an output is not backed up before its executor's notice "
        "while everything that executor holds could still be copied within the window, less notice.margin."),
    Key("notice.release", "notice_release", True, _bool, "true | false",
        "Let an executor with a termination notice go once no task fits before its deadline, none runs there "
        "and it holds nothing still needed that is not saved elsewhere, so its replacement can start before the deadline. "
        "Never the last executors: while every executor has a notice, none is let go."),
    Key("notice.signal", "notice_signal", "PWR", _signal_name, f"none or a signal name: {', '.join(SIGNALS)}",
        "POSIX signal an executor takes as a termination notice (chained with Spark's own decommission handler); none = ignore signals."),
    Key("rebalance.hazardFactor", "rebalance_hazard_factor", 10.0, _number(0.0, None, lo_open=True), "a number > 0",
        "An executor with a rebalance recommendation (AWS) has its eviction hazard multiplied by this from when the "
        "recommendation was posted: its outputs are backed up sooner and long or lineage-critical tasks avoid it. "
        "1 = ignore recommendations."),
    Key("sizing.lossFraction", "sizing_fraction", 0.05, _open_fraction, "a number in (0, 1)",
        "Task sizing: the longest task whose expected loss to its executor's eviction stays within this fraction "
        "of its work sets the suggested partition size (docs/task-sizing.md); stages with longer tasks get advice."),
    Key("sizing.rate", "sizing_rate", 0.0, _rate_or_zero, "bytes/s >= 0 (0 = not known), e.g. 50m",
        "Task sizing: bytes of input one task processes per second. With it, trspark.configure sets "
        "spark.sql.adaptive.advisoryPartitionSizeInBytes (and a larger initial partition number) unless you set "
        "them; 0 = the engine advises from the rate it measures."),
    Key("release.idle", "release_idle", 0.0, _number(0.0), "seconds >= 0 (0 = off)",
        "With dynamic allocation: release an executor idle this long once every output it holds that may still be read "
        "is saved elsewhere, instead of keeping it for its shuffle data. The plugin sets it to "
        "spark.dynamicAllocation.executorIdleTimeout, unless you set it, when dynamic allocation and shuffle tracking "
        "are on and the external shuffle service is off."),
    Key("release.minExecutors", "release_min_executors", 0, _int(0, 1 << 20), "an integer >= 0",
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
        return name, _lifetime(raw)
    except (ValueError, TypeError) as exc:
        detail = f" ({exc})" if str(exc) else ""
        raise ConfigError(f"{full}={raw!r} is not valid{detail}; allowed: {POOL_LIFETIME_ALLOWED}") from exc


def pool_settings(pool_lifetimes: Any) -> dict[str, str]:
    """Spark settings of ``{pool: spec}`` or ``((pool, spec), ...)``; anything else is a :class:`ConfigError`."""
    try:
        if isinstance(pool_lifetimes, str):
            raise TypeError
        pairs = pool_lifetimes.items() if isinstance(pool_lifetimes, Mapping) else pool_lifetimes
        return {f"{POOL_KEY_PREFIX}{name}{POOL_KEY_SUFFIX}": str(spec) for name, spec in pairs}
    except (TypeError, ValueError):
        raise ConfigError(f"pool_lifetimes={pool_lifetimes!r} is not valid; allowed: a mapping {{pool: lifetime spec}} "
                          "or (pool, spec) pairs, e.g. {'ondemand': 'stable', 'spot': 'exponential:mean=600'}") from None


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


def parse_value(key: Key, raw: str) -> Any:
    try:
        return key.parse(raw)
    except (ValueError, TypeError) as exc:
        detail = f" ({exc})" if str(exc) else ""
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
    raise ConfigError(f"unknown trspark option {option!r}; known: {', '.join(k.name for k in KEYS)} "
                      "(in Python, dots and capitals as underscores: lifetime.knowledge = lifetime_knowledge)")


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
