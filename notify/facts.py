"""What a message says, read when it is written (the Job may be gone when it is sent): the
Job's name, project and cluster, its workload's state with its source, age and reason
(jobs.status.workload: the same derivation as the Workload panel), its GPUs and since when
they are held, the failure its current run's logs or Kubernetes name (failures.judge: its label,
class and advice, said in both languages, as the channel's language is chosen when it is sent),
and the link to its page (TRAINYARD_PUBLIC_URL)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.urls import reverse
from django.utils import translation

from console.models import Cluster
from failures.judge import current_of, own_signatures, words
from failures.models import Finding, Signature
from jobs.choices import JobPhase
from jobs.messages import encode
from jobs.models import Job, WorkloadReport
from jobs.status.workload import Policies, Report, derive
from notify.choices import Language
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


def failure_facts(finding: Finding, own: Mapping[str, Signature]) -> dict[str, Any]:
    """A Finding's class and, in each language a channel may speak, its label, class and advice
    (failures.judge.words): the log line itself is not said (it follows the diagnostics rule)."""
    said: dict[str, Any] = {"class": finding.failure_class}
    for language in Language.values:
        with translation.override(language):
            found = words(finding, own)
        said[language] = {
            "label": found.label, "class_label": found.failure_class, "advice": found.advice,
        }  # fmt: skip
    return said


def job_facts(
    job: Job, now: datetime, finding: Finding | None = None,
    own: Mapping[str, Signature] | None = None,
) -> dict[str, Any]:  # fmt: skip
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
        "failure": failure_facts(finding, own or {}) if finding is not None else None,
    }  # fmt: skip


def facts_of(conditions: Sequence[Condition], now: datetime) -> dict[int, dict[str, Any]]:
    """Each occurrence's facts by its pk, in four queries at most (the Jobs, their findings, the
    operators' signatures these name, the clusters)."""
    job_ids = {c.job_id for c in conditions if c.job_id is not None}
    jobs = list(
        Job.objects.filter(pk__in=job_ids).select_related("project", "cluster", "workload")
        if job_ids
        else []
    )
    findings = current_of(jobs) if jobs else {}
    own = own_signatures(findings.values()) if findings else {}
    by_job = {job.pk: job_facts(job, now, findings.get(job.pk), own) for job in jobs}
    clusters = {c.cluster_id for c in conditions if c.job_id is None}
    names = dict(Cluster.objects.filter(pk__in=clusters).values_list("pk", "name"))
    found: dict[int, dict[str, Any]] = {}
    for condition in conditions:
        if condition.job_id is not None:
            found[condition.pk] = by_job.get(condition.job_id, {})
        else:
            found[condition.pk] = {"cluster": names.get(condition.cluster_id, "")}
    return found
