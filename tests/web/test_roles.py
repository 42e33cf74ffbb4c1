"""The spec's people as roles (docs/decisions.md, "Roles"): viewers read a project's Jobs, members
operate them, operators (the group "operators", superusers too; never `is_staff` alone) read
every project and manage projects; operating takes the member role for everyone. A user who may
create nowhere is told what they lack and who can grant it, and each project's Jobs run only on
the clusters it may use."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, Group, User
from django.test import Client
from django.utils import timezone

from console.models import ApiToken, Cluster, Membership, Node, Project
from jobs.access import is_operator, operators_group
from jobs.choices import JobPhase
from jobs.models import Job

SPEC = {"name": "ppo-math", "cluster": "gpu-a", "tasks": [{"role": "worker", "image": "rlinf:1"}]}


def api(user: User, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    token = ApiToken.issue(user, name="test")[1]
    kwargs: dict[str, Any] = {"headers": {"Authorization": f"Bearer {token}"}}
    if body is not None:
        kwargs |= {"data": json.dumps(body), "content_type": "application/json"}
    response = getattr(Client(), method)(f"/api/v1{path}", **kwargs)
    return response.status_code, response.json()


def page(client: Client, user: User, url: str) -> tuple[int, str]:
    client.force_login(user)
    response = client.get(url)
    return response.status_code, response.content.decode()


@pytest.fixture
def job(project: Project, cluster: Cluster, alice: User) -> Job:
    return Job.objects.create(
        project=project, name="train", cluster=cluster, namespace="default", owner=alice,
        spec={"tasks": []}, phase=JobPhase.RUNNING,
    )  # fmt: skip


@pytest.fixture
def root(db: None) -> User:
    """A superuser in no project."""
    return User.objects.create_superuser("root", password="password")


def test_it_makes_operators_through_the_group_or_superuser_never_through_staff(
    olga: User, root: User
) -> None:
    staff = User.objects.create_user("sam", is_staff=True)
    inactive = User.objects.create_superuser("gone", password="x", is_active=False)
    assert is_operator(olga) and is_operator(root)
    assert not is_operator(staff) and not is_operator(inactive)
    assert not is_operator(AnonymousUser())


@pytest.mark.parametrize("reader", ["olga", "root"])
def test_an_operator_reads_every_project_without_being_a_member(
    client: Client, job: Job, reader: str, request: pytest.FixtureRequest
) -> None:
    user = request.getfixturevalue(reader)
    assert 'href="/jobs/' + str(job.pk) in page(client, user, "/jobs/")[1]
    assert page(client, user, f"/jobs/{job.pk}/")[0] == 200
    status, body = api(user, "get", "/jobs")
    assert status == 200 and [row["name"] for row in body["results"]] == ["train"]


@pytest.mark.parametrize("reader", ["olga", "root"])
def test_an_operator_operates_only_where_a_member(
    client: Client, job: Job, project: Project, reader: str, request: pytest.FixtureRequest
) -> None:
    """Today a superuser got "You cannot create jobs in a project named 'demo'" though it
    existed: now the refusal says why and what to do."""
    user = request.getfixturevalue(reader)
    status, body = api(user, "post", "/jobs", {**SPEC, "project": "vision"})
    assert status == 403 and "add yourself to vision as a member" in body["message"]
    status, body = api(user, "post", f"/jobs/{job.pk}/stop")
    assert status == 403 and "operate only where they are members" in body["message"]
    client.force_login(user)
    refused = client.post(f"/jobs/{job.pk}/stop/")
    assert refused.status_code == 403 and "add yourself to vision" in refused.content.decode()
    Membership.objects.create(user=user, project=project)
    assert api(user, "post", "/jobs", {**SPEC, "project": "vision"})[0] == 201


def test_a_viewer_is_told_who_can_make_them_a_member(
    bob: User, project: Project, cluster: Cluster, olga: User
) -> None:
    Membership.objects.filter(user=bob).update(role=Membership.Role.VIEWER)
    status, body = api(bob, "post", "/jobs", {**SPEC, "project": "vision"})
    assert status == 403
    assert body["message"] == (
        "You are a viewer of vision: viewers read its jobs. An operator can make you a member."
    )


def test_a_user_in_no_project_sees_the_new_job_entry_and_why_they_cannot_use_it(
    client: Client, olga: User, root: User
) -> None:
    newcomer = User.objects.create_user("nina", password="password")
    status, listing = page(client, newcomer, "/jobs/")
    assert status == 200 and 'href="/jobs/new/"' in listing
    assert 'id="cannot-create-note"' in listing
    status, html = page(client, newcomer, "/jobs/new/")
    assert status == 403 and '<link rel="stylesheet"' in html  # the console's page, styled
    assert "You are not a member of any project" in html
    assert "Operators can add you to a project as a member: <strong>olga, root</strong>" in html


def test_the_page_says_so_when_no_operator_exists(client: Client, db: None) -> None:
    newcomer = User.objects.create_user("nina", password="password")
    status, html = page(client, newcomer, "/jobs/new/")
    assert status == 403 and "No operator is named yet" in html


def test_an_operator_in_no_project_is_sent_to_the_projects(client: Client, olga: User) -> None:
    status, html = page(client, olga, "/jobs/new/")
    assert status == 403 and "Operators read every project but create jobs only where" in html
    assert 'href="/projects/"' in html


def test_a_project_offers_and_accepts_only_the_clusters_it_may_use(
    client: Client, alice: User, olga: User, project: Project, cluster: Cluster
) -> None:
    """vision may use gpu-a, not gpu-b: alice neither sees gpu-b nor may choose it."""
    Cluster.objects.create(name="gpu-b", kubeconfig="x")
    form = page(client, alice, "/jobs/new/")[1]
    assert '<option value="gpu-a"' in form and "gpu-b" not in form
    status, body = api(alice, "post", "/jobs", {**SPEC, "cluster": "gpu-b"})
    assert status == 422
    assert body["errors"]["cluster"] == (
        "No cluster named 'gpu-b' is available to project vision (it may use: gpu-a)."
    )
    assert [row["name"] for row in api(alice, "get", "/clusters")[1]] == ["gpu-a"]
    assert "gpu-b" not in page(client, alice, "/clusters/")[1]
    assert 'data-cluster="gpu-b"' in page(client, olga, "/clusters/")[1]


def test_it_says_when_a_project_may_use_no_cluster_yet(
    client: Client, alice: User, project: Project, cluster: Cluster
) -> None:
    project.clusters.clear()
    status, body = api(alice, "post", "/jobs", SPEC)
    assert status == 422 and "Project vision may use no cluster yet" in body["errors"]["cluster"]
    assert "None of your projects may use a cluster yet" in page(client, alice, "/jobs/new/")[1]


def test_nodes_of_clusters_a_user_may_not_see_are_not_listed(
    client: Client, alice: User, cluster: Cluster
) -> None:
    hidden = Cluster.objects.create(name="gpu-b", kubeconfig="x")
    now = timezone.now()
    Node.objects.create(cluster=hidden, name="secret-node", phase="Online", observed_at=now)
    assert "secret-node" not in page(client, alice, "/nodes/")[1]
    assert api(alice, "get", "/nodes")[1] == []


def test_it_makes_an_operator_of_a_user_holding_the_permission_directly_or_in_another_group(
    db: None,
) -> None:
    permission = operators_group().permissions.get()
    direct, grouped, other = (User.objects.create_user(name) for name in ("dina", "gus", "otto"))
    direct.user_permissions.add(permission)
    Group.objects.create(name="platform").permissions.add(permission)
    grouped.groups.add(Group.objects.get(name="platform"))
    other.groups.add(Group.objects.create(name="readers"))
    assert is_operator(direct) and is_operator(grouped)
    assert not is_operator(other)
