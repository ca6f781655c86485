"""What the TPC-DS commands keep when a run goes wrong: a results file of another kind is refused
before any cluster starts, an interrupted verification leaves the table of an earlier run alone,
a verification CSV cut off mid-row is resumed, an unusable plugin is one error line, and each
session's work directory goes with the session; a policy's process stops with the benchmark's."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from jobs.tpcds import lockstep, session, verify
from jobs.tpcds.session import PolicyUnavailable
from jobs.tpcds.settings import Progress
from trspark.cli import cli


def _one_error_line(output: str) -> None:
    assert "Traceback" not in output, output
    assert len([line for line in output.splitlines() if line.startswith("Error")]) == 1, output


def test_bench_refuses_an_out_file_of_another_kind_before_any_cluster_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import jobs.tpcds.cli as bench_cli

    started: list[object] = []
    monkeypatch.setattr(bench_cli, "run_with_progress", lambda settings, console: started.append(settings))
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    result = CliRunner().invoke(cli, ["bench", "tpcds", "--sf", "1", "--queries", "q3", "--out", str(other)])
    assert result.exit_code == 2, result.output
    _one_error_line(result.output)
    assert "--out" in result.output and "not a trspark TPC-DS results file" in result.output
    assert started == []
    assert other.read_text() == "a,b\n1,2\n"


def _interrupted(*_: Any) -> list[verify.QueryVerdict]:
    raise KeyboardInterrupt


def test_an_interrupted_verification_without_a_csv_leaves_the_table_of_an_earlier_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = tmp_path / "QUERIES.md"
    earlier = f"# Queries\n\n{verify.BEGIN}\nq3 passed here\n{verify.END}\n"
    table.write_text(earlier)
    monkeypatch.setattr(verify, "resume", _interrupted)
    result = CliRunner().invoke(cli, ["bench", "verify", "--queries", "q3", "--out", str(table)])
    assert result.exit_code == 130, result.output
    assert table.read_text() == earlier


def test_an_unusable_plugin_stops_the_verification_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable(*_: Any) -> list[verify.QueryVerdict]:
        raise PolicyUnavailable("the shim jar is not built")

    monkeypatch.setattr(verify, "resume", unavailable)
    result = CliRunner().invoke(cli, ["bench", "verify", "--queries", "q3", "--out", str(tmp_path / "t.md")])
    assert result.exit_code == 1, result.output
    _one_error_line(result.output)
    assert "the plugin cannot run here: the shim jar is not built" in result.output


def test_a_verification_csv_cut_off_mid_row_runs_that_query_again(tmp_path: Path) -> None:
    cut = tmp_path / "verify.csv"
    cut.write_text("query,sf,verdict,kind,reason,spark_seconds\nq3,1,pass,equal,,1.50\nq7,1,fail\n")
    verdicts = verify.read_csv(cut, 1.0)
    assert [(v.query, v.ok) for v in verdicts] == [("q3", True)]
    assert verify.pending(("q3", "q7"), verdicts) == ("q7",)


def test_a_session_s_work_directory_goes_with_it_even_if_spark_fails_to_stop(tmp_path: Path) -> None:
    class FailingSpark:
        def stop(self) -> None:
            raise RuntimeError("the JVM is gone")

    work = tmp_path / "trspark-tpcds-tr-x"
    (work / "local" / "blockmgr").mkdir(parents=True)
    (work / "local" / "blockmgr" / "shuffle_0_0_0.data").write_bytes(b"x" * 100)
    with pytest.raises(RuntimeError):
        session.stop(FailingSpark(), work)  # type: ignore[arg-type]
    assert not work.exists()


def _busy_policy(channel: Any, flag: str) -> None:
    """A policy's process that keeps reporting until it is interrupted, then unwinds (as Spark's ``finally`` does)."""
    try:
        while True:
            channel.put(("step", "x" * 1000))
            time.sleep(0.001)
    except KeyboardInterrupt:
        Path(flag).write_text("unwound")


def test_a_stopped_benchmark_stops_its_policy_process_which_unwinds(tmp_path: Path) -> None:
    mp = multiprocessing.get_context("spawn")
    channel = mp.Queue()
    flag = tmp_path / "unwound"
    child = mp.Process(target=_busy_policy, args=(channel, str(flag)))
    child.start()
    channel.get(timeout=60)  # running, its queue filling up
    lockstep.stop_processes([child], channel, grace=60)
    child.join(timeout=5)
    assert not child.is_alive()
    assert child.exitcode == 0  # it unwound and exited; it was not terminated
    assert flag.read_text() == "unwound"


def _turn_taking_policy(ctx: Any, policy: str, data: Path, turns: lockstep.ChildTurns) -> None:
    """An interleaved policy's process: it asks for its first turn, then reports until interrupted."""
    try:
        turns.wait(lockstep.step_key(policy, "start"))
    except RuntimeError:  # the coordinator's stop: it never got a turn
        (data / policy).write_text("stopped while waiting")
        return
    try:
        while True:
            turns.put(("step", f"{policy} running"))
            time.sleep(0.001)
    except KeyboardInterrupt:
        (data / policy).write_text("unwound")


def test_a_stopped_interleaved_benchmark_stops_the_policy_whose_turn_it_is(tmp_path: Path) -> None:
    def interrupt(label: str) -> None:  # SIGTERM reaches the coordinator as this (trspark.cli)
        raise KeyboardInterrupt(label)

    with pytest.raises(KeyboardInterrupt, match="never running"):
        lockstep.run_interleaved(SimpleNamespace(stable={}), ["never", "tr"], tmp_path, Progress(step=interrupt), [],
                                 {"never": 1, "tr": 1}, _turn_taking_policy)
    # vanilla Spark's session goes first; it was mid-run and unwound, the other was told to stop
    assert (tmp_path / "never").read_text() == "unwound"
    assert (tmp_path / "tr").read_text() == "stopped while waiting"
