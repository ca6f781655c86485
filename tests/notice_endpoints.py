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
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

AWS_PATH = "/latest/meta-data/spot/instance-action"
GCP_PATH = "/computeMetadata/v1/instance/preempted"
AZURE_PATH = "/metadata/scheduledevents"


class NoticeServer:
    """One loopback HTTP server answering all three endpoints; ``url`` is its base address."""

    def __init__(self) -> None:
        self.deadline: datetime | None = None
        self.requests = 0
        self._incarnation = 1
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                server.requests += 1
                path = self.path.split("?", 1)[0]
                if path == AWS_PATH:
                    if server.deadline is None:
                        return self._reply(404, "text/plain", "Not Found")
                    body = {"action": "terminate", "time": server.deadline.strftime("%Y-%m-%dT%H:%M:%SZ")}
                    return self._reply(200, "application/json", json.dumps(body))
                if path == GCP_PATH:
                    if self.headers.get("Metadata-Flavor") != "Google":
                        return self._reply(403, "text/plain", "Missing Metadata-Flavor:Google header")
                    return self._reply(200, "text/plain", "TRUE" if server.deadline else "FALSE")
                if path == AZURE_PATH:
                    if self.headers.get("Metadata", "").lower() != "true":
                        return self._reply(400, "application/json", '{"error":"Bad request. Required metadata header not specified"}')
                    events = []
                    if server.deadline is not None:
                        events.append({
                            "EventId": "602d9444-d2cd-49c7-8624-8643e7171297",
                            "EventType": "Preempt",
                            "ResourceType": "VirtualMachine",
                            "Resources": ["executor-vm"],
                            "EventStatus": "Scheduled",
                            "NotBefore": format_datetime(server.deadline, usegmt=True),
                            "Description": "Spot eviction",
                            "EventSource": "Platform",
                            "DurationInSeconds": -1,
                        })
                    body = {"DocumentIncarnation": server._incarnation, "Events": events}
                    return self._reply(200, "application/json", json.dumps(body))
                return self._reply(404, "text/plain", "Not Found")

            def _reply(self, code: int, ctype: str, body: str) -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def post_notice(self, seconds: float) -> datetime:
        """Announce termination ``seconds`` from now on every endpoint; returns the deadline (UTC)."""
        self.deadline = datetime.now(UTC) + timedelta(seconds=seconds)
        self._incarnation += 1
        return self.deadline

    def clear(self) -> None:
        self.deadline = None
        self._incarnation += 1

    def __enter__(self) -> NoticeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
