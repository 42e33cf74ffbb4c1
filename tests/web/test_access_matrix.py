"""The access matrix: every page, fragment and endpoint, as every kind of reader, against an
explicit expected status (issue 12, "Show"). The routes come from the URLconf
(`django.urls.get_resolver()`) and the API's OpenAPI document; a route without an entry here
fails `test_every_route_has_an_entry`, so a new URL cannot ship without saying who may use it.

Readers, in the order of every expectation below: an anonymous visitor; nina, in no project;
bob, a viewer of vision; alice, a member of vision; charlie, a member of speech (another
project); olga, an operator (the group "operators"); root, a superuser in no project. The objects
asked for are vision's. On top of the statuses, every answer is checked for two things:
- no cross-project leak: an answer to someone who does not see vision names nothing of it;
- diagnostics (spec §Pod and Worker status: restart counts, exit codes, for authorised
  operators) appear exactly where jobs.diagnostics allows them.

Each request runs in a savepoint that is rolled back, so every reader finds the same state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from console.models import Addon, ApiToken, Cluster, DrainRun, Membership, Node, Project
from jobs.api import api
from jobs.choices import JobPhase, PodPhase, TaskPhase
from jobs.messages import Message, encode
from jobs.models import Job, Task, Workflow
from notify.models import Channel, Subscription
from tests.conftest import make_operator, open_cluster, open_project
from workers.models import PodInstance, Worker

READERS = ("anonymous", "nina", "bob", "alice", "charlie", "olga", "root")
# Who sees vision at all, and who sees its diagnostics by default (operators, superusers).
SEES_VISION = {"bob", "alice", "olga", "root"}
SEES_DIAGNOSTICS = {"olga", "root"}
SECRETS = ("ppo-secret", "wf-secret", "vision")
DIAGNOSTICS = re.compile(r'33 restarts|restart_count": ?33|>Restarts<|uid-crash-0')
CRASH = Message("pod.crash_loop", {
    "pod": "ppo-secret-actor-0", "count": 33,
    "exit": Message("exit.code_reason", {"code": 3, "reason": "Error"}),
})  # fmt: skip
SPEC = {"name": "new-job", "cluster": "gpu-a", "project": "vision",
        "tasks": [{"role": "worker", "image": "rlinf:1"}]}  # fmt: skip


@dataclass(frozen=True)
class Call:
    """One request and its expected status per reader (seven, in READERS order). `ids` maps
    the route's parameters to objects of the World; `diagnostics`: the answer shows the Job's
    diagnostics to the readers who may see them."""

    expect: str
    method: str = "get"
    ids: dict[str, str] = field(default_factory=dict)
    query: str = ""
    htmx: bool = False
    data: dict[str, Any] | None = None
    diagnostics: bool = False

    def statuses(self) -> dict[str, int]:
        codes = [int(code) for code in self.expect.split()]
        assert len(codes) == len(READERS), self.expect
        return dict(zip(READERS, codes, strict=True))


JOB = {"pk": "job"}
TASK = {"pk": "job", "task_pk": "task"}
WORKFLOW = {"pk": "workflow"}
PROJECT = {"pk": "project"}
BOB = {"pk": "project", "member_pk": "bob_membership"}
READ_VISION = "302 404 200 200 404 200 200"  # a page of one of vision's objects
EVERYONE = "302 200 200 200 200 200 200"  # any logged-in reader
CHANGE_VISION = "302 404 403 403 404 302 302"  # operators only, and only who sees it
OPERATE_JOB = "302 404 403 302 404 403 403"  # vision's members only
NOT_GET = "302 405 405 405 405 405 405"  # a POST-only view asked with GET
OPERATORS = "302 403 403 403 403 200 200"  # the audit trail
READ_LOGS = "302 404 403 200 404 200 200"  # vision's members and operators, not its viewers
POD = "ppo-secret-actor-0"
ACT = "302 403 403 403 403 302 302"  # an operator's action from a page
NODE = {"cluster": "=gpu-a", "node": "=node-a"}
DRAIN = {"pk": "drain"}
CLUSTER = {"name": "=gpu-a"}
ADDON = {"cluster": "=gpu-a", "name": "=metrics"}

ALICES = "302 404 404 302 404 404 404"  # alice's own object: 404 for everyone else
ALICE_CHANNEL = {"pk": "alice_channel"}
ALICE_SUBSCRIPTION = {"pk": "alice_subscription"}
PUBLIC_URL = "https://93.184.216.34/hook"  # an address the guard accepts (never called here)
NEW_CHANNEL = {"name": "new", "kind": "webhook", "language": "en"}

# Web routes by URL name (the URLconf, outside the API and the admin).
PAGES: dict[str, list[Call]] = {
    "login": [Call("200 200 200 200 200 200 200")],
    "logout": [Call("302 302 302 302 302 302 302", "post"), Call("405 405 405 405 405 405 405")],
    "password_change": [Call(EVERYONE)],
    "password_change_done": [Call(EVERYONE)],
    "password_reset": [Call("200 200 200 200 200 200 200")],
    "password_reset_done": [Call("200 200 200 200 200 200 200")],
    "password_reset_confirm": [
        Call("200 200 200 200 200 200 200", ids={"uidb64": "=MQ", "token": "=no-such-token"})
    ],
    "password_reset_complete": [Call("200 200 200 200 200 200 200")],
    "set_language": [Call("302 302 302 302 302 302 302", "post", data={"language": "en"})],
    "dashboard": [Call(EVERYONE, diagnostics=True), Call(EVERYONE, htmx=True, diagnostics=True)],
    "jobs": [Call(EVERYONE, diagnostics=True), Call(EVERYONE, htmx=True, diagnostics=True)],
    "job_new": [Call("302 403 403 200 200 403 403")],
    "job": [
        Call(READ_VISION, ids=JOB, diagnostics=True),
        Call(READ_VISION, ids=JOB, query="?part=status", htmx=True, diagnostics=True),
    ],
    "job_clone": [Call("302 404 403 200 404 403 403", ids=JOB)],
    "job_record": [Call(READ_VISION, ids=JOB, diagnostics=True)],
    # Logs: members and operators; the matrix's cluster cannot be read (its kubeconfig is "x"),
    # so the page and its fragment say so, and the download answers 502.
    "job_logs": [
        Call(READ_LOGS, ids=JOB),
        Call(READ_LOGS, ids=JOB, query=f"?pod={POD}&part=log", htmx=True),
        Call("302 404 403 200 404 200 200", ids=JOB, query=f"?pod={POD}&previous=1"),
    ],
    "job_logs_download": [
        Call("302 404 403 502 404 502 502", ids=JOB, query=f"?pod={POD}"),
        Call("302 404 403 404 404 404 404", ids=JOB, query="?pod=someone-else-0"),
    ],
    # Metrics: the page as the Job's; its series (GET /api/v1/jobs/{id}/series) with the
    # session too, JSON 401 without one (tests/jobs/test_series_api.py: with a token).
    "job_metrics": [Call(READ_VISION, ids=JOB), Call(READ_VISION, ids=JOB, query="?runs=all")],
    "api-job-series": [
        Call("401 404 200 200 404 200 200", ids={"job_id": "job"}),
        Call("401 404 200 200 404 200 200", ids={"job_id": "job"}, query="?x=step&run=all"),
    ],
    "job_stop": [Call(OPERATE_JOB, "post", ids=JOB), Call(NOT_GET, ids=JOB)],
    "job_resume": [Call(OPERATE_JOB, "post", ids=JOB), Call(NOT_GET, ids=JOB)],
    "job_delete": [
        Call(OPERATE_JOB, "post", ids=JOB, data={"confirm": "ppo-secret"}),
        Call(NOT_GET, ids=JOB),
    ],
    "task_workers": [
        Call(READ_VISION, ids=TASK, diagnostics=True),
        Call(READ_VISION, ids=TASK, htmx=True, diagnostics=True),
    ],
    "workflows": [Call(EVERYONE), Call(EVERYONE, htmx=True)],
    "workflow": [
        Call(READ_VISION, ids=WORKFLOW, diagnostics=True),
        Call(READ_VISION, ids=WORKFLOW, htmx=True, diagnostics=True),
    ],
    "clusters": [Call(EVERYONE), Call(EVERYONE, htmx=True)],
    "nodes": [Call(EVERYONE), Call(EVERYONE, htmx=True)],
    "addons": [Call(EVERYONE), Call(EVERYONE, htmx=True)],
    "projects": [
        Call(EVERYONE),
        Call("302 403 403 403 403 302 302", "post", data={"name": "robotics"}),
    ],
    "project": [Call(READ_VISION, ids=PROJECT)],
    "project_member_add": [
        Call(CHANGE_VISION, "post", ids=PROJECT, data={"username": "nina", "role": "viewer"}),
        Call(NOT_GET, ids=PROJECT),
    ],
    "project_member_role": [
        Call(CHANGE_VISION, "post", ids=BOB, data={"role": "member"}),
        Call(NOT_GET, ids=BOB),
    ],
    "project_member_remove": [
        Call(CHANGE_VISION, "post", ids=BOB),
        Call(NOT_GET, ids=BOB),
    ],
    "project_clusters": [
        Call(CHANGE_VISION, "post", ids=PROJECT, data={"clusters": []}),
        Call(NOT_GET, ids=PROJECT),
    ],
    # Node actions (issue 36): operators only, before any lookup. The matrix's cluster cannot
    # be read: the node page says so (200), a form's refusal comes back as a message (302).
    "node": [Call(OPERATORS, ids=NODE)],
    "cluster_new": [
        Call(OPERATORS),
        Call("302 403 403 403 403 422 422", "post", data={"name": "gpu-z", "server": ""}),
    ],
    "cluster": [Call(OPERATORS, ids=CLUSTER)],
    "addon_new": [
        Call(OPERATORS, ids={"cluster": "=gpu-a"}),
        Call(
            "302 403 403 403 403 422 422",
            "post",
            ids={"cluster": "=gpu-a"},
            data={"name": "BAD", "version": "1", "manifest": "x"},
        ),
    ],
    "addon": [Call(OPERATORS, ids=ADDON), Call(OPERATORS, ids=ADDON, htmx=True)],
    "addon_change": [Call(ACT, "post", ids=ADDON), Call(NOT_GET, ids=ADDON)],
    "addon_rollback": [Call(ACT, "post", ids=ADDON), Call(NOT_GET, ids=ADDON)],
    "cluster_test": [Call(ACT, "post", ids=CLUSTER), Call(NOT_GET, ids=CLUSTER)],
    "cluster_rotate": [Call(ACT, "post", ids=CLUSTER), Call(NOT_GET, ids=CLUSTER)],
    "cluster_retire": [Call(ACT, "post", ids=CLUSTER), Call(NOT_GET, ids=CLUSTER)],
    "node_cordon": [Call(ACT, "post", ids=NODE, data={"reason": "disk"}), Call(NOT_GET, ids=NODE)],
    "node_uncordon": [Call(ACT, "post", ids=NODE), Call(NOT_GET, ids=NODE)],
    "node_drain": [Call(ACT, "post", ids=NODE), Call(NOT_GET, ids=NODE)],
    "drain": [Call(OPERATORS, ids=DRAIN), Call(OPERATORS, ids=DRAIN, htmx=True)],
    "drain_stop": [Call(ACT, "post", ids=DRAIN), Call(NOT_GET, ids=DRAIN)],
    "project_idle_policy": [
        Call(CHANGE_VISION, "post", ids=PROJECT, data={"stop_when_idle_minutes": "30"}),
        Call(NOT_GET, ids=PROJECT),
    ],
    "api_tokens": [Call(EVERYONE), Call(EVERYONE, "post", data={"name": "ci"})],
    "audit": [Call(OPERATORS), Call(OPERATORS, query="?format=csv")],
    "usage": [Call(EVERYONE), Call(EVERYONE, query="?format=csv")],  # rows scoped per reader
    "api_token_revoke": [
        Call("302 404 404 302 404 404 404", "post", ids={"pk": "alice_token"}),
        Call(NOT_GET, ids={"pk": "alice_token"}),
    ],
    # Notifications (notify.views): a reader's own channels and subscriptions; "Notify me"
    # for who reads the Job. alice's channel sends to an address the guard refuses (no
    # request leaves the test), so her test send answers at once.
    "notifications": [Call(EVERYONE)],
    "notify_channel_add": [
        Call("302 302 302 302 302 302 302", "post", data=NEW_CHANNEL | {"target": PUBLIC_URL}),
        Call(NOT_GET),
    ],
    "notify_channel_test": [
        Call(ALICES, "post", ids=ALICE_CHANNEL),
        Call(NOT_GET, ids=ALICE_CHANNEL),
    ],
    "notify_channel_rotate": [
        Call(ALICES, "post", ids=ALICE_CHANNEL, data={"secret": "whsec_" + "A" * 44}),
        Call(NOT_GET, ids=ALICE_CHANNEL),
    ],
    "notify_channel_delete": [
        Call(ALICES, "post", ids=ALICE_CHANNEL),
        Call(NOT_GET, ids=ALICE_CHANNEL),
    ],
    "notify_subscription_add": [
        Call("302 200 200 200 200 200 200", "post", data={"scope": "mine"}),  # errors shown
        Call(NOT_GET),
    ],
    "notify_subscription_delete": [
        Call(ALICES, "post", ids=ALICE_SUBSCRIPTION),
        Call(NOT_GET, ids=ALICE_SUBSCRIPTION),
    ],
    "job_notify": [Call("302 404 302 302 404 302 302", "post", ids=JOB), Call(NOT_GET, ids=JOB)],
    # The API's routes that its OpenAPI document does not describe.
    "api:openapi-json": [Call("200 200 200 200 200 200 200")],
    "api:openapi-view": [Call("302 200 200 200 200 200 200")],  # the docs page needs a login
    "api:api-root": [Call("404 404 404 404 404 404 404")],
    "api:unknown_endpoint": [Call("404 404 404 404 404 404 404", ids={"rest": "=nope"})],
}

# The API's operations, by method and path as the OpenAPI document lists them; a bearer token
# for each reader but the anonymous one.
READ_API_JOB = "401 404 200 200 404 200 200"
ALICES_API = "401 404 404 200 404 404 404"
OPERATE_API_JOB = "401 404 403 {ok} 404 403 403"
OPERATOR_API = "401 403 403 403 403 {ok} {ok}"
API_NODE = {"name": "=gpu-a", "node": "=node-a"}
API: dict[str, Call] = {
    "GET /api/v1/clusters": Call("401 200 200 200 200 200 200"),
    "GET /api/v1/nodes": Call("401 200 200 200 200 200 200"),
    "GET /api/v1/addons": Call("401 200 200 200 200 200 200"),
    "GET /api/v1/jobs": Call("401 200 200 200 200 200 200", diagnostics=True),
    "POST /api/v1/jobs": Call("401 422 403 201 422 403 403", "post", data=SPEC),
    "GET /api/v1/jobs/{job_id}": Call(READ_API_JOB, diagnostics=True),
    # A plain view the document describes too (jobs/api/series_doc.py); with the session in PAGES.
    "GET /api/v1/jobs/{job_id}/series": Call(READ_API_JOB),
    "DELETE /api/v1/jobs/{job_id}": Call(
        OPERATE_API_JOB.format(ok=202), "delete", query="?confirm=ppo-secret"
    ),
    "POST /api/v1/jobs/{job_id}/stop": Call(OPERATE_API_JOB.format(ok=200), "post"),
    "POST /api/v1/jobs/{job_id}/resume": Call(OPERATE_API_JOB.format(ok=409), "post"),
    "POST /api/v1/jobs/{job_id}/clone": Call(
        OPERATE_API_JOB.format(ok=201), "post", data={"name": "ppo-copy"}
    ),
    "GET /api/v1/jobs/{job_id}/operations": Call(READ_API_JOB),
    # The matrix's cluster cannot be read: 503 for who may read logs; `previous` is 403 for
    # alice (no diagnostics), checked before the cluster is asked.
    "GET /api/v1/jobs/{job_id}/workers/{pod}/logs": Call("401 404 403 503 404 503 503"),
    # A Job's pods post with its signal token (tests/jobs/test_signals.py); a user's is refused.
    "POST /api/v1/jobs/{job_id}/signals": Call(
        "401 401 401 401 401 401 401",
        "post",
        data={"kind": "heartbeat", "pod": "p", "uid": "u", "seq": 1},
    ),
    "GET /api/v1/workflows": Call("401 200 200 200 200 200 200"),
    "POST /api/v1/workflows": Call(
        "401 422 403 201 422 403 403",
        "post",
        data={"name": "wf-new", "project": "vision", "jobs": [{**SPEC, "project": None}]},
    ),
    "GET /api/v1/workflows/{workflow_id}": Call(READ_API_JOB),
    # Notifications (notify.api): each reader's own channels and subscriptions.
    "GET /api/v1/channels": Call("401 200 200 200 200 200 200"),
    "POST /api/v1/channels": Call(
        "401 201 201 201 201 201 201", "post", data=NEW_CHANNEL | {"url": PUBLIC_URL}
    ),
    "GET /api/v1/channels/{channel_id}": Call(ALICES_API),
    "DELETE /api/v1/channels/{channel_id}": Call(ALICES_API, "delete"),
    "POST /api/v1/channels/{channel_id}/test": Call(ALICES_API, "post"),
    "GET /api/v1/channels/{channel_id}/deliveries": Call(ALICES_API),
    "GET /api/v1/subscriptions": Call("401 200 200 200 200 200 200"),
    "POST /api/v1/subscriptions": Call(
        "401 422 422 422 422 422 422", "post", data={"scope": {"kind": "mine"}}
    ),
    "DELETE /api/v1/subscriptions/{subscription_id}": Call(ALICES_API, "delete"),
    # Operators' actions (issue 36): 403 to anyone else; the matrix's cluster cannot be read or
    # written, so the actions that reach it answer 502.
    "POST /api/v1/clusters/{name}/nodes/{node}/cordon": Call(
        OPERATOR_API.format(ok=502), "post", ids=API_NODE, data={"reason": "disk"}
    ),
    "POST /api/v1/clusters/{name}/nodes/{node}/uncordon": Call(
        OPERATOR_API.format(ok=502), "post", ids=API_NODE
    ),
    "GET /api/v1/clusters/{name}/nodes/{node}/drain-preview": Call(
        OPERATOR_API.format(ok=502), ids=API_NODE
    ),
    "POST /api/v1/clusters/{name}/nodes/{node}/drain": Call(
        OPERATOR_API.format(ok=502), "post", ids=API_NODE, data={}
    ),
    "GET /api/v1/drains/{drain_id}": Call(OPERATOR_API.format(ok=200), ids={"drain_id": "drain"}),
    # The matrix's cluster has an unusable kubeconfig ("x") and a Running Job.
    "POST /api/v1/clusters": Call(OPERATOR_API.format(ok=422), "post", data={}),
    "POST /api/v1/clusters/{name}/test": Call(
        OPERATOR_API.format(ok=422), "post", ids={"name": "=gpu-a"}
    ),
    "POST /api/v1/clusters/{name}/credentials": Call(
        OPERATOR_API.format(ok=422), "post", ids={"name": "=gpu-a"}, data={}
    ),
    "GET /api/v1/clusters/{name}/addons": Call(OPERATOR_API.format(ok=200), ids=CLUSTER),
    "POST /api/v1/clusters/{name}/addons": Call(
        OPERATOR_API.format(ok=422), "post", ids=CLUSTER, data={"name": "BAD"}
    ),
    "GET /api/v1/clusters/{name}/addons/{addon}": Call(
        OPERATOR_API.format(ok=404), ids={**CLUSTER, "addon": "=nope"}
    ),
    "PATCH /api/v1/clusters/{name}/addons/{addon}": Call(
        OPERATOR_API.format(ok=404), "patch", ids={**CLUSTER, "addon": "=nope"}, data={}
    ),
    "POST /api/v1/clusters/{name}/addons/{addon}/rollback": Call(
        OPERATOR_API.format(ok=404), "post", ids={**CLUSTER, "addon": "=nope"}
    ),
    "DELETE /api/v1/clusters/{name}": Call(
        OPERATOR_API.format(ok=409), "delete", ids={"name": "=gpu-a"}
    ),
    "POST /api/v1/drains/{drain_id}/stop": Call(
        OPERATOR_API.format(ok=200), "post", ids={"drain_id": "drain"}
    ),
    # Everyone reads usage; the rows are those of the reader's projects (tests/usage/test_api.py).
    "GET /api/v1/usage": Call("401 200 200 200 200 200 200"),
    "GET /api/v1/usage.csv": Call("401 200 200 200 200 200 200"),
}


# --- the routes -----------------------------------------------------------------------------


def _names(patterns: list[Any], namespace: str = "") -> Iterator[str]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = ":".join(part for part in (namespace, pattern.namespace or "") if part)
            yield from _names(pattern.url_patterns, inner)
        elif isinstance(pattern, URLPattern) and pattern.name:
            yield f"{namespace}:{pattern.name}" if namespace else pattern.name


def url_names() -> set[str]:
    """Every named route but the admin's (test_the_admin_is_for_staff covers those) and the
    API operations the OpenAPI document lists (API covers those). The URLconf is loaded first:
    it imports the modules that add their operations to the API."""
    patterns = get_resolver().url_patterns
    described = {  # ninja names an operation's route by its function
        operation.view_func.__name__
        for _prefix, router in api._routers
        for path_view in router.path_operations.values()
        for operation in path_view.operations
        if operation.include_in_schema
    }
    return {
        name
        for name in _names(patterns)
        if not name.startswith("admin:") and name.removeprefix("api:") not in described
    }


def api_operations() -> set[str]:
    paths = api.get_openapi_schema()["paths"]
    return {f"{method.upper()} {path}" for path, methods in paths.items() for method in methods}


def test_every_route_has_an_entry() -> None:
    """A URL added to the URLconf or an operation added to the API fails here until the matrix
    says who may use it."""
    assert url_names() == set(PAGES)
    assert api_operations() == set(API)


# --- the world ------------------------------------------------------------------------------


@dataclass
class World:
    users: dict[str, User]
    tokens: dict[str, str]
    objects: dict[str, int]


@pytest.fixture
def world(db: None) -> World:
    """vision (bob viewer, alice member) with a crash-looping Job in a Workflow; speech
    (charlie member); nina in no project; olga operator; root superuser."""
    vision, speech = open_project("vision"), open_project("speech")
    cluster = open_cluster("gpu-a", kubeconfig="x")
    users = {name: User.objects.create_user(name, password="password")
             for name in ("nina", "bob", "alice", "charlie", "olga")}  # fmt: skip
    users["root"] = User.objects.create_superuser("root", password="password")
    make_operator(users["olga"])
    bob = Membership.objects.create(user=users["bob"], project=vision, role="viewer")
    Membership.objects.create(user=users["alice"], project=vision)
    Membership.objects.create(user=users["charlie"], project=speech)
    job, task, workflow = _crashing_job(vision, cluster, users["alice"])
    tokens = {name: ApiToken.issue(user, name="matrix")[1] for name, user in users.items()}
    Node.objects.create(cluster=cluster, name="node-a", phase="Online", observed_at=job.created_at)
    Addon.objects.create(cluster=cluster, name="metrics", managed=True)
    drain = DrainRun.objects.create(cluster=cluster, node_name="node-b", requested_by_name="olga")
    objects = {
        "drain": drain.pk,
        "job": job.pk, "task": task.pk, "workflow": workflow.pk, "project": vision.pk,
        "bob_membership": bob.pk,
        "alice_token": ApiToken.objects.filter(user=users["alice"]).get().pk,
        **_alices_notifications(users["alice"]),
    }  # fmt: skip
    return World(users, tokens, objects)


def _alices_notifications(alice: User) -> dict[str, int]:
    """A channel to an address the guard refuses (its test send makes no request), and a
    subscription of alice's Jobs with it."""
    channel = Channel.objects.create(
        owner=alice, name="alices-hook", kind="webhook", target="https://127.0.0.1:8159/hook"
    )
    subscription = Subscription.objects.create(
        user=alice, channel=channel, scope="mine", events=["job.failed"]
    )
    return {"alice_channel": channel.pk, "alice_subscription": subscription.pk}


