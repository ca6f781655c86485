"""trspark.spark_conf / trspark.configure: the settings PySpark users apply."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import trspark
from trspark.keys import ConfigError
from trspark.live import sparkconf

FAKE_JAR = "/opt/trspark/trspark-shim-abc123.jar"


@pytest.fixture
def fake_jar(monkeypatch: pytest.MonkeyPatch) -> str:
    """The dict logic is tested without building the jar."""
    monkeypatch.setattr(sparkconf, "plugin_jar", lambda: FAKE_JAR)
    return FAKE_JAR


def test_spark_conf_has_jar_plugin_python_and_the_options_in_both_spellings(fake_jar: str) -> None:
    conf = trspark.spark_conf(mode="always", recursionDepth=4, remote_path="file:///tmp/bk", scheduling=False)
    assert conf == {
        "spark.jars": fake_jar,
        "spark.plugins": "org.apache.spark.trspark.TRSparkPlugin",
        "spark.trspark.python": sys.executable,
        "spark.trspark.mode": "always",
        "spark.trspark.recursionDepth": "4",
        "spark.trspark.remote.path": "file:///tmp/bk",
        "spark.trspark.scheduling": "false",
    }


def test_engine_start_timeout_is_a_setting_of_its_own_with_a_generous_default(fake_jar: str) -> None:
    from trspark.engine.settings import TRConfig
    from trspark.keys import BY_FULL
    from trspark.live.config import from_spark_conf

    key = BY_FULL["spark.trspark.engine.startTimeout"]
    assert key.default == TRConfig().engine_start_timeout >= 60.0
    assert "spark.trspark.engine.startTimeout" not in trspark.spark_conf()  # the plugin's own default applies
    assert trspark.spark_conf(engine_start_timeout=300)["spark.trspark.engine.startTimeout"] == "300"
    assert from_spark_conf({"spark.trspark.engine.startTimeout": "2.5"}).engine_start_timeout == 2.5


@pytest.fixture
def other_python(tmp_path: Path) -> str:
    """An executable file that is not this interpreter."""
    path = tmp_path / "bin" / "python"
    path.parent.mkdir()
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def test_python_option_overrides_the_interpreter(fake_jar: str, other_python: str) -> None:
    assert trspark.spark_conf(python=other_python)["spark.trspark.python"] == other_python


def test_configure_keeps_an_interpreter_the_target_names_unless_told_otherwise(fake_jar: str, other_python: str) -> None:
    settings = {"spark.trspark.python": "/opt/engine-venv/bin/python"}
    assert trspark.configure(settings, mode="tr")["spark.trspark.python"] == "/opt/engine-venv/bin/python"
    assert trspark.configure(settings, python=other_python)["spark.trspark.python"] == other_python
    assert trspark.configure({})["spark.trspark.python"] == sys.executable


def test_a_python_that_cannot_be_run_is_refused_naming_the_argument_before_the_jar_is_built(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def no_build() -> str:
        raise AssertionError("the jar was built for settings that are refused")

    monkeypatch.setattr(sparkconf, "plugin_jar", no_build)
    not_executable = tmp_path / "python"
    not_executable.write_text("#!/bin/sh\n")
    for bad in (str(tmp_path / "no-such-python"), str(not_executable), str(tmp_path), "no-such-command-on-path"):
        with pytest.raises(ConfigError, match=re.escape(f"python={bad!r} (spark.trspark.python)")):
            trspark.spark_conf(python=bad)
        target: dict[str, str] = {}
        with pytest.raises(ConfigError, match=re.escape(f"python={bad!r}")):
            trspark.configure(target, python=bad)
        assert target == {}
    monkeypatch.setattr(sparkconf, "plugin_jar", lambda: FAKE_JAR)
    python_on_path = Path(sys.executable).name  # a name the JVM finds on PATH is run as such
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    assert trspark.spark_conf(python=python_on_path)["spark.trspark.python"] == python_on_path


def test_an_option_given_as_none_is_left_unset(fake_jar: str) -> None:
    conf = trspark.spark_conf(python=None, pool=None, remote_path=None, history_url=None, pool_lifetimes=None)
    assert conf["spark.trspark.python"] == sys.executable
    assert not {"spark.trspark.pool", "spark.trspark.remote.path", "spark.trspark.history.url"} & set(conf)
    assert "None" not in conf.values()
    with pytest.raises(ConfigError, match="unknown trspark option 'colour'"):
        trspark.spark_conf(colour=None)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mode": "sometimes"}, "spark.trspark.mode='sometimes' is not valid; allowed: tr | always | never"),
        ({"gamma": -1}, "spark.trspark.gamma='-1' is not valid; allowed: a number > 0"),
        ({"recursionDepth": 100}, "allowed: an integer 0..64"),
        ({"lifetime": "gamma:k=2"}, "unknown lifetime model 'gamma'"),
        ({"colour": "red"}, "unknown trspark option 'colour'; known: mode,"),
        ({"gama": 2}, "unknown trspark option 'gama' (did you mean 'gamma'?); known: mode,"),
        ({"recursion_dept": 3}, "unknown trspark option 'recursion_dept' (did you mean 'recursion_depth'?)"),
        # Booleans as Spark reads its own; a number's error says what the key allows, not Python's words.
        ({"duplication": "yes"}, "spark.trspark.duplication='yes' is not valid; allowed: true | false"),
        ({"notice_interval": "1x"}, "spark.trspark.notice.interval='1x' is not valid; allowed: seconds > 0: a number, "
                                    "or with a unit: 500ms, 30s, 2min, 1h"),
        ({"recursion_depth": "four"}, "spark.trspark.recursionDepth='four' is not valid; allowed: an integer 0..64"),
        ({"recursion_depth": 3, "recursionDepth": 4}, "spark.trspark.recursionDepth is given twice"),
        ({"engine_start_timeout": 0}, "spark.trspark.engine.startTimeout='0' is not valid; allowed: seconds > 0"),
        ({"engine.startTimeout": "soon"}, "spark.trspark.engine.startTimeout='soon' is not valid"),
        ({"engine_start_timeout": "inf"}, "spark.trspark.engine.startTimeout='inf' is not valid; allowed: seconds > 0"),
        ({"local_bandwidth": "inf"}, "spark.trspark.bandwidth.local='inf' is not valid; allowed:"),
        ({"engine_queue_capacity": 0}, "spark.trspark.engine.queueCapacity='0' is not valid; allowed: an integer 1..10000000"),
        ({"engine_queue_capacity": "1e4"}, "spark.trspark.engine.queueCapacity='1e4' is not valid"),
        # Finite, but a copy's time or a stage's start estimate would overflow in the engine.
        ({"local_bandwidth": "1e-300"}, "spark.trspark.bandwidth.local='1e-300' is not valid; allowed: bytes/s >= 1"),
        ({"alpha": "1e308"}, "spark.trspark.alpha='1e308' is not valid; allowed: a number 1..1000000"),
        ({"remote_cap": "1e400"}, "spark.trspark.bandwidth.remoteCap='1e400' is not valid"),
        ({"sizing_rate": "nan"}, "spark.trspark.sizing.rate='nan' is not valid"),
        # Python reads 1_0 as 10, the plugin's JVM does not read it at all.
        ({"period": "1_0"}, "spark.trspark.period='1_0' is not valid"),
        ({"backup_throttle": "5_0m"}, "spark.trspark.backup.throttle='5_0m' is not valid"),
        ({"recursion_depth": "1_0"}, "spark.trspark.recursionDepth='1_0' is not valid"),
        # Python reads other scripts' digits and spaces too; the JVM refuses them at start-up.
        ({"period": "\uff11\uff10"}, "spark.trspark.period='\uff11\uff10' is not valid"),
        ({"engine_timeout": "5\u3000"}, "spark.trspark.engine.timeout='5\\u3000' is not valid"),
        ({"backup_throttle": "\u0665m"}, "spark.trspark.backup.throttle='\u0665m' is not valid"),
        # Python's strip() takes other spaces off too; the JVM's trim() only ASCII blanks and controls.
        ({"mode": "tr\u3000"}, "spark.trspark.mode='tr\\u3000' is not valid"),
        ({"pool": "spot\xa0"}, "spark.trspark.pool='spot\\xa0' is not valid"),
        ({"notice_signal": "\u2003PWR"}, "spark.trspark.notice.signal='\\u2003PWR' is not valid"),
        ({"remote_path": "/mnt/backups"}, "spark.trspark.remote.path='/mnt/backups' is not valid (a URL with a scheme"),
        ({"notice_signal": "PRW"}, "spark.trspark.notice.signal='PRW' is not valid; allowed: none or a signal name: ALRM"),
        ({"notice_signal": "KILL"}, "spark.trspark.notice.signal='KILL' is not valid"),
        # Parsed by both checks, but every executor's poll would fail: "port out of range".
        ({"notice_url": "http://169.254.169.254:99999"}, "spark.trspark.notice.url='http://169.254.169.254:99999' is not valid"),
        ({"pool_lifetimes": "spot=stable"}, "pool_lifetimes='spot=stable' is not valid; allowed: a mapping"),
        # Each value allowed by its key, but no finite time grid for the engine.
        ({"lifetime": "deterministic:at=1e308"}, "these spark.trspark settings leave the engine unable to start"),
    ],
)
def test_bad_options_raise_config_error_naming_the_key(fake_jar: str, options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        trspark.spark_conf(**options)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "held, message",
    [
        ({"spark.trspark.sizing.lossFraction": "0.9"}, "spark.trspark.sizing.lossFraction=0.9"),
        ({"spark.trspark.pool.lifetime": "stable"}, "'spark.trspark.pool.lifetime' is not a valid pool setting"),
        ({"spark.trspark.history.url": "/proc/no-such-dir/history"}, "history"),
    ],
)
def test_configure_checks_the_settings_a_target_holds_and_leaves_it_as_it_was_when_they_fail(
        fake_jar: str, held: dict[str, str], message: str) -> None:
    target = dict(held)
    with pytest.raises(ConfigError, match=re.escape(message)):
        trspark.configure(target, mode="tr")
    assert target == held


def test_configure_appends_to_existing_jars_and_plugins_of_a_dict(fake_jar: str) -> None:
    settings = {"spark.jars": "/a.jar, /b.jar", "spark.plugins": "com.example.Other", "spark.app.name": "x"}
    assert trspark.configure(settings, mode="never") is settings
    assert settings["spark.jars"] == f"/a.jar,/b.jar,{fake_jar}"
    assert settings["spark.plugins"] == "com.example.Other,org.apache.spark.trspark.TRSparkPlugin"
    assert settings["spark.trspark.mode"] == "never" and settings["spark.app.name"] == "x"
    trspark.configure(settings)  # applying twice does not duplicate list entries
    assert settings["spark.jars"].count(fake_jar) == 1


def test_configure_sparkconf_and_builder_without_starting_spark(fake_jar: str) -> None:
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    conf = SparkConf(loadDefaults=False).set("spark.jars", "/x.jar")
    assert trspark.configure(conf, gamma=2) is conf
    assert conf.get("spark.jars") == f"/x.jar,{fake_jar}" and conf.get("spark.trspark.gamma") == "2"

    builder = SparkSession.builder.config("spark.plugins", "com.example.P")
    assert trspark.configure(builder, mode="always") is builder
    options = builder._options
    assert options["spark.plugins"] == "com.example.P,org.apache.spark.trspark.TRSparkPlugin"
    assert options["spark.jars"] == fake_jar and options["spark.trspark.mode"] == "always"


def test_a_builder_whose_python_cannot_import_the_engine_is_refused(fake_jar: str, tmp_path: Path) -> None:
    from pyspark.sql import SparkSession

    python = tmp_path / "python3"  # as a system interpreter without numpy answers the import
    python.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'numpy'\" >&2\nexit 1\n")
    python.chmod(0o755)
    builder = SparkSession.builder.appName("never-started")
    with pytest.raises(ConfigError, match=re.escape(f"python={str(python)!r} (spark.trspark.python) cannot run the "
                                                    "engine (ModuleNotFoundError: No module named 'numpy')")):
        trspark.configure(builder, mode="tr", python=str(python))
    assert "spark.plugins" not in builder._options
    # Settings for elsewhere (a dict, spark_conf) name an interpreter of the cluster: not run here.
    assert trspark.spark_conf(python=str(python))["spark.trspark.python"] == str(python)


def test_configure_rejects_other_objects(fake_jar: str) -> None:
    with pytest.raises(TypeError, match="SparkSession.Builder, a SparkConf or a dict"):
        trspark.configure(42)


def test_missing_shim_module_gives_a_fix_it_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trspark.live.shim", None)  # import of it raises ImportError
    with pytest.raises(RuntimeError, match="trspark build-shim"):
        sparkconf.plugin_jar()


# A fresh interpreter: the plugin jar must be on the driver's class path when its JVM starts, which
# a JVM gateway left running by another test module would not give.
SESSION_SCRIPT = textwrap.dedent("""
    from pyspark.sql import SparkSession
    import trspark
    builder = SparkSession.builder.master("local[1]").appName("trspark-configure-test")
    builder = builder.config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "3")
    spark = trspark.configure(builder, mode="tr").getOrCreate()  # tr: the plugin starts the engine
    try:
        df = spark.range(0, 1000).selectExpr("id % 7 AS k", "id AS v").groupBy("k").sum("v").orderBy("k")
        print("ROWS", [(r[0], r[1]) for r in df.collect()])
        print("PLUGINS", spark.sparkContext.getConf().get("spark.plugins"))
        # While it runs, getOrCreate() would return it: the same settings again are fine, others refused.
        assert trspark.configure(SparkSession.builder, mode="tr").getOrCreate() is spark
        # Values that mean the running ones are the same settings: another spelling, or the default of one unset.
        assert trspark.configure(SparkSession.builder, mode="TR", period=5.0).getOrCreate() is spark
        try:
            trspark.configure(SparkSession.builder, mode="always")
        except RuntimeError as exc:
            print("REFUSED", exc)
    finally:
        spark.stop()
