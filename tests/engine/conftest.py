"""End-to-end engine fixtures: a SimCluster over real HTTP, registered with `add_cluster`, and
helpers that run sync cycles until a condition holds (short sleeps, bounded by a timeout)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from console.engine.cycle import SyncResult, sync_cluster
from console.engine.gateways import gateway_for
from console.kube.gateway import Gateway
from console.models import Cluster
from jobs import operations
from jobs.models import Job
from jobs.spec import parse_job_spec
from simcluster.server import SimCluster
from tests.conftest import register_sim

# Simulated seconds per real second: `sim run 30` ends after 0.3 s, a 10 s back-off takes 0.1 s.
SPEED = 100.0
TIMEOUT = 20.0


@pytest.fixture(autouse=True)
def _fast_passwords(settings: Any) -> None:
    """The named users are created per test; the production hasher costs ~1 s each."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster(nodes=3, gpus_per_node=8, seed=0, speed=SPEED) as cluster:
        yield cluster


@pytest.fixture
def cluster(db: None, sim: SimCluster, tmp_path: Path) -> Cluster:
    return register_sim(sim, tmp_path)


def gateway(cluster: Cluster) -> Gateway:
    """A fresh gateway, for acting behind the console's back and counting API writes."""
    return gateway_for(Cluster.objects.get(pk=cluster.pk))


def sync_until(
    cluster: Cluster, condition: Callable[[], Any], timeout: float = TIMEOUT
) -> SyncResult:
    """Runs sync cycles until `condition()` is truthy; fails with the last state otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        result = sync_cluster(cluster.pk)
        if condition():
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s; last sync: {result}")
        time.sleep(0.05)


def task(
    role: str = "worker", *, replicas: int = 1, kind: str = "StatefulSet", **more: Any
) -> dict[str, Any]:
    return {
        "role": role,
        "kind": kind,
        "replicas": replicas,
        "image": "ghcr.io/trainyard/rlinf-trainer:0.4.2",
        "resources": {"cpu": "1", "memory": "1Gi", "gpu": 1},
        **more,
    }


def submit(user: User, cluster: Cluster, name: str, *tasks: dict[str, Any]) -> Job:
    """Creates a Job as the console does (jobs.operations.create_job)."""
    spec = parse_job_spec({"name": name, "cluster": cluster.name, "tasks": list(tasks)}, user)
    return operations.create_job(user, spec)


def phase_of(job: Job) -> str:
    return Job.objects.values_list("phase", flat=True).get(pk=job.pk)
