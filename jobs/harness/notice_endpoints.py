"""Imitations of the cloud termination-notice endpoints, served on 127.0.0.1 for tests.

Each imitation answers exactly like its cloud's instance metadata service does, before and after
a notice is posted with :meth:`NoticeServer.post_notice`:

* AWS spot ``GET /latest/meta-data/spot/instance-action``: 404 until a notice, then 200
  ``{"action": "terminate", "time": "<ISO-8601 UTC>"}`` (two minutes' warning on AWS).
* GCP preemption ``GET /computeMetadata/v1/instance/preempted`` (header ``Metadata-Flavor:
  Google`` required, else 403): ``FALSE`` until a notice, then ``TRUE`` (about 30 s on GCP).
* Azure Scheduled Events ``GET /metadata/scheduledevents?api-version=2020-07-01`` (header
  ``Metadata: true`` required, else 400): ``{"DocumentIncarnation": n, "Events": [...]}``
  with one ``Preempt`` event whose ``NotBefore`` is an RFC-1123 time (30 s on Azure spot).

The AWS imitation also serves ``GET /latest/meta-data/events/recommendations/rebalance``: 404
until :meth:`NoticeServer.post_rebalance`, then 200 ``{"noticeTime": "<ISO-8601 UTC>"}``.

Each also answers which pool the VM is in (its instance life cycle), ``spot`` unless
:meth:`NoticeServer.set_pool` says ``ondemand`` for all VMs or for one path prefix:

* AWS ``GET /latest/meta-data/instance-life-cycle``: ``spot`` / ``on-demand``.
* GCP ``GET /computeMetadata/v1/instance/scheduling/preemptible``: ``TRUE`` / ``FALSE``, and
  ``.../scheduling/provisioning-model``: ``SPOT`` / ``STANDARD`` (with ``gcp_spot_model`` a spot
  VM answers ``preemptible`` ``FALSE``, as a Spot VM may, so only the provisioning model tells).
* Azure ``GET /metadata/instance/compute/priority``: ``Spot`` / ``Regular``.

Options for the watcher's less common paths: ``aws_require_token`` makes the AWS imitation
answer 401 without an IMDSv2 session token (``PUT /latest/api/token``, which it always offers);
``aws_token_unanswered`` leaves token requests unanswered (as an IMDSv2 hop limit of 1 does to a
container's requests) while IMDSv1 requests are answered; ``azure_vm_name`` is served at ``/metadata/instance/compute/name`` and ``azure_resources`` lists
the VMs the event concerns; ``refuse_metadata`` answers GCP and Azure as they answer a request
without their metadata header (403 / 400).
"""

from __future__ import annotations

import json
import sys
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

AWS_PATH = "/latest/meta-data/spot/instance-action"
GCP_PATH = "/computeMetadata/v1/instance/preempted"
AZURE_PATH = "/metadata/scheduledevents"
AWS_TOKEN_PATH = "/latest/api/token"
AZURE_NAME_PATH = "/metadata/instance/compute/name"
AWS_LIFECYCLE_PATH = "/latest/meta-data/instance-life-cycle"
GCP_PREEMPTIBLE_PATH = "/computeMetadata/v1/instance/scheduling/preemptible"
GCP_PROVISIONING_PATH = "/computeMetadata/v1/instance/scheduling/provisioning-model"
AZURE_PRIORITY_PATH = "/metadata/instance/compute/priority"
AWS_REBALANCE_PATH = "/latest/meta-data/events/recommendations/rebalance"
POOLS = ("spot", "ondemand")


