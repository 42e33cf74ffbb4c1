"""`make run`'s demo webhook receiver: a small server on loopback that takes the console's
signed webhook messages and shows them on a page, and the demo user's channel to it with a
subscription to all their Jobs' events, so a newcomer sees a stalled demo Job arrive as a
message (docs/notifications.md)."""

from __future__ import annotations

import base64
import html
import json
import os
import threading
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from django.contrib.auth.models import User
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from notify.choices import Event, Kind, ScopeKind
from notify.models import Channel, Subscription

CHANNEL_NAME = "demo receiver"
KEPT = 200
MAX_BODY = 64 * 1024


@dataclass(frozen=True)
class Received:
    at: datetime
    message_id: str
    verified: bool
    body: dict[str, Any]


class Inbox:
    """What the receiver got, newest first, and the secret it verifies with."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.messages: deque[Received] = deque(maxlen=KEPT)
        self.lock = threading.Lock()

    def take(self, body: bytes, headers: dict[str, str]) -> Received:
        try:
            Webhook(self.secret).verify(body, headers)
            verified = True
        except WebhookVerificationError:
            verified = False
        try:
            data = json.loads(body)
        except ValueError:
            data = {"unreadable": body[:200].decode("utf-8", "replace")}
        received = Received(datetime.now(UTC), headers.get("webhook-id", ""), verified, data)
        with self.lock:
            self.messages.appendleft(received)
        return received


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def register(user: User, url: str, secret: str) -> Channel:
    """The demo user's channel to the receiver (its secret new at each start), subscribed to
    every event of their Jobs; kept across restarts."""
    channel, _ = Channel.objects.update_or_create(
        owner=user, name=CHANNEL_NAME, project=None,
        defaults={"kind": Kind.WEBHOOK, "target": url, "secret": secret, "state": "ok",
                  "broken_reason": ""},
    )  # fmt: skip
    Subscription.objects.get_or_create(
        user=user, channel=channel, scope=ScopeKind.MINE,
        defaults={"events": [str(event) for event in Event], "repeat_hours": 1},
    )  # fmt: skip
    return channel


def _row(item: Received) -> str:
    data = item.body.get("data") or {}
    job = data.get("job") or {}
    workload = data.get("workload") or {}
    what = item.body.get("type", "?") + (" (resolved)" if data.get("resolved") else "")
    about = job.get("name") or data.get("cluster") or ""
    state = workload.get("state") or ""
    check = "✔ signed" if item.verified else "✖ signature does not verify"
    pretty = html.escape(json.dumps(item.body, indent=2, ensure_ascii=False))
    return (
        f"<tr><td>{item.at:%H:%M:%S}</td><td><b>{html.escape(what)}</b></td>"
        f"<td>{html.escape(about)}</td><td>{html.escape(state)}</td><td>{check}</td>"
        f"<td><details><summary>{html.escape(item.message_id)}</summary><pre>{pretty}</pre>"
        "</details></td></tr>"
    )


def page(inbox: Inbox) -> bytes:
    with inbox.lock:
        rows = "".join(_row(item) for item in inbox.messages)
    body = rows or '<tr><td colspan="6">Nothing yet: a demo Job that stalls arrives here.</td></tr>'
    return (
        "<!doctype html><html><head><meta charset='utf-8'><meta http-equiv='refresh' content='5'>"
        "<title>Demo webhook receiver</title><style>body{font-family:sans-serif;margin:16px}"
        "td,th{padding:4px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}"
        "pre{font-size:12px}</style></head><body><h1>Demo webhook receiver</h1>"
        "<p>What Trainyard's <code>demo receiver</code> channel sent (newest first; this page "
        "reloads every 5 s).</p><table><tr><th>Received</th><th>Event</th><th>About</th>"
        f"<th>Workload</th><th>Signature</th><th>webhook-id</th></tr>{body}</table></body></html>"
    ).encode()


def handler(inbox: Inbox) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def _answer(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._answer(200, page(inbox), "text/html; charset=utf-8")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            if length > MAX_BODY:
                self._answer(413, b"too large", "text/plain")
                return
            received = inbox.take(self.rfile.read(length), dict(self.headers.items()))
            self._answer(200 if received.verified else 401, b"ok", "text/plain")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def serve(inbox: Inbox, port: int) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", port), handler(inbox))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.1,), daemon=True).start()
    return server
