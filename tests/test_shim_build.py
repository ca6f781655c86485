"""The shim jar build (cached by source hash) and ``trspark gc`` -- no Spark cluster needed."""

from __future__ import annotations

import os
import shutil
import time
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from trspark.cli import cli
from trspark.live import shim


def test_jar_is_cached_and_holds_the_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    first = Path(shim.jar_path())  # builds if this checkout has no jar for its sources yet

    def no_compile(root: Path, target: Path) -> None:
        raise AssertionError("a second jar_path() must not recompile")

    monkeypatch.setattr(shim, "compile_jar", no_compile)
    assert Path(shim.jar_path()) == first
    assert first.name == f"trspark-shim-{shim.source_hash()}.jar"
    with zipfile.ZipFile(first) as jar:
        names = set(jar.namelist())
        services = jar.read("META-INF/services/org.apache.spark.scheduler.ExternalClusterManager").decode()
    for cls in ("TRSparkPlugin", "TRDriverPlugin", "TRExecutorPlugin", "TRClusterManager", "TRTaskScheduler"):
        assert f"org/apache/spark/trspark/{cls}.class" in names
    assert "org.apache.spark.trspark.TRClusterManager" in services


def test_source_hash_follows_the_sources(tmp_path: Path) -> None:
    copy = tmp_path / "jvm-shim"
    shutil.copytree(shim.shim_root(), copy)
    assert shim.source_hash(copy) == shim.source_hash()
    plugin = copy / "src/main/scala/org/apache/spark/trspark/TRSparkPlugin.scala"
    plugin.write_text(plugin.read_text() + "\n// edited\n")
    assert shim.source_hash(copy) != shim.source_hash()


def test_packaged_sources_are_the_checkout_sources() -> None:
    # trspark/_shim is what a wheel carries; it must be the same tree the checkout builds from.
    packaged = Path(shim.__file__).parent.parent / "_shim"
    assert shim.source_hash(packaged) == shim.source_hash()


def _app_dir(root: Path, name: str, age_s: float) -> Path:
    app = root / name / "0" / "123"
    app.mkdir(parents=True)
    data = app / "shuffle_0_5_0.data"
    data.write_bytes(b"x" * 10)
    stamp = time.time() - age_s
    for path in (data, app, app.parent, app.parent.parent):
        os.utime(path, (stamp, stamp))
    return root / name


def test_gc_deletes_only_stale_applications(tmp_path: Path) -> None:
    stale = _app_dir(tmp_path, "app-crashed", age_s=7200)
    fresh = _app_dir(tmp_path, "app-running", age_s=10)
    result = CliRunner().invoke(cli, ["gc", "--path", f"file://{tmp_path}", "--older-than", "1h"])
    assert result.exit_code == 0, result.output
    assert "1 application directory deleted; 1 written to less than 1h ago kept" in result.output
    assert not stale.exists()
    assert fresh.exists()


def test_gc_dry_run_keeps_everything(tmp_path: Path) -> None:
    stale = _app_dir(tmp_path, "app-crashed", age_s=7200)
    for older_than in ("30m", "2min", "7200000ms"):  # Spark's duration units, as in spark.trspark.*
        result = CliRunner().invoke(cli, ["gc", "--path", str(tmp_path), "--older-than", older_than, "--dry-run"])
        assert result.exit_code == 0, result.output
        assert "would delete" in result.output and "1 application directory found" in result.output
    assert stale.exists()


def test_gc_rejects_a_bad_duration(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["gc", "--path", str(tmp_path), "--older-than", "soon"])
    assert result.exit_code == 2
    assert "--older-than" in result.output
    assert "2min" in result.output


def test_gc_looks_where_the_plugin_writes_by_default_and_says_where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The plugin's default: <spark.local.dir (first folder)>/trspark-backups, else the JVM's
    # java.io.tmpdir, which is /tmp on Linux whatever TMPDIR says.
    from trspark.live.shim import default_remote_path

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert default_remote_path() == "file:///tmp/trspark-backups"
    assert default_remote_path(f"{tmp_path},/other") == f"file://{tmp_path}/trspark-backups"
    stale = _app_dir(tmp_path / "trspark-backups", "app-crashed", age_s=7200)
    result = CliRunner().invoke(cli, ["gc", "--local-dir", str(tmp_path), "--older-than", "1h"])
    assert result.exit_code == 0, result.output
    assert f"looking in file://{tmp_path}/trspark-backups" in result.output
    assert "1 application directory deleted" in result.output and not stale.exists()


def test_a_jar_handed_out_is_kept_a_day_after_that_not_after_its_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An application started today on a jar built two days ago still serves it to new executors.
    monkeypatch.setattr(shim, "_jar_dirs", lambda: iter([tmp_path]))
    two_days_ago = time.time() - 2 * 86400
    in_use, unused = tmp_path / "trspark-shim-a.jar", tmp_path / "trspark-shim-old.jar"
    for jar in (in_use, unused):
        jar.write_bytes(b"jar")
        os.utime(jar, (two_days_ago, two_days_ago))
    monkeypatch.setattr(shim, "source_hash", lambda root=None: "a")
    assert shim.build() == in_use  # cached: handed out again
    monkeypatch.setattr(shim, "source_hash", lambda root=None: "b")  # the sources changed
    monkeypatch.setattr(shim, "compile_jar", lambda root, target: target.write_bytes(b"new"))
    assert shim.build() == tmp_path / "trspark-shim-b.jar"
    assert in_use.exists() and not unused.exists()
