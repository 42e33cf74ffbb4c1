"""Shared fixtures: the named users of every test (alice owner, bob teammate, charlie outsider,
olga operator), their projects, and a Celery app that never reaches a broker during tests.

The projects and the cluster of these fixtures may use each other (`Project.clusters`), whichever
is made first: tests about which clusters a project may use set the list themselves."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from console.celery import app as celery_app
from console.models import Cluster, Membership, Project
from jobs.access import operators_group
from simcluster.server import SimCluster

# Tests call the plain functions behind the tasks; a `.delay()` lands in memory and stays there.
celery_app.conf.broker_url = "memory://"
celery_app.conf.broker_transport = None

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "http://127.0.0.1:9"}
users:
- name: u
  user: {token: "t"}
contexts:
- name: c
  context: {cluster: c, user: u, namespace: default}
current-context: c
"""


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    """PBKDF2 costs most of a second per user; tests do not need its strength."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _member(user: User, project: Project, role: str = Membership.Role.MEMBER) -> User:
    Membership.objects.create(user=user, project=project, role=role)
    return user


def open_project(name: str) -> Project:
    """A project that may use every cluster registered so far."""
    project = Project.objects.create(name=name)
    project.clusters.add(*Cluster.objects.all())
    return project


def open_to_every_project(cluster: Cluster) -> Cluster:
    """The cluster, which every project made so far may now use."""
    for project in Project.objects.all():
        project.clusters.add(cluster)
    return cluster


def register_sim(sim: SimCluster, tmp_path: Path, name: str = "sim") -> Cluster:
    """A simulated cluster, registered as an operator would (`manage.py add_cluster`), which the
    tests' projects may use."""
    kubeconfig = sim.write_kubeconfig(tmp_path / f"kubeconfig-{name}", namespace="default")
    call_command("add_cluster", name, kubeconfig=str(kubeconfig), stdout=StringIO())
    return open_to_every_project(Cluster.objects.get(name=name))


def open_cluster(name: str, **fields: Any) -> Cluster:
    """A cluster that every project made so far may use."""
    return open_to_every_project(Cluster.objects.create(name=name, **fields))


def make_operator(user: User) -> User:
    """An operator: a member of the group "operators" (not staff, not a superuser)."""
    user.groups.add(operators_group())
    return user


@pytest.fixture
def project(db: None) -> Project:
    return open_project("vision")


@pytest.fixture
def other_project(db: None) -> Project:
    return open_project("speech")


@pytest.fixture
def alice(project: Project) -> User:
    return _member(User.objects.create_user("alice", password="password"), project)


@pytest.fixture
def bob(project: Project) -> User:
    return _member(User.objects.create_user("bob", password="password"), project)


@pytest.fixture
def charlie(other_project: Project) -> User:
    return _member(User.objects.create_user("charlie", password="password"), other_project)


@pytest.fixture
def olga(db: None) -> User:
    """The operator: in the group "operators", in no project."""
    return make_operator(User.objects.create_user("olga", password="password"))


@pytest.fixture
def cluster(db: None) -> Cluster:
    """A registered cluster that nothing answers for (tests that need one use simcluster)."""
    return open_cluster("gpu-a", kubeconfig=KUBECONFIG, namespace="default")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """No test may skip, here or in CI: a skipped test fails the run."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    skipped = reporter.stats.get("skipped", [])
    if skipped and exitstatus == 0:
        reporter.write_line(f"{len(skipped)} test(s) skipped: the suite allows none.", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def signalling_job(
    alice: User, cluster: Cluster, live_server: Any, monkeypatch: pytest.MonkeyPatch
) -> Any:
    """A Job of alice's project on a live console, with the signal environment its pods get
    (jobs.workload.intake, console.kube.manifests) set in this process, as a pod would have it."""
    from django.core.cache import cache

    from jobs.models import Job
    from jobs.workload.intake import signal_token

    cache.clear()  # the signal rate limit counts per pod
    job = Job.objects.create(
        project=alice.memberships.get().project, cluster=cluster, name="ppo", namespace="default",
        spec={"tasks": []},
    )  # fmt: skip
    for name, value in {
        "TRAINYARD_SIGNAL_URL": f"{live_server.url}/api/v1/jobs/{job.pk}/signals",
        "TRAINYARD_SIGNAL_TOKEN": signal_token(job.pk, job.run),
        "TRAINYARD_POD": "ppo-head-0",
        "TRAINYARD_POD_UID": "uid-0",
    }.items():
        monkeypatch.setenv(name, value)
    return job
