"""Who may read and operate what. Every query of Jobs and Workflows is scoped here, and the global
operator role is decided here, by one function (`is_operator`) that every check calls.

The spec's people (docs/decisions.md, "Roles"): a project's *viewers* read its Jobs; its
*members* also operate them (create, stop, resume, clone, delete); *operators* (the permission
`console.operate_platform`, given through the group "operators"; superusers hold it too) read
every project, see the diagnostics the spec reserves for authorised operators, and manage
projects, their members and their clusters. Operating a project's Jobs takes the member role,
for operators too.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import (
    AbstractBaseUser,
    AnonymousUser,
    Group,
    Permission,
    PermissionsMixin,
)
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils.translation import gettext as _

from console.models import Cluster, Membership, Project
from console.statements import Statement
from jobs.models import Job, Workflow

User = AbstractBaseUser | AnonymousUser

OPERATE_PLATFORM = "console.operate_platform"
OPERATORS_GROUP = "operators"
# How many operators a page names when it says whom to ask.
OPERATORS_NAMED = 10


def is_operator(user: User) -> bool:
    """The global operator role: an active user holding `console.operate_platform` (through the
    group "operators", or directly), or an active superuser. Not `is_staff`: the admin site is
    another matter."""
    if not isinstance(user, PermissionsMixin) or not user.is_active:
        return False
    if user.is_superuser:
        return True
    known: bool | None = getattr(user, "_trainyard_operator", None)
    if known is None:
        known = _holds_operate_platform(user)
        user._trainyard_operator = known  # type: ignore[attr-defined]
    return known


def _holds_operate_platform(user: PermissionsMixin) -> bool:
    """The permission held directly or through a group, in one query, asked once per request
    (the user object lives as long as the request). `user.has_perm` would load every permission
    of the user and of their groups, in two queries, on each page and poll."""
    return _OPERATE_PLATFORM_HELD.first(user.pk) is not None


def _operate_platform_held(user_id: int) -> QuerySet[Permission, Any]:
    app_label, codename = OPERATE_PLATFORM.split(".")
    permission = Permission.objects.filter(content_type__app_label=app_label, codename=codename)
    return permission.filter(Q(user=user_id) | Q(group__user=user_id)).values("pk")[:1]


_OPERATE_PLATFORM_HELD = Statement(_operate_platform_held, int)


def operators_group() -> Group:
    """The group whose users are operators. Migration console/0003 makes it; it is made again
    here when missing (a database flushed by tests keeps permissions but not groups)."""
    app_label, codename = OPERATE_PLATFORM.split(".")
    permission = Permission.objects.get(content_type__app_label=app_label, codename=codename)
    group, _ = Group.objects.get_or_create(name=OPERATORS_GROUP)
    group.permissions.add(permission)
    return group


def operator_names() -> list[str]:
    """Whom to ask for a project or a role: the active operators' user names, at most
    OPERATORS_NAMED, in order."""
    app_label, codename = OPERATE_PLATFORM.split(".")
    holds = {"content_type__app_label": app_label, "codename": codename}
    permission = Permission.objects.filter(**holds)
    operators = (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(
            Q(is_superuser=True)
            | Q(user_permissions__in=permission)
            | Q(groups__permissions__in=permission)
        )
    )
    names = operators.order_by("username").values_list("username", flat=True).distinct()
    return list(names[:OPERATORS_NAMED])


def _roles(user: AbstractBaseUser) -> dict[int, str]:
    """{project id: role} of the user's memberships, read once per user object (a request's:
    the checks of a page or poll then ask no more), as `is_operator` is."""
    known: dict[int, str] | None = getattr(user, "_trainyard_roles", None)
    if known is None:
        known = dict(_MEMBERSHIPS.rows(user.pk))
        user._trainyard_roles = known  # type: ignore[attr-defined]
    return known


_MEMBERSHIPS = Statement(
    lambda user_id: Membership.objects.filter(user_id=user_id).values_list("project_id", "role"),
    int,
)


def project_ids(user: User, *, write: bool = False) -> list[int]:
    """The ids of the projects where `user` is a viewer or a member, or with write=True a
    member (operators' other projects are not among them)."""
    if not isinstance(user, AbstractBaseUser) or not user.is_authenticated:
        return []
    return [pk for pk, role in _roles(user).items() if not write or role == Membership.Role.MEMBER]


def reads_project(user: User, project_id: int) -> bool:
    """Whether `user` may read the project's Jobs (operators: every project)."""
    return is_operator(user) or project_id in project_ids(user)


def operates_in(user: User, project_id: int) -> bool:
    """Whether `user` may operate the project's Jobs: the member role, for operators too."""
    return project_id in project_ids(user, write=True)


def projects_for(user: User, *, write: bool = False) -> QuerySet[Project]:
    """The projects `user` may see (operators: every one), or, with write=True, operate in:
    those where they hold the member role, operators included. Read from the memberships as
    they are now (a create checks its project again here, after its form was validated)."""
    if not user.is_authenticated:
        return Project.objects.none()
    if is_operator(user) and not write:
        return Project.objects.all()
    memberships = Membership.objects.filter(user_id=user.pk)
    if write:
        memberships = memberships.filter(role=Membership.Role.MEMBER)
    return Project.objects.filter(pk__in=memberships.values("project"))


def clusters_for(user: User) -> QuerySet[Cluster]:
    """The clusters `user` may see: operators every one; anyone else those that the projects
    they see may use (`Project.clusters`)."""
    if is_operator(user):
        return Cluster.objects.all()
    return Cluster.objects.filter(pk__in=projects_for(user).values("clusters"))


def usable_clusters(user: User) -> QuerySet[Cluster]:
    """The clusters `user` may create jobs on: those of the projects they operate in, while
    not retired (console.cluster_actions.retire)."""
    projects = projects_for(user, write=True).values("clusters")
    return Cluster.objects.filter(pk__in=projects, retired_at__isnull=True)


def cannot_operate(user: User, project: Project) -> str:
    """Why `user` may read `project` but not operate its jobs, and who can change that."""
    if is_operator(user):
        return _(
            "Operators read every project but operate only where they are members: add "
            "yourself to %(project)s as a member on its project page."
        ) % {"project": project.name}
    return _(
        "You are a viewer of %(project)s: viewers read its jobs. An operator can make you a member."
    ) % {"project": project.name}


def cannot_create(user: User) -> str:
    """Why `user` may create jobs in no project, and who can change that."""
    if is_operator(user):
        return _(
            "Operators read every project but create jobs only where they are members: add "
            "yourself to a project as a member on its project page."
        )
    if projects_for(user).exists():
        return _(
            "You are a viewer in every project you belong to: viewers read jobs but do not "
            "create them. An operator can make you a member."
        )
    return _("You are not a member of any project, so you cannot create jobs. An operator can "
             "add you to one.")  # fmt: skip


def jobs_for(user: User) -> QuerySet[Job]:
    """Visible Jobs; a Job whose deletion was requested is already gone for its users."""
    jobs = Job.objects.filter(delete_requested_at__isnull=True)
    return jobs if is_operator(user) else jobs.filter(project_id__in=project_ids(user))


def workflows_for(user: User) -> QuerySet[Workflow]:
    workflows = Workflow.objects.all()
    return workflows if is_operator(user) else workflows.filter(project_id__in=project_ids(user))


def get_job_for_user(user: User, pk: int, *, write: bool = False) -> Job:
    """The Job, or 404 for anyone outside its project (no hint that it exists); 403 for a
    reader who may not operate on it (a viewer, an operator who is not a member)."""
    try:
        related = ("cluster", "project", "owner", "workload")  # the report: the page's panel
        job = jobs_for(user).select_related(*related).get(pk=pk)
    except Job.DoesNotExist:
        raise Http404("No such job.") from None
    if write and not operates_in(user, job.project_id):
        raise PermissionDenied(cannot_operate(user, job.project))
    return job


def get_workflow_for_user(user: User, pk: int) -> Workflow:
    workflow = workflows_for(user).filter(pk=pk).first()
    if workflow is None:
        raise Http404("No such workflow.")
    return workflow