def _crashing_job(project: Project, cluster: Cluster, owner: User) -> tuple[Job, Task, Workflow]:
    workflow = Workflow.objects.create(project=project, name="wf-secret")
    message = encode(Message("task.with_problem", {"progress": "1/2", "problem": CRASH}))
    job = Job.objects.create(
        project=project, cluster=cluster, name="ppo-secret", namespace="default", owner=owner,
        spec={"tasks": [{"role": "actor", "image": "rlinf:1"}]}, phase=JobPhase.RUNNING,
        message=message, workflow=workflow,
    )  # fmt: skip
    task = Task.objects.create(
        job=job, role="actor", template={}, phase=TaskPhase.RUNNING, desired_replicas=2,
        ready_replicas=1, message=message,
    )  # fmt: skip
    now = job.created_at
    Worker.objects.create(
        task=task, pod_name="ppo-secret-actor-0", pod_uid="uid-crash-0", phase=PodPhase.RUNNING,
        restart_count=33, reason="CrashLoopBackOff", last_reported_at=now,
    )  # fmt: skip
    PodInstance.objects.create(
        task=task, uid="uid-crash-0", pod_name="ppo-secret-actor-0", phase=PodPhase.RUNNING,
        restart_count=33, last_exit_code=3, termination_reason="Error", first_seen_at=now,
        last_seen_at=now,
    )  # fmt: skip
    return job, task, workflow


