"""Bad ``spark.trspark.*`` settings stop plain ``spark-submit`` before any job runs.

``trspark.live.confcheck`` is tested directly; then real ``spark-submit`` runs of a tiny PySpark app
(``local[1]``, the plugin given only by ``--jars`` and ``--conf spark.plugins=...``) show that
the driver plugin runs it at start-up: each bad value ends the application with the check's
line (key + allowed values) and a non-zero exit before the app's job, and an interpreter that
cannot run the check only warns.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from console_log4j import write_console_log4j

import trspark
from trspark.live.confcheck import EXIT_BAD, EXIT_OK, main
from trspark.live.sparkconf import PLUGIN_CLASS

REPO_ROOT = Path(trspark.__file__).resolve().parents[1]
UNWRITABLE = "file:///proc/trspark-history"  # /proc takes no new directories, not even as root

BAD_SETTINGS = {
    "lifetime": ("spark.trspark.lifetime", "bogus", "spark.trspark.lifetime='bogus' is not valid", "allowed: stable (never evicted) or a lifetime spec"),
    "gamma": ("spark.trspark.gamma", "-1", "spark.trspark.gamma='-1' is not valid", "allowed: a number > 0"),
    "unknown": ("spark.trspark.bogus", "1", "unknown setting 'spark.trspark.bogus'", "known settings: spark.trspark.mode"),
    "pool": ("spark.trspark.pool.spot.lifetime", "sometimes", "spark.trspark.pool.spot.lifetime='sometimes' is not valid",
             "allowed: stable (never evicted) or a lifetime spec"),
    "history": ("spark.trspark.history.url", UNWRITABLE, f"spark.trspark.history.url='{UNWRITABLE}' is not reachable",
                "allowed: an fsspec URL"),
}


# ---- the Python check itself -----------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(BAD_SETTINGS))
def test_check_rejects_a_bad_setting_with_one_line(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    key, value, message, allowed = BAD_SETTINGS[case]
    assert main({"TRSPARK_CONF": f'{{"{key}": "{value}", "spark.trspark.mode": "tr"}}'}) == EXIT_BAD
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and allowed in err


def test_a_store_error_of_several_lines_still_gives_one_line_naming_the_key(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from trspark.live import history

    def refused(url: str) -> None:  # as Azure's SDK words an authentication failure
        raise PermissionError("Server failed to authenticate the request.\nRequestId:1\nErrorCode:AuthenticationFailed")

    monkeypatch.setattr(history, "store_fs", refused)
    assert main({"TRSPARK_CONF": '{"spark.trspark.history.url": "abfs://c/p"}'}) == EXIT_BAD
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "spark.trspark.history.url='abfs://c/p' is not reachable" in err
    assert "ErrorCode:AuthenticationFailed; allowed:" in err


def test_check_accepts_good_settings_and_a_writable_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = f'{{"spark.trspark.gamma": 2, "spark.trspark.history.url": "file://{tmp_path}/h", "spark.trspark.scheduling": false}}'
    assert main({"TRSPARK_CONF": conf}) == EXIT_OK
    assert capsys.readouterr().err == ""
    assert list(tmp_path.iterdir()) == []  # the check made nothing: the first record written makes the folder


def test_check_rejects_a_conf_that_is_not_a_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    assert main({"TRSPARK_CONF": "[1]"}) == EXIT_BAD
    assert "TRSPARK_CONF must be a JSON object" in capsys.readouterr().err


# ---- plain spark-submit ----------------------------------------------------------------------

# Every bad setting goes through the one check above; spark-submit shows that the plugin runs it and
# stops, for a value the check parses and for a URL it must reach (each submission is a driver JVM).
SUBMITTED_BAD_SETTINGS = ("gamma", "history")

APP = textwrap.dedent(
    """
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.appName("trspark-confcheck").getOrCreate()
    print("ANSWER", spark.sparkContext.parallelize(range(10), 2).sum(), flush=True)
    spark.stop()
    """
)


def spark_submit(app: Path, settings: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import pyspark

    from trspark.live.shim import jar_path

    submit = Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit"
    confs = [arg for key, value in {"spark.plugins": PLUGIN_CLASS, **settings}.items()
             for arg in ("--conf", f"{key}={value}")]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    # The tests read trspark's INFO lines, so the submissions bring their own configuration.
    log4j = write_console_log4j(app.with_name("log4j2.properties"), "warn", {"org.apache.spark.trspark": "info"})
    command = [str(submit), "--master", "local[1]", "--jars", str(jar_path()),
               "--driver-java-options", f"-Dlog4j2.configurationFile={log4j.as_uri()}", *confs, str(app)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def submissions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every case's ``spark-submit``, two at a time (each is a driver JVM plus a Python app)."""
    tmp = tmp_path_factory.mktemp("confcheck")
    app = tmp / "app.py"
    app.write_text(APP)
    cases = {name: {key: value, "spark.trspark.mode": "never"}
             for name, (key, value, _, _) in BAD_SETTINGS.items() if name in SUBMITTED_BAD_SETTINGS}
    cases["good"] = {"spark.trspark.mode": "never", "spark.trspark.gamma": "2"}
    cases["no-interpreter"] = {"spark.trspark.mode": "never", "spark.trspark.python": str(tmp / "no-such-python")}
    cases["no-filesystem"] = {"spark.trspark.mode": "always", "spark.trspark.remote.path": "foo://bucket/backups"}
    cases["old-fetch-protocol"] = {"spark.trspark.mode": "tr", "spark.shuffle.useOldFetchProtocol": "true"}
    # Spark's fallback storage takes a path without a scheme (the default file system's).
    fallback = "spark.storage.decommission.fallbackStorage.path"
    cases["fallback-without-scheme"] = {"spark.trspark.mode": "always", fallback: f"{tmp}/fallback/"}
    cases["fallback-unknown-scheme"] = {"spark.trspark.mode": "always", fallback: "nosuch://x/y/"}
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(spark_submit, app, settings) for name, settings in cases.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.spark
@pytest.mark.parametrize("case", SUBMITTED_BAD_SETTINGS)
def test_spark_submit_stops_on_a_bad_setting_before_any_job(
    case: str, submissions: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    _, _, message, allowed = BAD_SETTINGS[case]
    run = submissions[case]
    output = run.stdout + run.stderr
    assert run.returncode != 0
    assert f"org.apache.spark.SparkException: trspark: {message}" in output and allowed in output
    assert "ANSWER" not in run.stdout
    assert "Starting job" not in output  # SparkContext never got to run the app's job


@pytest.mark.spark
def test_spark_submit_with_good_settings_runs_after_the_check(submissions: dict[str, subprocess.CompletedProcess[str]]) -> None:
    run = submissions["good"]
    assert run.returncode == 0, run.stderr[-2000:]
    assert "ANSWER 45" in run.stdout
    assert f"trspark: settings checked by {sys.executable} in " in run.stderr


@pytest.mark.spark
def test_spark_submit_without_a_usable_interpreter_warns_and_runs(submissions: dict[str, subprocess.CompletedProcess[str]]) -> None:
    run = submissions["no-interpreter"]
    assert run.returncode == 0, run.stderr[-2000:]
    assert "ANSWER 45" in run.stdout
    warnings = [line for line in run.stderr.splitlines() if "cannot run" in line and "trspark.live.confcheck" in line]
    assert len(warnings) == 1 and "WARN" in warnings[0] and "going on without that check" in warnings[0]


def stopped_saying(run: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """The submission stopped at start-up, before the app's job gave an answer, saying each fragment."""
    output = run.stdout + run.stderr
    assert run.returncode != 0
    assert "ANSWER" not in run.stdout
    for fragment in fragments:
        assert fragment in output


@pytest.mark.spark
def test_spark_submit_stops_on_a_remote_path_whose_scheme_has_no_filesystem(
        submissions: dict[str, subprocess.CompletedProcess[str]]) -> None:
    """The Python check sees a URL with a scheme; only the driver knows whether Hadoop has a
    FileSystem for it. Without one every backup would fail and no output be protected."""
    stopped_saying(submissions["no-filesystem"],
                   "spark.trspark.remote.path='foo://bucket/backups' is not valid; allowed: a Hadoop FileSystem URL "
                   "whose scheme has a FileSystem on the classpath", 'No FileSystem for scheme "foo"')


@pytest.mark.spark
def test_spark_submit_stops_when_map_ids_cannot_tell_attempts_apart(
        submissions: dict[str, subprocess.CompletedProcess[str]]) -> None:
    stopped_saying(submissions["old-fetch-protocol"],
                   "spark.shuffle.useOldFetchProtocol=true gives every attempt of a map task the same map id",
                   "allowed with it: spark.trspark.mode=never")


@pytest.mark.spark
def test_a_fallback_storage_path_the_user_set_is_taken_as_spark_takes_it_and_named_when_it_fails(
        submissions: dict[str, subprocess.CompletedProcess[str]]) -> None:
    run = submissions["fallback-without-scheme"]
    assert run.returncode == 0, run.stderr[-2000:]
    assert "ANSWER 45" in run.stdout
    stopped_saying(submissions["fallback-unknown-scheme"],
                   "trspark: spark.storage.decommission.fallbackStorage.path='nosuch://x/y' is not valid")
