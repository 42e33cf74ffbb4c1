"""Channels and subscriptions of the named users (alice owner, bob teammate, charlie outsider)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from console.models import Cluster
from jobs.choices import JobPhase
from jobs.models import Job
from notify.choices import Event, Kind, ScopeKind
from notify.models import Channel, Subscription
from tests.engine.conftest import sim  # noqa: F401 (a simulated cluster, for the end-to-end test)


def channel(user: User, url: str = "https://hooks.example.com/x", **fields: Any) -> Channel:
    values: dict[str, Any] = {"name": f"{user.username}'s hook", "kind": Kind.WEBHOOK}
    return Channel.objects.create(owner=user, target=url, **(values | fields))


def subscribe(
    user: User, target: Channel, *events: Event, scope: str = ScopeKind.MINE, **fields: Any
) -> Subscription:
    chosen = [str(event) for event in events] or [str(event) for event in Event]
    return Subscription.objects.create(
        user=user, channel=target, scope=scope, events=chosen, **fields
    )


def job_of(user: User, cluster: Cluster, name: str = "ppo", **fields: Any) -> Job:
    values: dict[str, Any] = {"phase": JobPhase.RUNNING, "spec": {"tasks": [], "policies": {}}}
    return Job.objects.create(
        project=user.memberships.get().project, cluster=cluster, name=name,
        namespace="default", owner=user, **(values | fields),
    )  # fmt: skip
