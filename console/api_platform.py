"""The JSON API of operators' actions on clusters, nodes and add-ons (issue 36, docs/api.md):
registered on the API of `jobs.api` (its tokens, its JSON errors), with the same rules as the
pages because both call the same functions (`console.node_actions`).

Every endpoint here is the operators': anyone else gets 403 before anything is looked up.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from ninja import P, PathEx, Schema, Status

from console import addon_actions, cluster_actions, node_actions
from console.models import Cluster, DrainRun
from jobs.api.core import MAX_ID, api, error, json_body, user_of

__all__ = ["api"]
from jobs.choices import DrainAction, DrainPodStatus, DrainState
from jobs.schemas import WRITE, ErrorOut

ACTION = {**WRITE, 502: ErrorOut}
DrainId = PathEx[int, P(ge=1, le=MAX_ID)]


class DrainPodOut(Schema):
    namespace: str
    name: str
    status: DrainPodStatus
    reason: str
    detail: str
    attempts: int


class DrainOut(Schema):
    id: int
    cluster: str
    node: str
    state: DrainState
    message: str
    requested_by: str
    timeout_seconds: int
    started_at: datetime
    finished_at: datetime | None
    pods: list[DrainPodOut]


class PlannedPodOut(Schema):
    namespace: str
    name: str
    action: DrainAction
    reason: str
    detail: str


class JobAtRiskOut(Schema):
    job_id: int
    name: str
    owner: str
    project: str
    pods: list[str]
    gpus_on_node: int
    gpus: int


class DrainPreviewOut(Schema):
    node: str
    pods: list[PlannedPodOut]
    jobs: list[JobAtRiskOut]


class CordonOut(Schema):
    cluster: str
    node: str
    unschedulable: bool
    reason: str
    by: str
    at: datetime | None


class CheckOut(Schema):
    permission: str
    allowed: bool
    required: bool
    breaks: str


class ConnectionOut(Schema):
    """A connection test: whether `/version` answered (over verified TLS unless the cluster is
    insecure), and one SelfSubjectAccessReview per permission the console needs."""

    reached: bool
    version: str
    error: str
    checklist: list[CheckOut]


class RegisteredOut(Schema):
    name: str
    namespace: str
    insecure: bool
    insecure_since: datetime | None
    connection: ConnectionOut


@api.exception_handler(node_actions.ActionRefused)
def _action_refused(request: HttpRequest, exc: node_actions.ActionRefused) -> HttpResponse:
    return error(request, exc.status, exc.message, **exc.extra)


def _cluster(request: HttpRequest, name: str) -> Cluster:
    """Operators only, checked before the name is looked up (no hint to anyone else)."""
    node_actions.check_operator(user_of(request))
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise Http404("No such cluster.")
    return cluster


@api.post("/clusters", response={201: RegisteredOut, **ACTION}, tags=["clusters"])
def register_cluster(request: HttpRequest) -> Status[dict[str, Any]]:
    """`{name, server, ca, token}` or `{name, kubeconfig}` (+ `namespace`, `insecure`,
    `prometheus_url`): tested before it is stored; 201 with the checklist, or 4xx naming what
    failed."""
    node_actions.check_operator(user_of(request))
    body = json_body(request)
    name = body.get("name")
    if not isinstance(name, str):
        raise node_actions.ActionRefused(422, "name is required.", errors={"name": "Required."})
    cluster, report = cluster_actions.register(user_of(request), name, body, request)
    answer = {"name": cluster.name, "namespace": cluster.namespace, "insecure": cluster.insecure,
              "insecure_since": cluster.insecure_since,
              "connection": cluster_actions.report_json(report)}  # fmt: skip
    return Status(201, answer)


@api.post("/clusters/{name}/test", response={200: ConnectionOut, **ACTION}, tags=["clusters"])
def test_cluster(request: HttpRequest, name: str) -> dict[str, Any]:
    """The stored credentials tested again; the checklist kept for the pages."""
    report = cluster_actions.check_connection(user_of(request), _cluster(request, name), request)
    return cluster_actions.report_json(report)


@api.post(
    "/clusters/{name}/credentials", response={200: ConnectionOut, **ACTION}, tags=["clusters"]
)
def rotate_credentials(request: HttpRequest, name: str) -> dict[str, Any]:
    """Rotate: the same body as a registration (without `name`); the new credentials are
    tested, then swapped in at once."""
    cluster = _cluster(request, name)
    report = cluster_actions.rotate(user_of(request), cluster, json_body(request), request)
    return cluster_actions.report_json(report)


class AddonAttemptOut(Schema):
    kind: str
    from_version: str
    to_version: str
    requested_by: str
    started_at: datetime
    finished_at: datetime | None
    outcome: str
    answer: str
    reason: str


class AddonTransitionOut(Schema):
    phase: str
    reason: str
    at: datetime


class RegistryAddonOut(Schema):
    """A registry add-on: `phase` derived (Pending, Installing, Ready, Failed, Upgrading) with
    its `reason`; the last 10 attempts and transitions, newest first."""

    name: str
    namespace: str
    phase: str
    reason: str
    message: str
    desired_version: str
    applied_version: str
    versions: list[str]
    workloads: list[dict[str, Any]]
    attempts: list[AddonAttemptOut]
    transitions: list[AddonTransitionOut]


@api.get(
    "/clusters/{name}/addons", response={200: list[RegistryAddonOut], **ACTION}, tags=["addons"]
)
def addon_registry(request: HttpRequest, name: str) -> list[dict[str, Any]]:
    """The cluster's add-on registry (operators)."""
    found = addon_actions.registry(user_of(request), _cluster(request, name))
    return [addon_actions.addon_json(addon) for addon in found]


