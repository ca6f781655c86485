"""The one event-log reader: the report's lenient reading and the replay's strict checks on top of it."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import zstandard
from lz4_stream import END_MARK, lz4_block_stream

from simulators.eventlog import load_eventlog
from simulators.eventlog import read_events as replay_events
from trspark.eventlog import EventLogError, read_events

PLAIN = Path(__file__).parent / "fixtures" / "eventlogs" / "join_agg.json"
ZSTD = PLAIN.with_suffix(".zstd")
UNFINISHED = b'{"Event":"SparkListenerTaskStart","Stage '


def test_a_gzip_log_gives_the_events_of_the_plain_one(tmp_path: Path) -> None:
    path = tmp_path / "app-1.gz"
    path.write_bytes(gzip.compress(PLAIN.read_bytes()))
    assert list(read_events(path)) == list(read_events(PLAIN))
    assert list(replay_events(path)) == list(replay_events(PLAIN))


def test_a_corrupt_gzip_log_is_an_event_log_error(tmp_path: Path) -> None:
    data = bytearray(gzip.compress(PLAIN.read_bytes()))
    data[100:400] = bytes(300)
    path = tmp_path / "app-1.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(EventLogError, match="cannot decompress"):
        list(read_events(path))


def test_a_gzip_log_padded_with_zeros_reads_as_gzip_reads_it(tmp_path: Path) -> None:
    """Zeros after a member (a tape or block device's padding) are skipped, also across read blocks."""
    half = len(PLAIN.read_bytes()) // 2
    data = gzip.compress(PLAIN.read_bytes()[:half]) + bytes(100_000) + gzip.compress(PLAIN.read_bytes()[half:]) + bytes(70_000)
    path = tmp_path / "app-1.gz"
    path.write_bytes(data)
    assert gzip.decompress(data) == PLAIN.read_bytes()
    assert list(read_events(path, unfinished_last_line=False)) == list(read_events(PLAIN))


def test_a_cut_gzip_log_is_read_to_its_last_whole_event_and_refused_by_the_replay(tmp_path: Path) -> None:
    """As a cut zstd or lz4 log is: a crashed application's log, gzipped, still has a report."""
    data = gzip.compress(PLAIN.read_bytes())
    path = tmp_path / "app-1.gz"
    path.write_bytes(data[: len(data) // 2])
    events = list(read_events(path))
    assert 0 < len(events) < len(list(read_events(PLAIN)))
    assert events == list(read_events(PLAIN))[: len(events)]
    with pytest.raises(EventLogError, match=r"in the middle of an event \(its application is still running, or it crashed\)"):
        list(read_events(path, unfinished_last_line=False))
    path.write_bytes(data[:-8])  # whole lines, without the member's trailer
    assert list(read_events(path)) == list(read_events(PLAIN))
    with pytest.raises(EventLogError, match="ends without its end mark: the log is cut off"):
        list(read_events(path, unfinished_last_line=False))


def test_an_unfinished_last_line_is_skipped_by_the_report_and_refused_by_the_replay(tmp_path: Path) -> None:
    data = PLAIN.read_bytes()
    path = tmp_path / "app-1.inprogress"
    path.write_bytes(data + UNFINISHED)
    assert list(read_events(path)) == list(read_events(PLAIN))
    with pytest.raises(EventLogError, match="is unfinished: the log ends in the middle of an event"):
        list(read_events(path, unfinished_last_line=False))
    with pytest.raises(EventLogError, match="is unfinished: the log ends in the middle of an event"):
        load_eventlog(path)


def test_a_plain_log_cut_between_lines_inside_a_job_is_refused_by_the_replay(tmp_path: Path) -> None:
    """An in-progress plain log usually ends on a whole line: its unfinished job tells that it was cut."""
    lines = PLAIN.read_bytes().splitlines(keepends=True)
    first_end = next(i for i, line in enumerate(lines) if b'"SparkListenerJobEnd"' in line)
    second_start = next(i for i, line in enumerate(lines) if b'"SparkListenerJobStart"' in line and i > first_end)
    path = tmp_path / "app-1.inprogress"
    path.write_bytes(b"".join(lines[:second_start + 20]))  # job 1 started, some of its tasks ended
    with pytest.raises(EventLogError, match="Spark job 1 starts but never ends: the log is cut off"):
        load_eventlog(path)
    path.write_bytes(b"".join(lines[:second_start]))  # cut between jobs: job 0 whole, and nothing of job 1
    assert load_eventlog(path).job.num_tasks > 0


def test_an_empty_log_has_no_events_and_is_not_a_log_to_replay(tmp_path: Path) -> None:
    path = tmp_path / "app-1"
    path.write_bytes(b"\n")
    assert list(read_events(path)) == []
    with pytest.raises(EventLogError, match="empty"):
        load_eventlog(path)


def test_a_missing_path_is_an_event_log_error(tmp_path: Path) -> None:
    with pytest.raises(EventLogError, match="no such file"):
        list(read_events(tmp_path / "nothing"))


def test_a_compressed_log_cut_between_blocks_is_read_as_in_progress_and_refused_by_the_replay(tmp_path: Path) -> None:
    """A cut on a block boundary decodes to whole lines: only the codec's missing end mark tells."""
    whole_lz4 = lz4_block_stream(PLAIN.read_bytes(), block=4096)
    cut = {"zstd": ZSTD.read_bytes()[:40000], "lz4": whole_lz4[:-len(END_MARK)]}
    for codec, data in cut.items():
        path = tmp_path / f"app-1.{codec}"
        path.write_bytes(data)
        events = list(read_events(path))
        assert 0 < len(events) <= len(list(read_events(ZSTD if codec == "zstd" else PLAIN))), codec
        with pytest.raises(EventLogError, match="ends without its end mark: the log is cut off"):
            list(read_events(path, unfinished_last_line=False))
        with pytest.raises(EventLogError, match="ends without its end mark"):
            load_eventlog(path)
    whole = tmp_path / "app-2.lz4"
    whole.write_bytes(whole_lz4)
    assert list(read_events(whole, unfinished_last_line=False)) == list(read_events(PLAIN))
    assert list(read_events(ZSTD, unfinished_last_line=False)) == list(read_events(ZSTD))  # another application


@pytest.mark.parametrize("cut", [5, 20, 600])  # inside the magic's header, the rest of the header, a block's body
def test_an_lz4_log_cut_inside_a_block_is_read_as_in_progress_and_refused_by_the_replay(tmp_path: Path, cut: int) -> None:
    whole = lz4_block_stream(PLAIN.read_bytes(), block=4096)
    blocks = whole.count(b"LZ4Block") - 1  # the end mark is a block header too
    second = whole.index(b"LZ4Block", 1)
    path = tmp_path / "app-1.lz4"
    path.write_bytes(whole[:second + cut])
    events = list(read_events(path))
    assert blocks > 2 and 0 < len(events) < len(list(read_events(PLAIN)))
    with pytest.raises(EventLogError, match="is unfinished|ends without its end mark"):
        list(read_events(path, unfinished_last_line=False))


def test_a_rolling_logs_newest_part_that_begins_with_a_half_written_event_is_read_as_in_progress(tmp_path: Path) -> None:
    rolling = tmp_path / "eventlog_v2_app-1"
    rolling.mkdir()
    (rolling / "events_1_app-1").write_bytes(PLAIN.read_bytes())
    (rolling / "events_2_app-1").write_bytes(UNFINISHED)
    assert list(read_events(rolling)) == list(read_events(PLAIN))
    with pytest.raises(EventLogError, match="is unfinished"):
        list(read_events(rolling, unfinished_last_line=False))


def test_one_part_of_a_rolling_log_cut_between_jobs_stands_for_the_whole_log(tmp_path: Path) -> None:
    """Rolled over between two jobs, the first part alone would read as an application of one job."""
    lines = PLAIN.read_bytes().splitlines(keepends=True)
    first_end = next(i for i, line in enumerate(lines) if b'"SparkListenerJobEnd"' in line)
    second_start = next(i for i, line in enumerate(lines) if b'"SparkListenerJobStart"' in line and i > first_end)
    rolling = tmp_path / "eventlog_v2_app-1"
    rolling.mkdir()
    (rolling / "events_1_app-1").write_bytes(b"".join(lines[:second_start]))
    (rolling / "events_2_app-1.zstd").write_bytes(zstandard.compress(b"".join(lines[second_start:])))
    (rolling / "appstatus_app-1").write_bytes(b"")
    whole = load_eventlog(PLAIN)
    for part in sorted(rolling.glob("events_*")):
        assert list(read_events(part)) == list(read_events(PLAIN))
        replay = load_eventlog(part)
        assert (replay.job.num_tasks, replay.recorded_seconds) == (whole.job.num_tasks, whole.recorded_seconds)
    elsewhere = tmp_path / "copied" / "events_1_app-1"  # a part taken out of its log is all there is
    elsewhere.parent.mkdir()
    elsewhere.write_bytes((rolling / "events_1_app-1").read_bytes())
    assert load_eventlog(elsewhere).job.num_tasks < whole.job.num_tasks


def test_a_compacted_part_replaces_the_parts_up_to_its_number(tmp_path: Path) -> None:
    """The history server's compaction writes ``events_<n>_<app>[.<codec>].compact`` for parts 1..n,
    then deletes them: between the two, or if the delete failed, the old parts must not be read again."""
    lines = PLAIN.read_bytes().splitlines(keepends=True)
    cut = len(lines) // 2
    rolling = tmp_path / "eventlog_v2_app-1"
    rolling.mkdir()
    (rolling / "events_1_app-1").write_bytes(b"".join(lines[: cut // 2]))
    (rolling / "events_2_app-1.zstd").write_bytes(zstandard.compress(b"".join(lines[cut // 2: cut])))
    (rolling / "events_2_app-1.zstd.compact").write_bytes(zstandard.compress(b"".join(lines[:cut])))
    (rolling / "events_3_app-1").write_bytes(b"".join(lines[cut:]))
    assert list(read_events(rolling)) == list(read_events(PLAIN))
    assert list(read_events(rolling / "events_1_app-1")) == list(read_events(PLAIN))


@pytest.mark.parametrize("kept", [(1, 3), (2, 3)])
def test_a_rolling_log_with_a_part_missing_is_refused_naming_it(tmp_path: Path, kept: tuple[int, ...]) -> None:
    """Read past the gap, the log would pass for whole with the missing part's jobs never run."""
    lines = PLAIN.read_bytes().splitlines(keepends=True)
    third = len(lines) // 3
    rolling = tmp_path / "eventlog_v2_app-1"
    rolling.mkdir()
    for n in kept:
        (rolling / f"events_{n}_app-1").write_bytes(b"".join(lines[(n - 1) * third: n * third if n < 3 else None]))
    missing = sorted({1, 2} - set(kept))
    for path in (rolling, rolling / "events_3_app-1"):
        with pytest.raises(EventLogError, match=f"part {missing[0]} of this rolling event log is missing"):
            list(read_events(path))
        with pytest.raises(EventLogError, match="is missing"):
            load_eventlog(path)
