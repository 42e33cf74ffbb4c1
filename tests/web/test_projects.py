"""The projects pages: everyone sees the projects they belong to, their members and the clusters
they may use; operators create projects, add members by user name, change their role, remove
them and choose the clusters, in the console rather than only in the admin."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from console.models import AuditEvent, Cluster, Membership, Project


def get(client: Client, user: User, url: str) -> tuple[int, str]:
    client.force_login(user)
    response = client.get(url)
    return response.status_code, response.content.decode()


def post(client: Client, user: User, url: str, **data: object) -> tuple[int, str]:
    client.force_login(user)
    response = client.post(url, data)
    where = response["Location"] if response.status_code == 302 else ""
    return response.status_code, where or response.content.decode()


def test_an_operator_creates_a_project_and_lands_on_its_page(client: Client, olga: User) -> None:
    status, where = post(client, olga, "/projects/", name="robotics")
    project = Project.objects.get(name="robotics")
    assert (status, where) == (302, f"/projects/{project.pk}/")
    assert not project.memberships.exists() and not project.clusters.exists()
    status, html = get(client, olga, where)
    assert status == 200 and "Project robotics created." in html


@pytest.mark.parametrize(("name", "error"), [("no spaces", "valid"), ("vision", "already exists")])
def test_it_refuses_a_bad_or_taken_project_name(
    client: Client, olga: User, project: Project, name: str, error: str
) -> None:
    status, html = post(client, olga, "/projects/", name=name)
    assert status == 200 and error in html and 'aria-invalid="true"' in html
    assert Project.objects.count() == 1


def test_an_operator_adds_re_roles_and_removes_a_member(
    client: Client, olga: User, project: Project, charlie: User
) -> None:
    url = f"/projects/{project.pk}/"
    assert post(client, olga, f"{url}members/", username="charlie", role="viewer") == (302, url)
    membership = Membership.objects.get(project=project, user=charlie)
    assert membership.role == Membership.Role.VIEWER
    assert "charlie added to vision as Viewer." in get(client, olga, url)[1]
    assert post(client, olga, f"{url}members/{membership.pk}/role/", role="member")[0] == 302
    membership.refresh_from_db()
    assert membership.role == Membership.Role.MEMBER
    assert post(client, olga, f"{url}members/{membership.pk}/remove/")[0] == 302
    assert not Membership.objects.filter(pk=membership.pk).exists()


@pytest.mark.parametrize(
    ("username", "error"),
    [("nobody", "No active user is named nobody."), ("alice", "alice is already in this project")],
)
def test_it_says_why_a_member_cannot_be_added(
    client: Client, olga: User, project: Project, alice: User, username: str, error: str
) -> None:
    status, html = post(client, olga, f"/projects/{project.pk}/members/", username=username)
    assert status == 422 and error in html
    assert project.memberships.count() == 1


def test_an_operator_chooses_the_clusters_a_project_may_use(
    client: Client, olga: User, project: Project, cluster: Cluster
) -> None:
    other = Cluster.objects.create(name="gpu-b", kubeconfig="x")
    url = f"/projects/{project.pk}/"
    assert post(client, olga, f"{url}clusters/", clusters=[other.pk]) == (302, url)
    assert list(project.clusters.values_list("name", flat=True)) == ["gpu-b"]
    assert post(client, olga, f"{url}clusters/")[0] == 302
    assert not project.clusters.exists()


def test_a_member_sees_their_projects_with_members_clusters_and_whom_to_ask(
    client: Client, alice: User, bob: User, olga: User, project: Project, other_project: Project,
    cluster: Cluster,
) -> None:  # fmt: skip
    status, html = get(client, alice, "/projects/")
    assert status == 200 and 'data-project="vision"' in html and "speech" not in html
    assert "Operators, who add members and change roles: <strong>olga</strong>" in html
    assert 'name="name"' not in html  # no create form
    status, html = get(client, alice, f"/projects/{project.pk}/")
    assert status == 200 and 'data-user="bob"' in html and "<strong>gpu-a</strong>" in html
    assert "/members/" not in html and f"/projects/{project.pk}/clusters/" not in html


def test_only_operators_change_projects(
    client: Client, alice: User, charlie: User, project: Project
) -> None:
    """A member gets 403; someone who does not see the project, 404 (no hint it exists)."""
    membership = project.memberships.get()
    for url in (
        f"/projects/{project.pk}/members/",
        f"/projects/{project.pk}/members/{membership.pk}/role/",
        f"/projects/{project.pk}/members/{membership.pk}/remove/",
        f"/projects/{project.pk}/clusters/",
    ):
        assert post(client, alice, url, username="charlie", role="viewer")[0] == 403, url
        assert post(client, charlie, url, username="charlie", role="viewer")[0] == 404, url
    assert post(client, alice, "/projects/", name="mine")[0] == 403
    assert get(client, charlie, f"/projects/{project.pk}/")[0] == 404
    assert list(project.memberships.values_list("user__username", "role")) == [("alice", "member")]


def test_a_membership_of_another_project_is_404(
    client: Client, olga: User, project: Project, other_project: Project, charlie: User
) -> None:
    theirs = Membership.objects.get(user=charlie)
    url = f"/projects/{project.pk}/members/{theirs.pk}/remove/"
    assert post(client, olga, url)[0] == 404
    assert Membership.objects.filter(pk=theirs.pk).exists()


def test_every_change_made_on_the_projects_pages_is_in_the_audit_trail(
    client: Client, olga: User, charlie: User, cluster: Cluster
) -> None:
    """Issue 12: membership and role changes made in the console are audited, with who did them
    and from where, as those made in the admin are."""
    post(client, olga, "/projects/", name="robotics", HTTP_USER_AGENT="ops-browser")
    project = Project.objects.get(name="robotics")
    url = f"/projects/{project.pk}/"
    post(client, olga, f"{url}members/", username="charlie", role="viewer")
    membership = Membership.objects.get(project=project, user=charlie)
    post(client, olga, f"{url}members/{membership.pk}/role/", role="member")
    post(client, olga, f"{url}clusters/", clusters=[cluster.pk])
    post(client, olga, f"{url}members/{membership.pk}/remove/")
    events = AuditEvent.objects.order_by("pk").values_list(
        "actor_name", "action", "target", "detail"
    )
    made = [event for event in events if event[0] == "olga" and event[1] != "login"]
    assert made == [
        ("olga", "project.create", "project robotics", ""),
        ("olga", "membership.add", "charlie in project robotics", "role: viewer"),
        ("olga", "membership.change", "charlie in project robotics", "role: member"),
        ("olga", "policy.change", "project robotics", f"clusters: {cluster.name}"),
        ("olga", "membership.remove", "charlie in project robotics", ""),
    ]
    assert AuditEvent.objects.filter(action="project.create").get().ip == "127.0.0.1"
