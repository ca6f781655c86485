"""Spark sessions for the benchmark: a local-cluster (or a given master) configured per policy.

``local-cluster[N,cores,MB]`` runs each executor as its own JVM (a child of the driver JVM), so
killing one really loses its shuffle files -- the situation on a spot VM. Start-up takes 22-31 s
here, so the runner starts one session per policy and re-uses it for every query and repeat
(see README "TPC-DS on transient executors"); replacements for killed executors are cold JVMs,
which is why each session is warmed up first and the capacity lost to kills is reported.

Policies
--------
``never``         vanilla Spark, no plugin.
``decommission``  Spark's own decommissioning with fallback storage: on SIGPWR (the termination
                  notice) an executor migrates its shuffle files to peers or to the fallback path.
``always``, ``tr``  the trspark plugin (``trspark.spark_conf``) in that mode; needs the plugin jar.
                  They run on ``local-trcluster[N,C,M]`` (:meth:`ClusterSpec.master_for`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobs.tpcds.answers import Answer
from jobs.tpcds.datagen import TABLES
from jobs.tpcds.queries import Query

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

POLICIES: tuple[str, ...] = ("never", "always", "decommission", "efm", "pado", "tr")
PLUGIN_POLICIES = frozenset({"always", "efm", "pado", "tr"})


def parse_policies(text: str) -> tuple[str, ...]:
    """Parse ``"never,tr"``; raises ``ValueError`` naming the bad entries and the allowed ones."""
    items = [p.strip().lower() for p in text.split(",")]
    names = tuple(dict.fromkeys(p for p in items if p))
    bad = [p for p in names if p not in POLICIES]
    if bad or not names:
        raise ValueError(f"{', '.join(bad) or 'empty'}; allowed: comma-separated {', '.join(POLICIES)}")
    if not all(items):
        raise ValueError(f"{text!r} has an empty item; give a comma-separated list")
    if len(names) < len(items):
        raise ValueError(f"{text!r} names a policy twice")
    return names


class PolicyUnavailable(RuntimeError):
    """A policy cannot run here (e.g. the plugin jar or ``trspark.spark_conf`` is not built yet)."""


@dataclass(frozen=True)
class ClusterSpec:
    """Where queries run: a local-cluster of ``executors`` JVMs, or an existing ``master``."""

    executors: int = 3
    cores: int = 1
    memory_mb: int = 2048
    master: str | None = None
    extra_conf: dict[str, str] = field(default_factory=dict)

    @property
    def local(self) -> bool:
        return self.master is None

    @property
    def master_url(self) -> str:
        """Vanilla Spark's master: ``local-cluster[N,C,M]`` (or the given ``master``)."""
        return self.master or f"local-cluster[{self.executors},{self.cores},{self.memory_mb}]"

    def master_for(self, policy: str) -> str:
        """The master ``policy`` runs on.

        The plugin policies get ``local-trcluster[N,C,M]``: the same executor JVMs, but with the
        plugin's task scheduler, which re-points lost map outputs to their backups synchronously
        and does not count a signal-killed executor towards ``spark.task.maxFailures`` (see
        ``jvm-shim/README.md``). On a standalone cluster (``spark://``) they get ``spark-tr://``,
        the same cluster with that scheduler. ``never`` and ``decommission`` are vanilla Spark and
        keep the master as given, so the comparison is with Spark as users run it.
        """
        if policy not in PLUGIN_POLICIES:
            return self.master_url
        if self.master is None:
            return f"local-trcluster[{self.executors},{self.cores},{self.memory_mb}]"
        if self.master.startswith("spark://"):
            return "spark-tr://" + self.master.removeprefix("spark://")
        return self.master


def spark_home() -> Path:
    """A private SPARK_HOME linking pyspark's ``bin``, ``jars``, ``python``, ``sbin``.

    Executors of a local-cluster write their logs to ``$SPARK_HOME/work``; without this they land
    inside site-packages.
    """
    import pyspark

    source = Path(pyspark.__file__).parent
    home = Path(os.environ.get("TRSPARK_SPARK_HOME", "~/.cache/trspark/spark-home")).expanduser()
    home.mkdir(parents=True, exist_ok=True)
    for name in ("bin", "jars", "python", "sbin"):
        link = home / name
        if (source / name).exists() and not link.exists():
            link.symlink_to(source / name)
    conf = home / "conf"
    conf.mkdir(exist_ok=True)
    log4j = conf / "log4j2.properties"
    if not log4j.exists() or log4j.read_text() != _LOG4J:  # console: WARN, chatty parts quieter
        log4j.write_text(_LOG4J)
    return home


