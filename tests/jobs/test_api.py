"""The JSON API: bearer tokens, project scoping, the operations, and JSON errors for bad input.

Every endpoint is tried as anonymous (401), as an outsider (charlie: 404 for another project's
job), as a viewer (bob, made a viewer of vision: 403 on writes) and as a member (alice).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
import time_machine
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from console.models import Addon, ApiToken, Cluster, Membership, Node
from jobs.choices import JobPhase, PodPhase
from jobs.models import Job, Operation, Workflow
from jobs.operations import create_job, create_workflow
from jobs.spec import parse_job_spec, parse_workflow_spec
from tests.jobs.test_spec import job_data, workflow_data
from workers.models import Worker

API = "/api/v1"
NO_MESSAGE: dict[str, object] = {"message": "", "message_code": None, "message_params": {}}


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def viewer(bob: User) -> User:
    """bob, a viewer (not a member) of vision."""
    Membership.objects.filter(user=bob).update(role=Membership.Role.VIEWER)
    return bob


@pytest.fixture
def job(alice: User, cluster: Cluster) -> Job:
    job = create_job(alice, parse_job_spec(job_data(), alice))
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.RUNNING)
    job.refresh_from_db()
    return job


@pytest.fixture
def delay() -> Iterator[mock.MagicMock]:
    with mock.patch("console.tasks.reconcile_job.delay") as patched:
        yield patched


def token(user: User) -> str:
    return ApiToken.issue(user, name="test")[1]


def call(
    method: str, path: str, user: User | None = None, body: Any = None, raw: str | None = None
) -> Any:
    headers = {"Authorization": f"Bearer {token(user)}"} if user else {}
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    kwargs = {"data": data, "content_type": "application/json"} if data is not None else {}
    client = Client(enforce_csrf_checks=True)  # API clients send no CSRF token
    response = getattr(client, method)(f"{API}{path}", headers=headers, **kwargs)
    assert response["Content-Type"].startswith("application/json"), response.content
    return response


# --- authentication ------------------------------------------------------------------------


@pytest.mark.parametrize("header", [None, "Bearer nope", "Token abc", "Bearer", "Basic YTpi"])
def test_it_answers_401_without_a_valid_token(db: None, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    response = Client().get(f"{API}/jobs", headers=headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert "Bearer" in response.json()["message"]


def test_it_refuses_the_token_of_an_inactive_user(alice: User) -> None:
    plain = token(alice)
    User.objects.filter(pk=alice.pk).update(is_active=False)
    assert (
        Client().get(f"{API}/jobs", headers={"Authorization": f"Bearer {plain}"}).status_code == 401
    )


def test_it_records_token_use_at_most_once_a_minute(alice: User) -> None:
    record, plain = ApiToken.issue(alice)
    headers = {"Authorization": f"Bearer {plain}"}
    with time_machine.travel("2026-03-01 10:00:00Z", tick=False):
        Client().get(f"{API}/jobs", headers=headers)
        first = ApiToken.objects.get(pk=record.pk).last_used_at
        assert first == timezone.now()
    with time_machine.travel("2026-03-01 10:00:59Z", tick=False):
        with CaptureQueriesContext(connection) as queries:
            Client().get(f"{API}/jobs", headers=headers)
        assert not any(q["sql"].startswith("UPDATE") for q in queries.captured_queries)
        assert ApiToken.objects.get(pk=record.pk).last_used_at == first
    with time_machine.travel("2026-03-01 10:01:01Z", tick=False):
        Client().get(f"{API}/jobs", headers=headers)
        assert ApiToken.objects.get(pk=record.pk).last_used_at == timezone.now()


# --- the access matrix on one job ----------------------------------------------------------

JOB_ENDPOINTS = [
    ("get", "/jobs/{id}", None, 200, False),
    ("get", "/jobs/{id}/operations", None, 200, False),
    ("post", "/jobs/{id}/stop", None, 200, True),
    ("post", "/jobs/{id}/resume", None, 409, True),  # a Running job cannot be resumed
    ("post", "/jobs/{id}/clone", {"name": "ppo-math-2"}, 201, True),
    ("delete", "/jobs/{id}?confirm=ppo-math", None, 202, True),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "write"), JOB_ENDPOINTS)
def test_job_endpoints_are_scoped_by_project(
    job: Job,
    charlie: User,
    viewer: User,
    alice: User,
    delay: mock.MagicMock,
    method: str,
    path: str,
    body: Any,
    status: int,
    write: bool,
) -> None:
    url = path.format(id=job.pk)
    assert call(method, url, None, body).status_code == 401
    assert call(method, url, charlie, body).status_code == 404
    assert call(method, url, viewer, body).status_code == (403 if write else 200)
    response = call(method, url, alice, body)
    assert response.status_code == status, response.json()
    assert "message" in response.json() or status < 400


COLLECTIONS = ["/clusters", "/nodes", "/addons", "/jobs", "/workflows"]


@pytest.mark.parametrize("path", COLLECTIONS)
def test_collections_need_a_token(db: None, path: str) -> None:
    assert call("get", path).status_code == 401


def test_an_outsider_lists_none_of_the_projects_jobs(job: Job, charlie: User) -> None:
    assert call("get", "/jobs", charlie).json() == {
        "count": 0,
        "next": None,
        "previous": None,
        "results": [],
    }


def test_a_viewer_lists_and_reads_jobs(job: Job, viewer: User) -> None:
    assert call("get", "/jobs", viewer).json()["count"] == 1


# --- reading -------------------------------------------------------------------------------


def test_job_detail_shows_tasks_and_workers(job: Job, alice: User, olga: User) -> None:
    """alice, a member, gets the restart count as null (spec §Pod and Worker status: for
    authorised operators; jobs.diagnostics); olga, an operator, gets it."""
    now = timezone.now()
    head = job.tasks.get(role="head")
    Worker.objects.create(
        task=head,
        pod_name="ppo-math-head-0",
        node_name="gpu-node-1",
        ip="10.0.0.7",
        phase=PodPhase.RUNNING,
        ready=True,
        restart_count=2,
        reason="",
        last_reported_at=now,
    )
    body = call("get", f"/jobs/{job.pk}", alice).json()
    assert {k: body[k] for k in ("id", "name", "project", "cluster", "namespace", "phase")} == {
        "id": job.pk,
        "name": "ppo-math",
        "project": "vision",
        "cluster": "gpu-a",
        "namespace": "default",
        "phase": "Running",
    }
    assert (body["stopped"], body["run"], body["allowed_actions"]) == (
        False,
        1,
        ["stop", "clone", "delete"],
    )
    assert set(body) >= {"message", "created_at", "started_at", "finished_at", "observed_at"}
    task = body["tasks"][0]
    keys = ("name", "role", "kind", "phase", "desired_replicas", "workload_replicas")
    assert {k: task[k] for k in keys} == {
        "name": "ppo-math-head",
        "role": "head",
        "kind": "StatefulSet",
        "phase": "Pending",
        "desired_replicas": 1,
        "workload_replicas": None,  # spec §Task status: no workload observed yet
    }
    assert task["workers"] == [
        {
            "pod_name": "ppo-math-head-0",
            "node": "gpu-node-1",
            "ip": "10.0.0.7",
            "phase": "Running",
            "ready": True,
            "restart_count": None,
            "reason": "",
            "last_reported_at": now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        }
    ]
    (worker,) = call("get", f"/jobs/{job.pk}", olga).json()["tasks"][0]["workers"]
    assert worker["restart_count"] == 2


def test_job_list_filters_and_pages(alice: User, cluster: Cluster) -> None:
    for index in range(5):
        create_job(alice, parse_job_spec(job_data(name=f"job-{index}"), alice))
    Job.objects.filter(name="job-0").update(phase=JobPhase.FAILED)
    page = call("get", "/jobs?limit=2&offset=2", alice).json()
    assert (page["count"], [job["name"] for job in page["results"]]) == (5, ["job-2", "job-1"])
    assert page["next"].endswith("/api/v1/jobs?limit=2&offset=4")
    assert page["previous"].endswith("/api/v1/jobs?limit=2&offset=0")
    assert call("get", "/jobs?offset=4&limit=2", alice).json()["next"] is None
    assert call("get", "/jobs?offset=50", alice).json()["results"] == []
    failed = call("get", "/jobs?phase=Failed", alice).json()
    assert [job["name"] for job in failed["results"]] == ["job-0"]
    assert call("get", "/jobs?cluster=gpu-b", alice).json()["count"] == 0
    assert call("get", "/jobs?project=vision&cluster=gpu-a", alice).json()["count"] == 5


def _jobs_with_workers(user: User, count: int, offset: int) -> None:
    now = timezone.now()
    for index in range(offset, offset + count):
        job = create_job(user, parse_job_spec(job_data(name=f"job-{index}"), user))
        for task in job.tasks.all():
            for replica in range(2):
                Worker.objects.create(
                    task=task,
                    pod_name=f"{task.name}-{replica}",
                    phase=PodPhase.RUNNING,
                    last_reported_at=now,
                )


def test_the_job_list_query_count_does_not_grow_with_the_page(
    alice: User, cluster: Cluster
) -> None:
    plain = token(alice)

    def queries_for(limit: int) -> int:
        with CaptureQueriesContext(connection) as queries:
            response = Client().get(
                f"{API}/jobs?limit={limit}", headers={"Authorization": f"Bearer {plain}"}
            )
        assert len(response.json()["results"]) == limit
        return len(queries)

    _jobs_with_workers(alice, 2, 0)
    queries_for(2)  # the token's first use is recorded once; then reads write nothing
    small = queries_for(2)
    _jobs_with_workers(alice, 18, 2)
    assert queries_for(20) == small
    # Two read the reader's permissions (jobs.access.is_operator), one the address's recent
    # invalid tokens (console.ratelimit), one the runs' failures (failures.Finding), three the
    # Jobs' `usage` (usage.report.prefetch: totals, open intervals, measured utilisation).
    assert small <= 12


def test_clusters_nodes_and_addons(alice: User, olga: User, cluster: Cluster) -> None:
    """alice sees the clusters her project may use and their nodes; olga, an operator, all."""
    now = timezone.now()
    Node.objects.create(
        cluster=cluster, name="n1", phase=Node.Phase.ONLINE, gpu_capacity=8, observed_at=now
    )
    Addon.objects.create(cluster=cluster, name="nvidia-device-plugin", desired_version="0.17")
    other = Cluster.objects.create(name="gpu-b", kubeconfig="x")
    Node.objects.create(cluster=other, name="n2", phase=Node.Phase.OFFLINE, observed_at=now)
    Addon.objects.create(cluster=other, name="kuberay-operator")
    gpu_a = {
        "name": "gpu-a",
        "reachable": False,
        "insecure": False,
        "insecure_since": None,
        "last_synced_at": None,
        **NO_MESSAGE,
    }
    gpu_b = {
        "name": "gpu-b",
        "reachable": False,
        "insecure": False,
        "insecure_since": None,
        "last_synced_at": None,
        **NO_MESSAGE,
    }
    assert call("get", "/clusters", alice).json() == [gpu_a]
    assert call("get", "/clusters", olga).json() == [gpu_a, gpu_b]
    nodes = call("get", "/nodes?cluster=gpu-a", alice).json()
    assert [(n["cluster"], n["name"], n["phase"], n["gpu_capacity"]) for n in nodes] == [
        ("gpu-a", "n1", "Online", 8)
    ]
    assert call("get", "/nodes?cluster=gpu-b", alice).json() == []
    assert len(call("get", "/nodes", alice).json()) == 1
    assert len(call("get", "/nodes", olga).json()) == 2
    assert len(call("get", "/addons", olga).json()) == 2
    (addon,) = call("get", "/addons", alice).json()
    assert (addon["name"], addon["phase"], addon["desired_version"]) == (
        "nvidia-device-plugin",
        "Pending",
        "0.17",
    )


def test_operations_history(job: Job, alice: User) -> None:
    call("post", f"/jobs/{job.pk}/stop", alice)
    call("post", f"/jobs/{job.pk}/stop", alice)
    history = call("get", f"/jobs/{job.pk}/operations", alice).json()
    assert [(o["action"], o["result"], o["user"]) for o in history] == [
        ("stop", "refused", "alice"),
        ("stop", "accepted", "alice"),
        ("create", "accepted", "alice"),
    ]
    assert history[0]["message"] == "This Job is already Stopped."


# --- writing -------------------------------------------------------------------------------


def test_create_a_job(alice: User, cluster: Cluster, delay: mock.MagicMock,
                      django_capture_on_commit_callbacks: Any) -> None:  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        response = call("post", "/jobs", alice, job_data())
    assert response.status_code == 201
    body = response.json()
    assert (body["name"], body["phase"], body["project"], len(body["tasks"])) == (
        "ppo-math",
        "Pending",
        "vision",
        2,
    )
    delay.assert_called_once_with(body["id"])


def test_a_viewer_cannot_create(viewer: User, cluster: Cluster) -> None:
    assert call("post", "/jobs", viewer, job_data()).status_code == 403
    assert call("post", "/jobs", viewer, job_data(project="vision")).status_code == 403
    assert call("post", "/workflows", viewer, workflow_data()).status_code == 403
    assert not Job.objects.exists()


def test_an_outsider_cannot_create_in_another_project(charlie: User, cluster: Cluster) -> None:
    response = call("post", "/jobs", charlie, job_data(project="vision"))
    assert response.status_code == 422
    assert list(response.json()["errors"]) == ["project"]


def test_stop_then_resume(
    job: Job, alice: User, delay: mock.MagicMock, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        stopped = call("post", f"/jobs/{job.pk}/stop", alice).json()
    assert (stopped["phase"], stopped["stopped"], stopped["allowed_actions"]) == (
        "Stopped",
        True,
        ["resume", "clone", "delete"],
    )
    with django_capture_on_commit_callbacks(execute=True):
        resumed = call("post", f"/jobs/{job.pk}/resume", alice).json()
    assert (resumed["phase"], resumed["stopped"], resumed["run"]) == ("Pending", False, 2)
    assert delay.call_count == 2


def test_a_refused_operation_is_409_and_schedules_nothing(
    job: Job, alice: User, delay: mock.MagicMock, django_capture_on_commit_callbacks: Any
) -> None:
    """Spec §Job status: no stop or resume on a Succeeded Job."""
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.SUCCEEDED)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = call("post", f"/jobs/{job.pk}/stop", alice)
    assert response.status_code == 409
    assert response.json() == {
        "message": "A Succeeded Job is terminal: it cannot be stopped. Clone it to run it again."
    }
    assert callbacks == []
    delay.assert_not_called()


def test_clone_with_overrides(job: Job, alice: User) -> None:
    body = {"name": "ppo-math-2", "overrides": {"tasks": [{"role": "worker", "replicas": 8}]}}
    response = call("post", f"/jobs/{job.pk}/clone", alice, body)
    assert response.status_code == 201
    worker = next(t for t in response.json()["tasks"] if t["role"] == "worker")
    assert worker["desired_replicas"] == 8
    assert Job.objects.get(name="ppo-math-2").cloned_from == job


@pytest.mark.parametrize(
    ("body", "paths"),
    [
        ({}, {"name"}),
        ({"name": "ppo-math"}, {"name"}),
        ({"name": "x", "overrides": "big"}, {"overrides"}),
        ({"name": "x", "color": "red"}, {"color"}),
        ({"name": "x", "overrides": {"tasks": [{"role": "head", "replicas": "many"}]}},
         {"tasks.0.replicas"}),
    ],
)  # fmt: skip
def test_clone_reports_bad_input(job: Job, alice: User, body: Any, paths: set[str]) -> None:
    response = call("post", f"/jobs/{job.pk}/clone", alice, body)
    assert response.status_code == 422
    assert set(response.json()["errors"]) == paths


def test_delete_needs_the_name(job: Job, alice: User) -> None:
    response = call("delete", f"/jobs/{job.pk}?confirm=nope", alice)
    assert response.status_code == 422
    assert list(response.json()["errors"]) == ["confirm"]
    assert call("delete", f"/jobs/{job.pk}", alice).status_code == 422
    assert call("delete", f"/jobs/{job.pk}?confirm=ppo-math", alice).status_code == 202
    assert call("get", f"/jobs/{job.pk}", alice).status_code == 404
    assert Operation.objects.filter(job=job, action="delete").count() == 3


def test_workflows(alice: User, charlie: User, viewer: User, cluster: Cluster) -> None:
    response = call("post", "/workflows", alice, workflow_data())
    assert response.status_code == 201, response.json()
    created = response.json()
    assert (created["name"], created["phase"], created["project"]) == (
        "pipeline",
        "Pending",
        "vision",
    )
    assert [(j["name"], j["phase"], j["depends_on"]) for j in created["jobs"]] == [
        ("prepare", "Pending", []),
        ("train", "Pending", ["prepare"]),
        ("evaluate", "Pending", ["train"]),
    ]
    url = f"/workflows/{created['id']}"
    assert call("get", url, alice).json() == created
    assert call("get", url, viewer).status_code == 200
    assert call("get", url, charlie).status_code == 404
    assert call("get", url).status_code == 401
    assert [w["name"] for w in call("get", "/workflows", alice).json()] == ["pipeline"]
    assert call("get", "/workflows", charlie).json() == []


def test_a_cyclic_workflow_is_422(alice: User, cluster: Cluster) -> None:
    data = workflow_data()
    data["jobs"][0]["depends_on"] = ["evaluate"]
    response = call("post", "/workflows", alice, data)
    assert response.status_code == 422
    assert "cycle" in response.json()["errors"]["jobs"]
    assert not Workflow.objects.exists()


def test_a_workflow_lists_the_jobs_it_waits_for(alice: User, cluster: Cluster) -> None:
    workflow = create_workflow(alice, parse_workflow_spec(workflow_data(), alice))
    detail = call("get", f"/workflows/{workflow.pk}", alice).json()
    assert {j["name"]: j["depends_on"] for j in detail["jobs"]}["evaluate"] == ["train"]


# --- bad input never makes a 500 -----------------------------------------------------------

BAD_BODIES = [
    ("{not json", {"body"}),
    ("", {"body"}),
    ("[1, 2]", {"body"}),
    ('"text"', {"body"}),
    ("[" * 60_000, {"body"}),
    (json.dumps(job_data(color="red")), {"color"}),
    (json.dumps(job_data(tasks="head")), {"tasks"}),
    (json.dumps(job_data(name=12)), {"name"}),
    (json.dumps(job_data(tasks=[{"role": "head", "image": "x", "replicas": 10**100}])),
     {"tasks.0.replicas"}),
    (json.dumps(job_data(tasks=[{"role": "head", "image": "x", "resources": {"cpu": 1e400}}])),
     {"tasks.0.resources.cpu"}),
    (json.dumps(job_data(tasks=[{"role": "head", "image": "x", "resources": {"gpu": 2**70}}])),
     {"tasks.0.resources.gpu"}),
    (json.dumps(job_data(tasks=[{"role": "head", "image": ["x"]}])), {"tasks.0.image"}),
    (json.dumps(job_data(tasks=[{"role": "head", "image": "x", "env": {"A": None}}])),
     {"tasks.0.env.A"}),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "paths"), BAD_BODIES)
def test_bad_bodies_are_422_with_field_errors(
    alice: User, cluster: Cluster, raw: str, paths: set[str]
) -> None:
    response = call("post", "/jobs", alice, raw=raw)
    assert response.status_code == 422
    body = response.json()
    assert set(body) == {"message", "errors"}
    assert set(body["errors"]) == paths


@pytest.mark.parametrize(
    "path", ["/jobs/abc", "/jobs/0", "/jobs/-1", "/jobs/1.5", "/jobs/99999999999999999999999",
             "/jobs/12345", "/jobs/abc/stop", "/workflows/abc", "/workflows/777"],
)  # fmt: skip
def test_unknown_or_malformed_ids_are_404(alice: User, path: str) -> None:
    method = "post" if path.endswith("/stop") else "get"
    response = call(method, path, alice)
    assert response.status_code == 404
    assert "message" in response.json()


def test_an_unknown_endpoint_is_a_json_404(db: None) -> None:
    for method in ("get", "post", "delete"):
        response = call(method, "/no/such/thing")
        assert (response.status_code, response.json()) == (
            404,
            {"message": "No such API endpoint."},
        )


def test_a_wrong_method_is_a_json_405(alice: User) -> None:
    response = call("put", "/jobs", alice)
    assert response.status_code == 405
    assert "PUT is not allowed here" in response.json()["message"]
    assert set(response["Allow"].split(", ")) == {"GET", "POST"}


def test_a_body_over_the_upload_limit_is_413(alice: User, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = call("post", "/jobs", alice, raw=json.dumps(job_data(padding="x" * 2000)))
    assert response.status_code == 413
    assert response.json() == {"message": "The request body is too large."}


@pytest.mark.parametrize(
    ("query", "field"),
    [("limit=0", "limit"), ("limit=abc", "limit"), ("limit=100000", "limit"),
     ("offset=-1", "offset"), ("offset=1e999", "offset"), ("phase=Sleeping", "phase")],
)  # fmt: skip
def test_bad_query_parameters_are_422(alice: User, query: str, field: str) -> None:
    response = call("get", f"/jobs?{query}", alice)
    assert response.status_code == 422
    assert list(response.json()["errors"]) == [field]


# --- OpenAPI -------------------------------------------------------------------------------


def test_the_openapi_document_lists_every_endpoint(db: None) -> None:
    response = Client().get(f"{API}/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert {
        "/api/v1/clusters": {"get", "post"},
        "/api/v1/clusters/{name}": {"delete"},
        "/api/v1/clusters/{name}/test": {"post"},
        "/api/v1/clusters/{name}/credentials": {"post"},
        "/api/v1/clusters/{name}/addons": {"get", "post"},
        "/api/v1/clusters/{name}/addons/{addon}": {"get", "patch"},
        "/api/v1/clusters/{name}/addons/{addon}/rollback": {"post"},
        "/api/v1/nodes": {"get"},
        "/api/v1/addons": {"get"},
        "/api/v1/jobs": {"get", "post"},
        "/api/v1/jobs/{job_id}": {"get", "delete"},
        "/api/v1/jobs/{job_id}/stop": {"post"},
        "/api/v1/jobs/{job_id}/resume": {"post"},
        "/api/v1/jobs/{job_id}/clone": {"post"},
        "/api/v1/jobs/{job_id}/operations": {"get"},
        "/api/v1/jobs/{job_id}/workers/{pod}/logs": {"get"},
        "/api/v1/jobs/{job_id}/signals": {"post"},
        "/api/v1/workflows": {"get", "post"},
        "/api/v1/workflows/{workflow_id}": {"get"},
        # Notifications (notify.api, issue 32).
        "/api/v1/channels": {"get", "post"},
        "/api/v1/channels/{channel_id}": {"get", "delete"},
        "/api/v1/channels/{channel_id}/test": {"post"},
        "/api/v1/channels/{channel_id}/deliveries": {"get"},
        "/api/v1/subscriptions": {"get", "post"},
        "/api/v1/subscriptions/{subscription_id}": {"delete"},
        "/api/v1/clusters/{name}/nodes/{node}/cordon": {"post"},
        "/api/v1/clusters/{name}/nodes/{node}/uncordon": {"post"},
        "/api/v1/clusters/{name}/nodes/{node}/drain-preview": {"get"},
        "/api/v1/clusters/{name}/nodes/{node}/drain": {"post"},
        "/api/v1/drains/{drain_id}": {"get"},
        "/api/v1/drains/{drain_id}/stop": {"post"},
        "/api/v1/usage": {"get"},
        "/api/v1/usage.csv": {"get"},
        # The Metrics tab's series (jobs.api.series, issue 35), a plain view described too.
        "/api/v1/jobs/{job_id}/series": {"get"},
    } == {path: set(methods) for path, methods in document["paths"].items()}
    assert document["components"]["securitySchemes"]["BearerToken"]["scheme"] == "bearer"


def test_the_openapi_document_describes_every_response(db: None) -> None:
    document = Client().get(f"{API}/openapi.json").json()
    schemas = document["components"]["schemas"]
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            for status, response in operation["responses"].items():
                if status == "204":  # No Content: the series' "nothing new"
                    assert "content" not in response, (method, path)
                    continue
                schema = response["content"]["application/json"]["schema"]
                assert schema, (method, path, status)
            assert {"401", "404", "422"} <= set(operation["responses"]), (method, path)
            if method != "get":
                assert "403" in operation["responses"], (method, path)
            if method != "get" and not path.endswith("/signals"):  # signals conflict with nothing
                assert "409" in operation["responses"], (method, path)
    body = document["paths"]["/api/v1/jobs"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/JobSpec"}
    assert {"JobSpec", "TaskSpec", "ResourcesSpec", "CloneIn", "WorkflowSpec"} <= set(schemas)
    signals = document["paths"]["/api/v1/jobs/{job_id}/signals"]["post"]
    assert signals["security"] == [{"SignalToken": []}]
    assert signals["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/SignalBatch"
    }
    assert {"Heartbeat", "Progress", "Completion", "SignalsAccepted"} <= set(schemas)
    assert "SignalToken" in document["components"]["securitySchemes"]
    assert schemas["JobOut"]["properties"]["phase"]["$ref"].endswith("JobPhase")
