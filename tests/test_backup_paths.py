"""Paths of remote backups and lifetime history are built only from validated ids: an id such as
``..`` can neither place files outside the store's root nor make ``trspark gc`` or the plugin's
end-of-application delete reach beyond it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from py4j.protocol import Py4JJavaError

from tests.jvm_gateway import Jvm, plain_jvm, wait_for
from trspark.cli import cli
from trspark.live.history import HistoryStore, LifetimeRecord

BAD_IDS = ["..", ".", "", "../escape", "a/b", ".hidden", "x y"]


@pytest.fixture(scope="module")
def jvm() -> Iterator[Jvm]:
    with plain_jvm() as j:
        yield j


def backups(jvm: Jvm, root: Path, app_id: str) -> object:
    conf = jvm.gateway.jvm.org.apache.hadoop.conf.Configuration()
    return jvm.trspark.RemoteBackups(root.as_uri(), app_id, conf)


@pytest.mark.parametrize("app_id", BAD_IDS)
def test_the_plugin_refuses_an_application_id_that_is_not_one_path_component(jvm: Jvm, tmp_path: Path,
                                                                               app_id: str) -> None:
    with pytest.raises(Py4JJavaError, match="cannot name a backup directory"):
        backups(jvm, tmp_path, app_id)


@pytest.mark.parametrize("app_id", ["app-20261126073754-0000", "local-1764142674000", "application_1_0001"])
def test_backups_of_a_spark_application_id_stay_in_its_directory(jvm: Jvm, tmp_path: Path, app_id: str) -> None:
    store = backups(jvm, tmp_path / "root", app_id)
    app_dir = tmp_path / "root" / app_id
    assert Path(store.appDir().toUri().getPath()) == app_dir  # type: ignore[attr-defined]
    for path in (store.indexPath(3, 17), store.dataPath(3, 17), store.markerPath(3, 17)):  # type: ignore[attr-defined]
        assert app_dir / "3" in Path(path.toUri().getPath()).parents


def test_history_names_cannot_climb_out_of_the_store(tmp_path: Path) -> None:
    root = tmp_path / "store" / "history"
    store = HistoryStore(str(root))
    for name in ("..", "../escape", "."):
        store.append([LifetimeRecord(name, name, "1", 5.0, True)])
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and all(root in p.parents for p in written), written
    assert {r.duration for name in ("..", "../escape", ".") for r in store.load(name)} == {5.0}


def stale_dir(root: Path, name: str) -> Path:
    folder = root / name / "0" / "123"
    folder.mkdir(parents=True)
    (folder / "shuffle_0_5_0.data").write_bytes(b"x")
    stamp = time.time() - 7200
    for path in (folder / "shuffle_0_5_0.data", folder, folder.parent, folder.parent.parent):
        os.utime(path, (stamp, stamp))
    return root / name


def test_gc_deletes_only_directories_named_like_an_application(tmp_path: Path) -> None:
    crashed = stale_dir(tmp_path, "app-20261126073754-0000")
    others = [stale_dir(tmp_path, name) for name in (".snapshot", "old backups")]
    result = CliRunner().invoke(cli, ["gc", "--path", tmp_path.as_uri(), "--older-than", "1h"])
    assert result.exit_code == 0, result.output
    assert "1 application directory deleted" in result.output
    assert not crashed.exists()
    assert all(o.exists() for o in others)


def age(root: Path, hours: float = 2.0) -> None:
    """Every file and folder under ``root`` (itself included) last modified ``hours`` ago."""
    stamp = time.time() - hours * 3600
    for path in [*root.rglob("*"), root]:
        os.utime(path, (stamp, stamp))


def test_gc_leaves_every_directory_that_holds_anything_but_backups(tmp_path: Path) -> None:
    """A wrong ``--path`` (``/tmp``, a home folder) must find nothing: only the plugin's layout goes."""
    def make(name: str, *files: str) -> Path:
        for file in files:
            (tmp_path / name / file).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name / file).write_bytes(b"x")
        (tmp_path / name).mkdir(exist_ok=True)
        return tmp_path / name

    crashed = make("local-1795309018899", "3/17/shuffle_3_8_0.index", "3/17/shuffle_3_8_0.data",
                   "3/9/shuffle_3_8_0.trspark-ok", "3/40/.shuffle_3_9_0.data.0f8fad5b-d9cb-469f-a165-70867728950e.trspark-tmp")
    kept = [make("Documents", "report.txt"), make("projects", "trspark/README.md"),
            make("app-20240101010101-0001", "0/12/shuffle_0_1_0.data", "notes.txt"),  # one foreign file
            make("spark-0123456789abcdef0123456789abcdef", "blockmgr-1/0c/shuffle_0_1_0.data"),
            make("app-20240101010101-0002", "4/12/shuffle_5_1_0.data"),  # shuffle ids disagree
            make("app-20240101010101-0003")]  # empty: nothing to reclaim
    age(tmp_path)
    result = CliRunner().invoke(cli, ["gc", "--path", tmp_path.as_uri(), "--older-than", "1h"])
    assert result.exit_code == 0, result.output
    assert "1 application directory deleted" in result.output
    assert not crashed.exists() and all(k.exists() for k in kept)


