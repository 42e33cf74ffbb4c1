"""A Job that mounts a PersistentVolumeClaim, end to end on simcluster (issue 11, item 3): while
the claim does not exist its Worker is Pending with the scheduler's own message; once the claim is
created (by its owner, not the console) the pod is scheduled and the Worker Running."""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth.models import User

from console.kube.gateway import PODS
from console.models import Cluster
from jobs.messages import render_text
from simcluster.server import SimCluster
from tests.engine.conftest import gateway, phase_of, submit, sync_until, task
from tests.simcluster.conftest import connect
from workers.models import Worker

MISSING = (
    '0/3 nodes are available: persistentvolumeclaim "rlinf-outputs" not found. '
    "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
)


def test_a_worker_waits_for_its_claim_and_runs_once_it_exists(
    alice: User, cluster: Cluster, sim: SimCluster, tmp_path: Path
) -> None:
    volume = {"claim": "rlinf-outputs", "mount_path": "/outputs"}
    job = submit(alice, cluster, "ppo", task("head", volumes=[volume], shm_size="512Mi"))
    worker = lambda: Worker.objects.filter(task__job=job).first()  # noqa: E731
    sync_until(cluster, lambda: (w := worker()) is not None and w.reason == "Unschedulable")
    pending = worker()
    assert pending is not None and pending.phase == "Pending"
    assert render_text(pending.message) == MISSING
    assert phase_of(job) == "Pending"
    [pod] = gateway(cluster).list(PODS, f"trainyard.io/job={job.pk}", "default")
    assert pod["spec"]["volumes"] == [
        {"name": "claim-0", "persistentVolumeClaim": {"claimName": "rlinf-outputs"}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "512Mi"}},
    ]

    kube = connect(sim, tmp_path)
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "rlinf-outputs"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "100Gi"}}},
    }
    kube.core.create_namespaced_persistent_volume_claim("default", claim)
    kube.api.close()
    sync_until(cluster, lambda: (w := worker()) is not None and w.phase == "Running" and w.ready)
    running = worker()
    assert running is not None and running.reason == "" and running.node_name
    sync_until(cluster, lambda: phase_of(job) == "Running")
