"""The engine side of the live bridge, without sockets: one input line in, output lines out.

The JVM shim (driver plugin) and the engine process talk over a loopback socket in
newline-delimited JSON (the full wire protocol is in ``docs/architecture.md``):

1. engine -> shim, once: ``{"type":"Hello","token":"<TRSPARK_TOKEN>","version":1}``;
2. shim -> engine: one protocol event per line (:func:`trspark.engine.protocol.to_json` form)
   with an extra integer ``"seq"`` field, 1, 2, ...;
3. engine -> shim, per event: each command as one line, then ``{"type":"Ack","seq":n}``.

:class:`Bridge` is the pure part of step 2-3. It never lets one bad event stop the loop: a
malformed line is logged and acked without commands; a policy exception is logged with its
traceback and acked without commands (the shim then applies nothing for that event). Both are
counted and reported by :meth:`Bridge.summary`, with the distribution of the engine's own time
per event (from the line read to the Ack built: parsing, the policy and serialising), which the
shim's round-trip latency adds the socket and the driver's threads to.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TextIO

from hdrh.histogram import HdrHistogram

from trspark.engine.events import Event, JobEnded, TaskEnded
from trspark.engine.interface import Policy
from trspark.engine.protocol import ProtocolError, from_dict, to_dict, to_json
from trspark.engine.settings import TRConfig

TRACE_SETTINGS = "TraceSettings"
"""Type of a trace's first line: the settings the engine decided with."""
_UNTRACED_SETTINGS = ("remote_path", "history_url", "notice_url", "python")
"""Addresses no decision reads (they may carry credentials): left out of the trace."""

PROTOCOL_VERSION = 1
"""Version sent in ``Hello``; bump it when the framing or the Hello/Ack lines change."""

EventObserver = Callable[[Event], None]
"""Something that watches every valid event before the policy sees it (e.g. the lifetime
history recorder, which needs ``ExecutorAdded`` / ``ExecutorLost``)."""

log = logging.getLogger(__name__)

# Malformed lines are logged in full up to this many times; past it they are only counted, so a
# shim bug that sends garbage cannot flood the driver's log.
_MAX_LOGGED_MALFORMED = 20
# Longer answers (an engine stopped for minutes) are recorded as this many microseconds (1 hour).
_MAX_RECORDED_US = 3_600_000_000


def hello_line(token: str) -> str:
    """The engine's first line: proves to the shim that this process got the per-app token."""
    return json.dumps({"type": "Hello", "token": token, "version": PROTOCOL_VERSION}, separators=(",", ":"))


def ack_line(seq: int) -> str:
    """Ends the engine's answer to event ``seq`` (its commands, if any, came just before)."""
    return json.dumps({"type": "Ack", "seq": seq}, separators=(",", ":"))


@dataclass
class BridgeStats:
    """Counters of one engine session (reported on exit)."""

    events: int = 0
    """Valid events handed to the policy."""
    malformed: int = 0
    """Lines that were not a valid event (acked, not handled)."""
    policy_errors: int = 0
    """Events on which the policy (or serialising its commands) raised."""
    commands: Counter[str] = field(default_factory=Counter)
    """Commands sent, by type name."""
    jobs_ended: int = 0
    engine_us: HdrHistogram = field(default_factory=lambda: HdrHistogram(1, _MAX_RECORDED_US, 2))
    """Engine wall time per line (microseconds, 2 significant digits: bounded memory for any run length)."""
    engine_cpu_us: HdrHistogram = field(default_factory=lambda: HdrHistogram(1, _MAX_RECORDED_US, 2))
    """The CPU time of those lines: the wall time less the waits for a core on a busy machine."""
    decision_cpu_us: HdrHistogram = field(default_factory=lambda: HdrHistogram(1, _MAX_RECORDED_US, 2))
    """The CPU time of the task-end lines only: the per-output decision (Algorithm 2) is made there."""


