"""Who sees the diagnostics that spec §Pod and Worker status reserves for authorised operators:
container restart counts, exit codes and termination reasons, and the pod instance history
that holds them. One policy, for pages, fragments, messages, the troubleshooting record and the
JSON API alike; the facts are stored whoever reads them, and rendered per reader.

- Operators (jobs.access.is_operator) see them for every Job.
- With `TRAINYARD_DIAGNOSTICS=members`, the members of a Job's project see them too (an
  organisation that opens them to job owners); viewers never do.
- Anyone else gets the meaning: a message that carries them is worded as what it means
  (jobs.messages.withhold: "the container restarted after an error: read its logs or ask an
  operator"), a Worker's termination reason reads "Terminated", restart counts and exit codes
  are left out of pages and null in the API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.http import HttpRequest
from django.utils.translation import gettext

from jobs.access import User, is_operator, project_ids
from jobs.messages import carries_diagnostics

MEMBERS = "members"  # the value of TRAINYARD_DIAGNOSTICS that opens them to project members
# A Worker's reason for a reader without diagnostics when it was a termination reason: the
# container state Kubernetes reports, which says nothing of why.
TERMINATED = "Terminated"


@dataclass(frozen=True)
class Diagnostics:
    """The Jobs whose diagnostics a reader sees: those of every project, or of `projects`."""

    everywhere: bool = False
    projects: frozenset[int] = frozenset()

    def shown(self, project_id: int) -> bool:
        return self.everywhere or project_id in self.projects

    @property
    def anywhere(self) -> bool:
        return self.everywhere or bool(self.projects)

    def rows(self, project_field: str) -> Q:
        """The rows (Jobs, or rows related to them through `project_field`) whose diagnostics
        are shown; use only when `anywhere`."""
        return Q() if self.everywhere else Q(**{f"{project_field}__in": self.projects})


def readers() -> str:
    """Who reads diagnostics, in a few words for a badge: by TRAINYARD_DIAGNOSTICS."""
    if settings.TRAINYARD_DIAGNOSTICS == MEMBERS:
        return gettext("operators and project members")
    return gettext("operators")


def diagnostics_for(user: User) -> Diagnostics:
    if is_operator(user):
        return Diagnostics(everywhere=True)
    if settings.TRAINYARD_DIAGNOSTICS != MEMBERS:
        return Diagnostics()
    member_of = project_ids(user, write=True)
    return Diagnostics(projects=frozenset(member_of))


def for_request(request: HttpRequest) -> Diagnostics:
    """The reader's policy, decided once per request (API resolvers ask per object)."""
    cached: Diagnostics | None = getattr(request, "_trainyard_diagnostics", None)
    if cached is None:
        cached = diagnostics_for(request.user)
        request._trainyard_diagnostics = cached  # type: ignore[attr-defined]
    return cached


def shows_diagnostics(user: User, job: Any) -> bool:
    """Whether `user` sees the diagnostics of `job` (anything with a `project_id`)."""
    return diagnostics_for(user).shown(job.project_id)


def worker_reason(reason: str, message: str, diagnostics: bool) -> str:
    """A Worker row's reason as its reader sees it. The reason is the container's termination
    reason exactly when the row's message is its exit (jobs.status.problems.pod_reason)."""
    if diagnostics or not carries_diagnostics(message):
        return reason
    return TERMINATED
