"""Termination notices: trspark against Spark's own decommissioning, same job, same kill schedule.

Every run starts its own 3-executor cluster in a fresh Python process (a fresh driver JVM),
warms it up, then runs one multi-stage job (:func:`shuffle_job`: three shuffles of random,
incompressible records) while an :class:`~jobs.harness.chaos.EvictionInjector` replays the same
schedule: at each offset it gives one executor a termination notice and SIGKILLs it ``window``
seconds later (30 s: the GCP / Azure spot notice).

Policies (one row per notice source and policy):

* ``trspark`` -- ``local-trcluster[3,1,M]`` with the plugin in mode ``tr``, lifetime knowledge
  ``deterministic`` (a notice makes the executor's lifetime known to the engine), prior
  ``--lifetime`` (default a day-long exponential mean: in this schedule no executor goes without
  a notice; with a short prior trspark also backs up cheap outputs against unannounced evictions). The notice
  reaches the executor the way the source delivers it: ``aws`` / ``gcp`` / ``azure`` are posted on
  that executor's path of a loopback imitation of the cloud's metadata service
  (:mod:`jobs.harness.notice_endpoints`; the plugin polls it every 0.5 s), ``signal`` is SIGPWR.
* ``decommission`` -- ``local-cluster[3,1,M]`` with Spark's decommissioning and fallback storage
  (``jobs/tpcds/session.py``'s ``decommission`` settings). Spark reads no metadata service: its
  notice is always SIGPWR, sent at the same moments.

Bytes moved are counted the same way for both, from the files themselves: a :class:`CopyLedger`
polls every ``shuffle_*.data`` / ``.index`` file under the run's ``spark.local.dir`` (each
executor's ``blockmgr-*`` directory is one location) and under the backup / fallback root (one
location) every 0.25 s, so files deleted later (a decommissioned executor removes its directory
when it exits) are still counted. A map output seen in ``n`` locations was copied ``n - 1`` times:
bytes moved = sum over outputs of size x (n - 1). For trspark the plugin's own counters are
printed next to it.

Usage::

    python bench/notice_vs_decommission.py --sources aws,gcp,azure,signal --window 30 \\
        --kills 4:0,12:1 --markdown notices.md
"""

from __future__ import annotations

import csv
import json
import os
import random
import signal as signals
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import click

from jobs.harness.executors import driver_pid
from jobs.harness.notice_endpoints import NoticeServer

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("aws", "gcp", "azure", "signal")
POLICIES = ("trspark", "decommission")
RESULT_PREFIX = "RESULT "

# ---- the job -----------------------------------------------------------------------------------

KEYS = 4096
GROUPS = 100


@dataclass(frozen=True)
class JobShape:
    """Size of :func:`shuffle_job`: ``partitions`` tasks per stage, each ``task_seconds`` long
    (a sleep, so the stable time does not depend on the machine's load), each map output holding
    ``records`` x ``payload`` random bytes (incompressible: Spark's lz4 cannot shrink them)."""

    partitions: int = 12
    records: int = 10_000
    payload: int = 100
    task_seconds: float = 2.5


def _records(seed: int, shape: JobShape) -> list[tuple[int, bytes]]:
    rng = random.Random(seed)
    return [(rng.randrange(KEYS), rng.randbytes(shape.payload)) for _ in range(shape.records)]


def expected_answer(shape: JobShape) -> list[tuple[int, int]]:
    """The job's answer computed in plain Python (the oracle every run is checked against)."""
    totals = [0] * GROUPS
    for seed in range(shape.partitions):
        for key, payload in _records(seed, shape):
            totals[(key * 7 % KEYS) % GROUPS] += zlib.crc32(payload[::-1])
    return [(g, t) for g, t in enumerate(totals) if t]


