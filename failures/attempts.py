"""Every container run of a Job's pods the Logs tab offers to read (issue 34, item 2): those
kept, and the earlier runs of the pods the console saw with nothing kept of them ("not kept":
Kubernetes removed the pod or overwrote the run first, or it was never read). The page never
pretends a run was kept."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from failures.models import KeptLog
from jobs.models import Job
from jobs.pod_logs import CONTAINERS
from workers.models import PodInstance

# The most runs listed (a crash-looping pod has many); the newest pods' first.
ATTEMPT_LIMIT = 300


@dataclass(frozen=True)
class Attempt:
    pod_name: str
    pod_uid: str
    container: str
    attempt: int  # the container run: its restart count
    kept: KeptLog | None  # None: not kept


def attempts(job: Job, limit: int = ATTEMPT_LIMIT) -> tuple[list[Attempt], bool]:
    """The runs, by pod name, then pod (the newest first), then run (the newest first); and
    whether `limit` left some out. A present pod's current run is not listed (it is the live
    log); a gone pod's last one is."""
    kept = {(k.pod_uid, k.container, k.attempt): k for k in KeptLog.objects.filter(job=job)}
    found = [Attempt(k.pod_name, k.pod_uid, k.container, k.attempt, k) for k in kept.values()]
    since = {k.pod_uid: k.first_line_at or k.kept_at for k in kept.values()}
    instances = PodInstance.objects.filter(task__job=job).order_by("-first_seen_at")
    for instance in instances[:limit]:
        since[instance.uid] = instance.first_seen_at
        last = instance.restart_count if instance.gone_at is None else instance.restart_count + 1
        found += [
            Attempt(instance.pod_name, instance.uid, container, run, None)
            for run in range(last)
            for container in CONTAINERS
            if (instance.uid, container, run) not in kept
        ]
    found.sort(key=lambda a: (a.pod_name, -_seconds(since.get(a.pod_uid)), a.pod_uid,
                              -a.attempt, a.container))  # fmt: skip
    return found[:limit], len(found) > limit


def _seconds(at: datetime | None) -> float:
    return at.timestamp() if at else 0.0
