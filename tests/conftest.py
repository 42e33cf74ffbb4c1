"""Shared fixtures: the named users of every test (alice owner, bob teammate, charlie outsider,
olga operator), their projects, and a Celery app that never reaches a broker during tests."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from console.celery import app as celery_app
from console.models import Cluster, Membership, Project

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


@pytest.fixture
def project(db: None) -> Project:
    return Project.objects.create(name="vision")


@pytest.fixture
def other_project(db: None) -> Project:
    return Project.objects.create(name="speech")


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
    return User.objects.create_user("olga", password="password", is_staff=True)


@pytest.fixture
def cluster(db: None) -> Cluster:
    """A registered cluster that nothing answers for (tests that need one use simcluster)."""
    return Cluster.objects.create(name="gpu-a", kubeconfig=KUBECONFIG, namespace="default")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """No test may skip, here or in CI: a skipped test fails the run."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    skipped = reporter.stats.get("skipped", [])
    if skipped and exitstatus == 0:
        reporter.write_line(f"{len(skipped)} test(s) skipped: the suite allows none.", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
