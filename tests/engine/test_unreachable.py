"""A cluster that cannot be read freezes what the console shows (ARCHITECTURE §Principles:
never invent a transition from missing data) and is marked unreachable, keeping the time of its
last successful sync."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from console.engine.cycle import sync_cluster
from console.models import Cluster, Node
from jobs.models import Job, Task
from simcluster.server import SimCluster
from tests.engine.conftest import phase_of, submit, sync_until, task
from workers.models import PodInstance, Worker


def snapshot(job: Job) -> list[object]:
    """Every row the sync writes for the job and the cluster's nodes."""
    return [
        list(Job.objects.filter(pk=job.pk).values()),
        list(Task.objects.filter(job=job).order_by("pk").values()),
        list(Worker.objects.filter(task__job=job).order_by("pk").values()),
        list(PodInstance.objects.filter(task__job=job).order_by("pk").values()),
        list(Node.objects.order_by("pk").values()),
    ]


FAULTS: dict[str, Callable[[SimCluster], object]] = {
    "status 500": lambda sim: sim.set_fault(status=500, seconds=60),
    "status 429": lambda sim: sim.set_fault(status=429, seconds=60),
    "truncated JSON": lambda sim: sim.set_fault(truncate=True, seconds=60),
    "timeout": lambda sim: sim.set_fault(timeout=True, seconds=60),
    "stopped server": lambda sim: sim.stop(),
}


@pytest.mark.parametrize("fault", list(FAULTS))
@override_settings(TRAINYARD_KUBE_CONNECT_TIMEOUT=1, TRAINYARD_KUBE_READ_TIMEOUT=1)
def test_it_freezes_everything_and_marks_the_cluster_unreachable(
    alice: User, cluster: Cluster, sim: SimCluster, fault: str
) -> None:
    job = submit(alice, cluster, "train", task("worker", command=["sim", "crash", "20", "3"]))
    sync_until(cluster, lambda: phase_of(job) == "Running")
    cluster.refresh_from_db()
    last_synced_at = cluster.last_synced_at
    assert last_synced_at is not None
    before = snapshot(job)
    FAULTS[fault](sim)
    result = sync_cluster(cluster.pk)
    assert not result.reachable and not result.skipped
    cluster.refresh_from_db()
    assert cluster.reachable is False
    assert cluster.last_synced_at == last_synced_at
    assert cluster.last_attempt_at is not None and cluster.last_attempt_at > last_synced_at
    assert cluster.message and sim.token not in cluster.message
    assert cluster.sync_lease_until is None
    assert snapshot(job) == before  # nothing moved, although the pod keeps crashing
    assert sync_cluster(cluster.pk).reachable is False
    assert snapshot(job) == before


def test_it_comes_back_when_the_cluster_answers_again(
    alice: User, cluster: Cluster, sim: SimCluster
) -> None:
    job = submit(alice, cluster, "train", task("worker"))
    sync_until(cluster, lambda: phase_of(job) == "Running")
    sim.set_fault(status=503, seconds=60)
    assert sync_cluster(cluster.pk).reachable is False
    sim.clear_faults()
    assert sync_cluster(cluster.pk).reachable is True
    cluster.refresh_from_db()
    assert (cluster.reachable, cluster.message) == (True, "")
    assert cluster.last_synced_at == cluster.last_attempt_at
