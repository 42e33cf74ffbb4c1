"""The bootstrap commands (issue 31, item 5): `create_project`, `add_member`, `allow_cluster` and
`add_cluster --project` make from a script what an operator makes on the Projects pages, through
the same functions (console.projects), audited alike; `create_user` makes their users. Each can
run again and changes nothing."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from console.models import AuditEvent, Cluster, Membership, Project
from jobs.access import is_operator, operates_in, reads_project, usable_clusters
from tests.conftest import KUBECONFIG

Action = AuditEvent.Action


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def audited(action: AuditEvent.Action) -> list[tuple[str, str, str]]:
    events = AuditEvent.objects.filter(action=action).order_by("pk")
    return list(events.values_list("actor_name", "target", "detail"))


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    return path


def test_it_creates_a_project_once_and_audits_it(db: None) -> None:
    assert (
        run("create_project", "robotics")
        == "Created project robotics: no member, no cluster yet.\n"
    )
    assert run("create_project", "robotics") == "Project robotics exists: nothing changed.\n"
    project = Project.objects.get(name="robotics")
    assert not project.memberships.exists() and not project.clusters.exists()
    assert audited(Action.PROJECT_CREATE) == [("", "project robotics", "manage.py create_project")]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("robot arms", "'robot arms' is not a valid project name: Enter a valid “slug”"),
        ("r" * 64, "is not a valid project name: Ensure this value has at most 63 characters"),
    ],
)
def test_it_refuses_a_project_name_the_page_refuses(db: None, name: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run("create_project", name)
    assert not Project.objects.filter(name=name).exists()
    assert not AuditEvent.objects.exists()


def test_it_adds_a_member_with_a_role_once_then_changes_only_the_role(
    charlie: User, project: Project
) -> None:
    assert run("add_member", "vision", "charlie", "--role", "viewer") == (
        "Added charlie to project vision as viewer.\n"
    )
    assert run("add_member", "vision", "charlie", "--role", "viewer") == (
        "charlie is already viewer of project vision: nothing changed.\n"
    )
    assert run("add_member", "vision", "charlie") == (
        "charlie is now member of project vision (was viewer).\n"
    )
    assert run("add_member", "vision", "charlie", "--role", "member") == (
        "charlie is already member of project vision: nothing changed.\n"
    )
    assert project.memberships.get(user=charlie).role == Membership.Role.MEMBER
    target = "charlie in project vision"
    assert audited(Action.MEMBERSHIP_ADD) == [("", target, "role: viewer; manage.py add_member")]
    assert audited(Action.MEMBERSHIP_CHANGE) == [("", target, "role: member; manage.py add_member")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("nowhere", "charlie"),
            r"No project is named 'nowhere': create it with `manage.py create_project nowhere`",
        ),
        (("vision", "dave"), r"No active user is named 'dave': users are made in the admin"),
        (("vision", "charlie", "--role", "owner"), r"argument --role: invalid choice: 'owner'"),
    ],
)
def test_it_says_what_is_wrong_with_a_member_and_changes_nothing(
    charlie: User, project: Project, args: tuple[str, ...], message: str
) -> None:
    with pytest.raises(CommandError, match=message):
        run("add_member", *args)
    assert not project.memberships.filter(user=charlie).exists()
    assert not AuditEvent.objects.exists()


def test_it_adds_no_inactive_user(charlie: User, project: Project) -> None:
    """As the project's page: an inactive user cannot log in; adding them grants nothing."""
    charlie.is_active = False
    charlie.save()
    with pytest.raises(CommandError, match="No active user is named 'charlie'"):
        run("add_member", "vision", "charlie")


def test_it_lets_a_project_use_a_cluster_once_and_audits_it_as_a_policy(
    db: None, cluster: Cluster
) -> None:
    run("create_project", "robotics")
    Cluster.objects.create(name="gpu-b", kubeconfig=KUBECONFIG)
    assert run("allow_cluster", "robotics", "gpu-a") == (
        "Project robotics may now use cluster gpu-a.\n"
    )
    assert run("allow_cluster", "robotics", "gpu-b", "gpu-a") == (
        "Project robotics may now use cluster gpu-b.\n"
        "Project robotics already uses cluster gpu-a: nothing changed.\n"
    )
    assert run("allow_cluster", "robotics", "gpu-a", "gpu-b") == (
        "Project robotics already uses cluster gpu-a: nothing changed.\n"
        "Project robotics already uses cluster gpu-b: nothing changed.\n"
    )
    robotics = Project.objects.get(name="robotics")
    assert sorted(robotics.clusters.values_list("name", flat=True)) == ["gpu-a", "gpu-b"]
    assert audited(Action.POLICY_CHANGE) == [
        ("", "project robotics", "clusters: gpu-a; manage.py allow_cluster"),
        ("", "project robotics", "clusters: gpu-a, gpu-b; manage.py allow_cluster"),
    ]


def test_it_checks_every_cluster_named_before_changing_anything(db: None, cluster: Cluster) -> None:
    run("create_project", "robotics")
    with pytest.raises(CommandError, match=r"No cluster is named 'gpu-z': register it with"):
        run("allow_cluster", "robotics", "gpu-a", "gpu-z")
    with pytest.raises(CommandError, match=r"No project is named 'nowhere'"):
        run("allow_cluster", "nowhere", "gpu-a")
    assert not Project.objects.get(name="robotics").clusters.exists()
    assert not audited(Action.POLICY_CHANGE)


