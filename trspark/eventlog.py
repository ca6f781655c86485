"""Streaming reader of Spark event logs: plain, zstd, lz4 (``LZ4Block``) or gzip, a single file or rolling.

A rolling log is a directory ``eventlog_v2_<app>/`` of ``events_<n>_<app>[.<codec>]`` parts read
in ``n`` order, from its last compacted part (``.compact``, which replaces the parts up to its
number) on; one of its parts stands for the whole log. The codec is recognised by the file's first bytes, not its name, and every part
is decompressed as a stream, so a long application's log is never held in memory whole.
``trspark report`` and the simulator's ``whatif`` replay both read logs through :func:`read_events`.
"""

from __future__ import annotations

import io
import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
LZ4_MAGIC = b"LZ4Block"
GZIP_MAGIC = b"\x1f\x8b"
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"  # the lz4 command-line tool's format, which Spark never writes
# LZ4Block header after the magic: token (1), compressed length (4), original length (4), checksum (4).
LZ4_HEADER = 8 + 1 + 4 + 4 + 4
LZ4_RAW = 0x10


class EventLogError(ValueError):
    """The path is not a readable Spark event log (the message says why)."""


#: What a reader of events raises on an event without a field it needs or with a value of the wrong type.
MALFORMED = (KeyError, TypeError, AttributeError, ValueError)


def feed(events: Iterable[dict[str, Any]], add: Callable[[dict[str, Any]], None], path: object) -> None:
    """``add(event)`` for each event; an event ``add`` fails on (:data:`MALFORMED`) raises :class:`EventLogError` naming it."""
    for number, event in enumerate(events, 1):
        try:
            add(event)
        except EventLogError:
            raise
        except MALFORMED as exc:
            raise _malformed_event(path, number, event, exc) from None


def _malformed_event(path: object, number: int, event: object, error: Exception) -> EventLogError:
    """The error for event ``number`` (from 1) of the log at ``path``, which a reader failed on with ``error`` (one of :data:`MALFORMED`)."""
    kind = event.get("Event") if isinstance(event, dict) else None
    what = f"has no field {error.args[0]!r}" if isinstance(error, KeyError) else f"has a field of the wrong type ({error})"
    return EventLogError(f"{path}: event {number} ({kind if isinstance(kind, str) else 'of no kind'}) {what}; "
                         "not a well-formed Spark event log")


class _Lz4Blocks:
    """Decoded blocks of lz4-java's ``LZ4BlockOutputStream`` (Spark's lz4 codec); :attr:`complete` at its end mark."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.complete = False

    def __iter__(self) -> Iterator[bytes]:
        import lz4.block

        while header := self.raw.read(LZ4_HEADER):
            if header[:8] != LZ4_MAGIC[:len(header)]:
                raise EventLogError("corrupt LZ4Block stream")
            if len(header) < LZ4_HEADER:
                return  # cut inside a block's header: a log being written, or its crashed application's
            compressed = int.from_bytes(header[9:13], "little")
            original = int.from_bytes(header[13:17], "little")
            if original == 0:
                self.complete = True
                return
            body = self.raw.read(compressed)
            if len(body) < compressed:
                return  # cut inside a block
            yield body if header[8] & 0xF0 == LZ4_RAW else lz4.block.decompress(body, uncompressed_size=original)


class _ChunkReader(io.RawIOBase):
    """A readable stream over an iterator of byte chunks (for ``io.TextIOWrapper``)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._rest = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._rest:
            self._rest = next(self._chunks, b"")
            if not self._rest:
                return 0
        n = min(len(buffer), len(self._rest))
        buffer[:n] = self._rest[:n]
        self._rest = self._rest[n:]
        return n


