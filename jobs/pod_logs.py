"""Who reads a Job's pod logs, and how much (issue 10, item 1): one set of rules for the logs
page, its fragment, the download and the JSON API.

- The current logs of every pod of a Job: its project's members and operators (the issue's
  "members see"; a viewer reads the Job's status, not its workload's output: docs/decisions.md).
- The previous container's logs and the pod's Kubernetes Events: only readers who see the Job's
  diagnostics (spec §Pod and Worker: "previous logs and live Kubernetes events are checked by
  authorised operators"; jobs.diagnostics decides who they are).
- Always a tail, read through the API server with `tailLines` and `limitBytes`; what the console
  kept of a container run before Kubernetes lost it (issue 34: failures.store) is a diagnostic
  too, like the previous container's log it often is.

This module is the pages' and the API's one way to the engine (`console.engine.live_reads`, a read
on demand, answered while the reader waits): they import it, never the engine (docs/decisions.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext as _

from console.engine.live_reads import (
    CONTAINERS,
    LogTail,
    LogUnavailable,
    PodEvent,
    pod_events,
    pod_log,
)
from jobs.access import User, is_operator, operates_in
from jobs.diagnostics import shows_diagnostics
from jobs.messages import encode, render_text
from jobs.models import Job
from workers.models import Worker

TAIL_DEFAULT = 500
TAIL_MAX = 5000
# What one read may bring back at most, whatever the lines' length.
LIMIT_BYTES = 1024 * 1024
# How many pods the page's chooser lists (a Job with more is read by typing the pod's name).
POD_CHOICES = 500


class BadLogRequest(ValueError):
    """A request the rules refuse before asking the cluster (400)."""


@dataclass(frozen=True)
class LogRequest:
    pod: str
    container: str
    tail: int
    previous: bool


def reads_logs(user: User, job: Job) -> bool:
    return is_operator(user) or operates_in(user, job.project_id)


def check_reader(user: User, job: Job) -> None:
    """403 for a reader of the Job who may not read its logs (a viewer)."""
    if not reads_logs(user, job):
        message = _("The logs of %(project)s's jobs are shown to its members and operators.")
        raise PermissionDenied(message % {"project": job.project.name})


def check_kept_reader(user: User, job: Job) -> None:
    """403 for a reader who does not see the Job's diagnostics: the logs kept of its earlier
    runs are (spec §Pod and Worker status; issue 34, item 2)."""
    if not shows_diagnostics(user, job):
        raise PermissionDenied(_("The kept logs of earlier runs are shown to operators only."))


def parse_tail(value: str | None) -> int:
    """TAIL_DEFAULT when absent; a whole number from 1 to TAIL_MAX otherwise."""
    if value is None or value == "":
        return TAIL_DEFAULT
    if not value.isdigit() or not 1 <= int(value) <= TAIL_MAX:
        words = _("The tail is a number of lines from 1 to %(max)d.")
        raise BadLogRequest(words % {"max": TAIL_MAX})
    return int(value)


def log_request(
    user: User, job: Job, pod: str, container: str, tail: str | None, previous: bool
) -> LogRequest:
    """The checked request: PermissionDenied for `previous` without diagnostics, BadLogRequest
    for a bad tail or container. The pod is checked by `job_worker`."""
    if previous and not shows_diagnostics(user, job):
        raise PermissionDenied(_("The previous container's logs are shown to operators only."))
    if container and container not in CONTAINERS:
        raise BadLogRequest(_("No container %(name)s in this job's pods.") % {"name": container})
    return LogRequest(pod, container or CONTAINERS[0], parse_tail(tail), previous)


def job_worker(job: Job, pod: str) -> Worker | None:
    """The Worker row of `pod` if it is one of this Job's pods (else the pod is not read)."""
    return Worker.objects.filter(task__job=job, pod_name=pod).first() if pod else None


def job_pods(job: Job) -> list[str]:
    workers = Worker.objects.filter(task__job=job).order_by("task_id", "pod_name")
    return list(workers.values_list("pod_name", flat=True)[:POD_CHOICES])


def read_tail(job: Job, wanted: LogRequest) -> LogTail:
    """Raises LogUnavailable."""
    return pod_log(
        job.cluster, job.namespace, wanted.pod, wanted.container, wanted.tail, LIMIT_BYTES,
        wanted.previous,
    )  # fmt: skip


def read_events(job: Job, pod: str) -> list[PodEvent]:
    """Raises LogUnavailable; call only for a reader who sees diagnostics."""
    return pod_events(job.cluster, job.namespace, pod)


def unavailable_words(error: LogUnavailable, pod: str) -> str:
    """Why nothing could be read, for the reader: the API server's own refusal quoted."""
    if error.gone:
        return _("The cluster has no pod %(pod)s now: it was deleted or is being re-created.") % {
            "pod": pod
        }
    if error.refused:
        return _("The API server refused: %(detail)s") % {"detail": error.detail}
    reason = render_text(encode(error.reason)) if error.reason else ""
    return _("The cluster could not be read: %(reason)s") % {"reason": reason}


def marked(lines: list[str], query: str) -> list[tuple[str, bool]]:
    """Each line with whether it contains `query`, case-insensitively (every line does for an
    empty query): the page hides the others, and its script redoes this as one types."""
    needle = query.casefold()
    return [(line, needle in line.casefold()) for line in lines]
