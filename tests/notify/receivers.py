"""A local receiver for the senders' tests: an HTTP server on loopback (ports 8150-8159, or any
free one) that records each request and answers what the test scripted, in order."""

from __future__ import annotations

import contextlib
import errno
import json
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

PORTS = range(8150, 8160)


@dataclass(frozen=True)
class Received:
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    url: str = ""
    answers: deque[tuple[int, str, dict[str, str]]] = field(default_factory=deque)
    default: tuple[int, str, dict[str, str]] = (200, '{"code":0,"errcode":0}', {})
    received: list[Received] = field(default_factory=list)

    def answer(self, status: int, body: str = "", **headers: str) -> None:
        self.answers.append((status, body, {k.replace("_", "-"): v for k, v in headers.items()}))


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # STACK.md: no 40 ms per request

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            parts = urlsplit(self.path)
            receiver.received.append(
                Received(parts.path, parse_qs(parts.query), dict(self.headers.items()), body)
            )
            status, text, headers = (
                receiver.answers.popleft() if receiver.answers else receiver.default
            )
            data = text.encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            # A client that reads only so much (outbound's 64 KiB cap) and closes.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(data)

        def handle(self) -> None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                super().handle()  # the client may close first (after the 64 KiB it reads)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def _server(receiver: Receiver) -> ThreadingHTTPServer:
    for port in PORTS:
        try:
            return ThreadingHTTPServer(("127.0.0.1", port), _handler(receiver))
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise
    return ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))


@contextmanager
def receiving(path: str = "/hook") -> Iterator[Receiver]:
    receiver = Receiver()
    server = _server(receiver)
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}{path}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