class NoticeServer:
    """One loopback HTTP server answering all three endpoints; ``url`` is its base address."""

    def __init__(self, *, aws_require_token: bool = False, azure_vm_name: str = "executor-vm",
                 azure_resources: tuple[str, ...] = ("executor-vm",)) -> None:
        self.deadline: datetime | None = None
        self.requests = 0
        self.asked: Counter[str] = Counter()
        """GET requests per endpoint path (without the ``/<vm>`` prefix)."""
        self.clients: set[tuple[str, int]] = set()
        """The (host, port) each request came from: one per connection the clients opened."""
        self.aws_require_token = aws_require_token
        self.aws_tokens: set[str] = set()
        self.azure_vm_name = azure_vm_name
        self.azure_resources = list(azure_resources)
        self.refuse_metadata = False
        self.aws_token_unanswered = False
        self.token_requests = 0
        """``PUT /latest/api/token`` requests received, answered or not."""
        self._closing = threading.Event()
        self.throttle_azure_name = 0
        """Requests for the Azure VM name still to answer 429 Too Many Requests (IMDS throttling)."""
        self.pool = "spot"
        self.vm_pools: dict[str, str] = {}
        """Pools of single VMs: path prefix (``/vm-1``) -> ``spot`` | ``ondemand``; see :meth:`set_pool`."""
        self.gcp_spot_model = False
        self.rebalance: dict[str, datetime] = {}
        """Rebalance recommendations: path prefix ("" = every VM) -> notice time; see :meth:`post_rebalance`."""
        self.vm_deadlines: dict[str, datetime] = {}
        """Notices for one VM only: path prefix (``/vm-1``) -> deadline; see :meth:`post_notice`."""
        self._incarnation = 1
        handler = type("Handler", (_Handler,), {"notices": self})
        self._httpd = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def post_notice(self, seconds: float, vm: str = "") -> datetime:
        """Announce termination ``seconds`` from now on every endpoint; returns the deadline (UTC).

        With ``vm``, only requests under the path prefix ``/<vm>`` (base URL ``url + "/" + vm``)
        see the notice: several executors on one host can then stand for different VMs.
        """
        deadline = datetime.now(UTC) + timedelta(seconds=seconds)
        if vm:
            self.vm_deadlines["/" + vm.strip("/")] = deadline
        else:
            self.deadline = deadline
        self._incarnation += 1
        return deadline

    def post_rebalance(self, vm: str = "") -> datetime:
        """Post an AWS rebalance recommendation (now) for every VM, or only under the prefix ``/<vm>``."""
        since = datetime.now(UTC).replace(microsecond=0)
        self.rebalance["/" + vm.strip("/") if vm else ""] = since
        return since

    def set_pool(self, pool: str, vm: str = "") -> None:
        """Answer the life-cycle requests as a ``spot`` or ``ondemand`` VM: every VM, or with ``vm``
        only requests under the path prefix ``/<vm>`` (as :meth:`post_notice`)."""
        if pool not in POOLS:
            raise ValueError(f"pool {pool!r}: expected one of {POOLS}")
        if vm:
            self.vm_pools["/" + vm.strip("/")] = pool
        else:
            self.pool = pool

    def clear(self) -> None:
        self.deadline = None
        self.vm_deadlines.clear()
        self._incarnation += 1

    @staticmethod
    def split_path(path: str) -> tuple[str, str]:
        """``/vm-1/latest/meta-data/...`` -> (``/vm-1``, ``/latest/meta-data/...``); no prefix -> ``""``."""
        for endpoint in (AWS_PATH, GCP_PATH, AZURE_PATH, AWS_TOKEN_PATH, AZURE_NAME_PATH, AWS_LIFECYCLE_PATH,
                         GCP_PREEMPTIBLE_PATH, GCP_PROVISIONING_PATH, AZURE_PRIORITY_PATH, AWS_REBALANCE_PATH):
            if path.endswith(endpoint):
                return path[: -len(endpoint)], endpoint
        return "", path

    def __enter__(self) -> NoticeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()


