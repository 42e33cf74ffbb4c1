"""The gateway over real HTTP against a small scripted API server: pagination with limit and
continue, a full relist on 410 Gone, and every failure turned into a credential-free error."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from django.test import override_settings

from console.kube import client
from console.kube.apply import create, delete
from console.kube.gateway import PODS, STATEFULSETS, ApplyError, ClusterUnreachable, Gateway
from console.kubeconfig import validate_kubeconfig
from tests.engine import k8s_json as k8s

TOKEN = "very-secret-token"


class Script:
    """What the scripted server answers; `log` records (method, path, query)."""

    def __init__(self) -> None:
        self.pods = [k8s.pod(f"p-{i}") for i in range(7)]
        self.expire_once = False
        self.status = 200
        self.raw: bytes | None = None
        self.delay = 0.0
        self.truncate = False
        self.log: list[tuple[str, str, dict[str, list[str]]]] = []
        self.write_status = 201
        self.existing: dict[str, Any] | None = None


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, body: bytes, length: int | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(length if length is not None else len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            url = urlparse(self.path)
            query = parse_qs(url.query)
            script.log.append(("GET", url.path, query))
            assert self.headers["Authorization"] == f"Bearer {TOKEN}"
            time.sleep(script.delay)
            if script.raw is not None:
                return self._send(script.status, script.raw)
            if url.path.startswith("/apis/apps/v1/namespaces/default/statefulsets/"):
                if script.existing is None:
                    return self._send(404, b'{"kind":"Status","code":404}')
                return self._send(200, json.dumps(script.existing).encode())
            if script.status != 200:
                message = {
                    "kind": "Status",
                    "message": "etcdserver: leader changed",
                    "code": script.status,
                }
                return self._send(script.status, json.dumps(message).encode())
            token = query.get("continue", ["0"])[0]
            if token != "0" and script.expire_once:
                script.expire_once = False
                return self._send(410, b'{"kind":"Status","reason":"Expired","code":410}')
            start, limit = int(token), int(query["limit"][0])
            page = script.pods[start : start + 3]  # the server may return fewer than asked
            assert limit == 500
            following = start + 3
            metadata = {"resourceVersion": "1"}
            if following < len(script.pods):
                metadata["continue"] = str(following)
            body = json.dumps(
                {"kind": "PodList", "apiVersion": "v1", "metadata": metadata, "items": page}
            ).encode()
            if script.truncate:
                return self._send(200, body[: len(body) // 2], length=len(body))
            self._send(200, body)

        def _write(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            script.log.append(
                (self.command, urlparse(self.path).path, {"body": [json.dumps(body)]})
            )
            if script.write_status >= 300:
                message = {
                    "kind": "Status",
                    "message": "StatefulSet.apps is invalid",
                    "code": script.write_status,
                }
                return self._send(script.write_status, json.dumps(message).encode())
            self._send(script.write_status, json.dumps(body).encode())

        do_POST = do_PATCH = do_DELETE = _write

    return Handler


@pytest.fixture
def script() -> Iterator[Script]:
    yield Script()


@pytest.fixture
def gateway(script: Script) -> Iterator[Gateway]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    text = f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{server.server_port}"}}}}]
users: [{{name: u, user: {{token: {TOKEN}}}}}]
contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
current-context: c
"""
    with override_settings(TRAINYARD_KUBE_READ_TIMEOUT=1):
        yield Gateway(
            client.api_client(server.server_port, text, "", validate_kubeconfig), client.timeouts()
        )
    server.shutdown()
    server.server_close()


def test_it_lists_every_page_with_limit_and_continue(gateway: Gateway, script: Script) -> None:
    items = gateway.list(PODS, "app.kubernetes.io/managed-by=trainyard")
    assert [item["metadata"]["name"] for item in items] == [f"p-{i}" for i in range(7)]
    assert [query.get("continue") for _, _, query in script.log] == [None, ["3"], ["6"]]
    assert script.log[0][2]["labelSelector"] == ["app.kubernetes.io/managed-by=trainyard"]


