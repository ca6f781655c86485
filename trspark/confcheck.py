"""``python -m trspark.confcheck``: validate the ``spark.trspark.*`` settings for the JVM plugin.

Under plain ``spark-submit --conf spark.plugins=org.apache.spark.trspark.TRSparkPlugin`` nothing
on the Python side has seen the settings before Spark starts (``trspark.spark_conf`` validates
only what PySpark users pass through it). The driver plugin therefore runs this module
synchronously in its ``init`` with every ``spark.trspark.*`` setting as a JSON object in the
environment variable ``TRSPARK_CONF`` (the same variable the engine reads), and stops
SparkContext start-up with the line this prints.

Checks: every key is known, every value parses (:meth:`trspark.config.TRConfig.from_spark_conf`),
and a ``spark.trspark.history.url`` can be written and listed (:func:`trspark.history.check_url`).

Exit codes: 0 usable (prints nothing), 2 not usable (one line on stderr naming the key and the
allowed values). Anything else -- e.g. trspark not importable by that interpreter -- means the
check could not run; the plugin then warns and goes on.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping

from trspark.config import ConfigError, TRConfig

ENV_VAR = "TRSPARK_CONF"
EXIT_OK, EXIT_BAD = 0, 2


def check_settings(settings: Mapping[str, str]) -> TRConfig:
    """The validated configuration of ``settings`` (Spark keys -> string values).

    Raises
    ------
    ConfigError
        An unknown ``spark.trspark.*`` key, a value its key does not allow, or a history URL
        the driver cannot write (the message names the key and what is allowed).
    """
    config = TRConfig.from_spark_conf(settings)
    if config.history_url:
        from trspark.history import HistoryError, check_url

        try:
            check_url(config.history_url)
        except HistoryError as exc:
            raise ConfigError(str(exc)) from exc
    return config


def read_env(environ: Mapping[str, str]) -> dict[str, str]:
    """``TRSPARK_CONF`` as Spark settings; raises ``ConfigError`` when it is not a JSON object."""
    try:
        data = json.loads(environ.get(ENV_VAR, "{}"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{ENV_VAR} is not JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{ENV_VAR} must be a JSON object of Spark settings")
    # Spark conf values are strings; accept JSON numbers/booleans spelled as Spark would.
    return {str(k): (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in data.items()}


def main(environ: Mapping[str, str] | None = None) -> int:
    try:
        check_settings(read_env(os.environ if environ is None else environ))
    except ConfigError as exc:
        print(f"trspark: {exc}", file=sys.stderr)
        return EXIT_BAD
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
