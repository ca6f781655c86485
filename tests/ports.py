"""A local TCP port that nothing listens on."""

from __future__ import annotations

import socket


def unused_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago: a connection to it is refused, or a server may bind it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
