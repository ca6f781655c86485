"""Lifetime history across applications: does the third one start from the true lifetime law?

Each *application* is a fresh PySpark driver (its own process and JVM) on
``local-trcluster[3,1,M]`` with the trspark plugin (mode ``tr``), a deliberately wrong configured
lifetime model (``exponential:mean=600``) and ``spark.trspark.history.url`` set. It runs small
shuffle jobs back to back for ``--app-seconds`` while an
:class:`~jobs.harness.chaos.EvictionInjector` SIGKILLs executors at lifetimes drawn from the true
model (Weibull, seeded per application), counted from when the driver lists the executor (the
clock the history measures by). The plugin's engine records every executor's lifetime to the
store: observed when evicted, right-censored when alive at the end.

Before each application the bench computes the prior that application's engine starts from
(:func:`trspark.live.history.prior_from_history`, the engine's own function, on the same store), and
after each the fit of all records so far. It prints, per application: evictions drawn and
recorded, the method and mean of the prior it started from and of the fit after it, and the error
against the true mean :math:`\\lambda\\,\\Gamma(1 + 1/k)`.

``--store local`` keeps the history in a local directory, ``--store azurite`` in Azure Blob
storage served by Azurite (``abfs://history/<run>``, started from ``.tools/`` as in the tests).

Usage::

    python bench/history_apps.py --store local,azurite --apps 3 --app-seconds 150 \\
        --markdown history.md
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click

REPO = Path(__file__).resolve().parent.parent

RESULT_PREFIX = "RESULT "
CONFIGURED = "exponential:mean=600"
STORES = ("local", "azurite")
# The well-known development account of the Azure storage emulators (public, not a secret).
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@dataclass
class AppSpec:
    history_url: str
    pool: str
    truth: str
    seed: int
    seconds: float
    executors: int = 3
    memory_mb: int = 1024


@dataclass
class AppResult:
    app_id: str
    kills: int
    jobs: int
    jobs_ok: int
    engine_failed: bool
    """The plugin fell back to always-checkpoint: no engine, so nothing was recorded."""


def run_app(spec: AppSpec) -> AppResult:
    """One application: shuffle jobs for ``spec.seconds`` under Weibull-drawn SIGKILLs."""
    from pyspark.sql import SparkSession

    import trspark
    from jobs.harness.chaos import EvictionInjector
    from jobs.harness.executors import driver_pid
    from jobs.tpcds.metrics import executor_ids
    from jobs.tpcds.session import spark_home

    os.environ.setdefault("SPARK_HOME", str(spark_home()))
    settings = trspark.spark_conf(mode="tr", lifetime=CONFIGURED, history_url=spec.history_url, pool=spec.pool)
    with tempfile.TemporaryDirectory(prefix="trspark-history-app-") as tmp:
        builder = (SparkSession.builder.master(f"local-trcluster[{spec.executors},1,{spec.memory_mb}]")
                   .appName("trspark-history").config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false").config("spark.local.dir", tmp)
                   .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
                   .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "300s")
                   .config("spark.trspark.remote.path", Path(tmp, "backups").as_uri()))
        for key, value in settings.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        sc: Any = spark.sparkContext  # py4j fields typed Optional, set while the context runs
        sc.setLogLevel("ERROR")
        try:
            registered_ids = executor_ids(sc)
            injector = EvictionInjector(driver_pid(sc), model=spec.truth, rng=spec.seed, min_alive=1,
                                        registered=lambda e: e in registered_ids())
            jobs = ok = 0
            with injector:
                while injector.elapsed() < spec.seconds:
                    jobs += 1
                    pairs = sc.parallelize(range(6000), 6).map(lambda x: (x % 60, x)).reduceByKey(lambda a, b: a + b, 6)
                    ok += sorted(pairs.collect()) == [(k, sum(range(k, 6000, 60))) for k in range(60)]
            failed = bool(sc._jvm.org.apache.spark.trspark.TRStatus.isFallenBack())
            return AppResult(sc.applicationId, len(injector.records), jobs, ok, failed)
        finally:
            spark.stop()  # the engine censors the survivors and flushes the history


def run_app_in_subprocess(spec: AppSpec, env: dict[str, str]) -> AppResult:
    proc = subprocess.run([sys.executable, __file__, "app", json.dumps(asdict(spec))], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, text=True, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return AppResult(**json.loads(line[len(RESULT_PREFIX):]))
    raise RuntimeError(f"application failed (exit code {proc.returncode}); see stderr above")


# ---- stores --------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def azurite_store(run: str) -> Iterator[tuple[str, dict[str, str]]]:
    """Start Azurite from ``.tools/`` (``make azurite``); yield the history URL and the environment."""
    binary = os.environ.get("TRSPARK_AZURITE") or str(REPO / ".tools/node_modules/.bin/azurite-blob")
    if not Path(binary).exists() and not shutil.which("azurite-blob"):
        raise click.ClickException("Azurite is not installed: run `make azurite`")
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="trspark-azurite-") as location:
        proc = subprocess.Popen([binary if Path(binary).exists() else "azurite-blob", "--silent", "--disableTelemetry",
                                 "--location", location, "--blobHost", "127.0.0.1", "--blobPort", str(port),
                                 "--skipApiVersionCheck"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise click.ClickException(f"Azurite did not listen on port {port}") from None
                    time.sleep(0.2)  # polling the port, bounded by the deadline
            conn = (f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={AZURITE_KEY};"
                    f"BlobEndpoint=http://127.0.0.1:{port}/devstoreaccount1;")
            from azure.storage.blob import BlobServiceClient

            BlobServiceClient.from_connection_string(conn).create_container("history")
            yield f"abfs://history/{run}", {"AZURE_STORAGE_CONNECTION_STRING": conn}
        finally:
            proc.terminate()
            proc.wait(timeout=10)


@contextmanager
def local_store(run: str) -> Iterator[tuple[str, dict[str, str]]]:
    with tempfile.TemporaryDirectory(prefix="trspark-history-") as tmp:
        yield str(Path(tmp) / run), {}


# ---- the experiment ------------------------------------------------------------------------------------


@dataclass
class Row:
    store: str
    app: int
    app_id: str
    kills: int
    recorded: int
    evictions: int
    censored: int
    prior_method: str
    prior_mean: float
    fit_method: str
    fit_mean: float
    true_mean: float
    jobs_ok: str
    engine_failed: bool

    @property
    def prior_error(self) -> float:
        return abs(self.prior_mean - self.true_mean) / self.true_mean

    @property
    def fit_error(self) -> float:
        return abs(self.fit_mean - self.true_mean) / self.true_mean


def experiment(store: str, apps: int, truth: str, seconds: float, seed: int) -> list[Row]:
    """``apps`` applications in a row on one history store; one :class:`Row` per application."""
    from cost_model.lifetimes import from_spec
    from trspark.live.history import HistoryStore, fit_lifetime, prior_from_history

    true_mean = from_spec(truth).mean()
    run = f"bench-{uuid.uuid4().hex[:8]}"
    pool = "spot-a"
    rows: list[Row] = []
    with (azurite_store(run) if store == "azurite" else local_store(run)) as (url, extra_env):
        os.environ.update(extra_env)  # the store is read here too (prior and fit)
        env = {**os.environ, **extra_env}
        for app in range(1, apps + 1):
            prior_spec = prior_from_history(url, pool, CONFIGURED).spec
            prior_method = fit_lifetime(HistoryStore(url).load(pool), CONFIGURED).method
            result = run_app_in_subprocess(AppSpec(url, pool, truth, seed * 100 + app, seconds), env)
            records = HistoryStore(url).load(pool)
            fit = fit_lifetime(records, CONFIGURED)
            mine = [r for r in records if r.app_id == result.app_id]
            rows.append(Row(store, app, result.app_id, result.kills, len(mine), sum(r.observed for r in mine),
                            sum(not r.observed for r in mine), prior_method, from_spec(prior_spec).mean(),
                            fit.method, fit.model.mean(), true_mean, f"{result.jobs_ok}/{result.jobs}",
                            result.engine_failed))
            click.echo(json.dumps(asdict(rows[-1])), err=True)
    return rows


def markdown(rows: list[Row], truth: str, seconds: float) -> str:
    lines = [
        f"True lifetime model: `{truth}` (mean {rows[0].true_mean:.1f} s), lifetimes counted from the "
        f"executor's registration; configured model `{CONFIGURED}`; each application runs shuffle jobs for "
        f"{seconds:g} s on local-trcluster[3,1,1024]. *Prior* = the model the application's engine started "
        "from (fitted to the earlier applications' records); *fit after* = the fit of all records including "
        "this application's. Rule: < 5 evictions configured model, 5-29 censored Weibull MLE, >= 30 Kaplan-Meier.",
        "",
        "| store | app | kills | recorded (evicted / censored) | prior: method, mean | prior error | "
        "fit after: method, mean | fit error | jobs ok | engine |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r.store} | {r.app} | {r.kills} | {r.recorded} ({r.evictions} / {r.censored}) | "
                     f"{r.prior_method}, {r.prior_mean:.1f} s | {100 * r.prior_error:.1f} % | "
                     f"{r.fit_method}, {r.fit_mean:.1f} s | {100 * r.fit_error:.1f} % | {r.jobs_ok} | "
                     f"{'FAILED (nothing recorded)' if r.engine_failed else 'ok'} |")
    return "\n".join(lines) + "\n"


@click.group(invoke_without_command=True)
@click.option("--store", "stores", default=",".join(STORES), show_default=True, help="Comma-separated: local, azurite.")
@click.option("--apps", default=3, show_default=True, type=click.IntRange(1, 20))
@click.option("--app-seconds", default=150.0, show_default=True, type=click.FloatRange(min=10.0))
@click.option("--truth", default="weibull:shape=3,scale=45", show_default=True, help="Lifetime model the kills follow.")
@click.option("--seed", default=1, show_default=True, type=int)
@click.option("--markdown", "md_path", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.pass_context
def main(ctx: click.Context, stores: str, apps: int, app_seconds: float, truth: str, seed: int,
         md_path: Path | None) -> None:
    """Run the applications on each store and print one row per application."""
    if ctx.invoked_subcommand is not None:
        return
    from cost_model.lifetimes import from_spec

    try:
        from_spec(truth)
    except ValueError as exc:
        raise click.BadParameter(f"{truth!r}: {exc}", param_hint="--truth") from None
    chosen = [s.strip().lower() for s in stores.split(",") if s.strip()]
    if not chosen or any(s not in STORES for s in chosen):
        raise click.BadParameter(f"{stores!r}; allowed: comma-separated {', '.join(STORES)}", param_hint="--store")
    rows = [row for store in chosen for row in experiment(store, apps, truth, app_seconds, seed)]
    table = markdown(rows, truth, app_seconds)
    click.echo(table)
    if md_path is not None:
        md_path.write_text(table)


@main.command("app", hidden=True)
@click.argument("payload")
def app(payload: str) -> None:
    """One application (internal): PAYLOAD is an AppSpec as JSON; prints one RESULT line."""
    print(RESULT_PREFIX + json.dumps(asdict(run_app(AppSpec(**json.loads(payload))))), flush=True)


if __name__ == "__main__":
    main()
