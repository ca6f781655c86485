"""Replacement executors that start warmer: a class-data-sharing archive of the executor JVM.

A new executor JVM spends its first seconds loading and verifying thousands of Spark classes,
before it registers and again in its first tasks. On transient capacity every replacement pays
this. The JDK can map those classes from an archive instead (class-data sharing, JDK 13+):

* while no archive exists, executors run with ``-XX:ArchiveClassesAtExit``: each writes the
  classes it loaded to ``dump-<tag>-<app>-<executor>.jsa`` in the archive directory when it
  exits (Spark fills in ``{{APP_ID}}`` and ``{{EXECUTOR_ID}}``);
* the next application takes the newest finished dump as ``executor-<tag>.jsa`` and starts
  its executors with ``-XX:SharedArchiveFile``.

``<tag>`` names the Spark and Java versions, so an upgrade starts a new archive. The JVM checks
an archive when it starts (same JDK build, same class path) and runs without it, with a
warning, when it does not match. A truncated dump (an executor killed while writing it) would
crash it instead, so each dump is tried once before it is adopted: a stale or broken archive
costs the saving, never the job.

Measured on a 2-core machine (``bench/warm_start.py``): replacements registered 1 s sooner
after a kill and ran their first job 0.5 s faster. No library does this; the JVM
options are the JDK's own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

ARCHIVE_PREFIX = "executor-"
DUMP_PREFIX = "dump-"
SETTLE_S = 5.0
"""A dump younger than this may still be being written by an exiting executor: left for later."""
JAVA_OPTIONS_KEY = "spark.executor.extraJavaOptions"


def default_directory() -> Path:
    """``$XDG_CACHE_HOME/trspark/cds`` (``~/.cache/trspark/cds``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trspark" / "cds"


def version_tag(java: str | None = None) -> str:
    """``spark<version>-java<version>`` of the Spark this interpreter imports and the ``java`` executors run."""
    try:
        import pyspark

        spark = pyspark.__version__
    except ImportError:
        spark = "unknown"
    return _safe(f"spark{spark}-java{java_version(java)}")


def java_binary() -> str | None:
    """``$JAVA_HOME/bin/java``, else the ``java`` on PATH (the one Spark starts executors with)."""
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else shutil.which("java")


def java_version(java: str | None = None) -> str:
    """The full version of ``java`` (default: :func:`java_binary`), or ``unknown``."""
    binary = java or java_binary()
    if not binary:
        return "unknown"
    try:
        out = subprocess.run([binary, "-XshowSettings:properties", "-version"], capture_output=True, text=True,
                             timeout=30, check=False).stderr
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    found = re.search(r"java\.runtime\.version = (\S+)", out)
    return found.group(1) if found else "unknown"


def executor_java_options(directory: Path, tag: str, now: float | None = None) -> str:
    """The executor JVM option for ``directory``: use its archive, or write one at exit.

    Adopts the newest dump older than :data:`SETTLE_S` that a JVM starts with
    (:func:`archive_usable`) as the archive; the others are removed (they hold the same classes,
    or are broken). Returns ``-XX:SharedArchiveFile=<archive>``; without one,
    returns ``-XX:ArchiveClassesAtExit=<directory>/dump-<tag>-{{APP_ID}}-{{EXECUTOR_ID}}.jsa``.
    """
    directory.mkdir(parents=True, exist_ok=True)
    archive = directory / f"{ARCHIVE_PREFIX}{tag}.jsa"
    now = time.time() if now is None else now
    dumps = sorted((mtime, path) for path in directory.glob(f"{DUMP_PREFIX}{tag}-*.jsa")
                   if (mtime := _mtime(path)) is not None and now - mtime >= SETTLE_S)
    while dumps and not archive.exists():
        candidate = dumps.pop()[1]
        try:
            if archive_usable(candidate):
                os.replace(candidate, archive)
            else:
                candidate.unlink(missing_ok=True)
        except FileNotFoundError:
            pass  # another application starting now adopted or removed it
    for _, stale in dumps:
        stale.unlink(missing_ok=True)
    if archive.exists():
        return f"-XX:SharedArchiveFile={archive}"
    return f"-XX:ArchiveClassesAtExit={directory / DUMP_PREFIX}{tag}-{{{{APP_ID}}}}-{{{{EXECUTOR_ID}}}}.jsa"


def archive_usable(path: Path) -> bool:
    """Does a JVM start with ``path`` as its archive?

    A mismatched archive is skipped by the JVM with a warning, but a truncated one (an executor
    killed while it wrote its dump) crashes it: tried once here rather than in every executor.
    """
    binary = java_binary()
    if not binary:
        return False
    try:
        # The crash report goes nowhere: it would land as hs_err_pid*.log in the caller's directory.
        return subprocess.run([binary, f"-XX:SharedArchiveFile={path}", "-XX:ErrorFile=/dev/null", "-version"],
                              capture_output=True, timeout=60, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def warm_start_settings(value: str) -> dict[str, str]:
    """``spark.executor.extraJavaOptions`` for ``spark.trspark.warmStart`` = ``value`` (``""``: none)."""
    if not value:
        return {}
    directory = default_directory() if value == "true" else Path(value)
    return {JAVA_OPTIONS_KEY: executor_java_options(directory, version_tag())}


def merge_options(existing: str | None, option: str) -> str:
    """``existing`` JVM options with ``option`` appended, unless they already name an archive (the user's wins)."""
    parts = (existing or "").split()
    if any(part.startswith(("-XX:SharedArchiveFile=", "-XX:ArchiveClassesAtExit=")) for part in parts):
        return existing or ""
    return " ".join([*parts, option])


def _mtime(path: Path) -> float | None:
    """Last write (s since the epoch), or None if ``path`` went meanwhile."""
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return None


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)
