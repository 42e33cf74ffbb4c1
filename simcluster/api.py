"""The Kubernetes REST API over the store: routing, verbs, subresources, Status errors."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from simcluster import access, disruption, errors, resources
from simcluster.context import Context
from simcluster.deletion import DeleteOptions, delete_object
from simcluster.patch import merge_patch
from simcluster.resources import ResourceType
from simcluster.selectors import (
    Selector,
    SelectorError,
    format_selector,
    parse_field_selector,
    parse_label_selector,
)
from simcluster.watch import Watch, WatchRequest, parse_since
from simcluster.writes import Writer

Obj = dict[str, Any]
APPLY_PATCH = "application/apply-patch+yaml"
APPLIABLE = frozenset({"deployments", "daemonsets"})
LogReader = Callable[[Obj, Mapping[str, str]], str]


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: Mapping[str, str]
    body: bytes = b""


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    stream: Iterable[bytes] | None = None  # a watch: chunks written as they come


@dataclass
class Target:
    resource: ResourceType
    namespace: str | None
    name: str | None = None
    subresource: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        assert self.name is not None
        return (self.namespace or "", self.name)


def json_response(status: int, payload: Any) -> Response:
    return Response(status, orjson.dumps(payload))


def with_kind(resource: ResourceType, raw: bytes) -> bytes:
    """A stored object's bytes as a single-object answer (stored bytes omit kind/apiVersion)."""
    head = (
        b'{"kind":"'
        + resource.kind.encode()
        + b'","apiVersion":"'
        + resource.api_version.encode()
        + b'",'
    )
    return head + raw[1:]


