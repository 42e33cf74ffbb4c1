"""HTTP/1.1 plumbing: bearer-token auth, the /_sim/ control surface, fault injection on the
Kubernetes paths, and the DCGM-shaped exporter's `/dcgm/metrics` (no token, as dcgm-exporter's
own endpoint; simcluster/dcgm.py)."""

from __future__ import annotations

import hmac
import socket
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from simcluster import errors
from simcluster.api import Request, Response
from simcluster.faults import Faults

# What answers a request once it is authorized: the Kubernetes API or the /_sim/ control surface.
Answer = Callable[[Request], Response]
EXPORTER_PATH = "/dcgm/metrics"


GARBAGE = b"<html><body>502 Bad Gateway</body></html>"  # what a broken proxy answers


class SimHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self, address: tuple[str, int], *, token: str, faults: Faults, api: Answer, control: Answer,
        exporter: Callable[[], bytes],
        tls: ssl.SSLContext | None = None,
    ) -> None:  # fmt: skip
        self.token, self.faults, self.api, self.control = token, faults, api, control
        self.exporter = exporter
        self.tls = tls
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        """With `tls`, each connection is wrapped here but shaken hands with in its own thread
        (`finish_request`): a slow or refusing client never holds up the accept loop."""
        connection, address = super().get_request()
        if self.tls is None:
            return connection, address
        wrapped = self.tls.wrap_socket(connection, server_side=True, do_handshake_on_connect=False)
        return wrapped, address

    def finish_request(self, request: Any, client_address: Any) -> None:
        if isinstance(request, ssl.SSLSocket):
            try:
                request.do_handshake()
            except (ssl.SSLError, OSError):
                return  # the client refused our certificate (or left): as a real server, no log
        super().finish_request(request, client_address)

    def close_connections(self) -> None:
        """Idle keep-alive connections would otherwise keep their threads reading forever."""
        with self.connections_lock:
            for connection in list(self.connections):
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    continue


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in separate writes; with Nagle on, each answer waits for an ACK.
    disable_nagle_algorithm = True
    server: SimHTTPServer
    server_version = "simcluster"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            return

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        request = Request(
            method,
            parts.path,
            dict(parse_qsl(parts.query, keep_blank_values=True)),
            {k.lower(): v for k, v in self.headers.items()},
            body,
        )
        if parts.path == EXPORTER_PATH and method in ("GET", "HEAD"):
            text = self.server.exporter()
            self._send(Response(200, text, "text/plain; version=0.0.4; charset=utf-8"), method)
        elif not self._authorized():
            self._send(_error(errors.unauthorized()), method)
        elif parts.path == "/_sim" or parts.path.startswith("/_sim/"):
            self._send(self.server.control(request), method)
        else:
            self._serve_api(request)

    def _authorized(self) -> bool:
        header = self.headers.get("Authorization") or ""
        scheme, _, token = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            token.strip().encode(), self.server.token.encode()
        )

    def _serve_api(self, request: Request) -> None:
        faults = self.server.faults
        truncate = garbage = False
        for fault in faults.active():
            if fault.kind == "latency":
                time.sleep(fault.latency_ms / 1000)
            elif fault.kind == "timeout":
                faults.hold(fault)
                self.close_connection = True
                return
            elif fault.kind == "status":
                self._send(_error(errors.injected(fault.status)), request.method)
                return
            elif fault.kind == "truncate":
                truncate = True
            elif fault.kind == "garbage":
                garbage = True
        response = self.server.api(request)
        if response.stream is not None:
            self._send_stream(response, truncate, garbage)
            return
        if truncate:
            response = Response(
                200, response.body[: max(1, len(response.body) // 2)], response.content_type
            )
        elif garbage:
            response = Response(200, GARBAGE, response.content_type)
        self._send(response, request.method)

    def _send_stream(self, response: Response, truncate: bool, garbage: bool) -> None:
        """A watch, chunked. A truncate fault cuts the connection after the first event; a garbage
        fault sends a line that is not JSON first."""
        assert response.stream is not None
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        stream = iter(response.stream)
        try:
            if garbage:
                self._chunk(GARBAGE + b"\n")
            for line in stream:
                self._chunk(line)
                if truncate:
                    self.close_connection = True
                    return
            self.wfile.write(b"0\r\n\r\n")  # a complete stream keeps the connection alive
        except OSError:
            self.close_connection = True  # the client went away
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _send(self, response: Response, method: str) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Cache-Control", "no-cache, private")
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(response.body)


def _error(error: errors.ApiError) -> Response:
    return Response(error.code, orjson.dumps(error.status()), headers=error.headers)