class _Members:
    """Decoded chunks of concatenated zstd frames or gzip members; :attr:`complete` once the stream ended on one's end.

    A cut-off file may end on a whole line: the end mark of the last frame (of the last block
    for lz4) is what tells a whole log from a cut one, or from one still being written. Gzip is
    read this way too, not with :class:`gzip.GzipFile`, which refuses a cut-off file whole.
    """

    def __init__(self, raw: IO[bytes], decompressor: Callable[[], Any], padding: bytes = b"") -> None:
        self.raw = raw
        self.decompressor = decompressor
        """A new decoder of one frame or member, with ``decompress``, ``eof`` and ``unused_data``."""
        self.padding = padding
        """Bytes skipped between members (gzip's zeros, which :class:`gzip.GzipFile` skips too)."""
        self.complete = True

    def __iter__(self) -> Iterator[bytes]:
        decoder = None
        while chunk := self.raw.read(1 << 16):
            while chunk:
                if decoder is None:  # between members: skip the padding, if any, and start the next one
                    chunk = chunk.lstrip(self.padding)
                    if not chunk:
                        break
                    decoder = self.decompressor()
                if out := decoder.decompress(chunk):  # an empty chunk would read as the end of the stream
                    yield out
                chunk, decoder = (decoder.unused_data, None) if decoder.eof else (b"", decoder)
        self.complete = decoder is None


def _zstd_decoder() -> Any:
    import zstandard

    return zstandard.ZstdDecompressor().decompressobj()


def _gzip_decoder() -> Any:
    return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # 16 +: a gzip header and trailer around the deflate data


def _open(part: Path, raw: IO[bytes]) -> tuple[IO[bytes], _Members | _Lz4Blocks | None]:
    """The decoded stream of one part, and for zstd, lz4 and gzip the decoder that tells whether it ended whole."""
    head = raw.read(8)
    raw.seek(0)
    decoder = (_Members(raw, _zstd_decoder) if head.startswith(ZSTD_MAGIC) else _Lz4Blocks(raw) if head.startswith(LZ4_MAGIC)
               else _Members(raw, _gzip_decoder, b"\0") if head.startswith(GZIP_MAGIC) else None)
    if decoder is not None:
        return io.BufferedReader(_ChunkReader(iter(decoder))), decoder
    return _open_other(part, raw, head), None


def _open_other(part: Path, raw: IO[bytes], head: bytes) -> IO[bytes]:
    if head.startswith(LZ4_FRAME_MAGIC):
        raise EventLogError(f"{part}: an lz4 frame (the lz4 tool's format) is not a Spark event log codec; "
                            "decompress it (lz4 -d) or give the log Spark wrote")
    if part.suffix in (".snappy", ".lzf"):
        raise EventLogError(f"{part}: codec {part.suffix[1:]} is not supported; re-run with "
                            "spark.eventLog.compression.codec=zstd (or lz4), or uncompressed")
    return raw


def partition_of(task_info: dict[str, Any]) -> int:
    """The partition a task ran, from its ``Task Info``: its index counts within its stage
    attempt only (a retry that runs partitions 3 to 5 numbers them 0 to 2). Logs from before
    Spark 3.3 have no partition id: there the index stands in for it."""
    partition = task_info.get("Partition ID", -1)
    return int(partition) if isinstance(partition, int) and partition >= 0 else int(task_info["Index"])


def parts(path: Path) -> list[Path]:
    """The files of the log at ``path``, in order; every part of a rolling log when ``path`` is one of them.

    A part read alone would pass for a whole log when Spark rolled it over between two jobs: the
    application would seem to end there, with the jobs of the later parts never run.
    """
    if path.is_file() and (rolling := _rolling_log_of(path)) is not None:
        path = rolling
    if path.is_dir():
        # A compacted part (``....compact``) stands for every part up to its number: as Spark's own
        # reader does, read the last one and the parts after it, never the parts it replaced.
        numbered = sorted((int(m.group(1)), p.name.endswith(".compact"), p)
                          for p in path.iterdir() if (m := re.match(r"events_(\d+)_", p.name)))
        if not numbered:
            raise EventLogError(f"{path}: no events_<n>_* files; not a rolling Spark event log" + _logs_in(path))
        compacted = [i for i, (_, is_compact, _) in enumerate(numbered) if is_compact]
        kept = numbered[compacted[-1] if compacted else 0:]
        _check_no_part_missing(path, [n for n, _, _ in kept], compacted=bool(compacted))
        return [p for _, _, p in kept]
    if not path.is_file():
        raise EventLogError(f"{path}: {'not a regular file' if path.exists() else 'no such file'}")
    return [path]


