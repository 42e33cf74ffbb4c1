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
    from console.models import Cluster

    for cluster_id in Cluster.objects.values_list("pk", flat=True):
        sync_cluster.delay(cluster_id)


@shared_task
def sync_cluster(cluster_id: int) -> None:
    """Each cycle is added to the cluster's metrics (console.metrics), failed ones too."""
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
        logger.info(
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
def keep_logs(job_id: int, why: str, pods: list[list[Any]]) -> None:
    """Logs kept at a moment Kubernetes would lose them (console.engine.keep_logs)."""
    from console.engine.keep_logs import KeepPod, keep

    with log_context(job_id=job_id):
        keep(job_id, why, [KeepPod._make(pod) for pod in pods])


@shared_task
def evict_kept_logs() -> None:
    """The beat's entry for kept logs past their retention or their project's cap."""
    from django.utils import timezone

    from failures.store import evict

    evict(timezone.now())
