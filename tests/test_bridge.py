"""The engine side of the live bridge: the pure line translator and the real engine process.

The process tests play the shim: a loopback server socket, the real
``python -m trspark.live --connect`` subprocess, the wire protocol of ``docs/architecture.md``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from engine_session import engine_env, engine_session

from trspark.engine.commands import Backup, SafetyBelt
from trspark.engine.events import REMOTE, ExecutorAdded, JobEnded, TaskEnded
from trspark.engine.interface import Policy
from trspark.engine.protocol import from_dict, from_json, to_dict
from trspark.engine.registry import make_policy
from trspark.engine.settings import TRConfig
from trspark.live.bridge import PROTOCOL_VERSION, Bridge, ack_line, hello_line, recorded, traced_settings
from trspark.live.config import build_policy

LIVE_TRACE = Path(__file__).parent / "fixtures" / "live" / "tr_session_with_kills.jsonl"
"""``TRSPARK_TRACE`` of a live ``tr`` session: 8 TPC-DS queries at SF 0.1 on 3 one-core executors, 8 of
them killed (``python -m jobs.soak --passes 1 --no-rdd --kill-mean 20 --seed 0``)."""

TIMEOUT = 60.0  # generous: the shared machine is often heavily loaded

MAP_TASK = TaskEnded(
    time=3.5, stage_id=0, partition=4, executor_id="2", duration=1.25,
    shuffle_write_bytes=4096, shuffle_id=7, map_id=41,
)
RESULT_TASK = TaskEnded(time=4.0, stage_id=1, partition=0, executor_id="1", duration=0.5)


def event_line(event: object, seq: int) -> str:
    return json.dumps({**to_dict(event), "seq": seq})  # type: ignore[arg-type]


# ---- the pure part ---------------------------------------------------------------------------


def test_always_policy_answers_a_map_task_with_a_backup_then_the_ack() -> None:
    bridge = Bridge(make_policy("always"))
    out = bridge.handle_line(event_line(MAP_TASK, 1))
    assert [from_json(line) for line in out[:-1]] == [
        Backup(shuffle_id=7, map_index=4, source="2", target=REMOTE, bytes=4096, map_id=41)
    ]
    assert json.loads(out[-1]) == {"type": "Ack", "seq": 1}


def test_trace_has_each_event_then_its_commands() -> None:
    import io

    trace = io.StringIO()
    bridge = Bridge(make_policy("always"), trace=trace)
    bridge.handle_line(event_line(MAP_TASK, 1))
    bridge.handle_line("garbage")  # not an event: not traced
    bridge.handle_line(event_line(RESULT_TASK, 3))
    added = ExecutorAdded(time=5.0, executor_id="9", host="h")
    bridge.handle_line(event_line(added, 4))  # an event with no commands: traced too
    lines = [json.loads(line) for line in trace.getvalue().splitlines()]
    assert [line.pop("seq", None) for line in lines] == [1, None, 3, 4]
    assert [from_dict(line) for line in lines] == [
        MAP_TASK, Backup(shuffle_id=7, map_index=4, source="2", target=REMOTE, bytes=4096, map_id=41), RESULT_TASK, added,
    ]


def test_a_trace_that_cannot_be_written_is_given_up_and_the_decisions_go_on(caplog: pytest.LogCaptureFixture) -> None:
    import errno
    import io

    class FullDisk(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    bridge = Bridge(make_policy("always"), trace=FullDisk())
    out = bridge.handle_line(event_line(MAP_TASK, 1))
    assert [from_json(line) for line in out[:-1]] == [
        Backup(shuffle_id=7, map_index=4, source="2", target=REMOTE, bytes=4096, map_id=41)
    ]
    assert bridge.trace is None
    assert [r.message for r in caplog.records if "engine trace given up" in r.message]
    assert bridge.handle_line(event_line(RESULT_TASK, 2)) == [ack_line(2)]


def replayed_answers(config: TRConfig) -> tuple[int, list[str]]:
    """Events of the live trace and the events a fresh engine with ``config`` answers differently."""
    bridge = Bridge(build_policy(config))
    with LIVE_TRACE.open(encoding="utf-8") as trace:
        pairs = list(recorded(trace))
    return len(pairs), [event for event, commands in pairs if bridge.handle_line(event)[:-1] != commands]


def test_a_live_session_replays_to_the_commands_the_live_engine_sent() -> None:
    with LIVE_TRACE.open(encoding="utf-8") as trace:
        config = traced_settings(trace)
    assert config is not None and config.lifetime == "exponential:mean=20.0"
    assert config.remote_path == "" and config.python == ""  # addresses are not traced
    events, differing = replayed_answers(config)
    assert events == 392
    assert differing == []
    # Another belief decides otherwise on the same events: the comparison sees the decisions.
    _, elsewise = replayed_answers(config.with_options(lifetime="exponential:mean=2000"))
    assert elsewise


def test_settings_of_another_version_are_named() -> None:
    line = json.dumps({"type": "TraceSettings", "config": {"mode": "tr", "warp_factor": 9}})
    with pytest.raises(ValueError, match="unknown to this version of trspark: warp_factor"):
        traced_settings([line])


def test_recorded_reads_only_the_first_session_of_a_trace() -> None:
    lines = LIVE_TRACE.read_text(encoding="utf-8").splitlines()
    once = list(recorded(lines))
    assert list(recorded(lines + lines)) == once
    assert [json.loads(event)["seq"] for event, _ in once[:3]] == [1, 2, 3]


def test_result_task_and_never_policy_get_only_the_ack() -> None:
    assert Bridge(make_policy("always")).handle_line(event_line(RESULT_TASK, 1)) == [ack_line(1)]
    assert Bridge(make_policy("never")).handle_line(event_line(MAP_TASK, 1)) == [ack_line(1)]


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("garbage\n", "not JSON"),
        ('{"type": "Tick", "seq": 2, "time": ' + "9" * 5000 + "}\n", "not JSON"),  # past Python's 4,300 digits
        ("[" * 100_000 + "]" * 100_000 + "\n", "not JSON"),  # deeper than the recursion limit
        ("[1, 2]\n", "not a JSON object"),
        ('{"type": "Nope", "seq": 2}\n', "unknown message type"),
        ('{"type": "Tick", "seq": 2, "time": 1, "extra": 3}\n', "bad fields"),
        ('{"type": "Tick", "time": 1}\n', "seq"),
        ('{"type": "Backup", "seq": 2, "shuffle_id": 1, "map_index": 0, "source": "1", "target": "remote"}', "command"),
    ],
)
def test_malformed_lines_are_acked_counted_and_logged(line: str, why: str, caplog: pytest.LogCaptureFixture) -> None:
    bridge = Bridge(make_policy("always"))
    bridge.handle_line(event_line(RESULT_TASK, 1))
    with caplog.at_level(logging.WARNING, logger="trspark.live.bridge"):
        out = bridge.handle_line(line)
    # A line without a readable seq is acked as the next one the shim numbered (2).
    assert out == [ack_line(2)]
    assert bridge.stats.malformed == 1 and bridge.stats.events == 1
    assert why in caplog.text


def test_malformed_log_is_capped_but_counting_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    bridge = Bridge(make_policy("never"))
    with caplog.at_level(logging.WARNING, logger="trspark.live.bridge"):
        for _ in range(50):
            bridge.handle_line("x")
    assert bridge.stats.malformed == 50
    assert len(caplog.records) == 21  # 20 in full, then one "counting silently" line
    assert bridge.handle_line(event_line(RESULT_TASK, 51)) == [ack_line(51)]


class ExplodingPolicy(Policy):
    """Fails on executor events, backs up everything else through a partly unserialisable answer."""

    name = "exploding"

    def handle(self, event):  # type: ignore[no-untyped-def]
        if isinstance(event, ExecutorAdded):
            raise RuntimeError("boom")
        if isinstance(event, JobEnded):
            return (SafetyBelt(on=True), object())  # the second one cannot be sent
        return (SafetyBelt(on=True, reason="test"),)


def test_policy_exception_is_logged_with_traceback_and_the_loop_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    bridge = Bridge(ExplodingPolicy())
    with caplog.at_level(logging.ERROR, logger="trspark.live.bridge"):
        assert bridge.handle_line(event_line(ExecutorAdded(time=0.0, executor_id="1"), 1)) == [ack_line(1)]
        # All-or-nothing: a command that cannot be serialised suppresses the whole answer.
        assert bridge.handle_line(event_line(JobEnded(time=9.0), 2)) == [ack_line(2)]
    assert "RuntimeError: boom" in caplog.text  # the traceback is in the log
    out = bridge.handle_line(event_line(RESULT_TASK, 3))
    assert [from_json(line) for line in out[:-1]] == [SafetyBelt(on=True, reason="test")]
    summary = bridge.summary()
    assert summary["policy_errors"] == 2 and summary["events"] == 3 and summary["commands"] == {"SafetyBelt": 1}


def test_the_summary_gives_the_engines_time_per_line_and_per_decision_in_milliseconds() -> None:
    ticks = iter([0.0, 0.0004, 1.0, 1.0004, 2.0, 2.0004, 3.0, 3.0250])  # two clock reads per line
    cpu_ticks = iter([0.0, 0.0002, 0.1, 0.1002, 0.2, 0.2002, 0.3, 0.3010])
    bridge = Bridge(make_policy("always"), clock=lambda: next(ticks), cpu_clock=lambda: next(cpu_ticks))
    assert "engine_ms_p99" not in bridge.summary()  # nothing handled yet
    for seq in range(1, 4):
        bridge.handle_line(event_line(MAP_TASK, seq))
    bridge.handle_line("not json")  # a malformed line takes the engine's time too
    summary = bridge.summary()
    assert summary["engine_ms_p50"] == pytest.approx(0.4, rel=0.01)
    assert summary["engine_ms_p99"] == summary["engine_ms_max"] == pytest.approx(25.0, rel=0.01)
    assert summary["engine_cpu_ms_p50"] == pytest.approx(0.2, rel=0.01)
    assert summary["engine_cpu_ms_p99"] == summary["engine_cpu_ms_max"] == pytest.approx(1.0, rel=0.01)
    # Per decision: the task-end lines only (the malformed line's 1 ms is not one).
    assert summary["decision_cpu_ms_p99"] == summary["decision_cpu_ms_max"] == pytest.approx(0.2, rel=0.01)


def test_observers_see_valid_events_and_their_failures_do_not_stop_the_policy() -> None:
    seen: list[object] = []

    def broken(event: object) -> None:
        raise ValueError("observer bug")

    bridge = Bridge(make_policy("always"), observers=[seen.append, broken])
    out = bridge.handle_line(event_line(MAP_TASK, 1))
    bridge.handle_line("garbage")
    assert seen == [MAP_TASK]
    assert len(out) == 2 and bridge.stats.policy_errors == 0


class TaskBlindPolicy(Policy):
    """Declares it needs no task events; would fail loudly if handed one."""

    name = "task-blind"

    def wants(self, event_type: type) -> bool:
        return event_type is not TaskEnded

    def handle(self, event):  # type: ignore[no-untyped-def]
        assert not isinstance(event, TaskEnded)
        return (SafetyBelt(on=False, reason=type(event).__name__),)


def test_events_the_policy_does_not_want_are_acked_but_still_observed() -> None:
    seen: list[object] = []
    bridge = Bridge(TaskBlindPolicy(), observers=[seen.append])
    assert bridge.handle_line(event_line(MAP_TASK, 1)) == [ack_line(1)]
    out = bridge.handle_line(event_line(JobEnded(time=9.0), 2))
    assert [from_json(line) for line in out[:-1]] == [SafetyBelt(on=False, reason="JobEnded")]
    assert seen == [MAP_TASK, JobEnded(time=9.0)] and bridge.stats.policy_errors == 0


def test_hello_line_carries_token_and_version() -> None:
    assert json.loads(hello_line("s3cr3t")) == {"type": "Hello", "token": "s3cr3t", "version": PROTOCOL_VERSION}


# ---- the real engine process against a fake shim ------------------------------------------------

def test_engine_process_handshake_backup_garbage_and_clean_exit() -> None:
    conf = {"spark.trspark.mode": "always", "spark.app.id": "app-20261122-0001", "spark.trspark.gamma": "2"}
    with engine_session(conf) as (shim, proc):
        assert shim.read() == {"type": "Hello", "token": "tok-123", "version": 1}
        shim.send(event_line(MAP_TASK, 1))
        commands, ack = shim.answer()
        assert ack == {"type": "Ack", "seq": 1}
        assert [from_json(json.dumps(c)) for c in commands] == [
            Backup(shuffle_id=7, map_index=4, source="2", target=REMOTE, bytes=4096, map_id=41)
        ]
        shim.send("this is not json")
        assert shim.answer() == ([], {"type": "Ack", "seq": 2})
        shim.send(event_line(JobEnded(time=5.0), 3))
        assert shim.answer() == ([], {"type": "Ack", "seq": 3})
        shim.conn.shutdown(socket.SHUT_WR)  # EOF for the engine
        assert proc.wait(TIMEOUT) == 0
        stderr = proc.stderr.read()  # type: ignore[union-attr]
    summary = json.loads(stderr.split("session ended: ", 1)[1].splitlines()[0])
    assert summary["malformed"] == 1 and summary["events"] == 2 and summary["commands"] == {"Backup": 1}
    assert "app-20261122-0001" in stderr


def test_the_engine_process_traces_its_settings_then_the_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("TRSPARK_TRACE", str(trace))
    conf = {"spark.trspark.mode": "always", "spark.trspark.gamma": "2", "spark.trspark.remote.path": "s3a://b/k?secret=1"}
    with engine_session(conf) as (shim, proc):
        shim.read()  # Hello
        shim.send(event_line(MAP_TASK, 1))
        shim.answer()
        shim.conn.shutdown(socket.SHUT_WR)
        assert proc.wait(TIMEOUT) == 0
    lines = trace.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["TraceSettings", "TaskEnded", "Backup"]
    assert "secret" not in lines[0]
    config = traced_settings(lines)
    assert config is not None and (config.mode, config.gamma, config.remote_path) == ("always", 2.0, "")


def test_sigterm_ends_the_engine_cleanly_with_its_summary() -> None:
    """The plugin closes the socket and then sends SIGTERM; the summary must still be written."""
    with engine_session({"spark.trspark.mode": "always"}) as (shim, proc):
        shim.read()  # Hello
        shim.send(event_line(MAP_TASK, 1))
        shim.answer()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(TIMEOUT) == 0
        stderr = proc.stderr.read()  # type: ignore[union-attr]
    assert '"events": 1' in stderr.split("session ended: ", 1)[1]


@pytest.mark.parametrize(
    ("conf", "token", "expected"),
    [
        ({"spark.trspark.gamma": "-1"}, "t", "spark.trspark.gamma='-1' is not valid"),
        ({"spark.trspark.mode": "sometimes"}, "t", "allowed: tr | always | never"),
        ({"spark.trspark.bogus": "1"}, "t", "unknown setting 'spark.trspark.bogus'"),
        ({}, "", "TRSPARK_TOKEN"),
    ],
)
def test_bad_settings_end_the_engine_with_one_clear_line(conf: dict[str, str], token: str, expected: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "trspark.live", "--connect", "127.0.0.1:9"],
        env=engine_env(conf, token), capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], proc.stderr


def test_bad_conf_json_and_address_are_reported() -> None:
    env = {**os.environ, "TRSPARK_TOKEN": "t", "TRSPARK_CONF": "{not json"}
    proc = subprocess.run([sys.executable, "-m", "trspark.live", "--connect", "127.0.0.1:9"],
                          env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 2 and "TRSPARK_CONF is not JSON" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "trspark.live", "--connect", "nowhere"],
                          env=engine_env({}), capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 2 and "--connect 'nowhere' is not valid" in proc.stderr
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
    # The port is free again: nobody listens there.
    proc = subprocess.run([sys.executable, "-m", "trspark.live", "--connect", f"127.0.0.1:{port}"],
                          env=engine_env({"spark.trspark.mode": "never"}), capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 3 and "cannot connect to the trspark plugin" in proc.stderr


def test_engine_stops_when_its_parent_dies() -> None:
    """The socket stays open on our side; only the parent watch can end the session."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(TIMEOUT)
        port = server.getsockname()[1]
        launcher = textwrap.dedent(f"""
            import subprocess, sys, time
            subprocess.Popen([sys.executable, "-m", "trspark.live", "--connect", "127.0.0.1:{port}"])
            time.sleep(600)
        """)
        # A session of its own: if the engine outlives its parent (the failure tested), the
        # clean-up below still ends it with the whole group.
        parent = subprocess.Popen([sys.executable, "-c", launcher], env=engine_env({"spark.trspark.mode": "never"}),
                                  stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            conn, _ = server.accept()
            conn.settimeout(TIMEOUT)
            with conn, conn.makefile("r", encoding="utf-8") as reader:
                assert json.loads(reader.readline())["type"] == "Hello"
                parent.kill()
                parent.wait(TIMEOUT)
                assert reader.readline() == ""  # EOF: the engine closed its end (or timeout fails)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(parent.pid, signal.SIGKILL)
            parent.wait(TIMEOUT)
