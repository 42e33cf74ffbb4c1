"""The audit trail (issue 12, item 3): operations, logins, logouts, tokens, clusters and
memberships are recorded with who, when, from where and the result, never a secret; operators
read it with filters and export it as CSV; admin deletes cannot orphan workloads."""

from __future__ import annotations

import csv
import io
from io import StringIO
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.core.management import call_command
from django.http import StreamingHttpResponse
from django.test import Client

from console.models import ApiToken, AuditEvent, Cluster, Membership, Project
from console.policies import record_if_changed
from jobs.access import operators_group
from jobs.models import Job
from jobs.operations import stop_job
from tests.conftest import KUBECONFIG

Action, Result = AuditEvent.Action, AuditEvent.Result


def visitor() -> Client:
    return Client(HTTP_USER_AGENT="pytest-browser/1.0", REMOTE_ADDR="203.0.113.7")


def job_of(project: Project, cluster: Cluster, name: str = "train") -> Job:
    return Job.objects.create(
        project=project, name=name, cluster=cluster, namespace="default", spec={"tasks": []}
    )


def test_it_records_a_login_its_failure_and_a_logout_with_where_from(alice: User) -> None:
    client = visitor()
    client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    client.post("/accounts/login/", {"username": "nobody-password-typed-here", "password": "x"})
    client.post("/accounts/login/", {"username": "alice", "password": "password"})
    client.post("/accounts/logout/")
    events = list(AuditEvent.objects.order_by("pk"))
    assert [(e.action, e.result, e.actor_name) for e in events] == [
        (Action.LOGIN_FAILED, Result.FAILED, "alice"),
        (Action.LOGIN_FAILED, Result.FAILED, ""),  # an unknown name is not kept
        (Action.LOGIN, Result.SUCCEEDED, "alice"),
        (Action.LOGOUT, Result.SUCCEEDED, "alice"),
    ]
    assert {(e.ip, e.user_agent) for e in events} == {("203.0.113.7", "pytest-browser/1.0")}
    assert all("password" not in e.detail + e.target for e in events)


def test_it_records_operations_with_the_requests_origin(
    alice: User, project: Project, cluster: Cluster
) -> None:
    job = job_of(project, cluster)
    client = visitor()
    client.force_login(alice)
    client.post(f"/jobs/{job.pk}/stop/")
    client.post(f"/jobs/{job.pk}/stop/")  # already Stopped: refused
    stop, refused = AuditEvent.objects.filter(action=Action.JOB_STOP).order_by("pk")
    assert (stop.actor, stop.result, stop.ip) == (alice, Result.ACCEPTED, "203.0.113.7")
    assert stop.target == f"job train (#{job.pk}) in vision"
    assert refused.result == Result.REFUSED and refused.detail


def test_it_takes_the_client_address_from_a_trusted_proxy_only(
    alice: User, project: Project, cluster: Cluster, settings: Any
) -> None:
    job = job_of(project, cluster)
    client = Client(HTTP_X_FORWARDED_FOR="198.51.100.9, 10.0.0.5", REMOTE_ADDR="10.0.0.6")
    client.force_login(alice)
    stop_job(alice, job)  # no request: no origin
    client.post(f"/jobs/{job.pk}/resume/")
    settings.TRAINYARD_TRUSTED_PROXIES = ["10.0.0.0/8"]
    client.post(f"/jobs/{job.pk}/stop/")
    events = AuditEvent.objects.filter(action__startswith="job.").order_by("pk")
    assert list(events.values_list("ip", flat=True)) == [None, "10.0.0.6", "198.51.100.9"]


def test_tokens_are_recorded_by_name_never_by_secret(alice: User) -> None:
    client = Client()
    client.force_login(alice)
    html = client.post("/account/tokens/", {"name": "laptop", "days": "30"}).content.decode()
    token = ApiToken.objects.get()
    client.post(f"/account/tokens/{token.pk}/revoke/")
    issued, revoked = AuditEvent.objects.filter(action__startswith="token.").order_by("pk")
    assert issued.action == Action.TOKEN_ISSUE and "laptop" in issued.target
    assert revoked.action == Action.TOKEN_REVOKE
    secret = html.split('id="new-token"')[1].split('value="')[1].split('"')[0]
    for event in AuditEvent.objects.all():
        assert secret not in str(vars(event)) and token.token_hash not in str(vars(event))


def test_clusters_and_memberships_changed_in_the_admin_are_recorded(
    olga: User, project: Project, bob: User, tmp_path: Path
) -> None:
    olga.is_superuser = olga.is_staff = True  # the admin is for staff
    olga.save()
    client = Client()
    client.force_login(olga)
    data = {
        "name": "gpu-b",
        "kubeconfig": KUBECONFIG,
        "namespace": "default",
        "context": "",
        "insecure": "on",
    }  # fmt: skip (its server is plain http)
    client.post("/admin/console/cluster/add/", data)
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    call_command("add_cluster", "gpu-c", "--kubeconfig", str(path), stdout=StringIO())
    membership = Membership.objects.get(user=bob)
    form = {
        "name": "vision", "memberships-TOTAL_FORMS": "1", "memberships-INITIAL_FORMS": "1",
        "memberships-0-id": str(membership.pk), "memberships-0-project": str(project.pk),
        "memberships-0-user": str(bob.pk), "memberships-0-role": "viewer",
        "created_at_0": "2026-01-01", "created_at_1": "00:00:00",
    }  # fmt: skip
    client.post(f"/admin/console/project/{project.pk}/change/", form)
    actions = list(AuditEvent.objects.order_by("pk").values_list("action", "target"))
    assert (Action.CLUSTER_CREATE, "cluster gpu-b") in actions
    assert (Action.CLUSTER_CREATE, "cluster gpu-c") in actions
    assert (Action.MEMBERSHIP_CHANGE, "bob in project vision") in actions
    assert all(
        "token" not in detail for detail in AuditEvent.objects.values_list("detail", flat=True)
    )


