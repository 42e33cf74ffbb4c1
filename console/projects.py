"""Changes to projects, their members and the clusters they may use: made by operators on the
projects pages (console.views.projects) and by the bootstrap commands (`manage.py
create_project`, `add_member`, `allow_cluster`, `add_cluster --project`). One function per
change, so that each is made — and written to the audit trail (console.audit) — in one place;
who may make it is decided by the caller (jobs.access.is_operator). `by` is the operator who
made it (None from a command), `via` names the command in the audit entry's detail."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction

from console import audit
from console.models import Cluster, Membership, Project

# A request's user, checked by the caller; None for a management command.
Operator = AbstractBaseUser | AnonymousUser | None


def _detail(*parts: str) -> str:
    return "; ".join(part for part in parts if part)


def create_project(name: str, by: Operator, via: str = "") -> Project:
    """A new project has no member and may use no cluster until an operator says so."""
    project = Project.objects.create(name=name)
    audit.record(audit.Action.PROJECT_CREATE, user=by, target=f"project {name}", detail=via)
    return project


def active_user(name: str) -> User | None:
    """The user a member is added as: the active user of that name (an inactive one cannot log
    in, and adding them would grant nothing but a surprise when they are reactivated)."""
    return User.objects.filter(username=name, is_active=True).first()


def _member(membership: Membership, project: Project) -> str:
    return f"{membership.user} in project {project}"


def add_member(
    project: Project, user: User, role: Membership.Role, by: Operator, via: str = ""
) -> Membership:
    membership = Membership.objects.create(project=project, user=user, role=role)
    target, detail = _member(membership, project), _detail(f"role: {role}", via)
    audit.record(audit.Action.MEMBERSHIP_ADD, user=by, target=target, detail=detail)
    return membership


def change_role(membership: Membership, role: Membership.Role, by: Operator, via: str = "") -> bool:
    """True when the role changed (a conditional UPDATE: two operators at once change it once)."""
    rows = Membership.objects.filter(pk=membership.pk).exclude(role=role)
    changed = bool(rows.update(role=role))
    if changed:
        target = _member(membership, membership.project)
        detail = _detail(f"role: {role}", via)
        audit.record(audit.Action.MEMBERSHIP_CHANGE, user=by, target=target, detail=detail)
    return changed


def remove_member(membership: Membership, by: Operator) -> None:
    """The user's jobs stay in the project; they just can no longer see them."""
    if Membership.objects.filter(pk=membership.pk).delete()[0]:
        target = _member(membership, membership.project)
        audit.record(audit.Action.MEMBERSHIP_REMOVE, user=by, target=target)


def set_clusters(
    project: Project, clusters: Iterable[Cluster], by: Operator, via: str = ""
) -> None:
    """Jobs already running on a cluster taken off the list keep running there; new jobs of
    the project may be created only on the clusters listed."""
    with transaction.atomic():
        project.clusters.set(list(clusters))
        record_clusters(project, via=via, user=by)


def allow_clusters(
    project: Project, clusters: Iterable[Cluster], by: Operator, via: str = ""
) -> list[Cluster]:
    """Adds the clusters to those the project may use; the ones it did not use before, in the
    order given (none: nothing changed, nothing audited)."""
    allowed = set(project.clusters.values_list("pk", flat=True))
    added = list(
        {cluster.pk: cluster for cluster in clusters if cluster.pk not in allowed}.values()
    )
    if added:
        with transaction.atomic():
            project.clusters.add(*added)
            record_clusters(project, via=via, user=by)
    return added


def record_clusters(project: Project, via: str = "", **who: Any) -> None:
    """Which clusters a project may use is a policy: its change is audited as one (by `user` or
    the `request`'s user: the console's page and the admin)."""
    names = sorted(project.clusters.values_list("name", flat=True))
    detail = _detail("clusters: " + (", ".join(names) or "none"), via)
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
