"""Progress read from RLinf's own log lines (docs/workload-signals.md, "Fallbacks"): for each
Running Job whose policy `progress_from_logs` is on, the tail of its head pod's log becomes
Progress messages labelled as read from logs (jobs.workload.rlinf_logs,
jobs.workload.fallbacks). A Celery beat entry runs it at a low rate,
TRAINYARD_LOG_PROGRESS_SECONDS (once a minute by default).

- The head pod is the first pod (by ordinal) of the Task named `head`, else of the first Task,
  read only while Running: the one that runs RLinf's runner and prints its progress.
- The tail is capped (TAIL_LINES, LIMIT_BYTES), read with the API server's timestamps: each line's
  time is when its step was done, so the step times stay true however late the tail is read.
- A log that cannot be read now (its cluster unreachable, the pod just gone) is read again at the
  next pass; nothing is recorded meanwhile, so a silent run is not mistaken for a read one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from console.engine.live_reads import LogUnavailable, pod_log
from console.kube.manifests import CONTAINER
from jobs.choices import JobPhase, PodPhase, SignalSource
from jobs.models import Job
from jobs.workload.fallbacks import progress_signals, record_fallback
from jobs.workload.rlinf_logs import parse_progress
from workers.models import Worker

logger = logging.getLogger(__name__)
HEAD_ROLE = "head"
TAIL_LINES = 300  # about ten of RLinf's metric tables
LIMIT_BYTES = 256 * 1024


@dataclass(frozen=True)
class HeadPod:
    name: str
    uid: str
    restart_count: int


def head_pod(job: Job) -> HeadPod | None:
    """The Job's head pod when it is Running; None otherwise."""
    tasks = list(job.tasks.order_by("pk").values_list("pk", "role"))
    if not tasks:
        return None
    task_id = next((pk for pk, role in tasks if role == HEAD_ROLE), tasks[0][0])
    pods = Worker.objects.filter(task_id=task_id).values_list(
        "pod_name", "pod_uid", "phase", "restart_count"
    )
    first = min(pods, key=lambda pod: (len(pod[0]), pod[0]), default=None)  # name-2 < name-10
    if first is None or first[2] != PodPhase.RUNNING or not first[1]:
        return None
    return HeadPod(first[0], first[1], first[3])


def jobs_reading_logs() -> list[Job]:
    running = Job.objects.filter(
        phase=JobPhase.RUNNING, delete_requested_at__isnull=True, cluster__reachable=True,
        spec__policies__progress_from_logs=True,
    )  # fmt: skip
    return list(running.select_related("cluster").order_by("pk"))


def read_progress_from_logs() -> int:
    """One pass over every Job that reads its progress from logs; the new points recorded."""
    return sum(read_job_progress(job) for job in jobs_reading_logs())


def read_job_progress(job: Job) -> int:
    head = head_pod(job)
    if head is None:
        return 0
    try:
        tail = pod_log(
            job.cluster, job.namespace, head.name, CONTAINER, TAIL_LINES, LIMIT_BYTES,
            timestamps=True,
        )  # fmt: skip
    except LogUnavailable as error:
        logger.info("job %s: the log of %s was not read: %s", job.pk, head.name, error)
        return 0
    items = progress_signals(head.name, head.uid, head.restart_count, parse_progress(tail.text))
    done = record_fallback(job, job.run, items, SignalSource.LOGS)
    return done.accepted if done is not None else 0