@api.post("/clusters/{name}/addons", response={201: RegistryAddonOut, **ACTION}, tags=["addons"])
def register_addon(request: HttpRequest, name: str) -> Status[dict[str, Any]]:
    """`{name, namespace, versions: {version: manifest YAML}, desired_version}`: a desired
    version starts its install (server-side apply, field manager `trainyard`)."""
    cluster = _cluster(request, name)
    addon = addon_actions.create_addon(user_of(request), cluster, json_body(request), request)
    return Status(201, addon_actions.addon_json(addon))


@api.get(
    "/clusters/{name}/addons/{addon}", response={200: RegistryAddonOut, **ACTION}, tags=["addons"]
)
def addon_detail(request: HttpRequest, name: str, addon: str) -> dict[str, Any]:
    found = addon_actions.addon_of(user_of(request), _cluster(request, name), addon)
    return addon_actions.addon_json(found)


@api.patch(
    "/clusters/{name}/addons/{addon}", response={200: RegistryAddonOut, **ACTION}, tags=["addons"]
)
def change_addon(request: HttpRequest, name: str, addon: str) -> dict[str, Any]:
    """`{desired_version?, versions?}`: new versions added; a new desired version starts an
    install or an upgrade. 409 while an attempt runs."""
    user = user_of(request)
    found = addon_actions.addon_of(user, _cluster(request, name), addon)
    changed = addon_actions.change_addon(user, found, json_body(request), request)
    return addon_actions.addon_json(changed)


@api.post(
    "/clusters/{name}/addons/{addon}/rollback",
    response={200: RegistryAddonOut, **ACTION},
    tags=["addons"],
)
def rollback_addon(request: HttpRequest, name: str, addon: str) -> dict[str, Any]:
    """Back to the version applied before the current one; 409 when there is none."""
    user = user_of(request)
    found = addon_actions.addon_of(user, _cluster(request, name), addon)
    return addon_actions.addon_json(addon_actions.rollback(user, found, request))


class RetiredOut(Schema):
    name: str
    retired_at: datetime


@api.delete("/clusters/{name}", response={200: RetiredOut, **ACTION}, tags=["clusters"])
def retire_cluster(request: HttpRequest, name: str) -> dict[str, Any]:
    """Retire: 409 while it has Pending or Running Jobs, and when it is retired already (its
    first `retired_at` kept); its credentials deleted, its Jobs' history kept, never synced
    again."""
    retired = cluster_actions.retire(user_of(request), _cluster(request, name), request)
    return {"name": retired.name, "retired_at": retired.retired_at}


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise node_actions.ActionRefused(
            422, f"{name} must be true or false.", errors={name: "Must be a boolean."}
        )
    return value


