"""How long the policy engine takes to start and to answer its first executor, and its CPU seconds.

The driver plugin starts ``python -m trspark.live --connect HOST:PORT`` when the application
starts; until the engine says Hello its events wait. This bench does the same against a
listening socket on 127.0.0.1 with the default settings. ``--executor-after`` seconds after
Hello (an executor takes that long to register) it sends one ``ExecutorAdded`` and waits for
its ``Ack``, then closes the connection (the engine then ends). It reports the wall seconds to
Hello, the milliseconds from sending the event to its Ack, and the engine process's user +
system CPU seconds, over ``--repeat`` starts. To compare two versions, run it in each checkout
one after the other on an idle machine.

Usage::

    python bench/engine_start.py [--repeat 7] [--executor-after 2]
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

EXECUTOR_ADDED = json.dumps({"seq": 1, "type": "ExecutorAdded", "time": 0.0, "executor_id": "1", "host": "localhost"})


def start_once(executor_after: float) -> tuple[float, float, float]:
    """(seconds from spawn to Hello, seconds from the first event to its Ack, CPU seconds of the
    engine process) of one start."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        env = dict(os.environ, TRSPARK_TOKEN="bench",
                   TRSPARK_CONF=json.dumps({"spark.trspark.mode": "tr", "spark.app.id": "bench"}))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        engine = subprocess.Popen([sys.executable, "-m", "trspark.live", "--connect", f"127.0.0.1:{server.getsockname()[1]}"],
                                  env=env, stderr=subprocess.DEVNULL)
        connection, _ = server.accept()
        with connection, connection.makefile("rw", encoding="utf-8") as lines:
            hello = lines.readline()
            seconds = time.perf_counter() - started
            time.sleep(executor_after)  # the bench's workload: the time an executor takes to register
            sent = time.perf_counter()
            lines.write(EXECUTOR_ADDED + "\n")
            lines.flush()
            while '"Ack"' not in (answer := lines.readline()) and answer:
                pass  # the event's commands come before its Ack
            first = time.perf_counter() - sent
        engine.wait(timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if '"Hello"' not in hello:
        raise click.ClickException(f"the engine's first line was not Hello: {hello!r}")
    if not answer:
        raise click.ClickException("the engine ended before acknowledging the first event")
    return seconds, first, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


@click.command(help=__doc__)
@click.option("--repeat", type=click.IntRange(1), default=7, show_default=True, help="Engine starts measured.")
@click.option("--executor-after", type=click.FloatRange(0.0), default=2.0, show_default=True,
              help="Seconds from Hello to the first ExecutorAdded.")
def main(repeat: int, executor_after: float) -> None:
    runs = [start_once(executor_after) for _ in range(repeat)]
    hello, first, cpu = ([run[i] for run in runs] for i in range(3))
    click.echo(f"engine start, {repeat} runs: Hello after {statistics.median(hello):.3f} s median "
               f"({min(hello):.3f}-{max(hello):.3f}); first ExecutorAdded answered in "
               f"{1000 * statistics.median(first):.1f} ms median ({1000 * min(first):.1f}-{1000 * max(first):.1f}); "
               f"CPU {statistics.median(cpu):.3f} s median ({min(cpu):.3f}-{max(cpu):.3f})")


if __name__ == "__main__":
    main()