def shuffle_job(sc: Any, shape: JobShape) -> list[tuple[int, int]]:
    """Four stages, three shuffles: generate -> re-key -> checksum per group -> collect.

    .. math:: \\text{answer}(g) = \\sum_{(k,p):\\,(7k \\bmod K) \\bmod G = g} \\operatorname{crc32}(\\text{reverse}(p))
    """
    import operator

    n, pause = shape.partitions, shape.task_seconds

    def generate(seeds: Iterable[int]) -> Iterable[tuple[int, bytes]]:
        time.sleep(pause)
        for seed in seeds:
            yield from _records(seed, shape)

    def rekey(rows: Iterable[tuple[int, bytes]]) -> Iterable[tuple[int, bytes]]:
        time.sleep(pause)
        for key, payload in rows:
            yield key * 7 % KEYS, payload[::-1]

    def checksum(rows: Iterable[tuple[int, bytes]]) -> Iterable[tuple[int, int]]:
        time.sleep(pause)
        for key, payload in rows:
            yield key % GROUPS, zlib.crc32(payload)

    stage1 = sc.parallelize(range(n), n).mapPartitions(generate).partitionBy(n)
    stage2 = stage1.mapPartitions(rekey).partitionBy(n)
    stage3 = stage2.mapPartitions(checksum).reduceByKey(operator.add, n)
    return sorted(stage3.collect())


# ---- measuring copies ------------------------------------------------------------------------------


class CopyLedger:
    """Where each shuffle file was ever seen during a run; polled from a background thread.

    Parameters
    ----------
    local_dir
        The run's ``spark.local.dir``: each ``blockmgr-*`` directory below it is one executor.
    stores
        Backup / fallback roots: each is one location (Spark's fallback layout
        ``<root>/<appId>/<shuffleId>/<hash>/<file>``).
    """

    def __init__(self, local_dir: Path, stores: Iterable[Path], poll: float = 0.25) -> None:
        self.local_dir = local_dir
        self.stores = list(stores)
        self.poll = poll
        self.sizes: dict[str, int] = {}
        self.places: dict[str, set[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="copy-ledger", daemon=True)

    def __enter__(self) -> CopyLedger:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.scan()

    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            self.scan()

    def scan(self) -> None:
        for root, place_of in [(self.local_dir, _blockmgr_of)] + [(s, lambda _p, s=s: str(s)) for s in self.stores]:
            for dirpath, _, files in os.walk(root):
                for name in files:
                    if name.startswith("shuffle_") and name.endswith((".data", ".index")):
                        path = os.path.join(dirpath, name)
                        try:
                            size = os.stat(path).st_size
                        except FileNotFoundError:
                            continue  # deleted between listing and stat
                        self.sizes[name] = max(size, self.sizes.get(name, 0))
                        self.places.setdefault(name, set()).add(place_of(path))

    def bytes_copied(self) -> int:
        """:math:`\\sum_f \\text{size}(f)\\,(n_f - 1)` over shuffle files ``f`` seen in ``n_f`` places."""
        return sum(self.sizes[name] * (len(places) - 1) for name, places in self.places.items())

    def outputs_copied(self) -> int:
        return sum(len(p) > 1 for name, p in self.places.items() if name.endswith(".data"))


def _blockmgr_of(path: str) -> str:
    parts = Path(path).parts
    return next((str(Path(*parts[: i + 1])) for i, p in enumerate(parts) if p.startswith("blockmgr-")), path)


# ---- one run (in its own process) ---------------------------------------------------------------------


@dataclass
class RunSpec:
    source: str
    policy: str
    window: float
    kills: list[tuple[float, int]]
    shape: JobShape = field(default_factory=JobShape)
    executors: int = 3
    memory_mb: int = 1024
    lifetime: str = "exponential:mean=86400"


@dataclass
class RunResult:
    source: str
    policy: str
    notice_via: str
    seconds: float
    bytes_moved: int
    outputs_copied: int
    ok: bool
    notices_given: int
    kills_done: int
    plugin: dict[str, int] = field(default_factory=dict)


def policy_settings(spec: RunSpec, work: Path, notice_url: str) -> tuple[str, dict[str, str]]:
    """(master, Spark settings) of one run."""
    if spec.policy == "decommission":
        from jobs.tpcds.session import policy_conf

        return f"local-cluster[{spec.executors},1,{spec.memory_mb}]", policy_conf("decommission", work)
    import trspark

    options: dict[str, Any] = dict(mode="tr", knowledge="deterministic", remote_path=(work / "backups").as_uri(),
                                   notice_window=spec.window, notice_interval=0.5, lifetime=spec.lifetime)
    if spec.source != "signal":
        options.update(notice_source=spec.source, notice_url=notice_url + "/vm-{executorId}")
    return f"local-trcluster[{spec.executors},1,{spec.memory_mb}]", trspark.spark_conf(**options)


def run(spec: RunSpec) -> RunResult:
    """Start a cluster, warm it up, run the job under the kill schedule, measure, stop."""
    from pyspark.sql import SparkSession

    from jobs.harness.chaos import EvictionInjector
    from jobs.harness.executors import ExecutorProcess
    from jobs.tpcds.session import spark_home

    os.environ.setdefault("SPARK_HOME", str(spark_home()))
    with tempfile.TemporaryDirectory(prefix=f"trspark-notice-{spec.policy}-{spec.source}-") as tmp, \
            NoticeServer() as server:
        work = Path(tmp)
        master, settings = policy_settings(spec, work, server.url)
        builder = (SparkSession.builder.master(master).appName(f"notice-{spec.policy}-{spec.source}")
                   .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                   .config("spark.local.dir", str(work / "local"))
                   .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
                   .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "300s"))
        for key, value in settings.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        sc: Any = spark.sparkContext  # py4j fields typed Optional, set while the context runs
        sc.setLogLevel("ERROR")
        try:
            sc.parallelize(range(spec.executors * 4), spec.executors * 4).map(lambda x: x).count()  # warm up
            notify: Callable[[ExecutorProcess], None] | None = None
            if spec.policy == "trspark" and spec.source != "signal":
                def notify(victim: ExecutorProcess) -> None:
                    server.post_notice(spec.window, vm=f"vm-{victim.executor_id}")

            stores = [work / "backups", work / "fallback"]
            # The injector's schedule holds kill times; each notice goes out `window` s before its kill.
            kills = [(t + spec.window, rank) for t, rank in spec.kills]
            injector = EvictionInjector(driver_pid(sc), schedule=kills, notice=spec.window,
                                        notify=notify, min_alive=1)
            with CopyLedger(work / "local", stores) as ledger, injector:
                started = time.perf_counter()
                answer = shuffle_job(sc, spec.shape)
                seconds = time.perf_counter() - started
            status = sc._jvm.org.apache.spark.trspark.TRStatus
            plugin = {name: int(status.stat(name)) for name in
                      ("notices", "backups_done", "backups_bytes", "outputs_repointed", "outputs_lost")} \
                if spec.policy == "trspark" else {}
            if spec.policy == "trspark":
                # The engine did not answer in time (e.g. a loaded machine): the run was always-checkpoint.
                plugin["fallen_back"] = int(status.isFallenBack())
            records = injector.records
            return RunResult(
                source=spec.source, policy=spec.policy,
                notice_via="SIGPWR" if notify is None else f"{spec.source} endpoint",
                seconds=round(seconds, 2), bytes_moved=ledger.bytes_copied(), outputs_copied=ledger.outputs_copied(),
                ok=answer == expected_answer(spec.shape),
                notices_given=sum(r.signal == signals.SIGPWR for r in records),
                kills_done=sum(r.signal == signals.SIGKILL for r in records), plugin=plugin)
        finally:
            spark.stop()