class Bridge:
    """Turns shim lines into policy calls and the policy's commands into lines.

    Parameters
    ----------
    policy
        The policy that decides (built by :func:`trspark.engine.registry.make_policy`).
    observers
        Callables given every valid event before the policy (errors in them are logged and
        ignored, like policy errors).
    trace
        A text file that gets every valid event and then each command it caused, one JSON line
        each (``to_json`` form, events with ``"seq"``): what the engine saw and decided, for
        debugging a live run (``TRSPARK_TRACE``; the engine process writes
        :func:`trace_settings_line` first).
    clock, cpu_clock
        Seconds, for the engine's wall and CPU time per line (a test passes its own).
    """

    def __init__(self, policy: Policy, observers: Iterable[EventObserver] = (), trace: TextIO | None = None,
                 clock: Callable[[], float] = time.perf_counter,
                 cpu_clock: Callable[[], float] = time.thread_time) -> None:
        self.policy = policy
        self.clock, self.cpu_clock = clock, cpu_clock
        self.observers = list(observers)
        self.trace = trace
        self.stats = BridgeStats()
        self._last_seq = 0

    def handle_line(self, line: str) -> list[str]:
        """Answer one line from the shim: the command lines, then the ``Ack`` line (no newlines)."""
        started, cpu_started = self.clock(), self.cpu_clock()
        lines, event = self._answer(line)
        wall, cpu = _microseconds(self.clock() - started), _microseconds(self.cpu_clock() - cpu_started)
        self.stats.engine_us.record_value(wall)
        self.stats.engine_cpu_us.record_value(cpu)
        if isinstance(event, TaskEnded):
            self.stats.decision_cpu_us.record_value(cpu)
        return lines

    def _answer(self, line: str) -> tuple[list[str], Event | None]:
        seq, event, problem = self._parse(line)
        self._last_seq = seq
        if event is None:
            self.stats.malformed += 1
            if self.stats.malformed <= _MAX_LOGGED_MALFORMED:
                log.warning("malformed event (seq %d, acked without commands): %s", seq, problem)
            elif self.stats.malformed == _MAX_LOGGED_MALFORMED + 1:
                log.warning("more malformed events; counting them silently from now on")
            return [ack_line(seq)], None
        self.stats.events += 1
        if isinstance(event, JobEnded):
            self.stats.jobs_ended += 1
        return [*self._commands_for(event, seq), ack_line(seq)], event

    def summary(self) -> dict[str, object]:
        """Session counters and the policy's own summary (printed by the engine on exit)."""
        return {
            "events": self.stats.events,
            "malformed": self.stats.malformed,
            "policy_errors": self.stats.policy_errors,
            "commands": dict(self.stats.commands),
            "jobs_ended": self.stats.jobs_ended,
            "policy": self.policy.name,
            **self._engine_ms(),
            **{f"policy.{k}": v for k, v in self.policy.summary().items()},
        }

    def _engine_ms(self) -> dict[str, float]:
        """Median, 99th percentile and maximum of the engine's wall and CPU time per line, and of the
        CPU time per task-end line (ms)."""
        out: dict[str, float] = {}
        for name, times in (("engine_ms", self.stats.engine_us), ("engine_cpu_ms", self.stats.engine_cpu_us),
                            ("decision_cpu_ms", self.stats.decision_cpu_us)):
            if times.get_total_count():
                out |= {f"{name}_p50": times.get_value_at_percentile(50) / 1000,
                        f"{name}_p99": times.get_value_at_percentile(99) / 1000,
                        f"{name}_max": times.get_max_value() / 1000}
        return out

    def _parse(self, line: str) -> tuple[int, Event | None, str]:
        """``(seq, event or None, what was wrong)``.

        A line whose ``seq`` cannot be read is acked as the next expected number (the shim
        numbers events 1, 2, ... without gaps), so the shim's wait for that Ack still ends.
        """
        fallback_seq = self._last_seq + 1
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):  # JSONDecodeError; also a number of over 4,300 digits, deep nesting
            return fallback_seq, None, f"not JSON: {line.strip()[:200]!r}"
        if not isinstance(data, dict):
            return fallback_seq, None, f"not a JSON object: {line.strip()[:200]!r}"
        seq = data.pop("seq", None)
        if not isinstance(seq, int) or isinstance(seq, bool):
            return fallback_seq, None, f"missing or non-integer 'seq' in {line.strip()[:200]!r}"
        try:
            message = from_dict(data)
        except ProtocolError as exc:
            return seq, None, str(exc)
        if not isinstance(message, Event):  # Event is a union type; isinstance accepts it
            return seq, None, f"{type(message).__name__} is a command, not an event"
        return seq, message, ""

    def _commands_for(self, event: Event, seq: int) -> list[str]:
        lines = self._decide(event, seq)
        self.write_trace([_with_seq(event, seq), *lines])
        return lines

    def write_trace(self, lines: list[str]) -> None:
        """Append ``lines`` to the trace, if one is kept. A trace that cannot be written (a full
        disk) is given up with one warning: it is a record, and the decisions go on without it."""
        if self.trace is None:
            return
        try:
            self.trace.write("".join(f"{line}\n" for line in lines))
            self.trace.flush()
        except OSError as exc:
            log.warning("engine trace given up, it cannot be written: %s", exc)
            with contextlib.suppress(OSError):
                self.trace.close()
            self.trace = None

    def _decide(self, event: Event, seq: int) -> list[str]:
        for observe in self.observers:
            try:
                observe(event)
            except Exception:
                log.exception("event observer %r failed on seq %d; ignored", observe, seq)
        if not self.policy.wants(type(event)):
            return []
        try:
            commands = self.policy.handle(event)
            # Serialise all before sending any: a half-sent answer would be worse than none.
            lines = [to_json(command) for command in commands]
        except Exception:
            self.stats.policy_errors += 1
            log.exception("policy %r failed on seq %d (%s); acked without commands", self.policy.name, seq, type(event).__name__)
            return []
        self.stats.commands.update(type(command).__name__ for command in commands)
        return lines


