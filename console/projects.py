"""Changes to projects, their members and the clusters they may use: made by operators on the
projects pages (console.views.projects). One function per change, so that each is made — and
written to the audit trail (console.audit) — in one place; who may make it is decided by the
caller (jobs.access.is_operator). `by` is the operator who made it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction

from console import audit
from console.models import Cluster, Membership, Project

Operator = AbstractBaseUser | AnonymousUser  # a request's user, checked by the caller


def create_project(name: str, by: Operator) -> Project:
    """A new project has no member and may use no cluster until an operator says so."""
    project = Project.objects.create(name=name)
    audit.record(audit.Action.PROJECT_CREATE, user=by, target=f"project {name}")
    return project


def _member(membership: Membership, project: Project) -> str:
    return f"{membership.user} in project {project}"


def add_member(project: Project, user: User, role: Membership.Role, by: Operator) -> Membership:
    membership = Membership.objects.create(project=project, user=user, role=role)
    target = _member(membership, project)
    audit.record(audit.Action.MEMBERSHIP_ADD, user=by, target=target, detail=f"role: {role}")
    return membership


def change_role(membership: Membership, role: Membership.Role, by: Operator) -> bool:
    """True when the role changed (a conditional UPDATE: two operators at once change it once)."""
    rows = Membership.objects.filter(pk=membership.pk).exclude(role=role)
    changed = bool(rows.update(role=role))
    if changed:
        target, detail = _member(membership, membership.project), f"role: {role}"
        audit.record(audit.Action.MEMBERSHIP_CHANGE, user=by, target=target, detail=detail)
    return changed


def remove_member(membership: Membership, by: Operator) -> None:
    """The user's jobs stay in the project; they just can no longer see them."""
    if Membership.objects.filter(pk=membership.pk).delete()[0]:
        target = _member(membership, membership.project)
        audit.record(audit.Action.MEMBERSHIP_REMOVE, user=by, target=target)


def set_clusters(project: Project, clusters: Iterable[Cluster], by: Operator) -> None:
    """Jobs already running on a cluster taken off the list keep running there; new jobs of
    the project may be created only on the clusters listed."""
    with transaction.atomic():
        project.clusters.set(list(clusters))
        record_clusters(project, user=by)


def record_clusters(project: Project, **who: Any) -> None:
    """Which clusters a project may use is a policy: its change is audited as one (by `user` or
    the `request`'s user: the console's page and the admin)."""
    names = sorted(project.clusters.values_list("name", flat=True))
    detail = "clusters: " + (", ".join(names) or "none")
    audit.record(audit.Action.POLICY_CHANGE, target=f"project {project}", detail=detail, **who)


def set_idle_default(project: Project, minutes: int | None, by: Operator) -> bool:
    """The idle policy's default for the project's Jobs (usage.policy; a Job's own wins), audited
    as a policy change; True when it changed (a conditional UPDATE)."""
    rows = Project.objects.filter(pk=project.pk).exclude(stop_when_idle_minutes=minutes)
    if minutes is None:
        rows = Project.objects.filter(pk=project.pk, stop_when_idle_minutes__isnull=False)
    changed = bool(rows.update(stop_when_idle_minutes=minutes))
    if changed:
        detail = f"stop_when_idle_minutes: {minutes if minutes is not None else 'none'}"
        audit.record(audit.Action.POLICY_CHANGE, user=by, target=f"project {project}",
                     detail=detail)  # fmt: skip
    return changed
