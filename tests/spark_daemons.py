"""The ports Spark's own daemons (Master, History Server) bound, read from their logs.

The tests start them on port 0, so the kernel picks a free port at bind time. A port picked
free beforehand can be taken by another process before the daemon binds it, and Spark then
moves to the next port without telling the test.
"""

from __future__ import annotations

import re
from pathlib import Path

from jvm_gateway import wait_for


def started_port(log: Path, service: str, timeout: float = 240.0) -> int:
    """The port of ``service`` (as Spark names it, e.g. ``sparkMaster``, ``MasterUI``) once the daemon writing ``log`` logged it."""
    pattern = re.compile(rf"Successfully started service '{re.escape(service)}' on port (\d+)\.")

    def logged() -> int | None:
        found = pattern.search(log.read_text(errors="replace")) if log.exists() else None
        return int(found.group(1)) if found else None

    return wait_for(logged, what=f"{log.name} to name the port of {service!r}", timeout=timeout, every=0.1)