class Api:
    """Dispatches one request; every method runs under the store lock."""

    def __init__(
        self, ctx: Context, read_log: LogReader, server_address: str,
        stopping: threading.Event | None = None, bookmark_seconds: float = 60.0,
    ) -> None:  # fmt: skip
        self.ctx = ctx
        self.writer = Writer(ctx)
        self.read_log = read_log
        self.server_address = server_address
        self.stopping = stopping or threading.Event()
        self.bookmark_seconds = bookmark_seconds
        # What SelfSubjectAccessReviews answer (simcluster.access); None allows everything.
        self.access_rules: list[Obj] | None = None

    def handle(self, request: Request) -> Response:
        try:
            discovery = self._discovery(request)
            if discovery is not None:
                return discovery
            target = route(request.path)
            with self.ctx.store.lock:
                return self._dispatch(target, request)
        except errors.ApiError as error:
            return Response(error.code, orjson.dumps(error.status()), headers=error.headers)

    def _discovery(self, request: Request) -> Response | None:
        """/version, /api, /apis and the group documents; health checks answer plain `ok`."""
        parts = tuple(p for p in request.path.split("/") if p)
        if parts in (("healthz",), ("livez",), ("readyz",)):
            return Response(200, b"ok", "text/plain; charset=utf-8")
        document = discovery_document(parts, self.server_address)
        if document is None:
            return None
        if request.method not in ("GET", "HEAD"):
            raise errors.method_not_allowed()
        return json_response(200, document)

    def _dispatch(self, target: Target, request: Request) -> Response:
        if target.resource.plural in resources.CREATE_ONLY:
            if (request.method, target.name) != ("POST", None):
                raise errors.method_not_allowed()
            body = access.review(self.access_rules, _body_object(request.body))
            return json_response(201, body)
        verb = (request.method, target.name is not None, target.subresource)
        handlers: dict[tuple[str, bool, str | None], Callable[[Target, Request], Response]] = {
            ("GET", False, None): self.list,
            ("POST", False, None): self.create,
            ("DELETE", False, None): self.delete_collection,
            ("GET", True, None): self.get,
            ("PUT", True, None): self.update,
            ("PATCH", True, None): self.patch,
            ("DELETE", True, None): self.delete,
            ("GET", True, "status"): self.get,
            ("PUT", True, "status"): self.update,
            ("PATCH", True, "status"): self.patch,
            ("GET", True, "scale"): self.get_scale,
            ("PUT", True, "scale"): self.update_scale,
            ("PATCH", True, "scale"): self.patch_scale,
            ("GET", True, "log"): self.log,
            ("POST", True, "eviction"): self.evict,
        }
        handler = handlers.get(verb)
        if handler is None:
            raise errors.method_not_allowed()
        return handler(target, request)

    # Collections -----------------------------------------------------------------------------

    def list(self, target: Target, request: Request) -> Response:
        query = request.query
        if query.get("watch") in ("true", "1"):
            return self.watch(target, request)
        labels, fields = _selectors(target, query)
        limit = _int_param(query, "limit")
        token = query.get("continue", "")
        if token and query.get("resourceVersion"):
            raise errors.bad_request(
                "specifying resource version is not allowed when using continue"
            )
        page = self.ctx.store.list_page(
            target.resource.plural, target.namespace, labels, fields, limit, token
        )
        meta: Obj = {"resourceVersion": str(page.revision)}
        if page.continue_token:
            meta["continue"] = page.continue_token
        if page.remaining is not None:
            meta["remainingItemCount"] = page.remaining
        rt = target.resource
        head = f'{{"kind":"{rt.list_kind}","apiVersion":"{rt.api_version}","metadata":'.encode()
        body = head + orjson.dumps(meta) + b',"items":[' + b",".join(page.items) + b"]}"
        return Response(200, body)

    def watch(self, target: Target, request: Request) -> Response:
        query = request.query
        labels, fields = _selectors(target, query)
        watch = WatchRequest(
            target.resource, target.namespace, labels, fields,
            since=parse_since(query.get("resourceVersion", "")),
            timeout=float(_int_param(query, "timeoutSeconds")),
            bookmarks=query.get("allowWatchBookmarks") in ("true", "1"),
        )  # fmt: skip
        stream = Watch(self.ctx.store, watch, self.stopping, self.bookmark_seconds)
        return Response(200, b"", stream=stream)

    def create(self, target: Target, request: Request) -> Response:
        obj = _body_object(request.body)
        created = self.writer.create(target.resource, target.namespace, obj, _dry_run(request))
        return self._object(target.resource, created, 201)

    def delete_collection(self, target: Target, request: Request) -> Response:
        store, plural = self.ctx.store, target.resource.plural
        labels, fields = _selectors(target, request.query)
        page = store.list_page(plural, target.namespace, labels, fields)
        options = self._delete_options(request)
        deleted = []
        for raw in page.items:
            meta = orjson.loads(raw)["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            if store.get_version(plural, key) is not None:
                deleted.append(delete_object(self.ctx, plural, key, options)[0])
        rt = target.resource
        body = {
            "kind": rt.list_kind,
            "apiVersion": rt.api_version,
            "metadata": {"resourceVersion": str(store.revision)},
            "items": deleted,
        }
        return json_response(200, body)

    # Items -----------------------------------------------------------------------------------

    def get(self, target: Target, request: Request) -> Response:
        raw = self.ctx.store.raw(target.resource.plural, target.key)
        if raw is None:
            raise errors.not_found(target.resource.plural, target.resource.group, target.key[1])
        return Response(200, with_kind(target.resource, raw))

    def update(self, target: Target, request: Request) -> Response:
        obj = _body_object(request.body)
        status_only = target.subresource == "status"
        updated = self.writer.replace(
            target.resource, target.key, obj, status_only, _dry_run(request)
        )
        return self._object(target.resource, updated, 200)

    def patch(self, target: Target, request: Request) -> Response:
        content_type = request.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() == APPLY_PATCH:
            return self.apply(target, request)
        status_only = target.subresource == "status"
        patched = self.writer.patch(
            target.resource, target.key, content_type, request.body, status_only, _dry_run(request)
        )
        return self._object(target.resource, patched, 200)

    def apply(self, target: Target, request: Request) -> Response:
        """Server-side apply (`application/apply-patch+yaml`, JSON being YAML): creates the
        object when it is missing (201), else sets the fields the body names (200). One field
        manager at a time is what simcluster follows: the applied fields win (`force`), lists
        are replaced whole, and the manager is recorded in `managedFields`."""
        if target.resource.plural not in APPLIABLE or target.subresource:
            raise errors.unsupported_media_type(APPLY_PATCH)  # simcluster applies only these
        manager = request.query.get("fieldManager", "")
        if not manager:
            raise errors.bad_request("PATCH /apply requests require fieldManager to be set")
        body = _body_object(request.body)
        if (body.get("metadata") or {}).get("name") != target.key[1]:
            raise errors.bad_request("the name of the object does not match the name on the URL")
        entry = {"manager": manager, "operation": "Apply",
                 "apiVersion": target.resource.api_version, "time": self.ctx.stamp(),
                 "fieldsType": "FieldsV1", "fieldsV1": {}}  # fmt: skip
        if self.ctx.store.get(target.resource.plural, target.key) is None:
            body.setdefault("metadata", {})["managedFields"] = [entry]
            created = self.writer.create(target.resource, target.namespace, body, _dry_run(request))
            return self._object(target.resource, created, 201)
        old = self.writer.existing(target.resource, target.key)
        merged = merge_patch({"kind": target.resource.kind,
                              "apiVersion": target.resource.api_version, **old}, body)  # fmt: skip
        meta = merged["metadata"]
        others = [f for f in meta.get("managedFields") or [] if f.get("manager") != manager]
        meta["managedFields"] = [*others, entry]
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        updated = self.writer.replace(target.resource, target.key, merged, False, _dry_run(request))
        return self._object(target.resource, updated, 200)

    def delete(self, target: Target, request: Request) -> Response:
        rt = target.resource
        if _dry_run(request):
            return self.get(target, request)
        obj, gone = delete_object(self.ctx, rt.plural, target.key, self._delete_options(request))
        if gone and not rt.returns_deleted_object:
            meta = obj["metadata"]
            details: Obj = {
                "name": meta["name"],
                **({"group": rt.group} if rt.group else {}),
                "kind": rt.plural,
                "uid": meta["uid"],
            }
            return json_response(
                200,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": details,
                },
            )
        return self._object(rt, obj, 200)

    def _delete_options(self, request: Request) -> DeleteOptions:
        body: Obj = _body_object(request.body) if request.body.strip() else {}
        query = request.query
        preconditions = body.get("preconditions") or {}
        grace = body.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
        policy = body.get("propagationPolicy") or query.get("propagationPolicy")
        orphan = body.get("orphanDependents", query.get("orphanDependents"))
        if policy is None and orphan is not None:
            policy = "Orphan" if str(orphan).lower() == "true" else "Background"
        return DeleteOptions(
            grace_seconds=None if grace is None else int(grace),
            propagation=policy,
            uid=preconditions.get("uid"),
            resource_version=preconditions.get("resourceVersion"),
        )

    # Subresources ----------------------------------------------------------------------------

    def get_scale(self, target: Target, request: Request) -> Response:
        obj = self.writer.existing(target.resource, target.key)
        return json_response(200, scale_of(obj))

    def update_scale(self, target: Target, request: Request) -> Response:
        scale = _body_object(request.body)
        updated = self.writer.scale(target.resource, target.key, scale, _dry_run(request))
        return json_response(200, scale_of(updated))

    def patch_scale(self, target: Target, request: Request) -> Response:
        obj = self.writer.existing(target.resource, target.key)
        current = scale_of(obj)
        patched = self.writer.apply_patch(
            request.headers.get("content-type", ""), request.body, current
        )
        updated = self.writer.scale(target.resource, target.key, patched, _dry_run(request))
        return json_response(200, scale_of(updated))

    def log(self, target: Target, request: Request) -> Response:
        pod = self.writer.existing(target.resource, target.key)
        text = self.read_log(pod, request.query)
        return Response(200, text.encode(), "text/plain")

    def evict(self, target: Target, request: Request) -> Response:
        status, body = disruption.evict(
            self.ctx, target.key, _body_object(request.body), _dry_run(request)
        )
        return json_response(status, body)

    def _object(self, resource: ResourceType, obj: Obj, status: int) -> Response:
        body = {"kind": resource.kind, "apiVersion": resource.api_version, **obj}
        return json_response(status, body)