def _value(world: World, ref: str) -> str:
    """`=text` is the text itself; anything else names an object of the world."""
    return ref[1:] if ref.startswith("=") else str(world.objects[ref])


def _ask(world: World, reader: str, call: Call, url: str, api_call: bool) -> Any:
    """The answer to one request, in a savepoint rolled back afterwards."""
    client = Client()
    headers = {"HX-Request": "true"} if call.htmx else {}
    if api_call and reader != "anonymous":
        headers["Authorization"] = f"Bearer {world.tokens[reader]}"
    elif reader != "anonymous":
        client.force_login(world.users[reader])
    kwargs: dict[str, Any] = {"headers": headers}
    if call.data is not None:
        kwargs |= {"data": json.dumps(call.data), "content_type": "application/json"} \
            if api_call else {"data": call.data}  # fmt: skip
    with transaction.atomic():
        response = getattr(client, call.method)(url + call.query, **kwargs)
        transaction.set_rollback(True)
    return response


def _check(world: World, call: Call, url: str, api_call: bool, sees: set[str]) -> None:
    for reader, expected in call.statuses().items():
        response = _ask(world, reader, call, url, api_call)
        where = f"{call.method.upper()} {url}{call.query} as {reader}"
        # A poll whose session ended sends the whole page to the login form (HX-Redirect).
        status = 302 if response.get("HX-Redirect") else response.status_code
        assert status == expected, where
        body = b"".join(response.streaming_content) if response.streaming else response.content
        text = body.decode()
        if reader not in SEES_VISION and response.status_code < 300:
            assert not [secret for secret in SECRETS if secret in text], f"leak: {where}"
        if response.status_code == 200:
            shown = bool(DIAGNOSTICS.search(text))
            assert shown == (call.diagnostics and reader in sees), f"diagnostics: {where}"


