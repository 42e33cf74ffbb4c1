"""One Job, on demand: what an operation triggers (console.tasks.reconcile_job), so a stop or a
resume is applied now rather than at the next sync."""

from __future__ import annotations

import logging

from django.db.models import Q
from django.utils import timezone

from console import kubeconfig
from console.engine.apply import Outcome, apply_job, record, unreachable_reason
from console.engine.gateways import gateway_for
from console.engine.keep_logs import before_removal
from console.engine.plan import JobObjects, plan
from console.engine.rows import JobRow, job_rows, load_blocked, pending_operations
from console.kube import JOB_LABEL, MANAGED_SELECTOR
from console.kube.gateway import (
    BATCH_JOBS,
    SERVICES,
    STATEFULSETS,
    ClusterUnreachable,
    Gateway,
    parsed,
)
from console.kube.observations import (
    WorkloadObs,
    parse_batch_job,
    parse_service,
    parse_statefulset,
)
from console.models import Cluster
from jobs.models import Job

logger = logging.getLogger(__name__)


def observe_job(gateway: Gateway, job: JobRow) -> JobObjects:
    """The Job's objects only: three LISTs in its namespace, selected by its label."""
    selector = f"{MANAGED_SELECTOR},{JOB_LABEL}={job.pk}"
    items = [gateway.list(kind, selector, job.namespace) for kind in (STATEFULSETS, BATCH_JOBS)]
    workloads: list[WorkloadObs] = [
        *parsed(items[0], parse_statefulset),
        *parsed(items[1], parse_batch_job),
    ]
    services = parsed(gateway.list(SERVICES, selector, job.namespace), parse_service)
    return JobObjects(tuple(workloads), tuple(services))


def reconcile_job(job_id: int) -> None:
    """What an operation triggers (console.tasks.reconcile_job): apply one Job now rather than
    at the next sync. It takes no cluster lease: every write is idempotent, deletes carry the
    observed UID, and a create that meets the same object counts as done."""
    job_and_cluster = Job.objects.filter(pk=job_id).values_list("cluster_id", flat=True).first()
    if job_and_cluster is None:
        return
    cluster = Cluster.objects.get(pk=job_and_cluster)
    jobs = job_rows(Q(pk=job_id))
    if not jobs:
        return
    job, now = jobs[0], timezone.now()
    blocked = load_blocked(jobs).get(job.pk, [])
    try:
        gateway = gateway_for(cluster)
        writes = plan(job, observe_job(gateway, job), blocked)
        before_removal(job, writes)
        outcome = apply_job(gateway, writes)
    except (ClusterUnreachable, kubeconfig.KubeconfigRejected) as error:
        outcome = Outcome(unreachable=str(error), why_unreachable=unreachable_reason(error))
    operations = pending_operations(Q(job_id=job.pk)).get(job.pk, [])
    record(job, outcome, operations, blocked, now, cluster.name)
    if outcome.ok:
        logger.info("reconciled job %s: %s writes", job.pk, outcome.writes)
    else:
        logger.warning("reconcile of job %s: %s", job.pk, outcome.error_message)
