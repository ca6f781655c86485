"""Build and locate the JVM shim jar; the ``jar-path``, ``build-shim`` and ``gc`` commands.

The Scala sources of ``org.apache.spark.trspark`` are compiled with the Scala compiler that
pyspark ships in its ``jars/`` directory (no Maven or sbt)::

    java -cp "<pyspark>/jars/*" scala.tools.nsc.Main -usejavacp -d <tmp> <sources>

and packed into ``trspark-shim-<hash>.jar``, where ``<hash>`` covers the sources, the resource
files and the pyspark version, so an edit or a pyspark upgrade rebuilds and an unchanged tree
never does. The jar lives in ``trspark/_jars/`` or, when the package directory is read-only
(a system-wide install), in ``~/.cache/trspark/``.

Where the sources come from: a source checkout has them in ``jvm-shim/`` next to the package;
an installed wheel carries the same tree as package data under ``trspark/_shim/`` (a symlink to
``../jvm-shim`` in the checkout, which setuptools follows when it builds the wheel).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from trspark.setting_parsers import SECONDS_EXAMPLE, seconds

PLUGIN_CLASS = "org.apache.spark.trspark.TRSparkPlugin"
STALE_JAR_SECONDS = 86_400.0
# The sources and the jar cache stay at the top of the trspark package (package data there).
_PACKAGE_DIR = Path(__file__).resolve().parent.parent
_SOURCE_ROOTS = (_PACKAGE_DIR.parent / "jvm-shim", _PACKAGE_DIR / "_shim")


class ShimBuildError(RuntimeError):
    """The Scala shim could not be compiled (the message carries the compiler's output)."""


def shim_root() -> Path:
    """The ``jvm-shim`` tree: the checkout's, else the copy packaged inside ``trspark``."""
    for root in _SOURCE_ROOTS:
        if (root / "src" / "main" / "scala").is_dir():
            return root
    raise ShimBuildError(f"Scala sources of the shim not found (looked in {', '.join(map(str, _SOURCE_ROOTS))})")


def spark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def _files(root: Path, subdir: str, suffix: str = "") -> list[Path]:
    base = root / "src" / "main" / subdir
    if not base.is_dir():
        return []
    return sorted(p for p in base.rglob("*") if p.is_file() and p.name.endswith(suffix))


def source_hash(root: Path | None = None) -> str:
    """SHA-256 (first 16 hex digits) of every source and resource file and the pyspark version."""
    import pyspark

    root = root or shim_root()
    digest = hashlib.sha256(f"pyspark={pyspark.__version__}\n".encode())
    for path in _files(root, "scala", ".scala") + _files(root, "resources"):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _jar_dirs() -> Iterator[Path]:
    yield _PACKAGE_DIR / "_jars"
    yield Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "trspark"


def _writable_jar_dir() -> Path:
    for candidate in _jar_dirs():
        try:
            candidate.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(candidate, os.W_OK):
            return candidate
    raise ShimBuildError("no writable directory for the shim jar (tried trspark/_jars and ~/.cache/trspark)")


def cached_jar(digest: str | None = None) -> Path | None:
    """The already-built jar for the current sources, if any."""
    name = f"trspark-shim-{digest or source_hash()}.jar"
    return next((d / name for d in _jar_dirs() if (d / name).is_file()), None)


def compile_jar(root: Path, target: Path) -> None:
    """Compile ``root``'s Scala sources and pack them with its resources into ``target``."""
    sources = _files(root, "scala", ".scala")
    if not sources:
        raise ShimBuildError(f"no .scala files under {root / 'src/main/scala'}")
    java = shutil.which("java") or str(Path(os.environ.get("JAVA_HOME", "/usr")) / "bin" / "java")
    with tempfile.TemporaryDirectory(prefix="trspark-shim-") as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        cmd = [java, "-cp", f"{spark_jars_dir()}/*", "scala.tools.nsc.Main", "-usejavacp", "-deprecation",
               "-d", str(classes), *map(str, sources)]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise ShimBuildError(f"scalac failed ({result.returncode}):\n{result.stdout}{result.stderr}")
        # Write under a temporary name and rename, so a concurrent user never sees half a jar.
        partial = target.with_suffix(f".{os.getpid()}.part")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: trspark\n\n")
            for path in sorted(classes.rglob("*.class")):
                jar.write(path, path.relative_to(classes).as_posix())
            resources = root / "src" / "main" / "resources"
            for path in _files(root, "resources"):
                jar.write(path, path.relative_to(resources).as_posix())
        partial.replace(target)


def _mark_used(jar: Path) -> None:
    """Renew ``jar``'s modification time: the cleanup in :func:`build` counts a day from it."""
    # A read-only install cannot be renewed, and nobody without write access cleans it up either.
    with contextlib.suppress(OSError):
        os.utime(jar)


def build(force: bool = False) -> Path:
    """Return the shim jar for the current sources, compiling it if it is not cached (or ``force``)."""
    root = shim_root()
    digest = source_hash(root)
    existing = cached_jar(digest)
    if existing is not None and not force:
        _mark_used(existing)
        return existing
    target = (existing.parent if existing else _writable_jar_dir()) / f"trspark-shim-{digest}.jar"
    compile_jar(root, target)
    # Older jars may still be served to the executors of a running application: keep them a day
    # after their last use (a cached jar's time is renewed whenever it is handed out).
    for stale in target.parent.glob("trspark-shim-*.jar"):
        with contextlib.suppress(FileNotFoundError):  # another build may have just removed it
            if stale != target and time.time() - stale.stat().st_mtime > STALE_JAR_SECONDS:
                stale.unlink()
    return target


def jar_path() -> str:
    """Absolute path of the plugin jar (built on first use); pass it to ``--jars``."""
    return str(build())


@click.command("jar-path")
def jar_path_command() -> None:
    """Print the path of the plugin jar (building it if needed)."""
    try:
        click.echo(jar_path())
    except ShimBuildError as exc:
        raise click.ClickException(str(exc)) from exc


@click.command("build-shim")
def build_shim_command() -> None:
    """Compile the Scala plugin with the compiler shipped in pyspark (always recompiles)."""
    started = time.monotonic()
    try:
        path = build(force=True)
    except ShimBuildError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"built {path} in {time.monotonic() - started:.1f} s")