# --- the matrix -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PAGES))
def test_page(world: World, name: str) -> None:
    for call in PAGES[name]:
        ids = {key: _value(world, ref) for key, ref in call.ids.items()}
        _check(world, call, reverse(name, kwargs=ids), False, SEES_DIAGNOSTICS)


@pytest.mark.parametrize("operation", sorted(API))
def test_api(world: World, operation: str) -> None:
    call = API[operation]
    path = operation.split(" ", 1)[1]
    ids = {
        "job_id": world.objects["job"], "workflow_id": world.objects["workflow"], "pod": POD,
        "channel_id": world.objects["alice_channel"],
        "subscription_id": world.objects["alice_subscription"],
    }  # fmt: skip
    ids |= {key: _value(world, ref) for key, ref in call.ids.items()}
    _check(world, call, path.format(**ids), True, SEES_DIAGNOSTICS)


def test_the_members_setting_opens_diagnostics_to_members_only(world: World, settings: Any) -> None:
    """TRAINYARD_DIAGNOSTICS=members: alice, a member of vision, sees them; bob, its viewer,
    does not; operators still do."""
    settings.TRAINYARD_DIAGNOSTICS = "members"
    sees = SEES_DIAGNOSTICS | {"alice"}
    for name in ("job", "task_workers", "job_record", "jobs", "workflow", "dashboard"):
        for call in PAGES[name]:
            ids = {key: _value(world, ref) for key, ref in call.ids.items()}
            _check(world, call, reverse(name, kwargs=ids), False, sees)
    for operation in ("GET /api/v1/jobs", "GET /api/v1/jobs/{job_id}"):
        url = operation.split(" ", 1)[1].format(job_id=world.objects["job"])
        _check(world, API[operation], url, True, sees)


def test_the_admin_is_for_staff(world: World) -> None:
    """Every admin page (its index and each model's list) redirects anyone but staff to the
    admin's login: operators are not staff; root, a superuser, is (and the admin shows the
    stored facts, diagnostics included)."""
    urls = [reverse("admin:index")] + [
        reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for model in admin.site._registry
    ]
    call = Call("302 302 302 302 302 302 200")
    for url in urls:
        with_facts = "/workers/" in url
        _check(world, replace(call, diagnostics=with_facts), url, False, {"root"})