def discovery_document(parts: tuple[str, ...], server_address: str) -> Obj | None:
    if parts == ("version",):
        return resources.version_info()
    if parts == ("api",):
        return resources.api_versions(server_address)
    if parts == ("apis",):
        return resources.api_group_list()
    if parts == ("api", "v1"):
        return resources.api_resource_list("", "v1")
    if len(parts) in (2, 3) and parts[0] == "apis" and parts[1] in resources.GROUPS:
        version = resources.GROUPS[parts[1]]
        if len(parts) == 2:
            return resources.api_group(parts[1])
        if parts[2] == version:
            return resources.api_resource_list(parts[1], version)
    return None


def scale_of(obj: Obj) -> Obj:
    meta = obj["metadata"]
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": spec.get("replicas", 0)},
        "status": {
            "replicas": status.get("replicas", 0),
            "selector": format_selector(spec.get("selector")),
        },
    }


def route(path: str) -> Target:
    """/api/v1/... and /apis/<group>/<version>/..., namespaced or cluster-wide."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise errors.path_not_found()
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        candidate = resources.resource_for(group, version, rest[2])
        if candidate is not None and candidate.namespaced:
            namespace, rest = rest[1], rest[2:]
    resource = resources.resource_for(group, version, rest[0]) if rest else None
    if resource is None or len(rest) > 3:
        raise errors.path_not_found()
    if resource.namespaced and namespace is None and len(rest) > 1:
        raise errors.path_not_found()
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub is not None and sub not in resource.subresources:
        raise errors.path_not_found()
    return Target(resource, namespace, name, sub)


def _selectors(target: Target, query: Mapping[str, str]) -> tuple[Selector, Selector]:
    try:
        labels = parse_label_selector(query.get("labelSelector", ""))
        fields = parse_field_selector(
            query.get("fieldSelector", ""), target.resource.field_selectors
        )
    except SelectorError as error:
        raise errors.bad_request(str(error)) from None
    return labels, fields


def _body_object(body: bytes) -> Obj:
    try:
        value = orjson.loads(body or b"{}")
    except orjson.JSONDecodeError as error:
        raise errors.bad_request(
            f"the body of the request could not be decoded as JSON: {error}"
        ) from None
    if not isinstance(value, dict):
        raise errors.bad_request("the body of the request must be a JSON object")
    return value


def _int_param(query: Mapping[str, str], name: str) -> int:
    text = query.get(name, "") or "0"
    try:
        value = int(text)
    except ValueError:
        raise errors.bad_request(f"invalid {name} parameter: {text!r}") from None
    if value < 0:
        raise errors.bad_request(
            f"{name}: Invalid value: {value}: must be greater than or equal to 0"
        )
    return value


def _dry_run(request: Request) -> bool:
    return request.query.get("dryRun") == "All"