def _cordon_out(cluster: Cluster, node: str) -> dict[str, Any]:
    found = node_actions.node_of(cluster, node)
    cordon = cluster.cordons.filter(node_name=node).first()
    return {
        "cluster": cluster.name, "node": node, "unschedulable": found.unschedulable,
        "reason": cordon.reason if cordon else "", "by": cordon.by_name if cordon else "",
        "at": cordon.at if cordon else None,
    }  # fmt: skip


@api.post(
    "/clusters/{name}/nodes/{node}/cordon", response={200: CordonOut, **ACTION}, tags=["nodes"]
)
def cordon(request: HttpRequest, name: str, node: str) -> dict[str, Any]:
    """`{reason}` (required): patches `spec.unschedulable` to true; the node's Online/Offline
    phase never changes. The reason, who and when are kept and shown."""
    cluster = _cluster(request, name)
    reason = json_body(request).get("reason", "")
    node_actions.cordon(user_of(request), cluster, node, reason if isinstance(reason, str) else "",
                        request)  # fmt: skip
    return _cordon_out(cluster, node)


@api.post(
    "/clusters/{name}/nodes/{node}/uncordon", response={200: CordonOut, **ACTION}, tags=["nodes"]
)
def uncordon(request: HttpRequest, name: str, node: str) -> dict[str, Any]:
    """Clears `spec.unschedulable`. 409 while a drain of the node runs."""
    cluster = _cluster(request, name)
    node_actions.uncordon(user_of(request), cluster, node, request)
    return _cordon_out(cluster, node)


@api.get(
    "/clusters/{name}/nodes/{node}/drain-preview",
    response={200: DrainPreviewOut, **ACTION},
    tags=["nodes"],
)
def drain_preview(
    request: HttpRequest, name: str, node: str, delete_emptydir_data: bool = False
) -> dict[str, Any]:
    """Read live: each pod on the node and what a drain would do with it (evict, skip, blocked
    with the reason), and the Trainyard Jobs that would lose workers, with owner and GPUs."""
    cluster = _cluster(request, name)
    found = node_actions.preview(user_of(request), cluster, node, delete_emptydir_data)
    return node_actions.preview_json(found)


@api.post("/clusters/{name}/nodes/{node}/drain", response={202: DrainOut, **ACTION}, tags=["nodes"])
def start_drain(request: HttpRequest, name: str, node: str) -> Status[dict[str, Any]]:
    """`{timeout_seconds?, delete_emptydir_data?, skip_blocked?}`: cordons, then evicts through
    the Eviction API; follow it at `/drains/{id}`. 409 when pods are blocked by a rule no retry
    changes and `skip_blocked` is false, or when a drain of the node already runs."""
    cluster = _cluster(request, name)
    body = json_body(request)
    timeout = body.get("timeout_seconds", node_actions.DEFAULT_TIMEOUT_SECONDS)
    if not isinstance(timeout, int) or isinstance(timeout, bool):
        message = "timeout_seconds must be an integer."
        raise node_actions.ActionRefused(422, message, errors={"timeout_seconds": message})
    run = node_actions.start_drain(
        user_of(request), cluster, node, timeout_seconds=timeout,
        delete_emptydir_data=_flag(body, "delete_emptydir_data"),
        skip_blocked=_flag(body, "skip_blocked"), request=request,
    )  # fmt: skip
    return Status(202, node_actions.drain_json(run))


def _drain(request: HttpRequest, drain_id: int) -> DrainRun:
    node_actions.check_operator(user_of(request))
    run = DrainRun.objects.select_related("cluster").filter(pk=drain_id).first()
    if run is None:
        raise Http404("No such drain.")
    return run


@api.get("/drains/{drain_id}", response={200: DrainOut, **ACTION}, tags=["nodes"])
def drain_detail(request: HttpRequest, drain_id: DrainId) -> dict[str, Any]:
    """The drain's state (running, drained, partly_drained, failed, stopped) and its pods."""
    return node_actions.drain_json(_drain(request, drain_id))


@api.post("/drains/{drain_id}/stop", response={200: DrainOut, **ACTION}, tags=["nodes"])
def stop_drain(request: HttpRequest, drain_id: DrainId) -> dict[str, Any]:
    """Stops evicting; the node stays cordoned. 409 when the drain already ended."""
    run = node_actions.stop_drain(user_of(request), _drain(request, drain_id), request)
    return node_actions.drain_json(run)