def test_it_relists_from_scratch_when_the_continue_token_expired(
    gateway: Gateway, script: Script
) -> None:
    script.expire_once = True
    assert len(gateway.list(PODS)) == 7
    assert [query.get("continue") for _, _, query in script.log] == [
        None,
        ["3"],
        None,
        ["3"],
        ["6"],
    ]


@pytest.mark.parametrize("status", [500, 503, 401, 403])
def test_it_turns_error_answers_into_unreachable_without_credentials(
    gateway: Gateway, script: Script, status: int
) -> None:
    script.status = status
    with pytest.raises(ClusterUnreachable) as error:
        gateway.list(PODS)
    assert f"HTTP {status}" in str(error.value) and TOKEN not in str(error.value)


def test_it_reads_a_429_as_throttled_and_does_not_wait(gateway: Gateway, script: Script) -> None:
    """No Retry-After here: 1 s is said, and the read fails at once (the next cycle retries)."""
    script.status = 429
    started = time.monotonic()
    with pytest.raises(ClusterUnreachable, match="throttling requests") as error:
        gateway.list(PODS)
    assert time.monotonic() - started < 0.5
    assert (error.value.code, error.value.params) == ("throttled", {"retry_after": 1})
    assert len(script.log) == 1


@pytest.mark.parametrize(
    "raw", [b'{"items": [', b"<html>oops</html>", b"[]", b'{"kind": "PodList"}']
)
def test_it_turns_garbage_into_unreachable(gateway: Gateway, script: Script, raw: bytes) -> None:
    script.raw = raw
    with pytest.raises(ClusterUnreachable):
        gateway.list(PODS)


def test_it_turns_a_body_cut_short_into_unreachable(gateway: Gateway, script: Script) -> None:
    script.truncate = True
    with pytest.raises(ClusterUnreachable, match="truncated"):
        gateway.list(PODS)


def test_it_gives_up_after_the_read_timeout(gateway: Gateway, script: Script) -> None:
    script.delay = 1.5
    started = time.monotonic()
    with pytest.raises(ClusterUnreachable, match="timeout"):
        gateway.list(PODS)
    assert time.monotonic() - started < 2.5  # one attempt: reads are not retried


def test_it_says_when_nothing_listens(script: Script) -> None:
    text = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""
    gateway = Gateway(client.api_client(-1, text, "", validate_kubeconfig), (1, 1))
    with pytest.raises(ClusterUnreachable, match="cannot connect"):
        gateway.list(PODS)


def test_it_deletes_in_the_background_with_the_observed_uid(
    gateway: Gateway, script: Script
) -> None:
    assert delete(gateway, STATEFULSETS, "default", "train-worker", "uid-1")
    method, path, query = script.log[-1]
    assert (method, path) == (
        "DELETE",
        "/apis/apps/v1/namespaces/default/statefulsets/train-worker",
    )
    assert json.loads(query["body"][0]) == {
        "apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background",
        "preconditions": {"uid": "uid-1"},
    }  # fmt: skip
    script.write_status = 404
    assert not delete(gateway, STATEFULSETS, "default", "train-worker")


def test_it_reads_and_compares_on_already_exists(gateway: Gateway, script: Script) -> None:
    manifest = k8s.statefulset()
    script.write_status = 409
    script.existing = k8s.statefulset()
    assert create(gateway, STATEFULSETS, manifest) == script.existing  # the answer: theirs
    script.existing = k8s.statefulset(job=99)
    with pytest.raises(ApplyError, match="does not belong"):
        create(gateway, STATEFULSETS, manifest)


def test_it_reports_an_invalid_object_as_permanent(gateway: Gateway, script: Script) -> None:
    script.write_status = 422
    with pytest.raises(ApplyError) as error:
        create(gateway, STATEFULSETS, k8s.statefulset())
    assert error.value.permanent and "is invalid" in error.value.message
    assert gateway.writes == 1
