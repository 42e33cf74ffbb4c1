"""Requests to one cluster as raw JSON, through the kubernetes client's transport.

LISTs are read with `orjson` straight from the response bytes (the typed models are ~15x slower,
STACK.md), paginated with `limit`/`continue`, and restarted from scratch on 410 Gone (the
continue token expired). Every failure becomes a `ClusterUnreachable` (reads) or an `ApplyError`
(writes) whose message is safe to store and show: status, reason and the API's Status message,
never a header, a URL with credentials or the kubeconfig.
"""

from __future__ import annotations

import os
import re
import ssl
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import orjson
import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from kubernetes.client.rest import RESTResponse

PAGE_SIZE = 500
LIST_ATTEMPTS = 3
_USERINFO = re.compile(r"(\w+://)[^/@\s]+@")


class ClusterUnreachable(Exception):
    """The cluster could not be read: refused, timed out, answered an error or garbage.

    `str()` is an English sentence for logs. `code` and `params` say the same as data (plain
    values) for whoever words it for a reader; `api_message` is the API server's own Status
    message, when it sent one, quoted as it wrote it."""

    def __init__(
        self, message: str, code: str = "transport", api_message: str = "", **params: str | int
    ) -> None:
        super().__init__(message)
        self.code, self.params, self.api_message = code, params, api_message


class ApplyError(Exception):
    """A write the API server refused. 422 (Invalid) is permanent: retrying cannot help."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    @property
    def permanent(self) -> bool:
        return self.status == 422


class _Expired(Exception):
    """410 Gone on a continue token."""


class WatchExpired(Exception):
    """The cursor is older than the API server's watch window (410 Expired): relist."""


@dataclass(frozen=True)
class WatchEvent:
    """One ADDED, MODIFIED or DELETED event; `object` is the raw JSON object."""

    type: str
    object: dict[str, Any]


@dataclass(frozen=True)
class Watch:
    """One bounded WATCH: a resource (in one namespace, or all), from a resourceVersion."""

    resource: Resource
    since: str
    selector: str = ""
    namespace: str = ""


@dataclass(frozen=True)
class WatchBatch:
    """The events of one bounded watch and the resourceVersion absorbed after them (the last
    event's or bookmark's; the starting one when nothing came)."""

    events: list[WatchEvent]
    cursor: str


@dataclass(frozen=True)
class Listing:
    """Every item of a LIST and the resourceVersion of the snapshot it was read at."""

    items: list[Any]
    resource_version: str


@dataclass(frozen=True)
class Resource:
    kind: str
    api_version: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        return f"{base}/{quote(name, safe='')}" if name else base


STATEFULSETS = Resource("StatefulSet", "apps/v1", "statefulsets")
BATCH_JOBS = Resource("Job", "batch/v1", "jobs")
SERVICES = Resource("Service", "v1", "services")
PODS = Resource("Pod", "v1", "pods")
NODES = Resource("Node", "v1", "nodes", namespaced=False)
DAEMONSETS = Resource("DaemonSet", "apps/v1", "daemonsets")
DEPLOYMENTS = Resource("Deployment", "apps/v1", "deployments")
BUDGETS = Resource("PodDisruptionBudget", "policy/v1", "poddisruptionbudgets")
# Read only for operators' actions (a drain), under the opt-in deploy/rbac-operator-actions.yaml,
# never by the sync.
OPERATOR_ONLY = (BUDGETS,)


@dataclass(frozen=True)
class Eviction:
    """The answer to an eviction: its HTTP status, the Status message and causes' messages."""

    status: int
    message: str
    causes: tuple[str, ...]


def _causes(body: bytes) -> tuple[str, ...]:
    try:
        document = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return ()
    details = document.get("details") if isinstance(document, dict) else None
    causes = details.get("causes") if isinstance(details, dict) else None
    return tuple(
        safe_text(str(cause.get("message", "")))
        for cause in causes or ()
        if isinstance(cause, dict)
    )


