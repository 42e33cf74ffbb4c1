"""Changes to projects, their members and the clusters they may use: made by operators on the
projects pages (console.views.projects). One function per change, so that each is made in one
place; who may make it is decided by the caller (jobs.access.is_operator)."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import User
from django.db import transaction

from console.models import Cluster, Membership, Project


def create_project(name: str) -> Project:
    """A new project has no member and may use no cluster until an operator says so."""
    return Project.objects.create(name=name)


def add_member(project: Project, user: User, role: Membership.Role) -> Membership:
    return Membership.objects.create(project=project, user=user, role=role)


def change_role(membership: Membership, role: Membership.Role) -> bool:
    """True when the role changed (a conditional UPDATE: two operators at once change it once)."""
    rows = Membership.objects.filter(pk=membership.pk).exclude(role=role)
    return bool(rows.update(role=role))


def remove_member(membership: Membership) -> None:
    """The user's jobs stay in the project; they just can no longer see them."""
    Membership.objects.filter(pk=membership.pk).delete()


def set_clusters(project: Project, clusters: Iterable[Cluster]) -> None:
    """Jobs already running on a cluster taken off the list keep running there; new jobs of
    the project may be created only on the clusters listed."""
    with transaction.atomic():
        project.clusters.set(list(clusters))
