"""Logs kept at the moments Kubernetes would lose them (issue 34, item 1): a container's
previous run when the sync sees its restart count rise (the kubelet keeps one previous run
only, so it is read at once, before the next restart overwrites it), every current container
when the Job turns Failed or its workload reports its end, and before the console itself stops,
resumes or deletes the Job (kept first, then scaled down).

The sync only notes what is due (`due_after`, after its commit); the reads run in a Celery task
outside the cycle and its transaction, a few at a time. Before a removal they cannot wait for a
task: they run in place, bounded in time (`before_removal`). A pod Kubernetes removed first is
not kept: the page says "not kept" for an attempt with no row, never pretends."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import NamedTuple

from django.conf import settings
from django.utils import timezone

from console.engine.live_reads import CONTAINERS, LogUnavailable, pod_log, restart_count
from console.engine.plan import Verb, Write
from console.engine.rows import JobRow, State
from console.engine.write import Changes
from console.kube.gateway import BATCH_JOBS, STATEFULSETS
from failures import judge, store
from failures.models import KeptLog
from jobs.choices import JobPhase
from jobs.models import Job
from notify.record import failure_judged
from workers.models import PodInstance

logger = logging.getLogger(__name__)

PARALLEL_READS = 4
# The most seconds a stop, resume or delete spends starting reads before it removes the pods.
REMOVAL_READ_SECONDS = 10.0
WHY = KeptLog.Why


class KeepPod(NamedTuple):
    """One container run to keep: the current one, or the one before it (`previous`)."""

    pod_name: str
    pod_uid: str
    container: str
    attempt: int
    previous: bool


class Due(NamedTuple):
    job_id: int
    why: str
    pods: tuple[KeepPod, ...]  # empty: every present pod's current containers


def due_after(changes: Changes, state: State) -> list[Due]:
    """What a cycle's changes call for: a restart's previous run (one Due per Job; a pod first
    seen after a restart too), every container of a Job that turned Failed."""
    job_of = {task.pk: job.pk for job in state.jobs for task in job.tasks}
    restarted: dict[int, list[KeepPod]] = {}
    for instance in [*changes.instances, *changes.new_instances]:
        row = state.instances.get(instance.uid)
        if instance.restart_count <= (row.restart_count if row else 0):
            continue
        pods = restarted.setdefault(job_of.get(instance.task_id, 0), [])
        attempt = instance.restart_count - 1
        pods += [KeepPod(instance.pod_name, instance.uid, c, attempt, True) for c in CONTAINERS]
    due = [Due(job, WHY.RESTART, tuple(pods)) for job, pods in restarted.items() if job]
    failed = [c.pk for c in changes.jobs if c.fields.get("phase") == JobPhase.FAILED]
    return due + [Due(job_id, WHY.FAILED, ()) for job_id in failed]


def keep(
    job_id: int, why: str, pods: Sequence[KeepPod] = (), now: datetime | None = None,
    budget: float | None = None,
) -> int:  # fmt: skip
    """Reads and stores the runs asked for (every present pod's current containers when none
    are named); then, when the moment is a failure's, judges the run again. Returns how many
    were kept. With a `budget` (seconds), no read starts after it is spent."""
    now = now or timezone.now()
    job = Job.objects.select_related("cluster").filter(pk=job_id).first()
    if job is None:
        return 0
    until = time.monotonic() + budget if budget is not None else None
    tails = read_tails(job, list(pods) or current_pods(job), until)
    kept = store.save(job, why, tails, now)
    if why in (WHY.RESTART, WHY.FAILED, WHY.COMPLETION) and (kept or why != WHY.RESTART):
        judge.judge(job.pk, now)
    if why == WHY.FAILED:  # the job.failed message waited for this (notify.record)
        failure_judged(job.pk, job.run, now)
    return len(kept)


def current_pods(job: Job) -> list[KeepPod]:
    present = PodInstance.objects.filter(task__job=job, gone_at__isnull=True)
    return [
        KeepPod(i.pod_name, i.uid, container, i.restart_count, False)
        for i in present.order_by("pod_name")
        for container in CONTAINERS
    ]


def read_tails(job: Job, pods: Iterable[KeepPod], until: float | None = None) -> list[store.Tail]:
    """The tails, read PARALLEL_READS at a time; a pod that cannot be read, or whose read
    would start after `until` (time.monotonic()), is left out ("not kept")."""
    with ThreadPoolExecutor(PARALLEL_READS) as pool:
        read = pool.map(lambda pod: _read_until(job, pod, until), pods)
        return [tail for tail in read if tail is not None]


def _read_until(job: Job, pod: KeepPod, until: float | None) -> store.Tail | None:
    if until is not None and time.monotonic() > until:
        logger.info("job %s: the log of %s was not kept: no time left before its removal",
                    job.pk, pod.pod_name)  # fmt: skip
        return None
    return _read(job, pod)


def _read(job: Job, pod: KeepPod) -> store.Tail | None:
    keep_bytes = settings.TRAINYARD_LOG_KEEP_KIB * 1024
    try:
        tail = pod_log(
            job.cluster, job.namespace, pod.pod_name, pod.container, max(1000, keep_bytes // 40),
            keep_bytes, previous=pod.previous, timestamps=True, fill=True,
        )  # fmt: skip
    except LogUnavailable as error:
        logger.info("job %s: the log of %s was not kept: %s", job.pk, pod.pod_name, error)
        return None
    if pod.previous and not _read_the_run_noted(job, pod):
        logger.info("job %s: run %s of %s/%s was not kept: it restarted again before it was "
                    "read", job.pk, pod.attempt, pod.pod_name, pod.container)  # fmt: skip
        return None
    return store.Tail(pod.pod_name, pod.pod_uid, pod.container, pod.attempt, tail.text, tail.cut)


def _read_the_run_noted(job: Job, pod: KeepPod) -> bool:
    """Whether the previous run just read is the one the cycle noted (`pod.attempt`): the
    kubelet keeps one previous run, so a container that restarted again before the read gave a
    later run, which must not be stored under this one's number. Restart counts only rise, so a
    count still `attempt + 1` after the read was that at the read."""
    now = restart_count(job.cluster, job.namespace, pod.pod_name, pod.pod_uid, pod.container)
    return now == pod.attempt + 1


def before_removal(job: JobRow, writes: Sequence[Write]) -> None:
    """A stop, a resume or a delete keeps every current container first: the writes that remove
    pods (a scale to 0, a workload deleted) are applied only after. The reads run right here,
    in the cycle or the reconcile task that applies the writes (after them would be too late),
    outside any transaction, PARALLEL_READS at a time, none started after
    REMOVAL_READ_SECONDS: a Job of many pods delays its stop by that much at most, plus one
    read's own timeouts."""
    removes = any(
        w.resource in (STATEFULSETS, BATCH_JOBS)
        and (w.verb == Verb.DELETE or (w.verb == Verb.SCALE and w.replicas == 0))
        for w in writes
    )
    if not removes:
        return
    if job.delete_requested_at is not None:
        why = WHY.DELETE
    else:
        why = WHY.STOP if job.stopped else WHY.RESUME
    keep(job.pk, why, budget=REMOVAL_READ_SECONDS)