class _Server(ThreadingHTTPServer):
    """A thread per connection, as :class:`ThreadingHTTPServer`; dropped connections are no error."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Connections stay open between polls, so a killed executor drops one: as a VM taken away does.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """The endpoints' HTTP handler; ``notices`` is the :class:`NoticeServer` whose state it serves."""

    notices: NoticeServer
    # Instance metadata services keep a connection open between requests, as HTTP/1.1 does.
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.notices.requests += 1
        self.notices.clients.add(self.client_address[:2])
        prefix, path = self.notices.split_path(self.path.split("?", 1)[0])
        self.notices.asked[path] += 1
        deadline = self.notices.vm_deadlines.get(prefix, self.notices.deadline)
        spot = self.notices.vm_pools.get(prefix, self.notices.pool) == "spot"
        if path == AWS_REBALANCE_PATH:
            if self._aws_refused():
                return self._reply(401, "text/plain", "Unauthorized")
            since = self.notices.rebalance.get(prefix, self.notices.rebalance.get(""))
            if since is None:
                return self._reply(404, "text/plain", "Not Found")
            return self._reply(200, "application/json",
                               json.dumps({"noticeTime": since.strftime("%Y-%m-%dT%H:%M:%SZ")}))
        if path in (AWS_LIFECYCLE_PATH, GCP_PREEMPTIBLE_PATH, GCP_PROVISIONING_PATH, AZURE_PRIORITY_PATH):
            return self._pool_answer(path, spot)
        if path == AWS_PATH:
            if self._aws_refused():
                return self._reply(401, "text/plain", "Unauthorized")
            if deadline is None:
                return self._reply(404, "text/plain", "Not Found")
            body = {"action": "terminate", "time": deadline.strftime("%Y-%m-%dT%H:%M:%SZ")}
            return self._reply(200, "application/json", json.dumps(body))
        if path == GCP_PATH:
            if self.headers.get("Metadata-Flavor") != "Google" or self.notices.refuse_metadata:
                return self._reply(403, "text/plain", "Missing Metadata-Flavor:Google header")
            return self._reply(200, "text/plain", "TRUE" if deadline else "FALSE")
        if path == AZURE_NAME_PATH and self.headers.get("Metadata", "").lower() == "true":
            if self.notices.throttle_azure_name > 0:
                self.notices.throttle_azure_name -= 1
                return self._reply(429, "text/plain", "Too many requests")
            return self._reply(200, "text/plain", self.notices.azure_vm_name)
        if path == AZURE_PATH:
            if self.headers.get("Metadata", "").lower() != "true" or self.notices.refuse_metadata:
                return self._reply(400, "application/json", '{"error":"Bad request. Required metadata header not specified"}')
            events = []
            if deadline is not None:
                events.append({
                    "EventId": "602d9444-d2cd-49c7-8624-8643e7171297",
                    "EventType": "Preempt",
                    "ResourceType": "VirtualMachine",
                    "Resources": self.notices.azure_resources,
                    "EventStatus": "Scheduled",
                    "NotBefore": format_datetime(deadline, usegmt=True),
                    "Description": "Spot eviction",
                    "EventSource": "Platform",
                    "DurationInSeconds": -1,
                })
            document = {"DocumentIncarnation": self.notices._incarnation, "Events": events}
            return self._reply(200, "application/json", json.dumps(document))
        return self._reply(404, "text/plain", "Not Found")

    def _aws_refused(self) -> bool:
        """IMDSv2: a token that was not issued (or none, when tokens are required) is refused."""
        token = self.headers.get("X-aws-ec2-metadata-token")
        return (self.notices.aws_require_token or token is not None) and token not in self.notices.aws_tokens

    def _pool_answer(self, path: str, spot: bool) -> None:
        if path == AWS_LIFECYCLE_PATH:
            if self._aws_refused():
                return self._reply(401, "text/plain", "Unauthorized")
            return self._reply(200, "text/plain", "spot" if spot else "on-demand")
        if path.startswith("/computeMetadata/"):
            if self.headers.get("Metadata-Flavor") != "Google" or self.notices.refuse_metadata:
                return self._reply(403, "text/plain", "Missing Metadata-Flavor:Google header")
            if path == GCP_PREEMPTIBLE_PATH:
                return self._reply(200, "text/plain", "TRUE" if spot and not self.notices.gcp_spot_model else "FALSE")
            return self._reply(200, "text/plain", "SPOT" if spot else "STANDARD")
        if self.headers.get("Metadata", "").lower() != "true" or self.notices.refuse_metadata:
            return self._reply(400, "application/json", '{"error":"Bad request. Required metadata header not specified"}')
        return self._reply(200, "text/plain", "Spot" if spot else "Regular")

    def do_PUT(self) -> None:  # noqa: N802 (http.server's name)
        self.notices.requests += 1
        self.notices.clients.add(self.client_address[:2])
        self.notices.token_requests += 1
        if self.notices.aws_token_unanswered:
            self.notices._closing.wait()  # the answer never reaches the client; the server may close
            self.close_connection = True
            return None
        ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
        if self.notices.split_path(self.path)[1] != AWS_TOKEN_PATH or not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            return self._reply(400, "text/plain", "Bad Request")
        token = f"token-{len(self.notices.aws_tokens) + 1}"
        self.notices.aws_tokens.add(token)
        return self._reply(200, "text/plain", token)

    def _reply(self, code: int, ctype: str, body: str) -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
