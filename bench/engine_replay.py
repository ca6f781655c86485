"""The engine's CPU time per decision, replaying the events of a live run.

A live engine started with ``TRSPARK_TRACE=FILE`` in the driver's environment appends its
settings, then every event it got and the commands it answered, one JSON line each
(:mod:`trspark.live.bridge`). This feeds the events of the trace's first session again, in order,
through the same :class:`Bridge` to a fresh engine with those settings (each ``--conf KEY=VALUE``
over them; a trace without them starts from the plugin's defaults in mode ``tr``), and prints what the
live session summary prints: the CPU time per line and per task-end line (``decision_cpu_ms``,
where each map output's decision is made). It also checks that the replay answered every event
with the commands the live engine sent: the engine takes its time from the events, so a replay
decides the same, and its timings are those of the live decisions on an idle core rather than
beside Spark's JVMs. Back to back, the engine runs with warm caches; in a live run events come
apart and each line starts cold, which ``--gap`` (seconds of sleep after each event) brings back.

Run: ``python bench/engine_replay.py TRACE [--repeat 5] [--gap 0.01]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from trspark.engine.settings import TRConfig
from trspark.keys import PREFIX, ConfigError
from trspark.live.bridge import TRACE_SETTINGS, Bridge, recorded, traced_settings
from trspark.live.config import build_policy, from_spark_conf


def replay(lines: list[str], config: TRConfig, gap: float = 0.0) -> tuple[dict[str, object], list[int], list[tuple[float, str]]]:
    """One replay by a fresh engine, ``gap`` s of sleep after each event: its session summary, the
    seqs answered differently, and ``(CPU seconds, line)`` of each task-end line."""
    bridge = Bridge(build_policy(config))
    mismatched: list[int] = []
    timed: list[tuple[float, str]] = []
    for event, commands in recorded(lines):
        cpu = time.thread_time()
        answer = bridge.handle_line(event)
        cpu = time.thread_time() - cpu
        if answer[:-1] != commands:  # the last line is the Ack, which the trace does not keep
            mismatched.append(json.loads(event)["seq"])
        if '"type":"TaskEnded"' in event:
            timed.append((cpu, event))
        if gap:
            time.sleep(gap)
    return bridge.summary(), mismatched, timed


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path, help="a TRSPARK_TRACE file of one application")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a spark.trspark.* setting over the trace's own (repeatable); for a trace "
                             "without its settings line, over the plugin's defaults in mode tr")
    parser.add_argument("--repeat", type=int, default=5, help="replays, each by a fresh engine (the CPU is shared)")
    parser.add_argument("--gap", type=float, default=0.0,
                        help="seconds of sleep after each event, as events come apart in a live run")
    parser.add_argument("--slowest", type=int, default=5, help="list this many slowest task-end lines of the last replay")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.gap < 0 or args.slowest < 0:
        parser.error("--repeat must be >= 1, --gap and --slowest >= 0")

    with args.trace.open(encoding="utf-8") as trace:
        lines = list(trace)
    overrides = dict(item.partition("=")[::2] for item in args.conf)
    if outside := [key for key in overrides if not key.startswith(PREFIX)]:
        parser.error(f"--conf takes {PREFIX}* settings, not {', '.join(outside)}")
    try:
        config = from_spark_conf(overrides, base=traced_settings(lines) or TRConfig(mode="tr"))
    except ConfigError as exc:
        raise SystemExit(f"--conf: {exc}") from None
    figures: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        summary, mismatched, timed = replay(lines, config, args.gap)
        for name in ("engine_cpu_ms_p50", "engine_cpu_ms_p99", "decision_cpu_ms_p50", "decision_cpu_ms_p99"):
            figures.setdefault(name, []).append(float(summary[name]))  # type: ignore[arg-type]
    sessions = sum(f'"type":"{TRACE_SETTINGS}"' in line for line in lines)
    if sessions > 1:
        print(f"{args.trace} holds {sessions} sessions; the first is replayed")
    print(f"replayed {summary['events']} events of {args.trace} {args.repeat} times; answers that differ from the "
          f"live engine's: {len(mismatched)}{f' (first at seq {mismatched[0]})' if mismatched else ''}; "
          f"policy errors {summary['policy_errors']}")
    for name, values in figures.items():
        print(f"{name}: median {statistics.median(values):.3f} (min {min(values):.3f}, max {max(values):.3f})")
    for cpu, event in sorted(timed, reverse=True)[:args.slowest]:
        data = json.loads(event)
        print(f"  {cpu * 1e3:7.3f} ms  seq {data['seq']} stage {data['stage_id']} "
              f"shuffle {data.get('shuffle_id')} map {data.get('map_id')} on {data['executor_id']}")


if __name__ == "__main__":
    main()