def test_add_cluster_lets_projects_use_it_and_changes_nothing_the_second_time(
    db: None, kubeconfig: Path
) -> None:
    run("create_project", "robotics")
    run("create_project", "speech")
    args = ("add_cluster", "gpu-b", "--kubeconfig", str(kubeconfig), "--project", "robotics")
    assert run(*args, "--project", "speech") == (
        "Registered cluster gpu-b: server http://127.0.0.1:9, context c, "
        "default namespace default, insecure (TLS not verified).\n"
        "Project robotics may now use cluster gpu-b.\n"
        "Project speech may now use cluster gpu-b.\n"
    )
    # A plain http:// server: the operator's own kubeconfig says so, and the cluster shows it.
    registered = Cluster.objects.get(name="gpu-b")
    assert registered.insecure and registered.insecure_since is not None
    assert run(*args) == (
        "Cluster gpu-b is registered so (server http://127.0.0.1:9, context c, default namespace "
        "default, insecure (TLS not verified)): nothing changed.\n"
        "Project robotics already uses cluster gpu-b: nothing changed.\n"
    )
    assert audited(Action.CLUSTER_CREATE) == [("", "cluster gpu-b", "manage.py add_cluster")]
    assert not audited(Action.CLUSTER_CHANGE)
    assert len(audited(Action.POLICY_CHANGE)) == 2
    assert run(*args, "--namespace", "robots").startswith("Updated cluster gpu-b:")
    assert Cluster.objects.get(name="gpu-b").namespace == "robots"
    assert audited(Action.CLUSTER_CHANGE) == [("", "cluster gpu-b", "manage.py add_cluster")]


def test_add_cluster_registers_nothing_for_a_project_that_does_not_exist(
    db: None, kubeconfig: Path
) -> None:
    with pytest.raises(CommandError, match="No project is named 'robotics'"):
        run("add_cluster", "gpu-b", "--kubeconfig", str(kubeconfig), "--project", "robotics")
    assert not Cluster.objects.exists()
    assert not AuditEvent.objects.exists()


def test_add_cluster_names_its_prometheus_keeps_it_and_clears_it_on_request(
    db: None, kubeconfig: Path
) -> None:
    args = ("add_cluster", "gpu-b", "--kubeconfig", str(kubeconfig))
    run(*args, "--prometheus-url", "http://prometheus.monitoring:9090/")
    assert Cluster.objects.get().prometheus_url == "http://prometheus.monitoring:9090"
    assert "nothing changed" in run(*args)  # without the option the stored one is kept
    with pytest.raises(CommandError, match="not an http"):
        run(*args, "--prometheus-url", "ftp://prometheus")
    run(*args, "--prometheus-url", "")
    assert Cluster.objects.get().prometheus_url == ""


def test_the_roles_given_by_the_commands_are_the_roles_of_the_pages(
    bob: User, olga: User, kubeconfig: Path
) -> None:
    """A viewer reads the project's Jobs; a member (an operator too) also creates them, on its
    clusters (docs/operations.md, "Roles")."""
    run("create_project", "robotics")
    run("add_cluster", "gpu-b", "--kubeconfig", str(kubeconfig), "--project", "robotics")
    robotics = Project.objects.get(name="robotics")
    run("add_member", "robotics", "bob", "--role", "viewer")
    bob = User.objects.get(pk=bob.pk)  # a fresh user object: roles are read once per object
    assert reads_project(bob, robotics.pk) and not operates_in(bob, robotics.pk)
    assert not usable_clusters(bob).filter(name="gpu-b").exists()
    run("add_member", "robotics", "bob")
    bob = User.objects.get(pk=bob.pk)
    assert operates_in(bob, robotics.pk)
    assert usable_clusters(bob).filter(name="gpu-b").exists()
    assert not operates_in(olga, robotics.pk)
    run("add_member", "robotics", "olga")
    assert operates_in(User.objects.get(pk=olga.pk), robotics.pk)


def test_it_creates_a_user_once_and_never_resets_their_password(db: None, tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("correct horse battery\n")
    assert run("create_user", "dave", "--password-file", str(secret)) == "Created user dave.\n"
    secret.write_text("another long password\n")
    assert run("create_user", "dave", "--password-file", str(secret)) == (
        "User dave exists: nothing changed.\n"
    )
    dave = User.objects.get(username="dave")
    assert dave.check_password("correct horse battery")
    assert not dave.is_staff and not dave.is_superuser
    assert run("create_user", "erin") == (
        "Created user erin without a password (set one in the admin, /admin/).\n"
    )
    assert not User.objects.get(username="erin").has_usable_password()


def test_it_makes_an_operator_once_audited_as_a_change_of_rights(olga: User) -> None:
    assert run("create_user", "olga", "--operator") == "User olga exists: nothing changed.\n"
    assert run("create_user", "frank", "--operator") == (
        "Created user frank without a password (set one in the admin, /admin/).\n"
        "frank is now an operator.\n"
    )
    assert run("create_user", "frank", "--operator") == "User frank exists: nothing changed.\n"
    assert is_operator(User.objects.get(username="frank"))
    made_operators = [event for event in audited(Action.ROLE_CHANGE) if event[1] == "user frank"]
    assert made_operators == [("", "user frank", "user_groups: add operators")]


@pytest.mark.parametrize(
    ("args", "password", "message"),
    [
        (("dave smith",), "", "'dave smith' is not a valid user name: Enter a valid username"),
        (("dave",), "short", "is refused: This password is too short"),
        (("dave",), None, "Cannot read .*: FileNotFoundError"),
    ],
)
def test_it_says_what_is_wrong_with_a_user_and_creates_none(
    db: None, tmp_path: Path, args: tuple[str, ...], password: str | None, message: str
) -> None:
    secret = tmp_path / "password"
    if password is not None:
        secret.write_text(password)
    extra = ("--password-file", str(secret)) if password != "" else ()
    with pytest.raises(CommandError, match=message):
        run("create_user", *args, *extra)
    assert not User.objects.exists()
