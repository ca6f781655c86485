"""Bounds of the executor-side notice watcher (``NoticeWatcher.scala``) that the happy-path tests in
``test_notice_watcher.py`` do not reach: how long a request to a misbehaving metadata service may
take, and which deadline a notice without a time gets when the polls before it saw nothing usable."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from jobs.harness.notice_endpoints import NoticeServer
from tests.jvm_gateway import Jvm, plain_jvm
from tests.ports import unused_port
from tests.trickling_service import trickling_service

# The bounds below leave room for a loaded machine; the failures they catch take 10 s or more.
POLL_BOUND_S = 5.0


@pytest.fixture(scope="module")
def jvm() -> Iterator[Jvm]:
    with plain_jvm() as j:
        # One poll outside the timed ones loads the HTTP and logging classes.
        idle_watcher(j, "gcp", f"http://127.0.0.1:{unused_port()}")[0].pollOnce()
        yield j


def idle_watcher(jvm: Jvm, source: str, url: str, *, interval: float = 0.05, window: float = 30.0) -> tuple[Any, Any]:
    """A watcher that is not started: the test calls ``pollOnce`` itself, so each poll's timing is its own."""
    settings = jvm.trspark.NoticeSettings(source, url, interval, window, "none")
    recorder = jvm.trspark.NoticeRecorder()
    return jvm.trspark.NoticeWatcher(settings, recorder), recorder


def polled_once(jvm: Jvm, url: str) -> tuple[float, Any, Any]:
    """(the seconds one poll of ``url`` by a fresh GCP watcher took, the watcher, its recorder)."""
    w, recorder = idle_watcher(jvm, "gcp", url)
    started = time.monotonic()
    w.pollOnce()
    return time.monotonic() - started, w, recorder


@pytest.fixture()
def trickling_headers() -> Iterator[str]:
    """A service that sends its status line at once, then a header byte every 0.2 s for 20 s."""
    with trickling_service(b"HTTP/1.1 200 OK\r\n", 0.2) as url:
        yield url


def test_a_poll_is_cut_off_while_the_headers_trickle(jvm: Jvm, trickling_headers: str) -> None:
    """Each read gets the read timeout anew, so headers that trickle would hold a poll for ever."""
    took, w, recorder = polled_once(jvm, trickling_headers)
    assert took < POLL_BOUND_S
    assert "1000 ms" in w.problem()
    assert recorder.calls() == 0


def test_polls_of_a_service_that_trickles_its_body_are_cut_off_and_never_wait_for_the_rest(jvm: Jvm) -> None:
    """A body is cut off by the poll's own reads, never closed under them: a close would leave the
    rest of the body to the JDK's cleaner thread, and the next read would wait for that drain."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n"
    for _ in range(6):  # the race with the request timeout is lost only now and then
        with trickling_service(head, 0.1) as url:
            took, w, recorder = polled_once(jvm, url)
            assert took < POLL_BOUND_S
            assert "no whole answer within 1000 ms" in w.problem()
            assert recorder.calls() == 0


def test_a_body_that_stops_is_cut_off_by_the_read_timeout(jvm: Jvm) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nFA"
    with trickling_service(head, 60.0) as url:
        took, w, recorder = polled_once(jvm, url)
        assert took < POLL_BOUND_S
        assert "timed out" in w.problem()
        assert recorder.calls() == 0


def test_the_pool_lookup_at_start_is_cut_off_while_the_headers_trickle(jvm: Jvm, trickling_headers: str) -> None:
    """The executor's plugin start-up waits for this lookup: GCP asks twice, each ask bounded."""
    w, _ = idle_watcher(jvm, "gcp", trickling_headers)
    started = time.monotonic()
    assert not w.metadataPool().isDefined()
    assert time.monotonic() - started < 2 * POLL_BOUND_S


def test_a_notice_after_failed_polls_is_not_due_before_it_was_seen(jvm: Jvm) -> None:
    """The window counts from the last poll that saw no notice; after a longer outage than the
    window that poll is too old: the VM still runs when the notice is seen, so it ends no sooner."""
    with NoticeServer() as server:
        w, recorder = idle_watcher(jvm, "gcp", server.url, window=1.0)
        w.pollOnce()
        assert w.lastClear() > 0 and w.problem() == ""
        server.refuse_metadata = True
        outage_end = time.time() + 1.5
        while time.time() < outage_end:
            w.pollOnce()
            time.sleep(0.05)  # polls of the refusing service, as the watcher's timer makes them
        assert w.problem() != ""
        server.post_notice(1.0)
        server.refuse_metadata = False
        seen = time.time() * 1000
        w.pollOnce()
        assert recorder.calls() == 1
        assert recorder.deadline() >= seen - 5, (recorder.deadline(), w.lastClear())


def test_a_notice_at_the_first_poll_may_be_a_window_old(jvm: Jvm) -> None:
    """A VM can be preempted before its executor starts: with no poll before that saw none, the
    notice may be a whole window old, never older, since the VM still runs."""
    with NoticeServer() as server:
        server.post_notice(30)
        w, recorder = idle_watcher(jvm, "gcp", server.url, window=30.0)
        seen = time.time() * 1000
        w.pollOnce()
        assert recorder.calls() == 1
        assert seen - 5 <= recorder.deadline() <= seen + 1000


def test_an_unanswered_token_request_is_not_repeated_at_every_poll(jvm: Jvm) -> None:
    """IMDSv1 after a token request that timed out: asking again at every poll would hold each poll
    for the request timeout, a second interval in every poll."""
    with NoticeServer() as server:
        server.aws_token_unanswered = True
        w, recorder = idle_watcher(jvm, "aws", server.url)
        w.pollOnce()  # the first poll waits for the token that does not come
        assert w.problem() == ""
        started = time.monotonic()
        for _ in range(3):
            w.pollOnce()
        assert time.monotonic() - started < 2.5  # three polls that each waited for a token: 3 s
        assert w.problem() == "" and server.token_requests == 1
        server.post_notice(120)
        w.pollOnce()
        assert recorder.calls() == 1


def test_a_refused_request_without_a_token_asks_for_one_at_once(jvm: Jvm) -> None:
    """Once the service takes token requests and refuses IMDSv1, the next poll has a token again."""
    with NoticeServer() as server:
        server.aws_token_unanswered = True
        w, recorder = idle_watcher(jvm, "aws", server.url)
        w.pollOnce()
        server.aws_token_unanswered = False
        server.aws_require_token = True
        w.pollOnce()  # refused without a token (401): the watcher drops IMDSv1
        w.pollOnce()
        assert w.problem() == "" and server.aws_tokens
        server.post_notice(120)
        w.pollOnce()
        assert recorder.calls() == 1


def test_a_hibernate_action_is_due_when_seen(jvm: Jvm) -> None:
    """AWS gives no two minutes' warning before hibernation, which starts at the notice."""
    endpoints = jvm.trspark.NoticeEndpoints
    body = '{"action": "%s", "time": "2026-11-22T01:02:00Z"}'
    seen = 1795309200000  # 2026-11-22T01:00:00Z
    assert endpoints.parseAws(200, body % "hibernate", seen).deadlineEpochMillis() == seen
    assert endpoints.parseAws(200, body % "stop", seen).deadlineEpochMillis() == seen + 120_000
    assert endpoints.parseAws(200, body % "terminate", seen).deadlineEpochMillis() == seen + 120_000
