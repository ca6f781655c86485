"""``python -m trspark.live --connect HOST:PORT``: the policy engine process of the live bridge.

Started by the JVM shim's driver plugin. Reads its settings from the environment:

* ``TRSPARK_TOKEN``: the per-application secret, echoed in the ``Hello`` line;
* ``TRSPARK_CONF``: a JSON object with every ``spark.trspark.*`` setting (and ``spark.app.id``).
* ``TRSPARK_TRACE`` (optional): a file to append the settings and then every event and the
  commands it caused to, one JSON line each (set it in the driver's environment; the plugin
  passes its environment on).

It validates the configuration and builds the policy *before* connecting, so a bad setting ends
the process at once with one line naming the key (exit code 2) and the shim falls back to
always-checkpoint. Then it connects, sends ``Hello`` and answers events (see
:mod:`trspark.live.bridge` and ``docs/architecture.md``) until end of input or its parent dies.

Exit codes: 0 after end of input or SIGTERM, 2 bad settings / arguments, 3 cannot connect.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping
from typing import TextIO

from trspark.engine.interface import Policy
from trspark.engine.settings import TRConfig, is_stable_spec
from trspark.keys import ConfigError
from trspark.live.bridge import Bridge, EventObserver, hello_line, trace_settings_line
from trspark.live.config import build_policy, from_spark_conf, read_env

log = logging.getLogger(__name__)

EXIT_OK, EXIT_USAGE, EXIT_CONNECT = 0, 2, 3
PARENT_POLL_SECONDS = 0.5


class StartupError(Exception):
    """Bad settings or arguments: reported as one line, exit code 2."""


def read_settings(environ: Mapping[str, str]) -> tuple[str, TRConfig, str]:
    """``(token, config, app_id)`` from ``TRSPARK_TOKEN`` and ``TRSPARK_CONF``."""
    token = environ.get("TRSPARK_TOKEN", "")
    if not token:
        raise StartupError("environment variable TRSPARK_TOKEN is missing or empty (set by the trspark plugin)")
    try:
        as_text = read_env(environ)
        config = from_spark_conf(as_text)
    except ConfigError as exc:
        raise StartupError(str(exc)) from None
    return token, config, as_text.get("spark.app.id", "")


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise StartupError(f"--connect {text!r} is not valid; expected HOST:PORT, e.g. 127.0.0.1:40123")
    return host, int(port)


def event_observers(config: TRConfig, app_id: str) -> list[EventObserver]:
    """Watchers of every event besides the policy.

    When ``config.history_url`` is set: a recorder of observed executor lifetimes
    (``ExecutorAdded`` -> ``ExecutorLost``, survivors censored at ``JobEnded``/exit), keyed by
    ``config.pool`` and ``app_id``; and a compaction of the store's parts, off the engine's thread.
    """
    if not config.history_url:
        return []
    from trspark.live.history import HistoryStore
    from trspark.live.history_compaction import compact_in_background
    from trspark.live.recorder import HistoryObserver, LifetimeRecorder

    app = app_id or "unknown-app"
    # A store object of its own: the counter in its part names is not shared with the recorder's thread.
    compact_in_background(HistoryStore(config.history_url), app)
    recorder = LifetimeRecorder(HistoryStore(config.history_url), pool=config.pool, app_id=app, background=True)
    return [HistoryObserver(recorder)]


def with_history_prior(config: TRConfig) -> TRConfig:
    """Start from the lifetime models fitted to the pools' history (``spark.trspark.history.url``).

    ``spark.trspark.pool`` fits the shared model, each pool with a model of its own fits that one,
    and a pool found only in the store gets one once its evictions support a fit.

    An unreachable store degrades to the configured model with one warning (start-up validation
    in ``trspark.spark_conf`` already refused a URL that was unusable before the job started).
    """
    if not config.history_url:
        return config
    from trspark.live.history import prior_from_history, priors_of_other_pools

    # A stable (never evicted) model has nothing to fit, shared or a pool's.
    spec = config.lifetime
    if not is_stable_spec(spec):
        prior = prior_from_history(config.history_url, config.pool, config.lifetime)
        spec = prior.spec
        if not _logged(prior.account, prior.reachable):  # the configured models hold; a hung store is not waited on once per pool
            return config
    # Each pool with its own model fits it to its own history; stable pools have nothing to fit.
    pools = []
    for pool, configured in config.pool_lifetimes:
        fitted = configured
        if not is_stable_spec(configured):
            pool_prior = prior_from_history(config.history_url, pool, configured)
            if not _logged(pool_prior.account, pool_prior.reachable):
                return config
            fitted = pool_prior.spec
        pools.append((pool, fitted))
    others = priors_of_other_pools(config.history_url, [config.pool, *(p for p, _ in pools)], config.lifetime)
    for account in others.accounts:
        _logged(account, others.reachable)
    if not others.reachable:
        return config
    return config.with_options(lifetime=spec, pool_lifetimes=tuple(sorted([*pools, *others.fitted])))


def policy_with_history(config: TRConfig) -> tuple[TRConfig, Policy]:
    """The policy of ``config`` with its lifetimes fitted to the history (:func:`with_history_prior`).

    Lifetimes fitted to a damaged store may leave no policy to build (an infinite mean): then the
    configured ones, with a warning, for a bad history must not cost the application its engine.
    """
    fitted = with_history_prior(config)
    if fitted == config:
        return config, build_policy(config)
    try:
        return fitted, build_policy(fitted)
    except (ValueError, ArithmeticError) as exc:
        log.warning("the lifetimes fitted to the history leave the engine unable to start (%s); "
                    "using the configured ones", exc)
        return config, build_policy(config)


def _logged(account: str, reachable: bool) -> bool:
    """Log a history account, with a warning when the store was unreachable; returns ``reachable``."""
    (log.info if reachable else log.warning)("%s", account)
    return reachable


def watch_parent(sock: socket.socket, parent_pid: int) -> None:
    """End the session when the process that started us is gone.

    A killed driver JVM normally closes the socket (EOF), but a half-open loopback connection
    or a hung parent would leave the engine waiting forever. Shutting the socket down makes the
    main loop see EOF and exit through its normal path.
    """

    def poll() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_SECONDS)
        log.warning("parent process %d is gone; stopping", parent_pid)
        with contextlib.suppress(OSError):  # already closed: nothing left to end
            sock.shutdown(socket.SHUT_RDWR)

    threading.Thread(target=poll, name="trspark-parent-watch", daemon=True).start()


def serve(sock: socket.socket, bridge: Bridge, token: str) -> None:
    """Send Hello, start the policy's :meth:`~trspark.engine.interface.Policy.prepare` beside the
    event loop, then answer each event line until end of input."""
    with sock.makefile("r", encoding="utf-8", errors="replace", newline="\n") as reader, sock.makefile(
        "w", encoding="utf-8", newline="\n"
    ) as writer:
        writer.write(hello_line(token) + "\n")
        writer.flush()
        # After Hello, so that the application does not wait for it; executors take seconds to
        # register, so the first events find the policy's set-up done.
        threading.Thread(target=_prepare, args=(bridge.policy,), name="trspark-prepare", daemon=True).start()
        for line in reader:
            if not line.strip():
                continue  # keep-alive blank lines carry no seq
            writer.write("".join(out + "\n" for out in bridge.handle_line(line)))
            writer.flush()


def _prepare(policy: Policy) -> None:
    try:
        policy.prepare()
    except Exception:  # the first decisions then do the work themselves; nothing is lost
        log.exception("policy %r could not prepare; its first decisions will", policy.name)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="trspark engine %(levelname)s: %(message)s")
    parser = argparse.ArgumentParser(prog="python -m trspark.live", description="The trspark policy engine; started by the Spark plugin (see docs/architecture.md).")
    parser.add_argument("--connect", required=True, metavar="HOST:PORT", help="the shim's loopback socket")
    args = parser.parse_args(argv)
    parent_pid = os.getppid()
    try:
        host, port = parse_address(args.connect)
        token, config, app_id = read_settings(os.environ)
        config, policy = policy_with_history(config)
    except (StartupError, ValueError, ArithmeticError) as exc:
        # make_policy raises ValueError naming the mode and the policies that exist.
        print(f"trspark engine: {exc}", file=sys.stderr)
        return EXIT_USAGE
    observers = event_observers(config, app_id)
    trace_path = os.environ.get("TRSPARK_TRACE", "")
    trace = _open_trace(trace_path) if trace_path else None
    bridge = Bridge(policy, observers, trace)
    try:
        sock = socket.create_connection((host, port), timeout=max(config.engine_timeout, 5.0))
    except OSError as exc:
        print(f"trspark engine: cannot connect to the trspark plugin at {host}:{port}: {exc}", file=sys.stderr)
        return EXIT_CONNECT
    bridge.write_trace([trace_settings_line(config)])  # a session in the trace starts with its settings
    # At application end the plugin closes the socket, and sends SIGTERM if the engine is still
    # running 10 s later; when it drops the engine, it sends SIGTERM at once and kills 10 s later.
    # Unwind normally so the session summary and the lifetime history are written.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(EXIT_OK))
    sock.settimeout(None)  # events may be minutes apart; the parent watch ends a dead session
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # one small write per event
    watch_parent(sock, parent_pid)
    log.info("policy %s for %s connected to %s:%d", policy.name, app_id or "(no app id)", host, port)
    try:
        serve(sock, bridge, token)
    except OSError as exc:
        log.warning("connection lost: %s", exc)
    finally:
        # A SIGTERM arriving now would cut the clean-up short (no history censoring, no summary).
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sock.close()
        for observer in observers:  # e.g. censor the executors still alive in the lifetime history
            close = getattr(observer, "close", None)
            if close is not None:
                close()
        log.info("session ended: %s", json.dumps(bridge.summary(), sort_keys=True))
        if bridge.trace is not None:
            with contextlib.suppress(OSError):
                bridge.trace.close()
    return EXIT_OK


def _open_trace(path: str) -> TextIO | None:
    """The trace file ``TRSPARK_TRACE`` names, opened to append; None, with a warning, if it cannot be."""
    try:
        return open(path, "a", encoding="utf-8")  # noqa: SIM115 -- closed at the end of the session
    except OSError as exc:
        log.warning("TRSPARK_TRACE=%s cannot be opened, no trace is kept: %s", path, exc)
        return None


if __name__ == "__main__":
    sys.exit(main())
