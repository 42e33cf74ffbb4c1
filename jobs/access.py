"""Every query of Jobs and Workflows is scoped by project membership: one place decides it."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from console.models import Membership, Project
from jobs.models import Job, Workflow

User = AbstractBaseUser | AnonymousUser


def projects_for(user: User, *, write: bool = False) -> QuerySet[Project]:
    """The projects `user` may see (or, with write=True, operate in)."""
    if not user.is_authenticated:
        return Project.objects.none()
    memberships = Membership.objects.filter(user_id=user.pk)
    if write:
        memberships = memberships.filter(role=Membership.Role.MEMBER)
    return Project.objects.filter(pk__in=memberships.values("project"))


def is_operator(user: User) -> bool:
    """Operators see what spec §Where to look reserves for authorised operators (restart
    counts, exit codes, the instance history). For now: staff or superusers."""
    staff = getattr(user, "is_staff", False) or getattr(user, "is_superuser", False)
    return bool(user.is_authenticated and staff)


def jobs_for(user: User) -> QuerySet[Job]:
    """Visible Jobs; a Job whose deletion was requested is already gone for its users."""
    return Job.objects.filter(project__in=projects_for(user), delete_requested_at__isnull=True)


def workflows_for(user: User) -> QuerySet[Workflow]:
    return Workflow.objects.filter(project__in=projects_for(user))


def get_job_for_user(user: User, pk: int, *, write: bool = False) -> Job:
    """The Job, or 404 for anyone outside its project (no hint that it exists); 403 for a viewer
    asking to operate on it."""
    job = jobs_for(user).select_related("cluster", "project", "owner").filter(pk=pk).first()
    if job is None:
        raise Http404("No such job.")
    if write and not projects_for(user, write=True).filter(pk=job.project_id).exists():
        raise PermissionDenied("Viewers of this project cannot operate on its jobs.")
    return job


def get_workflow_for_user(user: User, pk: int) -> Workflow:
    workflow = workflows_for(user).filter(pk=pk).first()
    if workflow is None:
        raise Http404("No such workflow.")
    return workflow