_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
logger.sparkconf.name = org.apache.spark.SparkConf
logger.sparkconf.level = error
logger.nativecode.name = org.apache.hadoop.util.NativeCodeLoader
logger.nativecode.level = error
# A killed executor makes the RPC layer log every broken connection with a stack trace.
logger.network.name = org.apache.spark.network
logger.network.level = fatal
# The kills are the harness's own (SIGKILL: exit code 137), and it reports each; a local cluster
# stopping races its workers' last messages to the master. Only Spark's wording of an executor's
# exit is matched: trspark's own warnings (an engine that exited with code 137) must still show.
appender.console.filter.expected.type = RegexFilter
appender.console.filter.expected.regex = .*(Command exited with code 137|Failed to send ExecutorStateChanged).*
appender.console.filter.expected.onMatch = DENY
appender.console.filter.expected.onMismatch = NEUTRAL
"""


def policy_conf(policy: str, work_dir: Path, trspark_options: dict[str, Any] | None = None) -> dict[str, str]:
    """Spark settings that select ``policy`` (raises :class:`PolicyUnavailable` when it cannot run).

    ``trspark_options`` are extra ``spark.trspark.*`` options (TRConfig field names) for the plugin
    policies, e.g. the lifetime model the kills follow.
    """
    if policy == "never":
        return {}
    if policy == "decommission":
        fallback = work_dir / "fallback"
        fallback.mkdir(parents=True, exist_ok=True)
        return {
            "spark.decommission.enabled": "true",
            "spark.storage.decommission.enabled": "true",
            "spark.storage.decommission.shuffleBlocks.enabled": "true",
            "spark.storage.decommission.rddBlocks.enabled": "true",
            # The trailing slash matters: Spark appends "<appId>/<shuffleId>/..." to the path.
            "spark.storage.decommission.fallbackStorage.path": fallback.as_uri() + "/",
        }
    if policy in PLUGIN_POLICIES:
        return _plugin_conf(policy, work_dir, trspark_options or {})
    raise PolicyUnavailable(f"unknown policy {policy!r}; allowed: {', '.join(POLICIES)}")


def _plugin_conf(policy: str, work_dir: Path, options: dict[str, Any]) -> dict[str, str]:
    try:
        from trspark.live.sparkconf import spark_conf
    except ImportError as exc:
        raise PolicyUnavailable(f"policy {policy!r} needs trspark.spark_conf, which is not available: {exc}") from exc
    try:
        conf = spark_conf(mode=policy, remote_path=(work_dir / "backups").as_uri(), **options)
    except Exception as exc:  # the jar cannot be built or found: say so, never pretend
        raise PolicyUnavailable(f"policy {policy!r}: the trspark plugin is not usable: {exc}") from exc
    return {str(k): str(v) for k, v in dict(conf).items()}


def start(spec: ClusterSpec, policy: str, *, app_name: str = "trspark-tpcds",
          trspark_options: dict[str, Any] | None = None,
          console_log: Path | None = None) -> tuple[SparkSession, Path]:
    """Start a session for ``policy`` and return it with its private work directory.

    The work directory holds ``spark.local.dir`` (shuffle files), the fallback storage and the
    plugin's remote backups, so nothing is shared between policies. With ``console_log`` the
    driver JVM this starts writes its console output to that file (:func:`jvm_console_to`).
    """
    os.environ.setdefault("SPARK_HOME", str(spark_home()))
    from pyspark.sql import SparkSession

    work_dir = Path(tempfile.mkdtemp(prefix=f"trspark-tpcds-{policy}-"))
    conf: dict[str, Any] = {
        "spark.ui.port": "0",  # any free port: several sessions run on this machine at once
        "spark.ui.showConsoleProgress": "false",
        "spark.local.dir": str(work_dir / "local"),
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",  # wait for every executor at start-up
        "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
        # A local-cluster worker offers memory_mb; the executor must ask for no more than that.
        "spark.executor.memory": f"{spec.memory_mb}m" if spec.local else None,
        "spark.driver.memory": "2g",
        **policy_conf(policy, work_dir, trspark_options),
        **spec.extra_conf,
    }
    forget_earlier_session_conf()
    builder = SparkSession.builder.master(spec.master_for(policy)).appName(f"{app_name}-{policy}")
    for key, value in conf.items():
        if value is not None:
            builder = builder.config(key, value)
    with jvm_console_to(console_log):
        spark = builder.getOrCreate()
    # The driver's console: errors only (a kill makes Spark log many warnings); TRSPARK_LOG_LEVEL
    # (e.g. INFO) shows what the scheduler and the plugin did, for a run being investigated.
    spark.sparkContext.setLogLevel(os.environ.get("TRSPARK_LOG_LEVEL", "ERROR"))
    return spark, work_dir


LAUNCHER_KEYS = ("spark.submit.", "spark.app.submitTime")
"""System properties that PySpark's launcher sets for itself, kept by :func:`forget_earlier_session_conf`."""


