"""The engine bridge on a real plain ``local-cluster[3,1,1024]``: engine killed mid-job.

The scenario runs in its own Python process (its own driver JVM) so the test can read the
driver's whole log and count the fallback warning. It also checks the listener-only re-pointing
path that plain ``local-cluster`` masters get (no trcluster scheduler): after the fallback the
built-in always-checkpoint is on, an executor is killed between two jobs over the same shuffle,
and the second job must not re-run that executor's map tasks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

SCENARIO = textwrap.dedent(
    r"""
    import json, os, signal, sys, time, urllib.request
    import psutil
    from pyspark.sql import SparkSession
    from trspark.live.shim import jar_path
    from jobs.harness.executors import find_executors

    root = sys.argv[1]
    spark = (SparkSession.builder.master("local-cluster[3,1,1024]").appName("trspark-shim-engine")
             .config("spark.jars", jar_path())
             .config("spark.plugins", "org.apache.spark.trspark.TRSparkPlugin")
             .config("spark.trspark.mode", "tr")
             .config("spark.trspark.lifetime", "exponential:mean=30")
             .config("spark.trspark.python", sys.executable)
             .config("spark.trspark.engine.timeout", "30")  # the fallback must come from the kill, not load
             .config("spark.trspark.remote.path", "file://" + root)
             .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
             .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "180s")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    sc = spark.sparkContext
    status = sc._jvm.org.apache.spark.trspark.TRStatus
    driver = psutil.Process(int(sc._jvm.java.lang.ProcessHandle.current().pid()))
    out = {}

    def wait_for(cond, timeout=120):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = cond()
            if value:
                return value
            time.sleep(0.2)
        raise SystemExit("timed out")

    def command_line(p):
        try:
            return " ".join(p.cmdline())
        except psutil.Error:  # exited, or a zombie not yet reaped
            return ""

    def engines():
        return [p for p in driver.children(recursive=True) if "trspark.live" in command_line(p)]

    engine = wait_for(engines)[0]
    out["engine_connected_before_job"] = not status.isFallenBack()

    def slow(x):
        time.sleep(0.05)
        return (x % 97, x)

    rdd = sc.parallelize(range(1200), 12).map(slow).reduceByKey(lambda a, b: a + b, 4)
    import threading
    def tasks_done():  # mid-job: the map stage runs and has finished some of its tasks
        infos = [sc.statusTracker().getStageInfo(i) for i in sc.statusTracker().getActiveStageIds()]
        return any(info is not None and info.numCompletedTasks > 0 for info in infos)

    def kill_engine():
        wait_for(tasks_done)
        engine.send_signal(signal.SIGKILL)
        out["engine_killed_at_active_stages"] = list(sc.statusTracker().getActiveStageIds())
    killer = threading.Thread(target=kill_engine)
    killer.start()
    answer = dict(rdd.collect())
    killer.join()
    expected = {}
    for x in range(1200):
        expected[x % 97] = expected.get(x % 97, 0) + x
    out["first_job_correct"] = answer == expected
    out["fallen_back"] = bool(status.isFallenBack())
    wait_for(lambda: status.stat("backups_done") >= 12)
    out["backups_done"] = status.stat("backups_done")

    # Listener-only re-pointing on a plain local-cluster: kill a map executor, re-run.
    tracker = sc.statusTracker()
    job_stages = lambda g: sorted(s for j in tracker.getJobIdsForGroup(g) for s in tracker.getJobInfo(j).stageIds)
    def rest(path):
        url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/{path}"
        with urllib.request.urlopen(url, timeout=30) as r:
            return json.load(r)
    def tasks(stage):
        return [dict(t, a=a["attemptId"]) for a in rest(f"stages/{stage}")
                for t in rest(f"stages/{stage}/{a['attemptId']}/taskList?length=10000") if t["status"] == "SUCCESS"]
    rdd2 = sc.parallelize(range(60000), 6).map(lambda x: (x % 997, x)).reduceByKey(lambda a, b: a + b, 4)
    done = status.stat("backups_done")
    sc.setJobGroup("g1", "g1"); first = dict(rdd2.collect())
    stage = job_stages("g1")[0]
    maps = tasks(stage)
    wait_for(lambda: status.stat("backups_done") - done >= len(maps))
    victim = maps[0]["executorId"]
    pid = [e.pid for e in find_executors(driver.pid) if e.executor_id == victim][0]
    os.kill(pid, signal.SIGKILL)
    ids = lambda: {str(sc._jsc.sc().getExecutorIds().apply(i)) for i in range(sc._jsc.sc().getExecutorIds().size())}
    wait_for(lambda: victim not in ids())
    wait_for(lambda: status.stat("outputs_repointed") >= sum(t["executorId"] == victim for t in maps))
    sc.setJobGroup("g2", "g2"); second = dict(rdd2.collect())
    out["second_job_correct"] = first == second
    out["victim_outputs"] = sum(t["executorId"] == victim for t in maps)
    # Job g2 gets a new map stage for the reused shuffle: skipped (no tasks) unless outputs are missing.
    wait_for(lambda: all(j["status"] != "RUNNING" for j in rest("jobs") if j.get("jobGroup") == "g2"))
    out["reruns"] = sorted(t["index"] for t in tasks(job_stages("g2")[0]))
    spark.stop()
    print("RESULT " + json.dumps(out), flush=True)
    """
)


def test_engine_killed_mid_job_falls_back_with_one_warning(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCENARIO, str(tmp_path / "backups")],
        capture_output=True, text=True, timeout=420, cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    results = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and results, proc.stdout[-3000:] + proc.stderr[-5000:]
    out = json.loads(results[-1].removeprefix("RESULT "))
    assert out["engine_connected_before_job"]
    assert out["engine_killed_at_active_stages"], "the engine died mid-job"
    assert out["first_job_correct"]
    assert out["fallen_back"]
    warnings = [line for line in proc.stderr.splitlines() if "policy engine unavailable" in line]
    assert len(warnings) == 1, warnings
    assert "WARN" in warnings[0]
    assert out["backups_done"] >= 12  # always-checkpoint after the fallback covered the job's outputs
    assert out["second_job_correct"]
    assert out["victim_outputs"] >= 1
    assert out["reruns"] == []
