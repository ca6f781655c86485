"""The driver JVM's log in a file, for live tests that count what the plugin logged.

A log4j2 configuration that writes warnings (and trspark's INFO lines) to one file; it is set
with ``spark.driver.extraJavaOptions``, so it applies to the driver JVM a test module starts
(conftest.py starts a fresh one per module).
"""

from __future__ import annotations

from pathlib import Path

LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %p %c: %m%n%ex
logger.trspark.name = org.apache.spark.trspark
logger.trspark.level = info
"""


def driver_log(folder: Path) -> tuple[str, Path]:
    """(the ``spark.driver.extraJavaOptions`` value, the log file) for a driver logging under ``folder``."""
    log = folder / "driver.log"
    config = folder / "log4j2.properties"
    config.write_text(LOG4J2.format(log=log))
    return f"-Dlog4j2.configurationFile={config}", log


def log_lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []
