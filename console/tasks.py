"""Thin Celery tasks: they take ids and call plain functions that tests call directly."""

from __future__ import annotations

import logging

from celery import shared_task

logger = logging.getLogger(__name__)


@shared_task
def sync_all_clusters() -> None:
    """The beat entry point: one sync task per cluster, so clusters spread over the workers."""
    from console.models import Cluster

    for cluster_id in Cluster.objects.values_list("pk", flat=True):
        sync_cluster.delay(cluster_id)


@shared_task
def sync_cluster(cluster_id: int) -> None:
    from console.engine.cycle import sync_cluster as run

    result = run(cluster_id)
    logger.info("sync of cluster %s (%s): %s", result.name, cluster_id, result.summary())


@shared_task
def reconcile_job(job_id: int) -> None:
    from console.engine.one_job import reconcile_job as run

    run(job_id)
