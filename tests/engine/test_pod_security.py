"""End to end on simcluster: the pods the console creates meet the Pod Security "restricted"
level, so a Job runs in a namespace that enforces it (deploy/namespace-restricted.yaml); with
TRAINYARD_POD_USER=any they meet only "baseline", and that namespace refuses them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth.models import User

from console.kube.gateway import PODS, STATEFULSETS
from console.models import Cluster
from simcluster.server import SimCluster
from tests.deploy.test_rbac import documents
from tests.engine.conftest import gateway, phase_of, submit, sync_until, task
from tests.simcluster.conftest import connect, wait_for


def enforce_restricted(sim: SimCluster, tmp_path: Path) -> None:
    """The Pod Security labels of the example job namespace, deploy/namespace-restricted.yaml."""
    (namespace,) = documents("namespace-restricted.yaml")
    labels = namespace["metadata"]["labels"]
    kube = connect(sim, tmp_path)
    kube.core.patch_namespace("default", {"metadata": {"labels": labels}})
    kube.api.close()


def test_a_job_runs_in_a_namespace_that_enforces_restricted(
    alice: User, cluster: Cluster, sim: SimCluster, tmp_path: Path
) -> None:
    enforce_restricted(sim, tmp_path)
    job = submit(
        alice, cluster, "train", task("head"), task("eval", kind="Job", command=["sim", "hang"])
    )
    sync_until(cluster, lambda: phase_of(job) == "Running")
    pods = gateway(cluster).list(PODS, f"trainyard.io/job={job.pk}", "default")
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["securityContext"] == {
            "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"},
            "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
        }  # fmt: skip
        assert pod["spec"]["containers"][0]["securityContext"] == {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
        }  # fmt: skip


def test_with_any_user_the_restricted_namespace_refuses_the_pods(
    alice: User, cluster: Cluster, sim: SimCluster, tmp_path: Path, settings: Any
) -> None:
    settings.TRAINYARD_POD_USER = "any"
    enforce_restricted(sim, tmp_path)
    job = submit(alice, cluster, "train", task("head"))
    sync_until(
        cluster,
        lambda: gateway(cluster).list(STATEFULSETS, f"trainyard.io/job={job.pk}", "default"),
    )
    kube = connect(sim, tmp_path)

    def refused() -> list[Any]:  # the controller records it once it has tried to create a pod
        events = kube.core.list_namespaced_event("default", field_selector="reason=FailedCreate")
        return list(events.items)

    events = wait_for(refused)
    kube.api.close()
    assert events and 'violates PodSecurity "restricted:latest"' in events[0].message
    assert gateway(cluster).list(PODS, f"trainyard.io/job={job.pk}", "default") == []
    assert phase_of(job) == "Pending"
