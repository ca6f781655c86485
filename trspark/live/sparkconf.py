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

import shutil
import sys
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any, TypeVar

from trspark.keys import PREFIX, ConfigError, spark_text
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
    """
    get, put, items = _accessors(target)
    given = unchecked_option_settings(**options)
    _check_python(given)
    settings = _with_plugin(given, default_python=not get(PYTHON_KEY))
    # The target's own settings with the options over them are checked once, as a whole, before any is
    # written, so a call that raises leaves the target as it was. A dict may hold Python values
    # (True, 2, None): they are checked spelled as Spark will read them.
    ours = {name: spark_text(value) for name, value in items() if name.startswith(PREFIX)}
    ours.update((name, value) for name, value in settings.items() if name.startswith(PREFIX))
    config = check_settings(ours)
    for name, value in settings.items():
        put(name, merge_list(get(name), value) if name in _LIST_KEYS else value)
    for name, value in sql_settings(config, lambda key: _as_spark_text(get(key))).items():
        put(name, value)
    return target


def _as_spark_text(value: Any) -> str | None:
    return None if value is None else spark_text(value)


def _accessors(
    target: Any,
) -> tuple[Callable[[str], str | None], Callable[[str, str], Any], Callable[[], Iterable[tuple[str, str]]]]:
    """(read one, write one, every setting) of a Builder, a SparkConf or a mapping."""
    if isinstance(target, MutableMapping):
        return target.get, target.__setitem__, lambda: list(target.items())
    builder_options = getattr(target, "_options", None)
    if isinstance(builder_options, dict) and hasattr(target, "config"):
        # SparkSession.Builder keeps what .config() was given in _options (no public getter).
        return builder_options.get, lambda k, v: target.config(k, v), lambda: list(builder_options.items())
    if callable(getattr(target, "get", None)) and callable(getattr(target, "set", None)):
        return lambda k: target.get(k, None), target.set, lambda: list(target.getAll())  # SparkConf
    raise TypeError(
        f"trspark.configure expects a SparkSession.Builder, a SparkConf or a dict, not {type(target).__name__}"
    )