def trace_settings_line(config: TRConfig) -> str:
    """A trace's first line: the engine's settings as it decides with them (lifetimes fitted to
    the history included), so that the trace replays without the Spark configuration."""
    fields = {k: v for k, v in dataclasses.asdict(config).items() if k not in _UNTRACED_SETTINGS}
    return json.dumps({"type": TRACE_SETTINGS, "config": fields}, separators=(",", ":"))


def traced_settings(trace: Iterable[str]) -> TRConfig | None:
    """The settings of the first session in a trace, or None when it has no settings line.

    Raises ``ValueError`` naming the settings this version does not have (a trace of another version).
    """
    for line in trace:
        data = json.loads(line) if line.strip() else {}
        if data.get("type") == TRACE_SETTINGS:
            fields = data["config"]
            unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(TRConfig)})
            if unknown:
                raise ValueError(f"trace settings unknown to this version of trspark: {', '.join(unknown)}")
            fields["pool_lifetimes"] = tuple(tuple(pair) for pair in fields.get("pool_lifetimes", ()))
            return TRConfig(**fields)
    return None


def recorded(trace: Iterable[str]) -> Iterator[tuple[str, list[str]]]:
    """``(event line, the command lines it caused)`` of the first session in a trace, in order.

    Events are the lines with a ``seq``; each is followed by its commands (the Acks are not kept).
    A settings line starts each session. Feeding the events to a fresh engine with the same
    settings gives the same commands: the engine reads the time from the events, so a trace
    replays a live session's decisions.
    """
    event: str | None = None
    commands: list[str] = []
    sessions = 0
    for raw in trace:
        line = raw.rstrip("\n")
        if not line:
            continue
        data = json.loads(line)
        if data.get("type") == TRACE_SETTINGS:
            sessions += 1
            if sessions > 1:
                break
        elif "seq" in data:
            if event is not None:
                yield event, commands
            event, commands = line, []
        else:
            commands.append(line)
    if event is not None:
        yield event, commands


def _microseconds(seconds: float) -> int:
    """``seconds`` as whole microseconds within what the histograms record."""
    return min(max(round(seconds * 1e6), 1), _MAX_RECORDED_US)


def _with_seq(event: Event, seq: int) -> str:
    return json.dumps({"seq": seq, **to_dict(event)}, separators=(",", ":"))