def run_in_subprocess(spec: RunSpec) -> RunResult:
    """:func:`run` in a fresh Python process (the driver JVM's settings are fixed at its start)."""
    payload = json.dumps(asdict(spec))
    proc = subprocess.run([sys.executable, __file__, "worker", payload], cwd=REPO, stdout=subprocess.PIPE,
                          text=True, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return RunResult(**json.loads(line[len(RESULT_PREFIX):]))
    raise RuntimeError(f"run {spec.policy}/{spec.source} failed (exit code {proc.returncode}); see stderr above")


# ---- reporting -------------------------------------------------------------------------------------


def markdown(results: list[RunResult], spec: RunSpec) -> str:
    lines = [
        f"Job: {spec.shape.partitions} tasks x 4 stages, {spec.shape.task_seconds} s per task, "
        f"{spec.shape.records * spec.shape.payload / 1e6:.1f} MB per map output, 3 shuffles; "
        f"{spec.executors} executors x 1 core. Notices at {', '.join(f'{t:g} s (rank {r})' for t, r in spec.kills)} "
        f"after the job starts, SIGKILL {spec.window:g} s after each notice; trspark's prior `{spec.lifetime}`.",
        "",
        "| source | policy | notice via | seconds | bytes moved | outputs copied | result ok | notices / kills | plugin counters |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        counters = ", ".join(f"{k}={v}" for k, v in r.plugin.items()) or "-"
        lines.append(f"| {r.source} | {r.policy} | {r.notice_via} | {r.seconds:.1f} | {r.bytes_moved / 1e6:.1f} MB | "
                     f"{r.outputs_copied} | {'yes' if r.ok else 'NO'} | {r.notices_given} / {r.kills_done} | {counters} |")
    return "\n".join(lines) + "\n"


def _parse_kills(text: str) -> list[tuple[float, int]]:
    try:
        kills = [(float(t), int(r)) for t, r in (item.split(":") for item in text.split(",") if item.strip())]
    except ValueError:
        raise click.BadParameter(f"{text!r}; allowed: comma-separated SECONDS:RANK, e.g. 4:0,12:1",
                                 param_hint="--kills") from None
    if not kills or any(t < 0 or r < 0 for t, r in kills):
        raise click.BadParameter(f"{text!r}; allowed: comma-separated SECONDS:RANK with both >= 0", param_hint="--kills")
    return kills


def _parse_choices(text: str, allowed: tuple[str, ...], option: str) -> list[str]:
    items = [s.strip().lower() for s in text.split(",") if s.strip()]
    bad = [s for s in items if s not in allowed]
    if bad or not items:
        raise click.BadParameter(f"{text!r}; allowed: comma-separated {', '.join(allowed)}", param_hint=option)
    return items


@click.group(invoke_without_command=True)
@click.option("--sources", default=",".join(SOURCES), show_default=True, help="Notice sources for trspark.")
@click.option("--policies", default=",".join(POLICIES), show_default=True)
@click.option("--window", default=30.0, show_default=True, type=click.FloatRange(min=1.0), help="Seconds from notice to SIGKILL.")
@click.option("--kills", default="4:0,12:1", show_default=True, help="Notice times after the job starts and victim ranks.")
@click.option("--task-seconds", default=JobShape.task_seconds, show_default=True, type=click.FloatRange(min=0.0))
@click.option("--lifetime", default=RunSpec.lifetime, show_default=True,
              help="Lifetime model trspark starts from (spark.trspark.lifetime). The default says what the "
                   "schedule does: no executor goes without a notice, so the prior is a day-long mean; a short "
                   "prior makes trspark also insure against unannounced evictions, which costs bytes "
                   "decommissioning never spends.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--markdown", "md_path", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.pass_context
def main(ctx: click.Context, sources: str, policies: str, window: float, kills: str, task_seconds: float,
         lifetime: str, csv_path: Path | None, md_path: Path | None) -> None:
    """Run every (source, policy) pair once on the same job and kill schedule; print the table."""
    if ctx.invoked_subcommand is not None:
        return
    schedule = _parse_kills(kills)
    shape = JobShape(task_seconds=task_seconds)
    results: list[RunResult] = []
    for source in _parse_choices(sources, SOURCES, "--sources"):
        for policy in _parse_choices(policies, POLICIES, "--policies"):
            result = run_in_subprocess(RunSpec(source, policy, window, schedule, shape, lifetime=lifetime))
            click.echo(json.dumps(asdict(result)), err=True)
            results.append(result)
    table = markdown(results, RunSpec("", "", window, schedule, shape, lifetime=lifetime))
    click.echo(table)
    if md_path is not None:
        md_path.write_text(table)
    if csv_path is not None:
        with csv_path.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=[k for k in asdict(results[0]) if k != "plugin"] + ["plugin"])
            writer.writeheader()
            for r in results:
                writer.writerow({**asdict(r), "plugin": json.dumps(r.plugin)})


@main.command("worker", hidden=True)
@click.argument("payload")
def worker(payload: str) -> None:
    """One run (internal): PAYLOAD is a RunSpec as JSON; prints one RESULT line."""
    raw = json.loads(payload)
    spec = RunSpec(**{**raw, "shape": JobShape(**raw["shape"]), "kills": [tuple(k) for k in raw["kills"]]})
    print(RESULT_PREFIX + json.dumps(asdict(run(spec))), flush=True)


if __name__ == "__main__":
    main()
