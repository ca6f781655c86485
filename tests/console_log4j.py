"""A log4j2 configuration for a test's Spark JVM that logs to stderr, whatever ``SPARK_HOME`` holds.

Another test module may set ``SPARK_HOME`` to a Spark home whose own configuration is quieter
than Spark's default, so a test that reads a JVM's log lines brings its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def write_console_log4j(path: Path, root_level: str, levels: Mapping[str, str] | None = None) -> Path:
    """Write to ``path`` a configuration logging ``root_level`` and up to stderr, with ``levels`` per logger name; return ``path``."""
    lines = [
        f"rootLogger.level = {root_level}",
        "rootLogger.appenderRef.stderr.ref = stderr",
        "appender.stderr.type = Console",
        "appender.stderr.name = stderr",
        "appender.stderr.target = SYSTEM_ERR",
        "appender.stderr.layout.type = PatternLayout",
        "appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex",
    ]
    for name, level in (levels or {}).items():
        key = name.rsplit(".", 1)[-1]
        lines += [f"logger.{key}.name = {name}", f"logger.{key}.level = {level}"]
    path.write_text("\n".join(lines) + "\n")
    return path
