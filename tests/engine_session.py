"""The real policy engine process (``python -m trspark.live``) against a fake shim on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

TIMEOUT = 60.0  # generous: the shared machine is often heavily loaded


@dataclass
class FakeShim:
    conn: socket.socket
    reader: object

    def send(self, line: str) -> None:
        self.conn.sendall((line.rstrip("\n") + "\n").encode())

    def read(self) -> dict[str, object]:
        line = self.reader.readline()  # type: ignore[attr-defined]
        assert line, "engine closed the connection"
        return json.loads(line)  # type: ignore[no-any-return]

    def answer(self) -> tuple[list[dict[str, object]], dict[str, object]]:
        """Lines up to and including the next Ack: (commands, ack)."""
        commands = []
        while (message := self.read())["type"] != "Ack":
            commands.append(message)
        return commands, message


def engine_env(conf: dict[str, str], token: str = "tok-123") -> dict[str, str]:
    return {**os.environ, "TRSPARK_TOKEN": token, "TRSPARK_CONF": json.dumps(conf)}


@contextmanager
def engine_session(conf: dict[str, str], token: str = "tok-123") -> Iterator[tuple[FakeShim, subprocess.Popen[str]]]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(TIMEOUT)
        port = server.getsockname()[1]
        proc = subprocess.Popen(
            [sys.executable, "-m", "trspark.live", "--connect", f"127.0.0.1:{port}"],
            env=engine_env(conf, token), stderr=subprocess.PIPE, text=True,
        )
        try:
            conn, _ = server.accept()
            conn.settimeout(TIMEOUT)
            with conn, conn.makefile("r", encoding="utf-8") as reader:
                yield FakeShim(conn, reader), proc
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(TIMEOUT)
