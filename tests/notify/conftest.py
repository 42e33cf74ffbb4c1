"""Channels and subscriptions of the named users (alice owner, bob teammate, charlie outsider)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import translation

from console.models import Cluster
from jobs.choices import JobPhase
from jobs.models import Job
from notify.choices import Event, Kind, ScopeKind
from notify.models import Channel, Subscription
from notify.outbound import forget_pools
from notify.watch import follow
from tests.engine.conftest import sim  # noqa: F401 (a simulated cluster, for the end-to-end test)


def channel(user: User, url: str = "https://hooks.example.com/x", **fields: Any) -> Channel:
    values: dict[str, Any] = {"name": f"{user.username}'s hook", "kind": Kind.WEBHOOK}
    return Channel.objects.create(owner=user, target=url, **(values | fields))


def subscribe(
    user: User, target: Channel, *events: Event, scope: str = ScopeKind.MINE, **fields: Any
) -> Subscription:
    """As the API and the pages subscribe: what it covers is judged in the next cycle."""
    chosen = [str(event) for event in events] or [str(event) for event in Event]
    subscription = Subscription.objects.create(
        user=user, channel=target, scope=scope, events=chosen, **fields
    )
    follow(subscription)
    return subscription


def job_of(user: User, cluster: Cluster, name: str = "ppo", **fields: Any) -> Job:
    values: dict[str, Any] = {"phase": JobPhase.RUNNING, "spec": {"tasks": [], "policies": {}}}
    return Job.objects.create(
        project=user.memberships.get().project, cluster=cluster, name=name,
        namespace="default", owner=user, **(values | fields),
    )  # fmt: skip


@pytest.fixture(autouse=True)
def _judged_afresh() -> Iterator[None]:
    """notify.outbound keeps connections alive, to receivers that end with the test."""
    forget_pools()
    yield
    forget_pools()  # kept-alive connections to this test's receivers
    translation.deactivate()  # a request in 简体中文 leaves it active in this thread
