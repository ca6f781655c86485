"""Settings the plugin's JVM parses itself: the URLs it reads with ``java.net.URI``
(``spark.trspark.remote.path`` and ``spark.trspark.notice.url``) and numbers it reads with Java's
parser. The check before Spark starts takes exactly the values the plugin takes, each value run
through both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.jvm_gateway import Jvm, plain_jvm
from trspark import java_uri
from trspark.keys import ConfigError
from trspark.live.config import from_spark_conf

REMOTE_PATHS = [
    # taken
    "file:///tmp/backups", "file:/tmp/backups", "hdfs://nn:8020/trspark", "s3a://bucket", "s3a://bucket/p", "s3a:///p",
    "abfs://c@acct.dfs.core.windows.net/p", "file:///tmp/b%20c", "file:///tmp/caf\u00e9", "hdfs://name_node/p",
    "file:///tmp/x?y=1", "file:///tmp/x#frag", "wasb://c@a.blob.core.windows.net/", "hdfs://[::1]:8020/p",
    "hdfs://nn/p?x=[1]", "file:///tmp/x#[1]", "s3a://us\u00e9r@bucket/p", "hdfs://caf\u00e9/p", "file://#",
    "hdfs://[fe80::1%eth0]/p", "hdfs://[::ffff:1.2.3.4]/p",
    # refused by the plugin: no path, no scheme, or not a URI
    "file:", "s3a://", "foo:bar", "C:\\b", "file:///tmp/x%zz", "file:///tmp/{x}", "file:///tmp/my backups",
    "/tmp/backups", "file:///a#b#c", "hdfs://[nn]/p", "1file:///x", "://x", "hdfs://[::1]:8020/p[x]", "file:/a//[x]/b",
    "hdfs://[fe80::1%]/p", "hdfs://[fe80::1%e-0]/p",
]
NOTICE_URLS = [
    # taken
    "http://169.254.169.254", "http://127.0.0.1:8080/vm-{executorId}", "https://metadata.google.internal",
    "http://localhost:65535", "http://[::1]:80", "http://h/a%20b", "http://user@h", "http://010.0.0.1",
    "http://a-b.example.com.", "http://h:", "http://h/", "http://h/?a=[1]", "http://[fe80::1%eth0]",
    "http://[fe80::1%25eth0]:80",
    # refused by the plugin
    "HTTP://h", "http://metadata_svc:8080", "http://h/a b", "http://h:65536", "http://h:99999999999",
    "ftp://h", "http://", "http://-h", "http://h-", "http://1.2.3", "http://a.1b", "http://h:x", "http:h",
    "http://h/{x}", "http://[1]", "http://[1:2]", "http://[::1::]", "http://[12345::1]", "http://[:]",
    "http://\u0661.\u0661.\u0661.\u0661", "http://h:\u0661",
]


PERIODS = ["5", "\x015", "0.5", "500ms", "2min", "1h", "1e3", "1.", "1f", "0x1p3", "2D", "1_0", "5 s", "inf", "NaN", "-1", "0", "s"]
THROTTLES = ["0", "\x0150m", "50m", "1.5g", "400000", "50mb/s", "1e3k", "1f", "0x10", "1d", "-1", "Infinity", "m"]


@pytest.fixture(scope="module")
def jvm() -> Iterator[Jvm]:
    with plain_jvm() as j:
        yield j


def _jvm_takes(jvm: Jvm, key: str, value: str, parse: Any) -> bool:
    from py4j.protocol import Py4JJavaError

    conf = jvm.gateway.jvm.org.apache.spark.SparkConf(False)
    conf.set(key, value)
    try:
        parse(conf)
    except Py4JJavaError as exc:
        assert "IllegalArgumentException" in str(exc.java_exception.getClass().getName())
        return False
    return True


def _python_takes(key: str, value: str) -> bool:
    try:
        from_spark_conf({key: value})
    except ConfigError as exc:
        assert key in str(exc) and "allowed:" in str(exc) and "\n" not in str(exc)
        return False
    return True


@pytest.mark.parametrize(("key", "values"), [("spark.trspark.remote.path", REMOTE_PATHS),
                                             ("spark.trspark.notice.url", NOTICE_URLS),
                                             ("spark.trspark.period", PERIODS),
                                             ("spark.trspark.backup.throttle", THROTTLES)])
def test_the_check_and_the_plugin_take_the_same_values(jvm: Jvm, key: str, values: list[str]) -> None:
    parse = jvm.trspark.NoticeSettings.apply if key.endswith("notice.url") else jvm.trspark.TRConf.apply
    python = {v: _python_takes(key, v) for v in values}
    plugin = {v: _jvm_takes(jvm, key, v, parse) for v in values}
    assert python == plugin
    assert sum(python.values()) >= 5 and sum(not taken for taken in python.values()) >= 5


def test_a_refused_url_says_why() -> None:
    for key, value, why in [
        ("spark.trspark.remote.path", "file:///tmp/my backups", "' ' at index 14 is not allowed in a URL (escape it as %20)"),
        ("spark.trspark.remote.path", "foo:bar", "a URL with a scheme and a path"),
        ("spark.trspark.notice.url", "HTTP://h", "the scheme is 'HTTP' (lower case http or https)"),
        ("spark.trspark.notice.url", "http://metadata_svc:8080", "a host name has letters, digits and '-' only"),
    ]:
        with pytest.raises(ConfigError, match=f"{key}=.*{why}".replace("(", r"\(").replace(")", r"\)")):
            from_spark_conf({key: value})
    assert java_uri.parse("hdfs://nn:8020/p?x") == java_uri.JavaUri("hdfs", "nn", 8020, "/p")


def test_the_default_remote_path_is_absolute_and_a_local_dir_no_url_can_hold_stops_start_up(jvm: Jvm, tmp_path: Path,
                                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver hands its default to the executors: a relative spark.local.dir read as ``file://sparktmp/...``
    would name a host, and every copy would fail; a space must stop start-up naming spark.local.dir, not remote.path."""
    from py4j.protocol import Py4JJavaError

    from trspark.live.shim import default_remote_path

    def remote_path(**entries: str) -> str:
        conf = jvm.gateway.jvm.org.apache.spark.SparkConf(False)
        for key, value in entries.items():
            conf.set(key, value)
        return str(jvm.trspark.TRConf.apply(conf).remotePath())

    cwd = jvm.gateway.jvm.java.lang.System.getProperty("user.dir")
    assert remote_path(**{"spark.local.dir": "sparktmp,/other"}) == f"file://{cwd}/sparktmp/trspark-backups"
    assert remote_path(**{"spark.local.dir": "/tmp/"}) == "file:///tmp/trspark-backups"
    with pytest.raises(Py4JJavaError) as failure:
        remote_path(**{"spark.local.dir": "/tmp/sp dir"})
    message = str(failure.value.java_exception.getMessage())
    assert message.startswith("trspark: spark.local.dir='/tmp/sp dir' gives no default spark.trspark.remote.path")
    assert "allowed: set spark.trspark.remote.path" in message
    assert remote_path(**{"spark.local.dir": "/tmp/sp dir", "spark.trspark.mode": "never"})  # no backups, no need
    monkeypatch.chdir(tmp_path)  # `trspark gc --local-dir` looks where the plugin writes
    assert default_remote_path("sparktmp") == f"file://{tmp_path}/sparktmp/trspark-backups"


def test_the_plugin_says_why_it_refuses_a_remote_path(jvm: Jvm) -> None:
    """Under spark-submit without the Python check, the plugin's own line is all a user sees."""
    from py4j.protocol import Py4JJavaError

    conf = jvm.gateway.jvm.org.apache.spark.SparkConf(False)
    for value, why in [("file:///tmp/my backups", "(Illegal character in path at index 14: file:///tmp/my backups)"),
                       ("foo:bar", "(a URL with a scheme and a path, e.g. file:///mnt/backups)")]:
        conf.set("spark.trspark.remote.path", value)
        with pytest.raises(Py4JJavaError) as failure:
            jvm.trspark.TRConf.apply(conf)
        assert f"spark.trspark.remote.path='{value}' is not valid {why}; allowed:" in str(failure.value.java_exception.getMessage())