def default_remote_path(local_dir: str | None = None) -> str:
    """Where the plugin writes remote backups when ``spark.trspark.remote.path`` is empty.

    ``file://<spark.local.dir>/trspark-backups`` (its first folder, made absolute), else under the
    JVM's ``java.io.tmpdir``: ``/tmp`` on Linux whatever ``TMPDIR`` says, the platform's temp folder elsewhere.
    """
    if not local_dir:
        local_dir = "/tmp" if sys.platform.startswith("linux") else tempfile.gettempdir()
    return f"file://{_java_absolute(local_dir.split(',')[0].strip())}/trspark-backups"


def _java_absolute(path: str) -> str:
    """``path`` as Java's ``File.getAbsolutePath`` gives it: joined to the working folder, ``..`` kept
    (across a symbolic link it names another folder than a resolved one would)."""
    joined = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    return re.sub("/+", "/", joined).rstrip("/") or "/"


# An application id the plugin accepts as a backup directory name (RemoteBackups.isAppId).
APP_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
# What the plugin writes under <appId>: <shuffleId>/<hash>/shuffle_<shuffleId>_<mapId>_0.<kind>, and
# while a file is being written, the same name hidden with a random suffix (RemoteBackups.place).
# Hadoop's local file system (file://) checksums each of them in a hidden ".<name>.crc" beside it.
_BACKUP_NAME = r"shuffle_(?P=shuffle)_\d+_0\.(?:index|data|trspark-ok)"
_WRITING = r"\.[0-9a-f-]+\.trspark-tmp"
BACKUP_FILE = re.compile(
    rf"(?P<shuffle>\d+)/\d+/(?:{_BACKUP_NAME}|\.{_BACKUP_NAME}(?:\.crc|{_WRITING})|\.\.{_BACKUP_NAME}{_WRITING}\.crc)")
BACKUP_DIR = re.compile(r"\d+(?:/\d+)?")


def app_dirs_idle(url: str, now: float | None = None) -> list[tuple[str, float]]:
    """Each application directory under ``url`` with the seconds since its newest file was written.

    The plugin writes backups to ``<url>/<appId>/<shuffleId>/<hash>/<file>`` and deletes
    ``<url>/<appId>`` when the application ends; what is left belongs to crashed applications.
    A directory counts only when it is named like an application id and holds nothing but that
    layout, so a wrong ``--path`` (``/tmp``, a home folder) finds nothing to delete.
    """
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    now = time.time() if now is None else now
    found = []
    for entry in fs.ls(root, detail=True):
        if entry["type"] != "directory" or not APP_ID.fullmatch(entry["name"].rstrip("/").rsplit("/", 1)[-1]):
            continue
        newest = _newest_backup(fs, entry["name"])
        if newest is not None:
            found.append((fs.unstrip_protocol(entry["name"]), now - newest))
    return found


