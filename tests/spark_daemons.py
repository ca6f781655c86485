"""The ports Spark's own daemons (Master, History Server) bound, read from their logs.

The tests start them on port 0, so the kernel picks a free port at bind time. A port picked
free beforehand can be taken by another process before the daemon binds it, and Spark then
moves to the next port without telling the test. The daemons get Spark's default log level, INFO,
from a log4j2 configuration of their own (:mod:`console_log4j`): the line that names the port is
an INFO line.
"""

from __future__ import annotations

import re
from pathlib import Path

from console_log4j import write_console_log4j
from jvm_gateway import wait_for


def daemon_env(env: dict[str, str], folder: Path) -> dict[str, str]:
    """``env`` for a daemon started by ``spark-class``, with a log4j2 configuration (written to ``folder``) that logs its ports."""
    config = write_console_log4j(folder / "daemon-log4j2.properties", "info")
    options = f"{env.get('SPARK_DAEMON_JAVA_OPTS', '')} -Dlog4j2.configurationFile={config.as_uri()}".strip()
    return {**env, "SPARK_DAEMON_JAVA_OPTS": options}


def started_port(log: Path, service: str, timeout: float = 240.0) -> int:
    """The port of ``service`` (as Spark names it, e.g. ``sparkMaster``, ``MasterUI``) once the daemon writing ``log`` logged it."""
    pattern = re.compile(rf"Successfully started service '{re.escape(service)}' on port (\d+)\.")

    def logged() -> int | None:
        found = pattern.search(log.read_text(errors="replace")) if log.exists() else None
        return int(found.group(1)) if found else None

    return wait_for(logged, what=f"{log.name} to name the port of {service!r}", timeout=timeout, every=0.1)
