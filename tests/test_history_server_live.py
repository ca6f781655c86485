"""Spark's History Server opens an event log that holds trspark's events (it has no trspark jar).

The committed log of a ``local-trcluster`` run with kills (see ``tests/fixtures/observability``)
is served by ``spark-class org.apache.spark.deploy.history.HistoryServer`` on 127.0.0.1: the
application is listed, its jobs and executors replay, and trspark's events are only dropped
as unrecognized.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from spark_daemons import daemon_env, started_port
from test_shim_live import wait_for

pytestmark = pytest.mark.spark

FIXTURE = Path(__file__).parent / "fixtures" / "observability"


def get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.load(response)
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return None  # not up yet: no answer, or an HTML page while the REST API is still being set up


def test_history_server_replays_a_log_with_trspark_events(tmp_path: Path) -> None:
    import pyspark

    logs = tmp_path / "logs"
    shutil.copytree(FIXTURE / "eventlog", logs)
    app_id = next(p.name for p in logs.iterdir()).removeprefix("eventlog_v2_")
    spark_home = Path(pyspark.__file__).parent
    env = daemon_env(dict(os.environ, SPARK_HOME=str(spark_home), SPARK_LOCAL_IP="127.0.0.1",
                          SPARK_HISTORY_OPTS=f"-Dspark.history.fs.logDirectory=file://{logs} -Dspark.history.ui.port=0 "
                                             "-Dspark.history.fs.update.interval=1s"), tmp_path)
    out = tmp_path / "history.log"
    with out.open("wb") as sink:
        server = subprocess.Popen([str(spark_home / "bin" / "spark-class"), "org.apache.spark.deploy.history.HistoryServer"],
                                  env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{started_port(out, 'HistoryServerUI')}/api/v1/applications"
        apps = wait_for(lambda: get(base), timeout=240, what="the History Server to list the application")
        assert [a["id"] for a in apps] == [app_id]
        assert apps[0]["attempts"][0]["completed"] is True
        jobs = wait_for(lambda: get(f"{base}/{app_id}/jobs"), what="the application's jobs")
        assert jobs and all(j["status"] == "SUCCEEDED" for j in jobs)
        executors = get(f"{base}/{app_id}/allexecutors")
        assert executors is not None and sum(not e["isActive"] for e in executors) >= 3
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    log = out.read_text(errors="replace")
    assert "Drop unrecognized event: org.apache.spark.trspark.TR" in log
    assert "Exception" not in log.replace("ClassNotFoundException", ""), log[-3000:]
