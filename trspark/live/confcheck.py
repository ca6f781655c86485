"""``python -m trspark.live.confcheck``: validate the ``spark.trspark.*`` settings for the JVM plugin.

Under plain ``spark-submit --conf spark.plugins=org.apache.spark.trspark.TRSparkPlugin`` nothing
on the Python side has seen the settings before Spark starts (``trspark.spark_conf`` validates
only what PySpark users pass through it). The driver plugin therefore runs this module
synchronously in its ``init`` with every ``spark.trspark.*`` setting as a JSON object in the
environment variable ``TRSPARK_CONF`` (the same variable the engine reads), and stops
SparkContext start-up with the line this prints. The checks are
:func:`trspark.live.config.check_settings`.

Exit codes: 0 usable (prints nothing), 2 not usable (one line on stderr naming the key and the
allowed values). Anything else -- e.g. trspark not importable by that interpreter -- means the
check could not run; the plugin then warns and goes on.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from trspark.keys import ConfigError
from trspark.live.config import check_settings, read_env

EXIT_OK, EXIT_BAD = 0, 2


def main(environ: Mapping[str, str] | None = None) -> int:
    try:
        check_settings(read_env(os.environ if environ is None else environ))
    except ConfigError as exc:
        # One line: the plugin shows the last line it reads, and a store's error may span several.
        print("trspark: " + " ".join(str(exc).split()), file=sys.stderr)
        return EXIT_BAD
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
