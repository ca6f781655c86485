"""The engine process starts whatever lifetimes the history gives (``python -m trspark.live``, no Spark)."""

from __future__ import annotations

import json
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

from engine_session import TIMEOUT, engine_env

from trspark.live.history import HistoryStore, LifetimeRecord


def test_a_history_whose_fitted_lifetimes_cannot_run_leaves_the_engine_on_the_configured_ones(tmp_path: Path) -> None:
    url = str(tmp_path / "hist")
    # Valid records each, but their Kaplan-Meier model has an infinite mean: no policy builds on it.
    HistoryStore(url).append([LifetimeRecord("p", "a", str(i), 1e308, True) for i in range(30)])
    conf = {"spark.trspark.history.url": url, "spark.trspark.pool": "p", "spark.trspark.lifetime": "exponential:mean=100"}
    with socket.create_server(("127.0.0.1", 0)) as server:
        proc = subprocess.Popen([sys.executable, "-m", "trspark.live", "--connect", f"127.0.0.1:{server.getsockname()[1]}"],
                                env=engine_env(conf), stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + TIMEOUT
        while proc.poll() is None and not select.select([server], [], [], 0.2)[0] and time.monotonic() < deadline:
            pass
        if proc.poll() is not None:  # ended before connecting: the application would lose its engine
            raise AssertionError(f"engine exited with {proc.returncode}: {proc.stderr.read()}")  # type: ignore[union-attr]
        conn, _ = server.accept()
        with conn, conn.makefile("r", encoding="utf-8") as reader:
            assert json.loads(reader.readline())["type"] == "Hello"
        assert proc.wait(TIMEOUT) == 0
    assert "fitted to the history" in proc.stderr.read()  # type: ignore[union-attr]
