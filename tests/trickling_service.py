"""A loopback HTTP service that answers slowly, one byte at a time, for the notice watcher's timeouts."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def trickling_service(head: bytes, every: float) -> Iterator[str]:
    """The URL of a service that sends ``head`` at once, then one byte every ``every`` s (100 of them)."""
    stop = threading.Event()

    def serve(listener: socket.socket) -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.sendall(head)
                for _ in range(100):
                    if stop.wait(every):
                        return
                    try:
                        connection.sendall(b"F")
                    except OSError:
                        break

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        threading.Thread(target=serve, args=(listener,), daemon=True).start()
        try:
            yield f"http://127.0.0.1:{listener.getsockname()[1]}"
        finally:
            stop.set()