""")
# A session started without trspark: configuring a builder then would change nothing.
PLAIN_SESSION_SCRIPT = textwrap.dedent("""
    from pyspark.sql import SparkSession
    import trspark
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    try:
        trspark.configure(SparkSession.builder, mode="tr")
    except RuntimeError as exc:
        print("REFUSED", exc)
    finally:
        spark.stop()
""")


@pytest.mark.spark
def test_local_session_built_with_configure_runs_a_query() -> None:
    sparkconf.plugin_jar()  # built here: a jar that does not build fails the test
    # ~15 s on an idle machine; the cap is for a shared, heavily loaded one (75 s start-up seen).
    proc = subprocess.run([sys.executable, "-c", SESSION_SCRIPT], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = [(k, sum(v for v in range(1000) if v % 7 == k)) for k in range(7)]
    assert f"ROWS {expected}" in proc.stdout
    assert "PLUGINS org.apache.spark.trspark.TRSparkPlugin" in proc.stdout
    # The plugin started `python -m trspark.live` (its stderr is inherited) and fed it events.
    assert "trspark engine INFO: policy tr for local-" in proc.stderr, proc.stderr[-3000:]
    summary = json.loads(proc.stderr.split("session ended: ", 1)[1].splitlines()[0])
    assert summary["events"] > 0 and summary["jobs_ended"] >= 1
    assert summary["malformed"] == 0 and summary["policy_errors"] == 0
    refused = [line for line in proc.stdout.splitlines() if line.startswith("REFUSED")]
    assert len(refused) == 1 and "is running with other values of spark.trspark.mode" in refused[0], proc.stdout
    assert "stop it first (spark.stop())" in refused[0]


@pytest.mark.spark
def test_configuring_a_builder_while_a_session_without_trspark_runs_is_refused() -> None:
    proc = subprocess.run([sys.executable, "-c", PLAIN_SESSION_SCRIPT], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "is running without the trspark plugin, and getOrCreate() would return it unchanged" in proc.stdout, proc.stdout


def test_configure_checks_a_dicts_python_values_as_spark_will_read_them(fake_jar: str) -> None:
    conf = trspark.configure({"spark.trspark.scheduling": True, "spark.trspark.gamma": 2})
    assert conf["spark.trspark.scheduling"] is True  # the caller's own values are left as given
    with pytest.raises(ConfigError, match="spark.trspark.mode='None' is not valid"):
        trspark.configure({"spark.trspark.mode": None})


def test_every_key_suffix_in_snake_case_is_an_option(fake_jar: str) -> None:
    conf = trspark.spark_conf(lifetime_knowledge="fitted", backup_targets="remote", bandwidth_local="100m",
                              sizing_loss_fraction=0.1, scheduling_warm_first=True)
    assert conf["spark.trspark.lifetime.knowledge"] == "fitted"
    assert conf["spark.trspark.backup.targets"] == "remote"
    assert conf["spark.trspark.bandwidth.local"] == "100m"
    assert conf["spark.trspark.sizing.lossFraction"] == "0.1"
    assert conf["spark.trspark.scheduling.warmFirst"] == "true"
    with pytest.raises(ConfigError, match=r"pool_lifetimes=\[\(NAME, SPEC\)"):
        trspark.spark_conf(**{"spark.trspark.pool.spot.lifetime": "stable"})


def test_an_unknown_spark_key_names_the_closest_known_one() -> None:
    from trspark.live.config import from_spark_conf

    for given, close in (("spark.trspark.gama", "spark.trspark.gamma"),
                         ("spark.trspark.histroy.url", "spark.trspark.history.url"),
                         ("spark.trspark.engine.queuecapacity", "spark.trspark.engine.queueCapacity")):
        with pytest.raises(ConfigError, match=re.escape(f"unknown setting {given!r} (did you mean {close!r}?); known settings:")):
            from_spark_conf({given: "1"})
    # Nothing close: no guess (the common prefix is not compared).
    with pytest.raises(ConfigError, match=re.escape("unknown setting 'spark.trspark.bogus'; known settings:")):
        from_spark_conf({"spark.trspark.bogus": "1"})


def test_a_running_sessions_setting_is_the_same_when_it_means_the_same() -> None:
    from trspark.live.sparkconf import _same_setting

    assert _same_setting("spark.trspark.mode", "tr", "TR") and _same_setting("spark.trspark.period", None, "5.0")
    # The driver writes the remote path back without its trailing '/'.
    assert _same_setting("spark.trspark.remote.path", "file:///mnt/b", "file:///mnt/b/")
    assert not _same_setting("spark.trspark.remote.path", "file:///mnt/b", "file:///mnt/c")
    assert not _same_setting("spark.trspark.mode", "tr", "always") and not _same_setting("spark.trspark.gamma", None, "2")
    assert not _same_setting("spark.app.name", "a", "b")
