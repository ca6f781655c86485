"""The ``spark-tr://host:port`` master against a real standalone cluster started by the test.

A standalone Master and one Worker (2 cores, so 2 one-core executors) run as their own JVMs from
pyspark's ``bin/spark-class`` (the ``start-*.sh`` scripts are not in the pip package); the
driver is this test process's PySpark JVM. Executors are children of the Worker, as on a real
cluster, and the Worker -- not the driver -- reports their death to the Master.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from spark_daemons import daemon_env, started_port
from test_shim_live import Cluster, expected_sums, reruns_of, run_job, shuffled, wait_for

pytestmark = pytest.mark.spark

EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def master_state(ui_port: int) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=10) as response:
            return json.load(response)  # type: ignore[no-any-return]
    except (OSError, ValueError):  # not up yet, or a starting UI that answers /json/ with its HTML page
        return {}


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, psutil.Process]]:
    """``(master URL as spark-tr://..., the Worker process)``; both JVMs end with the module."""
    import pyspark

    spark_class = str(Path(pyspark.__file__).resolve().parent / "bin" / "spark-class")
    work = tmp_path_factory.mktemp("standalone")
    env = daemon_env(dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_WORKER_DIR=str(work / "work")), work)
    logs = [open(work / name, "wb") for name in ("master.log", "worker.log")]  # noqa: SIM115 -- closed below
    procs = [subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", "0", "--webui-port", "0"],
                              env=env, stdout=logs[0], stderr=subprocess.STDOUT)]
    try:
        # Port 0: the Master binds ports the kernel picks; the Worker is started once they are logged.
        port, ui_port = started_port(work / "master.log", "sparkMaster"), started_port(work / "master.log", "MasterUI")
        worker = subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                   "--cores", "2", "--memory", "2g", "--webui-port", "0", "--work-dir", str(work / "work"),
                                   f"spark://127.0.0.1:{port}"],
                                  env=env, stdout=logs[1], stderr=subprocess.STDOUT)
        procs.insert(0, worker)
        wait_for(lambda: master_state(ui_port).get("aliveworkers") == 1, what="the worker to register")
        yield f"spark-tr://127.0.0.1:{port}", psutil.Process(worker.pid)
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        for log in logs:
            log.close()


def command_line(proc: psutil.Process) -> str:
    """The process's command line, or "" for one that already exited or is a zombie.

    The Worker's children include short-lived launcher shells and executors killed earlier in
    the module, which linger as zombies until the Worker reaps them; their command line is gone.
    """
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:  # NoSuchProcess, ZombieProcess, AccessDenied
        return ""


class StandaloneCluster(Cluster):
    def __init__(self, spark: Any, root: Path, worker: psutil.Process) -> None:
        super().__init__(spark, root)
        self.worker = worker

    def kill(self, executor_id: str) -> None:
        """SIGKILL the executor JVM (a child of the Worker) and wait until the driver dropped it."""
        pids = [p.pid for p in self.worker.children(recursive=True)
                if EXECUTOR_CLASS in (line := command_line(p)) and f"--executor-id {executor_id} " in line + " "]
        assert pids, f"no process for executor {executor_id}"
        os.kill(pids[0], signal.SIGKILL)
        wait_for(lambda: executor_id not in self.alive(), what=f"executor {executor_id} to be removed")

    def full_strength(self) -> None:
        wait_for(lambda: len(self.alive()) >= 2, what="two executors")


@pytest.fixture(scope="module")
def cluster(standalone: tuple[str, psutil.Process], tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    from pyspark.sql import SparkSession

    from trspark.live.shim import jar_path

    master, worker = standalone
    root = tmp_path_factory.mktemp("backups")
    spark = (
        SparkSession.builder.master(master)
        .appName("trspark-standalone")
        .config("spark.jars", jar_path())
        .config("spark.plugins", "org.apache.spark.trspark.TRSparkPlugin")
        .config("spark.trspark.mode", "always")
        .config("spark.trspark.remote.path", f"file://{root}")
        .config("spark.executor.cores", "1")
        .config("spark.executor.memory", "768m")
        .config("spark.cores.max", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
        .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "180s")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    try:
        yield StandaloneCluster(spark, root, worker)
    finally:
        spark.stop()


def test_spark_tr_master_runs_jobs_under_the_trspark_scheduler(cluster: StandaloneCluster) -> None:
    scheduler = cluster.sc._jsc.sc().taskScheduler().getClass().getName()
    assert scheduler == "org.apache.spark.trspark.TRTaskScheduler"
    cluster.full_strength()
    assert run_job(cluster, shuffled(cluster), "standalone-answer") == expected_sums(60_000)


def test_a_killed_executors_outputs_come_from_backups(cluster: StandaloneCluster) -> None:
    cluster.full_strength()
    rdd = shuffled(cluster)
    done = cluster.stat("backups_done")
    assert run_job(cluster, rdd, "standalone-first") == expected_sums(60_000)
    first = cluster.map_tasks(cluster.job_stages("standalone-first")[0])
    wait_for(lambda: cluster.stat("backups_done") - done >= len(first), what="the map outputs' backups")
    victim = first[0]["executorId"]
    cluster.kill(victim)
    assert run_job(cluster, rdd, "standalone-second") == expected_sums(60_000)
    assert reruns_of(cluster, "standalone-second") == []
    assert cluster.stat("outputs_repointed") >= sum(t["executorId"] == victim for t in first)