def _check_no_part_missing(path: Path, numbers: list[int], *, compacted: bool) -> None:
    """Refuse a rolling log whose parts from the first kept on (1 without a compacted part) skip a number.

    Read past a gap, the log would look whole while the jobs and executors of the missing part
    never appear: Spark deletes a part only once a compacted part stands for it.
    """
    expected = range(numbers[0] if compacted else 1, numbers[-1] + 1)
    missing = sorted(set(expected) - set(numbers))
    if missing:
        raise EventLogError(f"{path}: part{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} of this rolling "
                            f"event log {'are' if len(missing) > 1 else 'is'} missing (found {', '.join(map(str, sorted(set(numbers))))})")


def _rolling_log_of(part: Path) -> Path | None:
    """The directory ``eventlog_v2_<app>`` that ``part``, named ``events_<n>_<app>[.<codec>]``, lies in; else None.

    Spark spells ``<app>`` (the application id, and its attempt's) without dots, so a dot starts the codec.
    """
    named = re.fullmatch(r"events_\d+_([^.]+)(\..*)?", part.name)
    if named is None or part.parent.name != f"eventlog_v2_{named.group(1)}":
        return None
    return part.parent


def _logs_in(folder: Path) -> str:
    """``; it holds N event logs (names): give one`` for a folder of logs, such as ``spark.eventLog.dir``."""
    logs = sorted(p.name for p in folder.iterdir()
                  if p.name.startswith(("eventlog_v2_", "app-", "local-", "application_")) or p.name.endswith(".inprogress"))
    if not logs:
        return ""
    shown = ", ".join(logs[:5]) + (", ..." if len(logs) > 5 else "")
    return f"; it holds {len(logs)} event log{'s' * (len(logs) != 1)} ({shown}): give one of them"


def read_events(path: str | Path, *, unfinished_last_line: bool = True) -> Iterator[dict[str, Any]]:
    """Every event of the log as a dict (``"Event"`` holds its type), in order.

    Raises :class:`EventLogError` on a file that cannot be read or decompressed, or that is not
    JSON lines of Spark listener events. An unfinished last line (an in-progress log) is skipped,
    or refused with ``unfinished_last_line=False``.
    """
    if not str(path).strip():  # Path("") is the working folder
        raise EventLogError("no event log given: the path is empty")
    read = [0]  # events of the parts before: a rolling log's newest part may begin with a half-written line
    for part in parts(Path(path)):
        try:
            with part.open("rb") as raw:
                yield from _part_events(part, raw, unfinished_last_line, read)
        except EventLogError:
            raise
        except OSError as exc:  # an unreadable file
            raise EventLogError(f"{part}: cannot read ({exc.strerror or exc})") from exc
        except Exception as exc:  # each codec raises its own error type
            raise EventLogError(f"{part}: cannot decompress ({type(exc).__name__}: {exc})") from exc


def _part_events(part: Path, raw: IO[bytes], unfinished_last_line: bool, read: list[int]) -> Iterator[dict[str, Any]]:
    """The events of one part; ``read[0]`` counts the events of the log so far."""
    stream, decoder = _open(part, raw)
    lines = io.TextIOWrapper(stream, encoding="utf-8", errors="replace")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            # Cut off after whole events: a log still being written (or its crashed application's).
            if not line.endswith("\n") and read[0]:
                if unfinished_last_line:
                    break
                raise EventLogError(f"{part}: line {number} is unfinished: the log ends in the middle of an event "
                                    "(its application is still running, or it crashed)") from None
            raise EventLogError(f"{part}: line {number} is not JSON; not a Spark event log") from None
        if not isinstance(event, dict) or "Event" not in event:
            raise EventLogError(f"{part}: line {number} has no \"Event\"; not a Spark listener event")
        read[0] += 1
        yield event
    if decoder is not None and not decoder.complete and not unfinished_last_line:
        raise EventLogError(f"{part}: the compressed stream ends without its end mark: the log is cut off "
                            "(its application is still running, or it crashed)")
