"""How long the policy engine takes to start: from spawning it to its Hello, and its CPU seconds.

The driver plugin starts ``python -m trspark.live --connect HOST:PORT`` when the application
starts; until the engine says Hello its events wait. This bench does the same against a
listening socket on 127.0.0.1 with the default settings, closes the connection once Hello has
come (the engine then ends), and reports the wall seconds to Hello and the engine process's
user + system CPU seconds, over ``--repeat`` starts. To compare two versions, run it in each
checkout one after the other on an idle machine.

Usage::

    python bench/engine_start.py [--repeat 7]
"""

from __future__ import annotations

import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time

import click


def start_once() -> tuple[float, float]:
    """(seconds from spawn to Hello, CPU seconds of the engine process) of one start."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        env = dict(os.environ, TRSPARK_TOKEN="bench",
                   TRSPARK_CONF=json.dumps({"spark.trspark.mode": "tr", "spark.app.id": "bench"}))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        engine = subprocess.Popen([sys.executable, "-m", "trspark.live", "--connect", f"127.0.0.1:{server.getsockname()[1]}"],
                                  env=env, stderr=subprocess.DEVNULL)
        connection, _ = server.accept()
        with connection, connection.makefile(encoding="utf-8") as lines:
            hello = lines.readline()
        seconds = time.perf_counter() - started
        engine.wait(timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if '"Hello"' not in hello:
        raise click.ClickException(f"the engine's first line was not Hello: {hello!r}")
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


@click.command(help=__doc__)
@click.option("--repeat", type=click.IntRange(1), default=7, show_default=True, help="Engine starts measured.")
def main(repeat: int) -> None:
    runs = [start_once() for _ in range(repeat)]
    hello = [seconds for seconds, _ in runs]
    cpu = [seconds for _, seconds in runs]
    click.echo(f"engine start, {repeat} runs: Hello after {statistics.median(hello):.3f} s median "
               f"({min(hello):.3f}-{max(hello):.3f}); CPU {statistics.median(cpu):.3f} s median "
               f"({min(cpu):.3f}-{max(cpu):.3f})")


if __name__ == "__main__":
    main()
