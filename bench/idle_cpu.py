"""CPU an idle Spark application uses, with and without trspark, measured in turn.

Each configuration starts its own ``local-cluster``, runs a small two-shuffle job twice (so the
JVMs are warm and the plugin has backed outputs up), waits ``--settle`` seconds, then reads the
CPU time (user + system, from ``/proc`` through psutil) of the driver JVM, each executor JVM and
every other process under the driver (trspark's engine) over a ``--window`` of seconds in which
nothing runs. The configurations run one after the other, each in its own process, and the
figures are milliseconds of CPU per second of wall time.

* ``none``: vanilla Spark (the reference);
* ``tr``: the plugin with its engine, policy ``tr``, remote copies to a local directory;
* ``tr-aws``: ``tr`` whose executors also poll AWS's spot notice endpoint every second
  (``notice.source=aws``), answered by an imitation on 127.0.0.1.

Usage::

    python bench/idle_cpu.py [--executors 2] [--settle 10] [--window 30] [--repeat 3]
        [--configs none,tr,tr-aws] [--csv results.csv]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import psutil

from jobs.harness.sample_job import two_shuffle_checksum
from jobs.reports.render import append_row

CONFIGS = ("none", "tr", "tr-aws")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (0 if it is gone)."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return float(times.user + times.system)


def idle_usage(driver: int, window: float) -> dict[str, Any]:
    """ms of CPU per s of wall over ``window`` s: the driver JVM, each executor, everything else under the driver."""
    from jobs.harness.executors import find_executors

    executors = {e.executor_id: e.pid for e in find_executors(driver)}
    others = [p.pid for p in psutil.Process(driver).children(recursive=True) if p.pid not in executors.values()]
    pids = {"driver": [driver], **{f"executor {k}": [v] for k, v in executors.items()}, "other": others}
    before = {name: sum(cpu_seconds(p) for p in group) for name, group in pids.items()}
    start = time.monotonic()
    time.sleep(window)
    wall = time.monotonic() - start
    used = {name: (sum(cpu_seconds(p) for p in pids[name]) - before[name]) * 1000.0 / wall for name in pids}
    per_executor = [used[name] for name in used if name.startswith("executor")]
    return {"used": used, "executor_median": statistics.median(per_executor), "executors": len(per_executor)}


def measure(config: str, executors: int, settle: float, window: float) -> dict[str, Any]:
    """Start ``config``'s application, run the job twice, let it settle, measure the idle window."""
    from pyspark.sql import SparkSession

    from jobs.harness.executors import driver_pid
    from jobs.harness.notice_endpoints import NoticeServer

    with tempfile.TemporaryDirectory(prefix=f"trspark-idle-{config}-") as tmp, NoticeServer() as metadata:
        builder = (
            SparkSession.builder.master(f"local-cluster[{executors},1,1024]").appName(f"trspark-idle-{config}")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
            .config("spark.sql.shuffle.partitions", "8")
        )
        if config != "none":
            import trspark

            notices = {"notice_source": "aws", "notice_url": metadata.url} if config == "tr-aws" else {}
            builder = trspark.configure(builder, mode="tr", remote_path=(Path(tmp) / "backups").as_uri(), **notices)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        try:
            for _ in range(2):
                two_shuffle_checksum(spark, 2_000_000, 8)
            time.sleep(settle)
            return {"config": config, **idle_usage(driver_pid(spark.sparkContext), window)}
        finally:
            spark.stop()


@click.command(help=__doc__)
@click.option("--executors", type=click.IntRange(1), default=2, show_default=True)
@click.option("--settle", type=click.FloatRange(0), default=10.0, show_default=True,
              help="Seconds idle before the window opens.")
@click.option("--window", type=click.FloatRange(1), default=30.0, show_default=True, help="Seconds measured.")
@click.option("--repeat", type=click.IntRange(1), default=3, show_default=True,
              help="Rounds; each runs every configuration once, in turn.")
@click.option("--configs", default=",".join(CONFIGS), show_default=True, callback=lambda _c, _p, v: _configs(v),
              help="Comma-separated configurations; the first one is the reference.")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), help="Append one row per run.")
@click.option("--worker", type=click.Choice(CONFIGS), hidden=True)
def main(executors: int, settle: float, window: float, repeat: int, configs: list[str], csv_path: Path | None,
         worker: str | None) -> None:
    if worker is not None:
        print(json.dumps(measure(worker, executors, settle, window)), flush=True)
        return
    medians: dict[str, list[float]] = {config: [] for config in configs}
    drivers: dict[str, list[float]] = {config: [] for config in configs}
    for round_ in range(repeat):
        for config in configs:
            args = [sys.executable, __file__, "--worker", config, "--executors", str(executors),
                    "--settle", str(settle), "--window", str(window)]
            done = subprocess.run(args, check=False, capture_output=True, text=True)
            if done.returncode != 0:
                raise click.ClickException(f"{config} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
            result = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("{")))
            used = result["used"]
            medians[config].append(result["executor_median"])
            drivers[config].append(used["driver"])
            click.echo(f"[{round_ + 1}/{repeat}] {config}: "
                       + ", ".join(f"{name} {value:.1f}" for name, value in used.items()) + " (ms CPU per s)")
            if csv_path is not None:
                append_row(csv_path, {"round": round_ + 1, "config": config, "executors": result["executors"],
                                      "window_s": window, "driver_ms_per_s": f"{used['driver']:.1f}",
                                      "other_ms_per_s": f"{used['other']:.1f}",
                                      "executor_median_ms_per_s": f"{result['executor_median']:.1f}"})
    first = configs[0]
    for name, figures in (("idle executor", medians), ("driver", drivers)):
        reference = statistics.median(figures[first])
        click.echo(f"{name}, median of {repeat} ms CPU per s (min-max): {first} {reference:.1f} ({_span(figures[first])})"
                   + "".join(f"; {c} {statistics.median(figures[c]):.1f} ({_span(figures[c])}), "
                             f"{statistics.median(figures[c]) - reference:+.1f} over {first}" for c in configs[1:]))


def _configs(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in CONFIGS]
    if unknown or not names:
        raise click.BadParameter(f"{', '.join(unknown) or 'none given'}; allowed: {', '.join(CONFIGS)}")
    return list(dict.fromkeys(names))


def _span(values: list[float]) -> str:
    return f"{min(values):.1f}-{max(values):.1f}"


if __name__ == "__main__":
    main()
