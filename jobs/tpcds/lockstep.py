"""Policies taking turns: each keeps its cluster up, one runs at a time, runs of a schedule side by side.

Run one after the other, each policy's runs come minutes apart, and a shared 2-core host drifts
that much: vanilla Spark's stable time of one job moved by half between sessions there, more
than the effect under study. With ``BenchSettings.interleave`` every policy's session runs in its
own process (a driver JVM loads the plugin only at its start) and all stay up. Before each step a
process asks the coordinator (:func:`run_interleaved`) for its turn with the step's key
(:func:`step_key`); the coordinator waits until every live process has asked, then lets the
smallest key go, ties taken in the policy order rotated by the query's and run's numbers (so no
policy always comes first). Run ``r`` of a query under every policy, with the same kills, is so
made in one round. Without interleaving, :class:`Turns` lets every step go at once.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from jobs.tpcds.results import RunRow
from jobs.tpcds.settings import Progress

STEP_PHASES = ("start", "warm-up", "stable")


def step_key(policy: str, step: str, query_index: int = 0, run: int = 0) -> tuple[int, ...]:
    """The order of a policy's steps among all policies' steps: ``(phase, query, run)``, smallest first.

    Vanilla Spark starts, warms up and measures the reference first; the other policies' sessions
    start once it is known (their plugin's lifetime model is a multiple of it); every policy's
    evicted runs come last, so that run ``r`` of a query under each policy is made in one round.
    """
    if step not in STEP_PHASES:  # evicted runs (or, on an existing cluster, real ones)
        return (2 * len(STEP_PHASES), query_index, run)
    return (STEP_PHASES.index(step) + (0 if policy == "never" else len(STEP_PHASES)), query_index, run)


class Turns:
    """When a policy's session may take its next step: at once (policies run one after the other)."""

    interleaved = False

    def wait(self, key: tuple[int, ...]) -> dict[str, float]:
        """Block until step ``key`` may run; returns the stable seconds known so far (query -> s)."""
        return {}


class ChildTurns(Turns):
    """A policy process's side when interleaved: announce each step, wait for the coordinator's go."""

    interleaved = True

    def __init__(self, policy: str, stable: dict[str, float], outbox: Any, inbox: Any) -> None:
        self.policy, self.stable, self.outbox, self.inbox = policy, stable, outbox, inbox

    def put(self, message: tuple[str, Any]) -> None:
        """Send ``(kind, payload)`` to the coordinator, as this policy's (the runner's channel interface)."""
        self.outbox.put((self.policy, *message))

    def wait(self, key: tuple[int, ...]) -> dict[str, float]:
        self.put(("ready", (key, dict(self.stable))))
        kind, stable = self.inbox.get()
        if kind != "go":
            raise RuntimeError(f"{self.policy}: the coordinator sent {kind!r} instead of a go")
        return stable  # type: ignore[no-any-return]


def turn_order(waiting: dict[str, tuple[int, ...]], policies: list[str]) -> str:
    """The waiting policy whose step goes next: smallest key, ties in policy order rotated by query + run."""
    def rank(policy: str) -> tuple[tuple[int, ...], int]:
        key = waiting[policy]
        return key, (policies.index(policy) - sum(key[1:])) % len(policies)
    return min(waiting, key=rank)


def run_interleaved(ctx: Any, policies: list[str], data: Path, progress: Progress, rows: list[RunRow],
                    planned: dict[str, int], target: Callable[..., None]) -> dict[str, str]:
    """Run every policy's session at once, taking turns; rows into ``rows``; the policies skipped, with why.

    ``ctx`` is the runner's context; ``planned``: each policy's recorded runs (a skipped policy's
    missing ones still advance the progress); ``target(ctx, policy, data, turns)`` runs one
    policy's session in its own process, asking ``turns`` (a :class:`ChildTurns`) before each step
    and sending it ``(kind, payload)`` messages: ``step``, ``advance``, ``row`` and a last
    ``done`` whose payload has ``stable`` and ``skipped``.
    """
    mp = multiprocessing.get_context("spawn")
    outbox = mp.Queue()
    inboxes = {p: mp.Queue() for p in policies}
    children = {p: mp.Process(target=target, args=(ctx, p, data, ChildTurns(p, ctx.stable, outbox, inboxes[p])),
                              name=f"bench-{p}")
                for p in policies}
    for child in children.values():
        child.start()
    waiting: dict[str, tuple[int, ...]] = {}
    skipped: dict[str, str] = {}
    done: set[str] = set()
    try:
        while len(done) < len(policies):
            try:
                policy, kind, payload = outbox.get(timeout=1.0)
            except queue.Empty:
                for p, child in children.items():
                    if p not in done and not child.is_alive():
                        done.add(p)
                        skipped[p] = f"its worker process died (exit code {child.exitcode})"
                        waiting.pop(p, None)
            else:
                _take(ctx, policy, kind, payload, progress, rows, waiting, done, skipped)
            if waiting and len(waiting) + len(done) == len(policies):
                chosen = turn_order(waiting, policies)
                del waiting[chosen]
                inboxes[chosen].put(("go", dict(ctx.stable)))
    finally:
        # Interrupted: a process waiting for its turn stops its session and ends; the one whose turn
        # it is would finish its run first (SIGTERM reaches only this process), so it is stopped.
        running = [children[p] for p in policies if p not in done and p not in waiting]
        for p in policies:
            if p not in done:
                inboxes[p].put(("stop", {}))
        stop_processes(running, outbox)
        for child in children.values():
            child.join(60)
            if child.is_alive():
                child.kill()
    for policy in skipped:
        for _ in range(planned[policy] - sum(r.policy == policy for r in rows)):
            progress.advance()
    return skipped


def _take(ctx: Any, policy: str, kind: str, payload: Any, progress: Progress, rows: list[RunRow],
          waiting: dict[str, tuple[int, ...]], done: set[str], skipped: dict[str, str]) -> None:
    """One message of a policy process."""
    if kind == "ready":
        key, stable = payload
        waiting[policy] = key
        if policy == "never":  # vanilla Spark's stable times are the reference of every policy
            ctx.stable.update(stable)
    elif kind == "done":
        done.add(policy)
        if payload.skipped:
            skipped[policy] = payload.skipped
        if policy == "never":
            ctx.stable.update(payload.stable)
    else:
        forward(kind, payload, progress, rows)


def forward(kind: str, payload: Any, progress: Progress, rows: list[RunRow]) -> bool:
    """Pass on a policy process's ``step``, ``advance`` or ``row`` message; False for any other kind."""
    if kind == "step":
        progress.step(payload)
    elif kind == "advance":
        progress.advance()
    elif kind == "row":
        rows.append(payload)
    else:
        return False
    return True


def stop_processes(children: Sequence[Any], channel: Any, grace: float = 120.0) -> None:
    """Stop policy processes as Ctrl-C would: SIGINT, so each unwinds (Spark stopped, CPU caps removed).

    SIGTERM reaches only the benchmark's own process, and without this a policy's process would
    go on killing executors until its runs were done. Messages on ``channel`` are read and dropped
    meanwhile: a process whose queue is full cannot exit. One still alive after ``grace`` seconds
    is terminated (its Spark may then be left to its own shutdown hooks).
    """
    for child in children:
        if child.pid is not None and child.is_alive():
            os.kill(child.pid, signal.SIGINT)
    deadline = time.monotonic() + grace
    while any(child.is_alive() for child in children) and time.monotonic() < deadline:
        for child in children:
            child.join(timeout=0.5 / len(children))
        with contextlib.suppress(queue.Empty, OSError, EOFError):
            while True:
                channel.get_nowait()
    for child in children:
        if child.is_alive():
            child.terminate()
