"""Thin Celery tasks: they take ids and call plain functions that tests call directly."""

from __future__ import annotations

from celery import shared_task


@shared_task
def sync_all_clusters() -> None:
    """The beat entry point: one sync task per cluster, so clusters spread over the workers."""
    from console.models import Cluster

    for cluster_id in Cluster.objects.values_list("pk", flat=True):
        sync_cluster.delay(cluster_id)


@shared_task
def sync_cluster(cluster_id: int) -> None:
    from console.sync import sync_cluster as run

    run(cluster_id)


@shared_task
def reconcile_job(job_id: int) -> None:
    from console.reconcile import reconcile_job as run

    run(job_id)
