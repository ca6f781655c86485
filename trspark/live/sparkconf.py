"""Spark settings that switch trspark on, for PySpark users.

>>> from pyspark.sql import SparkSession
>>> import trspark
>>> spark = trspark.configure(SparkSession.builder.master("local-cluster[3,1,2048]"), mode="tr",
...                           lifetime="exponential:mean=600").getOrCreate()      # doctest: +SKIP

:func:`spark_conf` returns the settings as a dict (for ``spark-submit --conf`` lines, or
``SparkConf.setAll``); :func:`configure` applies them to a ``SparkSession.Builder``, a
``SparkConf`` or a plain dict, *appending* the jar and the plugin to any ``spark.jars`` /
``spark.plugins`` already there. Options are ``spark.trspark.*`` settings spelled as
:class:`trspark.engine.settings.TRConfig` fields (``recursion_depth=4``) or as the Spark key
suffix (``recursionDepth=4``); every value is validated here (:func:`trspark.live.config.option_settings`),
so a bad one fails before Spark starts with a :class:`trspark.keys.ConfigError` naming the key
and the allowed values.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any, TypeVar

from trspark.keys import BY_FULL, PREFIX, ConfigError, spark_text
from trspark.live.config import check_settings, option_settings, unchecked_option_settings
from trspark.live.sizing import sql_settings

PLUGIN_CLASS = "org.apache.spark.trspark.TRSparkPlugin"
JARS_KEY = "spark.jars"
PLUGINS_KEY = "spark.plugins"
PYTHON_KEY = PREFIX + "python"

# Spark settings that hold comma-separated lists: ours is appended, never replaces the user's.
_LIST_KEYS = (JARS_KEY, PLUGINS_KEY)

T = TypeVar("T")


def plugin_jar() -> str:
    """Path of the plugin jar (built on first use by :mod:`trspark.live.shim`)."""
    try:
        from trspark.live.shim import jar_path
    except ImportError as exc:
        raise RuntimeError(
            f"the trspark plugin jar is not available ({exc}); reinstall trspark or run `trspark build-shim`"
        ) from exc
    return str(jar_path())


def spark_conf(**options: Any) -> dict[str, str]:
    """Every Spark setting that enables trspark, with ``options`` as ``spark.trspark.*`` values.

    Returns ``spark.jars`` (the plugin jar), ``spark.plugins`` (:data:`PLUGIN_CLASS`),
    ``spark.trspark.python`` (this interpreter, so the engine runs with the trspark the user
    imported, unless ``python=`` is given) and the validated options.
    """
    given = option_settings(**options)
    _check_python(given)
    return _with_plugin(given, default_python=True)


def _check_python(given: dict[str, str]) -> None:
    """Refuse a ``python=`` that names no executable file here and no command on ``PATH``.

    The plugin runs it (a path, or a name the JVM looks up on ``PATH``) only once Spark has started;
    a bad one then shows only in the driver's log, and the application runs without its engine
    (always-checkpoint). Checked here, the mistake is one exception at the call that made it.
    """
    python = given.get(PYTHON_KEY)
    if python and shutil.which(python) is None:
        raise ConfigError(f"python={python!r} ({PYTHON_KEY}) is neither an executable file nor a command on "
                          f"PATH; give the interpreter that runs the engine, e.g. python={sys.executable!r}")


def _with_plugin(given: dict[str, str], *, default_python: bool) -> dict[str, str]:
    """The jar, the plugin and, unless ``given`` names one and ``default_python``, this interpreter; then ``given``."""
    settings = {JARS_KEY: plugin_jar(), PLUGINS_KEY: PLUGIN_CLASS}
    if default_python and PYTHON_KEY not in given:
        settings[PYTHON_KEY] = sys.executable
    return {**settings, **given}


def merge_list(existing: str | None, item: str) -> str:
    """Append ``item`` to a comma-separated Spark list unless it is already there."""
    items = [part.strip() for part in (existing or "").split(",") if part.strip()]
    return ",".join(items if item in items else [*items, item])


def configure(target: T, **options: Any) -> T:
    """Apply :func:`spark_conf` to ``target`` and return it.

    ``target`` is a ``pyspark.sql.SparkSession.Builder``, a ``pyspark.SparkConf`` or a mutable
    mapping of settings. ``spark.jars`` and ``spark.plugins`` are extended, not replaced, and a
    ``spark.trspark.python`` already there is kept unless ``python=`` is given. With
    ``sizing_rate`` (an option or a setting ``target`` holds), the lifetime rule's shuffle
    partition size is added through AQE (:func:`trspark.live.sizing.sql_settings`) where
    ``target`` does not set it already, from every ``spark.trspark.*`` setting ``target`` then holds.

    For a builder, a ``python=`` interpreter must import the engine, and no SparkContext may be
    running with settings that ``getOrCreate()`` would keep instead (``RuntimeError``).
    """
    get, put, items = _accessors(target)
    given = unchecked_option_settings(**options)
    _check_python(given)
    builder = _is_builder(target)
    if builder:  # this process starts the driver, so the engine's interpreter runs here
        _check_engine_imports(given.get(PYTHON_KEY))
    settings = _with_plugin(given, default_python=not get(PYTHON_KEY))
    # The target's own settings with the options over them are checked once, as a whole, before any is
    # written, so a call that raises leaves the target as it was. A dict may hold Python values
    # (True, 2, None): they are checked spelled as Spark will read them.
    ours = {name: spark_text(value) for name, value in items() if name.startswith(PREFIX)}
    ours.update((name, value) for name, value in settings.items() if name.startswith(PREFIX))
    config = check_settings(ours)
    if builder:
        _check_no_running_context_ignores(ours)
    for name, value in settings.items():
        put(name, merge_list(get(name), value) if name in _LIST_KEYS else value)
    for name, value in sql_settings(config, lambda key: _as_spark_text(get(key))).items():
        put(name, value)
    return target


def _is_builder(target: Any) -> bool:
    return isinstance(getattr(target, "_options", None), dict) and hasattr(target, "config")


def _check_engine_imports(python: str | None) -> None:
    """Refuse a ``python=`` other than this interpreter that cannot import the engine.

    Without it the plugin's own check only warns, and the application runs without its engine
    (always-checkpoint). A check that gives no answer in 60 s is left to the plugin.
    """
    if not python:
        return
    found = shutil.which(python)
    if found is None or os.path.realpath(found) == os.path.realpath(sys.executable):
        return
    try:
        run = subprocess.run([found, "-c", "import trspark.live.engine_process"], capture_output=True, text=True,
                             timeout=60, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or [f"exit code {run.returncode}"])[-1]
        raise ConfigError(f"python={python!r} ({PYTHON_KEY}) cannot run the engine ({last}); give an interpreter "
                          f"with trspark and its dependencies installed, e.g. python={sys.executable!r}")


def _check_no_running_context_ignores(settings: dict[str, str]) -> None:
    """Refuse to configure a builder whose ``getOrCreate()`` would return a running SparkContext
    that lacks the plugin or holds other ``spark.trspark.*`` values: Spark would ignore them all."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return
    sc = SparkContext._active_spark_context
    if sc is None:
        return
    conf = sc.getConf()
    plugins = [p.strip() for p in (conf.get(PLUGINS_KEY) or "").split(",")]
    differing = sorted(name for name, value in settings.items() if not _same_setting(name, conf.get(name), value))
    if PLUGIN_CLASS in plugins and not differing:
        return
    what = "without the trspark plugin" if PLUGIN_CLASS not in plugins else "with other values of " + ", ".join(differing)
    raise RuntimeError(f"trspark.configure: SparkContext {sc.applicationId} is running {what}, and getOrCreate() "
                       "would return it unchanged; stop it first (spark.stop()), then configure and build the session")