def forget_earlier_session_conf() -> None:
    """Clear the ``spark.*`` settings an earlier session left in this process's driver JVM.

    PySpark starts the driver JVM with the first session's settings as ``--conf`` options, so they
    become Java system properties, which every later ``SparkConf`` in that JVM loads: a later
    session would inherit each setting it does not give itself (seen: one test's
    ``spark.trspark.release.idle=0`` and ``shuffleTracking.timeout`` in the next test's
    application). Without a JVM yet there is nothing to clear.
    """
    from pyspark import SparkContext

    jvm = SparkContext._jvm
    if jvm is None:
        return
    system = jvm.java.lang.System
    for key in list(system.getProperties().stringPropertyNames()):
        if key.startswith("spark.") and not key.startswith(LAUNCHER_KEYS):
            system.clearProperty(key)


def stop(spark: SparkSession, work_dir: Path) -> None:
    """Stop ``spark`` and delete the work directory :func:`start` made for it (shuffle files,
    fallback storage, backups): no later session reads it, and a benchmark starts many."""
    try:
        spark.stop()
        forget_local_dirs(spark.sparkContext)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def forget_local_dirs(sc: Any) -> None:
    """Make the next session in this driver JVM use its own ``spark.local.dir``.

    Spark keeps the local folders it first created for the whole JVM
    (``Utils.getOrCreateLocalRootDirs``), and stopping a context does not forget them: a later
    session in the same py4j JVM would write its executors' and Python's folders into this
    session's ``spark.local.dir``, creating it again after it was deleted. ``sc`` is the stopped
    ``SparkContext`` (typed ``Any``, as py4j's fields are).
    """
    utils = getattr(getattr(sc._jvm.org.apache.spark.util, "Utils$"), "MODULE$")
    utils.clearLocalRootDirs()


@contextmanager
def jvm_console_to(path: Path | None) -> Iterator[None]:
    """A driver JVM launched in this block writes its standard error to ``path`` (appended) for good.

    PySpark starts the JVM as a child that inherits file descriptor 2, so pointing it at the file
    for the launch alone sends there everything the JVM and the processes it starts print to the
    console: Spark's log, JVM warnings, stack traces printed straight to standard error (such as
    a ``RejectedExecutionException`` when a local cluster shuts down), the trspark engine's lines.
    Python's standard error is the console again after the block. A JVM this process already
    runs keeps its console (PySpark starts one per process). ``None``: nothing changes.

    If the launch fails, its exception gets the last lines of the file as a note: the reason is there.
    """
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as log:  # a file that cannot be opened fails here, with fd 2 untouched
        saved = os.dup(2)
        os.dup2(log.fileno(), 2)
    try:
        yield
    except Exception as exc:
        tail = path.read_text(errors="replace").splitlines()[-20:]
        exc.add_note(f"the end of {path}:\n" + "\n".join(tail))
        raise
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def set_executor_target(spark: SparkSession, total: int) -> None:
    """Ask the cluster manager for ``total`` executors in all: below the live count nothing is
    killed, but a lost executor is not replaced; raising it again starts the missing ones."""
    sc = spark.sparkContext
    jvm: Any = sc._jvm
    no_locality = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(jvm.java.util.HashMap())
    if not sc._jsc.sc().requestTotalExecutors(total, 0, no_locality):
        raise RuntimeError(f"the cluster manager refused a target of {total} executors")


def register_tables(spark: SparkSession, data: Path) -> None:
    """Expose every TPC-DS Parquet file as a temporary view named after its table.

    The schema is read from the Parquet footer here (pyarrow) and handed to Spark, which would
    otherwise run one schema-inference job per table at every session start.
    """
    for table in TABLES:
        path = Path(data) / f"{table}.parquet"
        ddl = spark_ddl(path)
        reader = spark.read.schema(ddl) if ddl else spark.read
        reader.parquet(str(path)).createOrReplaceTempView(table)


_ARROW_TO_SPARK = {"int32": "INT", "int64": "BIGINT", "string": "STRING", "large_string": "STRING",
                   "date32[day]": "DATE", "double": "DOUBLE", "float": "FLOAT", "bool": "BOOLEAN"}


def spark_ddl(path: Path) -> str | None:
    """Spark DDL (``a BIGINT, b DECIMAL(7,2)``) of a Parquet file, or None for a type not mapped here."""
    import pyarrow.parquet as pq

    columns = []
    for f in pq.read_schema(path):
        kind = str(f.type)
        if kind.startswith("decimal128("):
            spark_type = "DECIMAL" + kind.removeprefix("decimal128")
        elif kind in _ARROW_TO_SPARK:
            spark_type = _ARROW_TO_SPARK[kind]
        else:
            return None  # let Spark infer it
        columns.append(f"`{f.name}` {spark_type}")
    return ", ".join(columns)


def run_query(spark: SparkSession, query: Query, *, job_group: str) -> Answer:
    """Run ``query`` under ``job_group`` (so its jobs can be cancelled and measured) and collect it."""
    sc = spark.sparkContext
    sc.setJobGroup(job_group, f"TPC-DS {query.name}", interruptOnCancel=True)
    try:
        df = spark.sql(query.spark_sql)
        rows = df.collect()
        return Answer.of(df.columns, [tuple(row) for row in rows])
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