def safe_text(text: str, limit: int = 300) -> str:
    """Drops user-info from URLs and bounds the length of a message that will be stored."""
    text = _USERINFO.sub(r"\1", " ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _api_message(body: bytes) -> str:
    """The `message` of the API's Status document, "" when the body is not one."""
    try:
        document = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return ""
    if isinstance(document, dict) and isinstance(document.get("message"), str):
        return str(document["message"])
    return ""


def _status_message(status: int, reason: str, body: bytes) -> str:
    """`HTTP 422 Unprocessable Entity: <the API's Status message>`."""
    detail = _api_message(body)
    return safe_text(f"HTTP {status} {reason}" + (f": {detail}" if detail else ""))


@contextmanager
def _transport() -> Iterator[None]:
    """Connection-level failures, and the client's wrapping of TLS ones, as ClusterUnreachable."""
    try:
        yield
    except (urllib3.exceptions.HTTPError, OSError) as error:
        raise _transport_failure(error) from None
    except ApiException as error:
        text = safe_text(f"TLS error ({error.status})")
        raise ClusterUnreachable(text, "tls", status=str(error.status)) from None


class PeerRefused(urllib3.exceptions.HTTPError):
    """The connection reached an address the console may not talk to (`console.kube.client`
    checks it right after the TCP connect, before TLS or any byte of the request)."""

    def __init__(self, address: str, problem: str) -> None:
        super().__init__(f"the API server's address {address} is {problem}: refused")
        self.address, self.problem = address, problem


def _tls_failure(cause: ssl.SSLError) -> ClusterUnreachable:
    """A certificate the CA does not vouch for (or not for this host) is named by OpenSSL's own
    words ("unable to get local issuer certificate", "Hostname mismatch, ..."): what the
    operator must fix. Any other TLS failure is a handshake failure, named by its reason."""
    if isinstance(cause, ssl.SSLCertVerificationError):
        problem = safe_text(
            str(cause.verify_message or cause.reason or "certificate verify failed")
        )
        text = f"the API server's certificate is not trusted ({problem}): check the CA given for it"
        return ClusterUnreachable(text, "certificate", problem=problem)
    problem = safe_text(str(cause.reason or type(cause).__name__))
    return ClusterUnreachable(
        f"the TLS handshake with the API server failed ({problem})",
        "tls_handshake",
        problem=problem,
    )


def _ssl_cause(error: BaseException) -> ssl.SSLError | None:
    """The `ssl` error under urllib3's wrappings (MaxRetryError.reason, SSLError.args[0])."""
    for found in (error, getattr(error, "reason", None), *getattr(error, "args", ())[:1]):
        if isinstance(found, ssl.SSLError):
            return found
        if isinstance(found, urllib3.exceptions.SSLError) and found is not error:
            return _ssl_cause(found)
    return None


def _transport_failure(error: Exception) -> ClusterUnreachable:
    """Connection-level failures named by type and cause, never with the request's headers."""
    cause = getattr(error, "reason", None) or error
    if isinstance(cause, PeerRefused):
        return ClusterUnreachable(
            str(cause), "address", address=cause.address, problem=cause.problem
        )
    tls = _ssl_cause(error)
    if tls is not None:
        return _tls_failure(tls)
    if isinstance(error, urllib3.exceptions.ProtocolError):
        text = "the API server closed the connection mid-response (truncated answer)"
        return ClusterUnreachable(text, "truncated")
    if isinstance(cause, urllib3.exceptions.NewConnectionError | ConnectionError):
        text = "cannot connect to the API server (connection refused or unreachable)"
        return ClusterUnreachable(text, "refused")
    if isinstance(cause, urllib3.exceptions.TimeoutError | TimeoutError):
        return ClusterUnreachable("the API server did not answer in time (timeout)", "timeout")
    error_type = type(cause).__name__
    text = safe_text(f"cannot talk to the API server ({error_type})")
    return ClusterUnreachable(text, "transport", error=error_type)


def _status_failure(status: int, reason: str, body: bytes) -> ClusterUnreachable:
    """An error status answered to a read: the API server's Status message kept apart."""
    text, detail = _status_message(status, reason, body), safe_text(_api_message(body))
    return ClusterUnreachable(text, "status", detail, status=status, reason=safe_text(reason))


def _throttled(retry_after: str | None) -> ClusterUnreachable:
    """429 Too Many Requests (kube-apiserver's priority and fairness): the read is not retried
    within the cycle (no sleep holds a worker); the next cycle, an interval later, retries."""
    seconds = int(retry_after) if retry_after and retry_after.isdigit() else 1
    text = f"the API server is throttling requests (429 Too Many Requests); retry after {seconds} s"
    return ClusterUnreachable(text, "throttled", retry_after=seconds)


class Gateway:
    """Talks to one cluster, from several threads at once (a cycle's watches are opened by
    the opener threads). Counts its requests, writes and bytes received (the cycle's figures,
    tests and the bench read them)."""

    def __init__(self, client: ApiClient, timeouts: tuple[int, int]) -> None:
        self.client = client
        self.timeouts = timeouts
        self._counting = threading.Lock()
        self.requests = 0
        self.writes = 0
        self.bytes_received = 0

    def _send(
        self, method: str, path: str, query: list[tuple[str, str]], body: Any, content_type: str,
        timeouts: tuple[int, int] | None = None,
    ) -> tuple[int, str, bytes]:  # fmt: skip
        return self._answer(method, self._open(method, path, query, body, content_type, timeouts))

    def _open(
        self, method: str, path: str, query: list[tuple[str, str]], body: Any, content_type: str,
        timeouts: tuple[int, int] | None = None,
    ) -> RESTResponse:  # fmt: skip
        """Sends a request and reads the answer's status line and headers, not its body."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        request = self.client.param_serialize(
            method, path, query_params=query, header_params=headers, body=body,
            auth_settings=["BearerToken"],
        )  # fmt: skip
        with self._counting:
            self.requests += 1
            self.writes += method != "GET"
        with _transport():
            return self.client.call_api(*request, _request_timeout=timeouts or self.timeouts)

    def _answer(self, method: str, response: RESTResponse) -> tuple[int, str, bytes]:
        """The answer's body, read to its end."""
        with _transport():
            data = response.read() or b""
        if response.status == 429 and method == "GET":
            raise _throttled(response.getheader("Retry-After"))
        self.bytes_received += len(data)
        return response.status, str(response.reason or ""), data

    def _json(self, status: int, data: bytes) -> dict[str, Any]:
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise ClusterUnreachable(
                f"the API server answered HTTP {status} with malformed or truncated JSON",
                "malformed_json",
                status=status,
            ) from None
        if not isinstance(document, dict):
            text = "the API server answered JSON that is not an object"
            raise ClusterUnreachable(text, "unexpected_shape")
        return document

    # --- reads -----------------------------------------------------------------------------

    def _page(self, path: str, query: list[tuple[str, str]]) -> dict[str, Any]:
        status, reason, data = self._send("GET", path, query, None, "")
        if status == 410 and any(key == "continue" for key, _ in query):
            raise _Expired
        if not 200 <= status < 300:
            raise _status_failure(status, reason, data)
        page = self._json(status, data)
        if not isinstance(page.get("items"), list):
            raise ClusterUnreachable(
                "the API server answered a list without items", "unexpected_shape"
            )
        return page

    def list(
        self, resource: Resource, selector: str = "", namespace: str = "", fields: str = ""
    ) -> list[Any]:
        """Every item of a LIST, all pages; a full relist when a continue token expired."""
        return self.listing(resource, selector, namespace, fields).items

    def listing(
        self, resource: Resource, selector: str = "", namespace: str = "", fields: str = ""
    ) -> Listing:
        """A LIST with the resourceVersion a watch continues from (every page of one LIST is
        read at the revision of its first page)."""
        path = resource.path(namespace or None)
        for _attempt in range(LIST_ATTEMPTS):
            items: list[Any] = []
            token = version = ""
            try:
                while True:
                    query = [("limit", str(PAGE_SIZE))]
                    query += [("labelSelector", selector)] if selector else []
                    query += [("fieldSelector", fields)] if fields else []
                    query += [("continue", token)] if token else []
                    page = self._page(path, query)
                    items.extend(page["items"])
                    meta = page.get("metadata") or {}
                    version = version or str(meta.get("resourceVersion") or "")
                    token = meta.get("continue") or ""
                    if not token:
                        return Listing(items, version)
            except _Expired:
                continue
        text = f"listing {resource.plural} kept expiring (410 Gone)"
        raise ClusterUnreachable(text, "expiring", resource=resource.plural)

    def watch(
        self, resource: Resource, since: str, timeout_seconds: int, selector: str = "",
        namespace: str = "",
    ) -> WatchBatch:  # fmt: skip
        """One bounded WATCH from `since` (see `watches`)."""
        return self.watches([Watch(resource, since, selector, namespace)], timeout_seconds)[0]

    def watches(self, watches: Sequence[Watch], timeout_seconds: int) -> Sequence[WatchBatch]:
        """Bounded WATCHes, all under way at once: the requests are sent together, by the
        process's opener threads, each waiting for its answer's status and headers (an API
        server sends those as soon as a watch starts, after the cluster's latency); then each
        answer is read to its end in turn, here. The server closes each one after
        `timeout_seconds`, so reading them all costs about that much wall time and no CPU while
        nothing changes. Anything malformed (an error status, a cut stream, a line that is not
        an event) raises ClusterUnreachable, and wins over a 410 ERROR event, which raises
        WatchExpired once every answer is read: the caller keeps its cursors and relists."""
        opened = list(self._open_all(watches, timeout_seconds))
        batches: list[WatchBatch] = []
        expired: WatchExpired | None = None
        try:
            while opened:
                watch, response = opened[0]
                status, reason, data = self._answer("GET", response)
                opened.pop(0)
                try:
                    batches.append(_watch_answer(watch, status, reason, data))
                except WatchExpired as error:
                    expired = expired or error
        finally:
            _drop([response for _watch, response in opened])  # a fault: the rest is not read
        if expired is not None:
            raise expired
        return batches

    def _open_all(
        self, watches: Sequence[Watch], timeout_seconds: int
    ) -> Sequence[tuple[Watch, RESTResponse]]:
        connect, read = self.timeouts
        timeouts = (connect, read + timeout_seconds)
        futures = []
        for watch in watches:
            query = [
                ("watch", "1"),
                ("resourceVersion", watch.since),
                ("allowWatchBookmarks", "true"),
                ("timeoutSeconds", str(timeout_seconds)),
            ]
            query += [("labelSelector", watch.selector)] if watch.selector else []
            path = watch.resource.path(watch.namespace or None)
            futures.append(_opener().submit(self._open, "GET", path, query, None, "", timeouts))
        opened: list[tuple[Watch, RESTResponse]] = []
        fault: Exception | None = None
        for watch, future in zip(watches, futures, strict=True):
            try:
                opened.append((watch, future.result()))
            except Exception as error:  # ClusterUnreachable, or a bug: the others are dropped
                fault = fault or error
        if fault is not None:
            _drop([response for _watch, response in opened])
            raise fault
        return opened

    def get(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        status, reason, data = self._send("GET", resource.path(namespace, name), [], None, "")
        if status == 404:
            return None
        if not 200 <= status < 300:
            raise ApplyError(status, _status_message(status, reason, data))
        return self._json(status, data)

    def log(
        self, namespace: str, name: str, container: str, tail_lines: int, limit_bytes: int,
        previous: bool = False, timestamps: bool = False,
    ) -> str:  # fmt: skip
        """The `log` subresource of one pod: the last `tail_lines` lines, at most `limit_bytes`
        bytes (the API server cuts there, mid-line if need be), each line after the time it was
        written when `timestamps`. Read, never stored. A refusal (400: no previous container,
        still waiting; 404: no such pod) is a ClusterUnreachable with its status and the API
        server's own message."""
        query = [("container", container), ("tailLines", str(tail_lines)),
                 ("limitBytes", str(limit_bytes)),
                 ("timestamps", "true" if timestamps else "false")]  # fmt: skip
        query += [("previous", "true")] if previous else []
        path = PODS.path(namespace, name) + "/log"
        status, reason, data = self._send("GET", path, query, None, "")
        if not 200 <= status < 300:
            raise _status_failure(status, reason, data)
        return data.decode(errors="replace")

    def pod_events(self, namespace: str, name: str, limit: int) -> Iterable[Any]:
        """The Events about one pod (by `involvedObject.name`), one page of at most `limit`:
        what an operator reads beside its logs; the engine never stores them."""
        query = [("fieldSelector", f"involvedObject.name={name}"), ("limit", str(limit))]
        path = Resource("Event", "v1", "events").path(namespace)
        items: Iterable[Any] = self._page(path, query)["items"]
        return items

    # --- writes ----------------------------------------------------------------------------

    def _write(
        self, method: str, path: str, body: Any, content_type: str = "application/json"
    ) -> tuple[int, dict[str, Any]]:
        status, reason, data = self._send(method, path, [], body, content_type)
        if not 200 <= status < 300:
            raise ApplyError(status, _status_message(status, reason, data))
        return status, self._json(status, data) if data else {}

    def create(self, resource: Resource, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._write("POST", resource.path(namespace), body)[1]

    def patch(
        self, resource: Resource, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386): only the fields named change."""
        path = resource.path(namespace, name)
        return self._write("PATCH", path, patch, "application/merge-patch+json")[1]

    def apply(
        self, resource: Resource, namespace: str, name: str, body: dict[str, Any], manager: str
    ) -> tuple[int, dict[str, Any]]:
        """Server-side apply (`application/apply-patch+yaml`; JSON is YAML) as `manager`,
        forcing its ownership of the fields it sets: 201 created, 200 updated."""
        path = resource.path(namespace, name)
        query = [("fieldManager", manager), ("force", "true")]
        status, reason, data = self._send(
            "PATCH", path, query, body, "application/apply-patch+yaml"
        )
        if not 200 <= status < 300:
            raise ApplyError(status, _status_message(status, reason, data))
        return status, self._json(status, data)

    def version(self) -> dict[str, Any]:
        """`GET /version`: the API server's build (`gitVersion`, ...)."""
        status, reason, data = self._send("GET", "/version", [], None, "")
        if not 200 <= status < 300:
            raise _status_failure(status, reason, data)
        return self._json(status, data)

    def access_review(self, attributes: dict[str, str]) -> tuple[bool, str]:
        """One SelfSubjectAccessReview (authorization.k8s.io/v1) of the credentials in use:
        whether they may do `attributes` (verb, group, resource, subresource, namespace), and
        the authorizer's reason."""
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
        status, reason, data = self._send("POST", path, [], body, "application/json")
        if not 200 <= status < 300:
            raise _status_failure(status, reason, data)
        answer = self._json(status, data).get("status") or {}
        return answer.get("allowed") is True, safe_text(str(answer.get("reason", "")))

    def evict(self, namespace: str, name: str, uid: str) -> Eviction:
        """`POST pods/NAME/eviction` (policy/v1), only that very pod (a UID precondition): the
        API server's answer as it came, for the caller to judge — 201 evicted, 429 a budget
        forbids it for now, 500 several budgets, 404/409 the pod is gone."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": {"preconditions": {"uid": uid}},
        }
        path = PODS.path(namespace, name) + "/eviction"
        status, _reason, data = self._send("POST", path, [], body, "application/json")
        return Eviction(status, safe_text(_api_message(data)), _causes(data))

    def delete(self, resource: Resource, namespace: str, name: str, uid: str = "") -> None:
        """Background propagation: the object goes now, its pods are collected after. With `uid`
        the API deletes only that very object, so a stale observation never deletes a newer
        object of the same name."""
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
        }
        if uid:
            options["preconditions"] = {"uid": uid}
        self._write("DELETE", resource.path(namespace, name), options)


# The threads that send a cycle's watches and wait for their headers, one set per process (a
# forked worker makes its own: threads do not survive a fork).
_OPENERS: dict[int, ThreadPoolExecutor] = {}
_OPENERS_LOCK = threading.Lock()


def _opener() -> ThreadPoolExecutor:
    with _OPENERS_LOCK:
        pool = _OPENERS.get(os.getpid())
        if pool is None:
            pool = _OPENERS[os.getpid()] = ThreadPoolExecutor(16, thread_name_prefix="watch")
        return pool


def _drop(responses: Iterable[RESTResponse]) -> None:
    """Answers that will not be read: their connections are closed, not reused."""
    for response in responses:
        response.response.close()
        response.response.release_conn()


def _watch_answer(watch: Watch, status: int, reason: str, data: bytes) -> WatchBatch:
    if not 200 <= status < 300:
        if status == 410:
            raise WatchExpired(_status_message(status, reason, data))
        raise ClusterUnreachable(_status_message(status, reason, data))
    return _watch_batch(watch.resource, data, watch.since)


def _watch_batch(resource: Resource, data: bytes, since: str) -> WatchBatch:
    events, cursor = [], since
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            event = orjson.loads(line)
            kind, obj = event["type"], event["object"]
            version = obj["metadata"]["resourceVersion"] if kind != "ERROR" else ""
        except (orjson.JSONDecodeError, TypeError, KeyError):
            raise ClusterUnreachable(
                f"the API server answered a watch of {resource.plural} with a malformed event"
            ) from None
        if kind == "ERROR":
            code = obj.get("code") if isinstance(obj, dict) else None
            if code == 410:
                raise WatchExpired(safe_text(str(obj.get("message", "410 Expired"))))
            raise ClusterUnreachable(_status_message(code or 500, "ERROR event", line))
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            events.append(WatchEvent(kind, obj))
        cursor = str(version)
    return WatchBatch(events, cursor)


def parsed[T](items: Iterable[Any], parser: Callable[[Any], T]) -> list[T]:
    """Parses every item; an item of the wrong shape makes the whole answer unusable."""
    try:
        return [parser(item) for item in items]
    except (AttributeError, TypeError, ValueError, IndexError, KeyError):
        text = "the API server answered objects of an unexpected shape"
        raise ClusterUnreachable(text, "unexpected_shape") from None