def test_gc_deletes_backups_the_plugin_wrote_through_hadoops_local_file_system(jvm: Jvm, tmp_path: Path) -> None:
    """Hadoop's file:// store (the default path) writes a hidden checksum file beside each file."""
    index, data = tmp_path / "shuffle_2_7_0.index", tmp_path / "shuffle_2_7_0.data"
    index.write_bytes(bytes(16))
    data.write_bytes(b"rows" * 100)
    root = tmp_path / "root"
    assert backups(jvm, root, "app-20261126073754-0007").writeFiles(2, 7, str(index), str(data)) == 416  # type: ignore[attr-defined]
    written = {p.name for p in (root / "app-20261126073754-0007").rglob("*") if p.is_file()}
    assert ".shuffle_2_7_0.data.crc" in written
    age(root)
    result = CliRunner().invoke(cli, ["gc", "--path", root.as_uri(), "--older-than", "1h"])
    assert result.exit_code == 0, result.output
    assert "1 application directory deleted" in result.output
    assert not (root / "app-20261126073754-0007").exists()


@pytest.mark.parametrize("what", ["missing", "a file"])
def test_gc_on_a_path_that_is_no_directory_stops_naming_it(tmp_path: Path, what: str) -> None:
    path = tmp_path / "backups"
    if what == "a file":
        path.write_text("x")
    result = CliRunner().invoke(cli, ["gc", "--path", path.as_uri()])
    assert result.exit_code == 2, result.output
    assert "--path" in result.output and "is not a directory" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("args", "message"), [
    (["--path", "file:///tmp", "--local-dir", "/tmp"], "--local-dir finds the plugin's default path; with --path it would be ignored"),
    (["--local-dir", "{tmp}/nowhere"], "Invalid value for --local-dir: '{tmp}/nowhere': no such folder"),
    (["--local-dir", ""], "Invalid value for --local-dir: '': no such folder"),  # not the working folder
    (["--local-dir", "{tmp}/local"], "Invalid value for --local-dir: 'file://{tmp}/local/trspark-backups' is not a directory"),
])
def test_gc_refuses_a_local_dir_it_cannot_use_naming_it(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "trspark-backups").write_text("x")  # a file where the plugin's folder would be
    result = CliRunner().invoke(cli, ["gc", "--dry-run", *(a.format(tmp=tmp_path) for a in args)])
    assert result.exit_code == 2, result.output
    assert message.format(tmp=tmp_path) in result.output



def test_gc_on_a_store_whose_library_cannot_load_gives_its_first_line(monkeypatch: pytest.MonkeyPatch) -> None:
    # pyarrow's hdfs:// without a JVM raises one error listing each of some 90 paths it tried
    import fsspec

    tried = "\n".join(f"dlopen(/usr/java/{n}/libjvm.so) failed" for n in range(90))

    def unloadable(url: str, **_options: object) -> None:
        raise OSError(f"Unable to load libjvm\n{tried}")

    monkeypatch.setattr(fsspec.core, "url_to_fs", unloadable)
    result = CliRunner().invoke(cli, ["gc", "--path", "hdfs://127.0.0.1:9/backups"])
    assert result.exit_code == 2, result.output
    assert "cannot be listed (Unable to load libjvm)" in result.output and "dlopen" not in result.output

@pytest.mark.azurite
def test_gc_on_azurite_deletes_a_crashed_applications_backups_and_keeps_the_rest(
        azurite: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``trspark gc`` through fsspec (adlfs) on a blob container: only an application-named
    directory whose newest blob is older than ``--older-than`` goes; blob stores have no real
    directories, so a live application's directory is recognised by its newest blob alone."""
    from azure.storage.blob import BlobServiceClient

    from trspark.live import shim

    container = BlobServiceClient.from_connection_string(azurite).create_container("backups")
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite)

    def put(*names: str) -> float:
        """Upload one small blob per name; the newest ``Last-Modified`` (epoch s, whole seconds)."""
        blobs = [container.upload_blob(name, b"x" * 64) for name in names]
        return max(b.get_blob_properties().last_modified.timestamp() for b in blobs)

    crashed, live = "trspark/app-20261126080000-0000", "trspark/app-20261126090000-0001"
    old = put(f"{crashed}/0/123/shuffle_0_5_0.index", f"{crashed}/0/123/shuffle_0_5_0.data",
              f"{crashed}/2/7/shuffle_2_1_0.data", f"{live}/0/45/shuffle_0_1_0.data",
              "trspark/old backups/0/1/shuffle_0_0_0.data", "trspark/app-20261126070000-0002",
              "elsewhere/app-20261126080000-0000/0/1/shuffle_0_0_0.data")
    wait_for(lambda: time.time() >= old + 3, what="three seconds past the first blobs", timeout=10)
    # The live application keeps writing: its newest blob is at least two seconds younger.
    new = put(f"{live}/1/77/shuffle_1_2_0.data")
    assert new - old >= 2
    before = sorted(container.list_blob_names())
    # gc reads "now" once the live application's newest blob is a second old: the crashed one's
    # newest is then at least three seconds old, so "--older-than 2s" splits them for certain.
    monkeypatch.setattr(shim, "time", SimpleNamespace(time=lambda: new + 1.0, monotonic=time.monotonic))
    url = "abfs://backups/trspark"

    dry = CliRunner().invoke(cli, ["gc", "--path", url, "--older-than", "2s", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert dry.output.splitlines() == [f"looking in {url}", f"would delete abfs://backups/{crashed}",
                                       "1 application directory found; 1 written to less than 2s ago kept"]
    assert sorted(container.list_blob_names()) == before

    result = CliRunner().invoke(cli, ["gc", "--path", url, "--older-than", "2s"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [f"looking in {url}", f"deleting abfs://backups/{crashed}",
                                          "1 application directory deleted; 1 written to less than 2s ago kept"]
    assert sorted(container.list_blob_names()) == [n for n in before if not n.startswith(crashed + "/")]
    assert len(before) - len(list(container.list_blob_names())) == 3
