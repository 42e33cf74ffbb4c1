"""Thin Celery tasks: they take ids and call plain functions that tests call directly."""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import shared_task

from console.structured_logging import log_context

logger = logging.getLogger(__name__)


@shared_task
def sync_all_clusters() -> None:
    """The beat entry point: one sync task per cluster, so clusters spread over the workers."""
    from django.utils import timezone

    from console.engine.connection import access_due
    from console.models import Cluster

    live = Cluster.objects.filter(retired_at__isnull=True)  # a retired one has no credentials
    for cluster_id in live.values_list("pk", flat=True):
        sync_cluster.delay(cluster_id)
    for cluster_id in access_due(timezone.now()):
        check_access.delay(cluster_id)


@shared_task
def check_access(cluster_id: int) -> None:
    """The console's permissions on a cluster, one SelfSubjectAccessReview each (issue 36)."""
    from console.engine.connection import refresh_access

    refresh_access(cluster_id)


@shared_task
def sync_cluster(cluster_id: int) -> None:
    """Each cycle is added to the cluster's metrics (console.metrics), failed ones too, and
    logged in one line: its summary, a warning when the cluster was unreachable."""
    from console import metrics
    from console.engine.cycle import sync_cluster as run

    started = time.monotonic()
    with log_context(cluster_id=cluster_id):
        try:
            result = run(cluster_id)
        except Exception:
            metrics.record_failed_sync(cluster_id, time.monotonic() - started)
            raise
        metrics.record_sync(result)
        for due in result.logs_due:
            keep_logs.delay(due.job_id, due.why, [list(pod) for pod in due.pods])
        for job_id in result.judge_due:
            judge_failure.delay(job_id)
        failed = not result.reachable and not result.skipped
        logger.log(
            logging.WARNING if failed else logging.INFO,
            "sync of cluster %s (%s): %s", result.name, cluster_id, result.summary(),
            extra={"cluster": result.name, "skipped": result.skipped, "seconds": result.seconds},
        )  # fmt: skip


@shared_task
def reconcile_job(job_id: int) -> None:
    from console.engine.one_job import reconcile_job as run

    with log_context(job_id=job_id):
        run(job_id)


@shared_task
def read_progress_from_logs() -> None:
    """The beat's entry for RLinf's log lines (docs/workload-signals.md, "Fallbacks")."""
    from console.engine.log_progress import read_progress_from_logs as run

    run()


@shared_task
def drain_node(drain_id: int) -> None:
    """One pass of a node drain; the next is queued while the drain runs (a 429 is retried
    then). The beat's `resume_drains` restarts a chain a dead worker broke."""
    from console.engine.nodes import advance_drain

    with log_context(drain_id=drain_id):
        delay = advance_drain(drain_id)
    if delay is not None:
        drain_node.apply_async((drain_id,), countdown=delay)


@shared_task
def resume_drains() -> None:
    from django.utils import timezone

    from console.engine.nodes import stalled_drains

    for drain_id in stalled_drains(timezone.now()):
        drain_node.delay(drain_id)


@shared_task
def apply_addon(attempt_id: int) -> None:
    """One pass of an add-on's install, upgrade or rollback; the next is queued while it runs."""
    from console.engine.addons import advance_attempt

    with log_context(attempt_id=attempt_id):
        delay = advance_attempt(attempt_id)
    if delay is not None:
        apply_addon.apply_async((attempt_id,), countdown=delay)


@shared_task
def observe_addons() -> None:
    """The registry add-ons' rollouts read again (a Ready one that loses availability)."""
    from console.engine.addons import observe_addons as run

    run()


@shared_task
def keep_logs(job_id: int, why: str, pods: list[list[Any]]) -> None:
    """Logs kept at a moment Kubernetes would lose them (console.engine.keep_logs)."""
    from console.engine.keep_logs import KeepPod, keep

    with log_context(job_id=job_id):
        keep(job_id, why, [KeepPod._make(pod) for pod in pods])


@shared_task
def judge_failure(job_id: int) -> None:
    """A Job's run judged again (failures.judge): a pod of it shows a failure's reason."""
    from django.utils import timezone

    from failures.judge import judge

    with log_context(job_id=job_id):
        judge(job_id, timezone.now())


@shared_task
def evict_kept_logs() -> None:
    """The beat's entry for kept logs past their retention or their project's cap."""
    from django.utils import timezone

    from failures.store import evict

    evict(timezone.now())