def test_the_admin_cannot_delete_a_job_row_but_deletes_through_the_console(
    olga: User, project: Project, cluster: Cluster
) -> None:
    olga.is_superuser = olga.is_staff = True  # the admin is for staff
    olga.save()
    job = job_of(project, cluster)
    client = Client()
    client.force_login(olga)
    assert client.get(f"/admin/jobs/job/{job.pk}/delete/").status_code == 403
    assert client.get(f"/admin/console/project/{project.pk}/delete/").status_code == 403
    action = {"action": "delete_through_console", "_selected_action": [job.pk]}
    client.post("/admin/jobs/job/", action)
    job.refresh_from_db()
    assert job.delete_requested_at is not None  # reconcile removes the workloads, then the row
    assert AuditEvent.objects.filter(action=Action.JOB_DELETE, result=Result.ACCEPTED).exists()


def test_only_operators_read_the_trail_with_filters_and_csv(
    alice: User, olga: User, charlie: User
) -> None:
    AuditEvent.objects.create(actor_name="alice", action=Action.LOGIN, result=Result.SUCCEEDED)
    AuditEvent.objects.create(
        actor_name="bob", action=Action.LOGIN_FAILED, result=Result.FAILED, target="=cmd()"
    )
    client = Client()
    client.force_login(alice)
    assert client.get("/audit/").status_code == 403
    client.force_login(olga)
    html = client.get("/audit/", {"result": "failed"}).content.decode()
    assert "bob" in html and "<td>alice</td>" not in html
    response = client.get("/audit/", {"who": "bob", "format": "csv"})
    assert isinstance(response, StreamingHttpResponse)
    body = b"".join(bytes(chunk) for chunk in response.streaming_content)
    rows = list(csv.reader(io.StringIO(body.decode())))
    assert rows[0][:3] == ["at", "actor_name", "action"]
    assert [row[1:5] for row in rows[1:]] == [["bob", "login.failed", "'=cmd()", "failed"]]
    assert client.get("/audit/", {"since": "2000-01-01", "until": "2000-01-02"}).status_code == 200
    assert "No event matches" in client.get("/audit/", {"until": "2000-01-02"}).content.decode()


def test_a_users_rights_changes_are_recorded_but_not_a_login(alice: User) -> None:
    alice.is_staff = True
    alice.save()
    alice.groups.add(operators_group())
    Client().post("/accounts/login/", {"username": "alice", "password": "password"})
    changes = AuditEvent.objects.filter(action=Action.ROLE_CHANGE).order_by("pk")
    assert list(changes.values_list("target", "detail")) == [
        ("user alice", "is_staff: False -> True"),
        ("user alice", "user_groups: add operators"),
    ]


def test_a_projects_clusters_changed_in_the_admin_are_a_policy_change(
    olga: User, project: Project, cluster: Cluster
) -> None:
    olga.is_superuser = olga.is_staff = True
    olga.save()
    client = Client()
    client.force_login(olga)
    form = {
        "name": project.name, "clusters": [str(cluster.pk)],
        "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0",
        "created_at_0": "2026-01-01", "created_at_1": "00:00:00",
    }  # fmt: skip
    project.clusters.clear()  # the fixtures' project may use the fixtures' cluster
    response = client.post(f"/admin/console/project/{project.pk}/change/", form)
    assert response.status_code == 302, response.content
    event = AuditEvent.objects.get(action=Action.POLICY_CHANGE)
    assert (event.actor_name, event.target) == ("olga", f"project {project.name}")
    assert event.detail == f"clusters: {cluster.name}"


def test_deploy_time_policies_are_recorded_when_they_change(db: None, settings: Any) -> None:
    first = record_if_changed()
    assert first is not None and first.action == Action.POLICY_CHANGE
    assert "in force: DIAGNOSTICS=operators; POD_USER=1000;" in first.detail
    assert "METRICS_TOKEN=unset" in first.detail
    assert record_if_changed() is None  # the same policies: nothing new
    settings.TRAINYARD_DIAGNOSTICS = "members"
    settings.TRAINYARD_METRICS_TOKEN = "s3cret-scrape-token"
    changed = record_if_changed()
    assert changed is not None and changed.actor_name == "deploy"
    assert changed.detail.startswith(
        "DIAGNOSTICS: operators → members; METRICS_TOKEN: unset → set — in force: "
    )
    assert "s3cret" not in changed.detail
    assert record_if_changed() is None
