"""What a message says, read when it is written (the Job may be gone when it is sent): the
Job's name, project and cluster, its workload's state with its source, age and reason
(jobs.status.workload: the same derivation as the Workload panel), its GPUs and since when
they are held, and the link to its page (TRAINYARD_PUBLIC_URL)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.urls import reverse

from console.models import Cluster
from jobs.choices import JobPhase
from jobs.messages import encode
from jobs.models import Job, WorkloadReport
from jobs.status.workload import Policies, Report, derive
from notify.models import Condition

REPORT_FIELDS = ("run", "first_received_at", "last_received_at", "latest", "steps")


def job_url(job_id: int) -> str:
    return f"{settings.TRAINYARD_PUBLIC_URL}{reverse('job', args=[job_id])}"


def gpus_of(spec: Mapping[str, Any]) -> int:
    """The GPUs a run holds: each Task's replicas times the whole GPUs one replica requests."""
    total = 0
    for task in spec.get("tasks") or []:
        resources = task.get("resources") or {}
        total += int(task.get("replicas", 1) or 0) * int(resources.get("gpu", 0) or 0)
    return total


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat() if moment else None


def report_of(row: WorkloadReport | None) -> Report | None:
    if row is None:
        return None
    return Report(**{name: getattr(row, name) for name in REPORT_FIELDS})


def job_facts(job: Job, now: datetime) -> dict[str, Any]:
    try:
        row: WorkloadReport | None = job.workload
    except WorkloadReport.DoesNotExist:
        row = None
    workload = derive(report_of(row), JobPhase(job.phase), job.run, Policies.of(job.spec), now)
    return {
        "job": {
            "id": job.pk, "name": job.name, "project": job.project.name,
            "cluster": job.cluster.name, "url": job_url(job.pk), "phase": job.phase,
        },
        "workload": {
            "state": str(workload.state),
            "source": str(workload.source) if workload.source else None,
            "reported_at": _iso(workload.reported_at),
            "reason": encode(workload.reason) if workload.reason else "",
            "step": workload.step, "max_steps": workload.max_steps,
        },
        "gpus": gpus_of(job.spec),
        "gpus_since": _iso(job.started_at),
        "cluster": job.cluster.name,
    }  # fmt: skip


def facts_of(conditions: Sequence[Condition], now: datetime) -> dict[int, dict[str, Any]]:
    """Each occurrence's facts by its pk, in two queries at most."""
    job_ids = {c.job_id for c in conditions if c.job_id is not None}
    jobs = Job.objects.filter(pk__in=job_ids).select_related("project", "cluster", "workload")
    by_job = {job.pk: job_facts(job, now) for job in jobs} if job_ids else {}
    clusters = {c.cluster_id for c in conditions if c.job_id is None}
    names = dict(Cluster.objects.filter(pk__in=clusters).values_list("pk", "name"))
    found: dict[int, dict[str, Any]] = {}
    for condition in conditions:
        if condition.job_id is not None:
            found[condition.pk] = by_job.get(condition.job_id, {})
        else:
            found[condition.pk] = {"cluster": names.get(condition.cluster_id, "")}
    return found
