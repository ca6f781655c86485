"""Event-log replay on real Spark 4.3 logs made by ``tests/fixtures/eventlogs/make_eventlogs.py``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import lz4.block
import pytest
from click.testing import CliRunner

from simulators.eventlog import EventLogError, load_eventlog
from simulators.runner import stable_job_time
from simulators.world import WorldSpec
from trspark.cli import cli
from trspark.eventlog import LZ4_MAGIC as LZ4_BLOCK_MAGIC

FIXTURES = Path(__file__).parent / "fixtures" / "eventlogs"
PLAIN = FIXTURES / "join_agg.json"
ZSTD = FIXTURES / "join_agg.zstd"


def structure(path: Path) -> list[tuple[int, int, tuple[int, ...], int | None]]:
    return [(s.stage_id, s.num_tasks, s.parents, s.shuffle_id) for s in load_eventlog(path).job.stages]


def test_plain_log_becomes_a_multi_stage_dag_with_a_join() -> None:
    replay = load_eventlog(PLAIN)
    job = replay.job
    assert len(job.stages) >= 5
    assert any(len(s.parents) == 2 for s in job.stages)  # the join reads two shuffles
    assert sum(1 for s in job.stages if s.shuffle_id is not None) >= 4
    assert job.shuffle_bytes() > 0
    assert (replay.executors, replay.cores) == (1, 2)  # local[2]
    assert replay.recorded_seconds > 0


def shape(path: Path) -> list[tuple[int, int, bool]]:
    """The DAG up to stage numbering (Spark numbered the two scans differently in the two runs)."""
    return sorted((s.num_tasks, len(s.parents), s.shuffle_id is not None) for s in load_eventlog(path).job.stages)


def test_a_map_stage_that_wrote_nothing_still_comes_before_its_readers(tmp_path: Path) -> None:
    # A filter that matched no row: the map stage writes an empty shuffle, and its readers still wait for it.
    events = [json.loads(line) for line in PLAIN.read_text().splitlines()]
    first_map = min(e["Stage ID"] for e in events
                    if e["Event"] == "SparkListenerTaskEnd" and e.get("Task Type") == "ShuffleMapTask")
    for e in events:
        if e["Event"] == "SparkListenerTaskEnd" and e["Stage ID"] == first_map:
            e["Task Metrics"]["Shuffle Write Metrics"]["Shuffle Bytes Written"] = 0
    empty = tmp_path / "empty_shuffle.json"
    empty.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert [(sid, n, parents) for sid, n, parents, _ in structure(empty)] == \
        [(sid, n, parents) for sid, n, parents, _ in structure(PLAIN)]
    assert any(first_map in parents for _, _, parents, _ in structure(empty))


def test_zstd_log_reads_like_the_plain_one() -> None:
    assert ZSTD.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"  # really zstd-compressed by Spark
    assert shape(ZSTD) == shape(PLAIN)


def test_stable_replay_reproduces_the_recorded_job_time() -> None:
    for path in (PLAIN, ZSTD):
        replay = load_eventlog(path)
        simulated = stable_job_time(replay.job, WorldSpec(vms=replay.executors, cores=replay.cores))
        assert simulated == pytest.approx(replay.recorded_seconds, rel=0.15)


def test_a_log_with_evictions_replays_on_as_many_executors_as_were_alive_at_once() -> None:
    """Three executors, each killed and replaced (six added in all): the replay keeps three."""
    log = next((Path(__file__).parent / "fixtures" / "observability" / "eventlog").iterdir())
    replay = load_eventlog(log)
    assert (replay.executors, replay.cores) == (3, 1)
    simulated = stable_job_time(replay.job, WorldSpec(vms=replay.executors, cores=replay.cores))
    assert simulated == pytest.approx(replay.recorded_seconds, rel=0.15)


def test_rolling_log_directory(tmp_path: Path) -> None:
    rolled = tmp_path / "eventlog_v2_local-1"
    rolled.mkdir()
    (rolled / "events_1_local-1.zstd").write_bytes(ZSTD.read_bytes())
    (rolled / "appstatus_local-1").write_text("")
    assert structure(rolled) == structure(ZSTD)


def test_lz4_block_and_gzip_logs(tmp_path: Path) -> None:
    raw = PLAIN.read_bytes()
    # lz4-java's LZ4BlockOutputStream framing: magic, token (0x20 = LZ4, level bits), sizes, checksum
    frames = b""
    for start in range(0, len(raw), 65536):
        chunk = raw[start:start + 65536]
        body = lz4.block.compress(chunk, store_size=False)
        frames += LZ4_BLOCK_MAGIC + bytes([0x20 | 6]) + len(body).to_bytes(4, "little") + len(chunk).to_bytes(4, "little")
        frames += b"\0\0\0\0" + body
    frames += LZ4_BLOCK_MAGIC + bytes([0x10]) + bytes(12)
    (tmp_path / "app.lz4").write_bytes(frames)
    (tmp_path / "app.gz").write_bytes(gzip.compress(raw))
    assert structure(tmp_path / "app.lz4") == structure(PLAIN)
    assert structure(tmp_path / "app.gz") == structure(PLAIN)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"hello": "world"}\n', "not a Spark listener event"),
        (b"\x00\x01garbage\xff", "not JSON"),
        (b"", "the event log is empty; it was cut before its application started"),
        (b"\x28\xb5\x2f\xfd" + b"\xff" * 20, "cannot decompress"),
    ],
)
def test_not_a_spark_log_is_rejected(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "log"
    path.write_bytes(content)
    with pytest.raises(EventLogError, match=message):
        load_eventlog(path)


def test_whatif_cli_compares_policies_on_a_real_log() -> None:
    result = CliRunner().invoke(cli, ["whatif", str(ZSTD), "--stability", "5", "--policy", "never", "--policy", "oracle",
                                      "--runs", "3", "--workers", "1", "--format", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert [r["policy"] for r in out["results"]] == ["never", "oracle"]
    assert all(r["runs"] == 3 for r in out["results"])


@pytest.mark.parametrize("args", [["/nonexistent/log"], ["--lifetime", "bogus:x=1"]])
def test_whatif_bad_input_is_one_line_exit_2(tmp_path: Path, args: list[str]) -> None:
    if args[0].startswith("--"):
        args = [str(PLAIN), *args]
    result = CliRunner().invoke(cli, ["whatif", *args])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ")


def test_whatif_checks_its_options_before_it_reads_the_log(tmp_path: Path) -> None:
    not_a_log = tmp_path / "notes.txt"
    not_a_log.write_text("hello\n")
    result = CliRunner().invoke(cli, ["whatif", str(not_a_log), "--runs", "0"])
    assert result.exit_code == 2 and "--runs=0 is not valid" in result.output, result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stability", "-1"], "--stability=-1.0 is not valid"),
        (["--stability", "5", "--lambda", "1"], "give only one of --stability, --lambda, --lifetime"),
        (["--lifetime", "bogus"], "--lifetime='bogus'"),
        (["--pool", "od=1@stable", "--stability", "5"], "every --pool has its own lifetime"),
        (["--price", "spot=1"], "no pool 'spot' in this world"),
    ],
)
def test_whatif_checks_lifetime_and_price_options_before_it_reads_the_log(tmp_path: Path, args: list[str],
                                                                          message: str) -> None:
    """Neither the lifetime options nor the pools' names depend on the log: a mistake stops before a long read."""
    result = CliRunner().invoke(cli, ["whatif", str(tmp_path / "missing-log"), *args])
    assert result.exit_code == 2 and message in result.output, result.output