def _newest_backup(fs: Any, app_dir: str) -> float | None:
    """The newest modification time (epoch s) under ``app_dir``; None unless it holds backups and only backups."""
    prefix = app_dir.rstrip("/") + "/"
    newest, files = 0.0, 0
    for name, info in fs.find(app_dir, detail=True, withdirs=True).items():
        if name.rstrip("/") + "/" == prefix:  # the directory itself
            relative = ""
        elif name.startswith(prefix):
            relative = name[len(prefix):]
        else:
            return None
        if info["type"] == "directory":
            if relative and not BACKUP_DIR.fullmatch(relative.rstrip("/")):
                return None
        elif BACKUP_FILE.fullmatch(relative):
            files += 1
        else:
            return None
        mtime = info.get("mtime") or info.get("last_modified") or info.get("created")
        newest = max(newest, mtime.timestamp() if hasattr(mtime, "timestamp") else float(mtime or 0.0))
    return newest if files else None


@click.command("gc")
@click.option("--path", "url", default=None,
              help="Backup root URL: your spark.trspark.remote.path (default: the plugin's default, see --local-dir).")
@click.option("--local-dir", default=None,
              help="Your spark.local.dir, for the plugin's default path <spark.local.dir>/trspark-backups "
                   "(default: the JVM's temp folder, /tmp on Linux).")
@click.option("--older-than", default="1h", show_default=True, help="Only delete apps idle this long: 90s, 30min, 12h, 7d.")
@click.option("--dry-run", is_flag=True, help="List what would be deleted.")
def gc_command(url: str | None, local_dir: str | None, older_than: str, dry_run: bool) -> None:
    """Delete remote backups left behind by crashed applications.

    Without --path it looks where the plugin writes when spark.trspark.remote.path is empty: a
    folder on each executor's host, so run it on every host.
    """
    import fsspec

    try:
        age = seconds(0.0)(older_than)
    except ValueError:
        raise click.BadParameter(f"{older_than!r}; allowed: seconds >= 0, {SECONDS_EXAMPLE}, 7d",
                                 param_hint="--older-than") from None
    given = url is not None
    if given and local_dir is not None:
        raise click.UsageError("--local-dir finds the plugin's default path; with --path it would be ignored: give one of them")
    first_dir = None if local_dir is None else local_dir.split(",")[0].strip()
    if first_dir is not None and not (first_dir and Path(first_dir).is_dir()):
        raise click.BadParameter(f"{local_dir!r}: no such folder; allowed: your spark.local.dir", param_hint="--local-dir")
    url = url or default_remote_path(local_dir)
    hint = "--path" if given else "--local-dir"  # the option the path came from, also when it is the default
    click.echo(f"looking in {url}")
    try:
        fs, root = fsspec.core.url_to_fs(url)
        if not fs.isdir(root):
            if given or fs.exists(root):  # the default folder is only made by a first backup on this host
                raise click.BadParameter(f"{url!r} is not a directory", param_hint=hint)
            found = []
        else:
            found = app_dirs_idle(url)
    except (ValueError, ImportError, OSError) as exc:
        # A library that cannot load its native part (libjvm for hdfs://) lists every path it tried: its first line says it.
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise click.BadParameter(f"{url!r} cannot be listed ({reason})", param_hint=hint) from None
    stale = [app_dir for app_dir, idle in found if idle >= age]
    failed = 0
    for app_dir in stale:
        click.echo(("would delete " if dry_run else "deleting ") + app_dir)
        if not dry_run:
            try:
                fs.rm(fsspec.core.url_to_fs(app_dir)[1], recursive=True)
            except OSError as exc:
                failed += 1
                click.echo(f"cannot delete {app_dir}: {exc}", err=True)
    done = len(stale) - failed
    kept = len(found) - len(stale)  # a running application's, or one that crashed less than --older-than ago
    click.echo(f"{done} application director{'y' if done == 1 else 'ies'} {'found' if dry_run else 'deleted'}"
               + (f"; {kept} written to less than {older_than} ago kept" if kept else ""))
    if failed:
        raise SystemExit(1)