def _same_setting(name: str, running: str | None, wanted: str) -> bool:
    """Whether a running context's value of ``name`` (None: unset) means ``wanted``: a trspark key
    compares parsed values (``TR`` is ``tr``, ``5.0`` is ``5``), its default standing for an unset one."""
    if running == wanted:
        return True
    key = BY_FULL.get(name)
    if key is None:
        return False
    try:
        wanted_value, running_value = key.parse(wanted), key.default if running is None else key.parse(running)
    except (ValueError, TypeError):
        return False
    if name == PREFIX + "remote.path":  # the driver writes the path back without its trailing '/'
        return bool(wanted_value.rstrip("/") == running_value.rstrip("/"))
    return bool(wanted_value == running_value)


def _as_spark_text(value: Any) -> str | None:
    return None if value is None else spark_text(value)


def _accessors(
    target: Any,
) -> tuple[Callable[[str], str | None], Callable[[str, str], Any], Callable[[], Iterable[tuple[str, str]]]]:
    """(read one, write one, every setting) of a Builder, a SparkConf or a mapping."""
    if isinstance(target, MutableMapping):
        return target.get, target.__setitem__, lambda: list(target.items())
    if _is_builder(target):
        # SparkSession.Builder keeps what .config() was given in _options (no public getter).
        builder_options: dict[str, str] = target._options
        return builder_options.get, lambda k, v: target.config(k, v), lambda: list(builder_options.items())
    if callable(getattr(target, "get", None)) and callable(getattr(target, "set", None)):
        return lambda k: target.get(k, None), target.set, lambda: list(target.getAll())  # SparkConf
    raise TypeError(
        f"trspark.configure expects a SparkSession.Builder, a SparkConf or a dict, not {type(target).__name__}"
    )
