"""Thin Celery tasks: they take ids and call plain functions that tests call directly."""

from __future__ import annotations

import logging
import time

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
