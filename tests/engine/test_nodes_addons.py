"""Nodes and add-ons as the sync reports them (spec §Node and Addon status)."""

from __future__ import annotations

from django.contrib.auth.models import User

from console.engine.cycle import sync_cluster
from console.engine.stored import SCHEMA
from console.kube.gateway import DEPLOYMENTS
from console.models import Addon, Cluster, Node
from jobs import operations
from jobs.models import Job
from simcluster.server import SimCluster
from tests.engine.conftest import gateway, phase_of, submit, sync_until, task


def node(name: str) -> Node:
    return Node.objects.get(name=name)


def addon(name: str) -> Addon:
    return Addon.objects.get(name=name)


def test_it_lists_the_nodes_with_capacity_and_requested_gpus(alice: User, cluster: Cluster) -> None:
    job = submit(alice, cluster, "train", task("worker", replicas=3))
    sync_until(cluster, lambda: phase_of(job) == "Running")
    sync_until(cluster, lambda: sum(n.gpu_allocated for n in Node.objects.all()) == 3)
    nodes = Node.objects.order_by("name")
    assert [n.name for n in nodes] == ["sim-node-0", "sim-node-1", "sim-node-2"]
    assert all(n.phase == "Online" and n.gpu_capacity == 8 and n.cpu_capacity for n in nodes)
    assert all(n.last_heartbeat_at is not None and not n.unschedulable for n in nodes)


def test_it_follows_the_gpus_held_per_node_as_pods_come_and_go(
    alice: User, cluster: Cluster
) -> None:
    """Spec §Node and Addon status: a watch cycle moves a Node's total by its changed pods
    only; a relist sums the pods again and finds the same totals."""
    job = submit(alice, cluster, "train", task("worker", replicas=3))
    sync_until(cluster, lambda: sum(n.gpu_allocated for n in Node.objects.all()) == 3)
    operations.stop_job(alice, Job.objects.get(pk=job.pk))
    sync_until(cluster, lambda: sum(n.gpu_allocated for n in Node.objects.all()) == 0)
    operations.resume_job(alice, Job.objects.get(pk=job.pk))
    sync_until(cluster, lambda: sum(n.gpu_allocated for n in Node.objects.all()) == 3)
    watched = {n.name: n.gpu_allocated for n in Node.objects.all()}
    Cluster.objects.filter(pk=cluster.pk).update(watch_cursors={"observations": SCHEMA})
    assert sync_cluster(cluster.pk).relisted
    assert {n.name: n.gpu_allocated for n in Node.objects.all()} == watched


def test_it_shows_a_node_whose_kubelet_stopped_as_offline(
    cluster: Cluster, sim: SimCluster
) -> None:
    sync_cluster(cluster.pk)
    sim.node_offline("sim-node-1")
    sync_until(cluster, lambda: node("sim-node-1").phase == "Offline")
    assert "NodeStatusUnknown" in node("sim-node-1").message
    assert node("sim-node-0").phase == "Online"


def test_it_shows_a_cordoned_node_online_and_unschedulable(
    cluster: Cluster, sim: SimCluster
) -> None:
    """Spec §Node and Addon status: schedulability is separate from Online/Offline."""
    sync_cluster(cluster.pk)
    sim.cordon("sim-node-2")
    sync_cluster(cluster.pk)
    assert (node("sim-node-2").phase, node("sim-node-2").unschedulable) == ("Online", True)


def test_it_forgets_nodes_that_left_the_cluster(cluster: Cluster) -> None:
    Node.objects.create(
        cluster=cluster, name="gone-node", phase="Online", observed_at=cluster.created_at
    )
    sync_cluster(cluster.pk)
    assert not Node.objects.filter(name="gone-node").exists()


def test_it_shows_the_addons_ready_with_their_versions(cluster: Cluster) -> None:
    sync_until(cluster, lambda: Addon.objects.filter(phase="Ready").count() == 2)
    assert (addon("kuberay-operator").current_version, addon("kuberay-operator").workload_kind) == (
        "v1.3.0", "Deployment",
    )  # fmt: skip
    assert addon("nvidia-device-plugin").current_version == "v0.17.0"
    Addon.objects.filter(name="kuberay-operator").update(desired_version="v1.4.0")
    sync_cluster(cluster.pk)
    assert addon("kuberay-operator").phase == "Pending"  # the desired version is not rolled out


def test_it_shows_a_bad_upgrade_upgrading_then_failed(cluster: Cluster) -> None:
    sync_until(cluster, lambda: addon_phase("kuberay-operator") == "Ready")
    bad = {
        "spec": {
            "progressDeadlineSeconds": 600,  # 6 s at SPEED: longer than one watch window
            "template": {
                "spec": {
                    "containers": [
                        {"name": "kuberay-operator", "image": "quay.io/kuberay/nonexistent:v1.4.0"}
                    ]
                }
            },
        }
    }
    gateway(cluster).patch(DEPLOYMENTS, "kube-system", "kuberay-operator", bad)
    phases: list[str] = []

    def failed() -> bool:
        phases.append(addon_phase("kuberay-operator"))
        return phases[-1] == "Failed"

    sync_until(cluster, failed)
    assert "Upgrading" in phases
    assert set(phases) <= {"Ready", "Upgrading", "Failed"}
    operator = addon("kuberay-operator")
    assert operator.current_version == "v1.3.0"  # the old pods keep running
    assert operator.message


def addon_phase(name: str) -> str:
    return Addon.objects.filter(name=name).values_list("phase", flat=True).first() or ""
