"""Cordon, uncordon and drain against simcluster, through the console's own functions
(console.node_actions, console.engine.nodes): issue 36, Build 2 and its Show list.

Spec §Node and Addon status: cordoning changes `spec.unschedulable`, never Online/Offline.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from console import node_actions
from console.engine.nodes import RETRY_SECONDS, advance_drain, stalled_drains
from console.kube.gateway import BUDGETS
from console.models import AuditEvent, Cluster, DrainPod, DrainRun, Node, NodeCordon
from jobs.choices import DrainAction, DrainPodStatus, DrainReason, DrainState
from jobs.status.drain import GRACE_SLACK_SECONDS
from simcluster.resources import RESOURCES
from simcluster.server import SimCluster
from tests.engine.conftest import gateway, submit, sync_until, task

NODE = "sim-node-0"


def create(
    sim: SimCluster, plural: str, manifest: dict[str, Any], namespace: str = "default"
) -> None:
    with sim.cluster.store.lock:
        sim.cluster.writer.create(RESOURCES[plural], namespace, manifest)
    sim.tick()


def _node(sim: SimCluster) -> dict[str, Any]:
    node = sim.cluster.store.get("nodes", ("", NODE))
    assert node is not None
    return node


def pinned_deployment(name: str, replicas: int = 1, **pod: Any) -> dict[str, Any]:
    labels = {"app": name}
    spec = {
        "nodeSelector": {"kubernetes.io/hostname": NODE},
        "containers": [{"name": "main", "image": "nginx:1.27"}],
        **pod,
    }
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def budget(name: str, app: str, min_available: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": app}}, "minAvailable": min_available},
    }


def ready_on_node(sim: SimCluster, app: str, count: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with sim.cluster.store.lock:
            pods = [
                p for p in sim.cluster.store.objects("pods", "default")
                if (p["metadata"].get("labels") or {}).get("app") == app
                and p["spec"].get("nodeName") == NODE
                and any(c["type"] == "Ready" and c["status"] == "True"
                        for c in p.get("status", {}).get("conditions", []))
            ]  # fmt: skip
        if len(pods) == count:
            return
        time.sleep(0.02)
    raise AssertionError(f"{app}: {count} ready pods on {NODE} not seen")


def budget_allows(sim: SimCluster, name: str) -> int:
    with sim.cluster.store.lock:
        found = sim.cluster.store.get("poddisruptionbudgets", ("default", name)) or {}
    return int((found.get("status") or {}).get("disruptionsAllowed", -1))


def run_drain(run: DrainRun, timeout: float = 20.0) -> DrainRun:
    """Passes as the task chains them (without its 5 s wait), until the drain ends."""
    deadline = time.monotonic() + timeout
    while advance_drain(run.pk) is not None:
        assert time.monotonic() < deadline, "the drain did not end"
        time.sleep(0.05)
    return DrainRun.objects.get(pk=run.pk)


def pods_left(sim: SimCluster, app: str) -> list[str]:
    with sim.cluster.store.lock:
        return [
            p["metadata"]["name"] for p in sim.cluster.store.objects("pods", "default")
            if (p["metadata"].get("labels") or {}).get("app") == app
            and p["spec"].get("nodeName") == NODE
        ]  # fmt: skip


@pytest.fixture
def synced(cluster: Cluster) -> Cluster:
    sync_until(cluster, lambda: Node.objects.filter(cluster=cluster).count() == 3)
    return cluster


def test_it_cordons_with_a_reason_and_never_changes_online_offline(
    sim: SimCluster, synced: Cluster, olga: User
) -> None:
    node_actions.cordon(olga, synced, NODE, "  replace the NIC  ")
    with sim.cluster.store.lock:
        spec = _node(sim)["spec"]
    assert spec["unschedulable"] is True
    row = Node.objects.get(cluster=synced, name=NODE)
    assert (row.unschedulable, row.phase) == (True, Node.Phase.ONLINE)
    cordon = NodeCordon.objects.get(cluster=synced, node_name=NODE)
    assert (cordon.reason, cordon.by_name) == ("replace the NIC", "olga")
    sync_until(synced, lambda: Node.objects.get(cluster=synced, name=NODE).unschedulable)
    assert Node.objects.get(cluster=synced, name=NODE).phase == Node.Phase.ONLINE

    node_actions.uncordon(olga, synced, NODE)
    with sim.cluster.store.lock:
        assert "unschedulable" not in _node(sim)["spec"]
    assert not NodeCordon.objects.filter(cluster=synced).exists()
    nodes = AuditEvent.objects.filter(action__startswith="node.").order_by("at", "pk")
    actions = list(nodes.values_list("action", "target", "detail"))
    assert actions == [
        (AuditEvent.Action.NODE_CORDON, f"sim/{NODE}", "replace the NIC"),
        (AuditEvent.Action.NODE_UNCORDON, f"sim/{NODE}", ""),
    ]


def test_it_refuses_a_cordon_without_a_reason_and_anyone_but_an_operator(
    sim: SimCluster, synced: Cluster, olga: User, bob: User
) -> None:
    with pytest.raises(node_actions.ActionRefused) as refused:
        node_actions.cordon(olga, synced, NODE, "   ")
    assert refused.value.status == 422
    with pytest.raises(PermissionDenied):
        node_actions.cordon(bob, synced, NODE, "mine now")
    with pytest.raises(PermissionDenied):
        node_actions.start_drain(bob, synced, NODE)
    with sim.cluster.store.lock:
        assert "unschedulable" not in _node(sim)["spec"]


def test_it_ends_partly_drained_naming_the_budget_then_drained_once_it_allows(
    sim: SimCluster, synced: Cluster, olga: User
) -> None:
    create(sim, "deployments", pinned_deployment("api"))
    ready_on_node(sim, "api", 1)
    create(sim, "poddisruptionbudgets", budget("api-pdb", "api", 1))
    assert budget_allows(sim, "api-pdb") == 0

    shown = node_actions.preview(olga, synced, NODE)
    api = next(p for p in shown.plans if p.pod.labels.get("app") == "api")
    assert (api.action, api.reason) == (DrainAction.BLOCKED, DrainReason.BUDGET)
    assert "default/api-pdb" in api.detail
    assert {p.reason for p in shown.plans if p.action == DrainAction.SKIP} == {
        DrainReason.DAEMONSET
    }

    first = run_drain(node_actions.start_drain(olga, synced, NODE, timeout_seconds=1))
    assert first.state == DrainState.PARTLY_DRAINED
    row = first.pods.get(name__startswith="api-")
    assert (row.status, row.reason) == (DrainPodStatus.BLOCKED, DrainReason.BUDGET)
    assert "api-pdb" in row.detail and row.attempts >= 1
    assert pods_left(sim, "api"), "a blocked pod was never deleted"

    with sim.cluster.store.lock:
        sim.cluster.store.remove("poddisruptionbudgets", ("default", "api-pdb"))
    second = run_drain(node_actions.start_drain(olga, synced, NODE, timeout_seconds=30))
    assert second.state == DrainState.DRAINED
    assert pods_left(sim, "api") == []
    with sim.cluster.store.lock:
        assert _node(sim)["spec"]["unschedulable"] is True


def test_it_never_reports_drained_while_an_evicted_pod_is_still_terminating(
    sim: SimCluster, synced: Cluster, olga: User
) -> None:
    """Issue 36: the drain waits for each pod to be gone within its grace period. Within it
    the pod is `evicting` and the drain runs; past it (and its removal's slack) the pod is
    `failed`, naming its grace period, and the drain ends Failed while the pod remains."""
    slow: dict[str, Any] = {"terminationGracePeriodSeconds": 600, "containers": [
        {"name": "main", "image": "python:3.12", "command": ["sim", "hang"]}]}  # fmt: skip
    create(sim, "deployments", pinned_deployment("slow", **slow))
    ready_on_node(sim, "slow", 1)
    run = node_actions.start_drain(olga, synced, NODE, timeout_seconds=3600)
    assert advance_drain(run.pk) == 5.0
    assert advance_drain(run.pk) == 5.0
    row = DrainPod.objects.get(drain=run, name__startswith="slow-")
    assert row.status == DrainPodStatus.EVICTING
    assert DrainRun.objects.get(pk=run.pk).state == DrainState.RUNNING
    assert pods_left(sim, "slow")
    within = timezone.now() - timedelta(seconds=600 + GRACE_SLACK_SECONDS - 5)
    DrainPod.objects.filter(pk=row.pk).update(updated_at=within)
    assert advance_drain(run.pk) == 5.0
    assert DrainPod.objects.get(pk=row.pk).status == DrainPodStatus.EVICTING
    past = timezone.now() - timedelta(seconds=600 + GRACE_SLACK_SECONDS + 5)
    DrainPod.objects.filter(pk=row.pk).update(updated_at=past)
    ended = run_drain(run)  # the node's other pods (an operator's) go meanwhile
    late = DrainPod.objects.get(pk=row.pk)
    assert (late.status, late.reason) == (DrainPodStatus.FAILED, DrainReason.GRACE_PERIOD)
    assert "grace period 600 s" in late.detail
    assert ended.state == DrainState.FAILED
    assert pods_left(sim, "slow"), "the pod is still there: never Drained"


def test_it_ends_drained_once_the_budget_allows_within_the_same_drain(
    sim: SimCluster, synced: Cluster, olga: User
) -> None:
    """Issue 36, Show: a drain blocked by a budget (429, retried at each pass, every 5 s)
    ends Drained once the budget allows a disruption — the budget raised, not removed — and
    never reports drained while the pod remains. The passes are called directly: the 5 s is
    the task's countdown (advance_drain's answer), not a wait in the drain."""
    create(sim, "deployments", pinned_deployment("api"))
    ready_on_node(sim, "api", 1)
    create(sim, "poddisruptionbudgets", budget("api-pdb", "api", 1))
    assert budget_allows(sim, "api-pdb") == 0
    run = node_actions.start_drain(olga, synced, NODE, timeout_seconds=3600)
    for attempt in (1, 2, 3):
        assert advance_drain(run.pk) == RETRY_SECONDS
        row = run.pods.get(name__startswith="api-")
        assert (row.status, row.reason, row.attempts) == (
            DrainPodStatus.BLOCKED, DrainReason.BUDGET, attempt,
        )  # fmt: skip
        assert "api-pdb" in row.detail
        assert DrainRun.objects.get(pk=run.pk).state == DrainState.RUNNING

    gateway(synced).patch(BUDGETS, "default", "api-pdb", {"spec": {"minAvailable": 0}})
    sim.tick()
    assert budget_allows(sim, "api-pdb") == 1
    states = []
    for _ in range(200):
        delay = advance_drain(run.pk)
        state = DrainRun.objects.get(pk=run.pk).state
        states.append(state)
        if state == DrainState.DRAINED:
            assert pods_left(sim, "api") == [], "drained while a pod remains"
        if delay is None:
            break
        assert delay == RETRY_SECONDS
        time.sleep(0.02)
    assert states[-1] == DrainState.DRAINED and states.count(DrainState.DRAINED) == 1
    row = run.pods.get(name__startswith="api-")
    assert (row.status, row.attempts) == (DrainPodStatus.EVICTED, 4)
    with sim.cluster.store.lock:
        assert sim.cluster.store.get("poddisruptionbudgets", ("default", "api-pdb"))


def test_it_refuses_a_drain_blocked_by_emptydir_unless_told_and_stops_leaving_it_cordoned(
    sim: SimCluster, synced: Cluster, olga: User
) -> None:
    scratch: dict[str, Any] = {"volumes": [{"name": "scratch", "emptyDir": {}}]}
    create(sim, "deployments", pinned_deployment("cache", **scratch))
    ready_on_node(sim, "cache", 1)
    with pytest.raises(node_actions.ActionRefused) as refused:
        node_actions.start_drain(olga, synced, NODE)
    assert refused.value.status == 409 and "cache-" in refused.value.message
    run = node_actions.start_drain(olga, synced, NODE, skip_blocked=True, timeout_seconds=60)
    row = run.pods.get(name__startswith="cache-")
    assert (row.status, row.reason) == (DrainPodStatus.BLOCKED, DrainReason.EMPTY_DIR)
    stopped = node_actions.stop_drain(olga, run)
    assert stopped.state == DrainState.STOPPED
    assert advance_drain(run.pk) is None
    assert Node.objects.get(cluster=synced, name=NODE).unschedulable
    assert pods_left(sim, "cache")
    assert AuditEvent.objects.filter(action=AuditEvent.Action.NODE_DRAIN_STOP).count() == 1


def test_it_names_the_trainyard_jobs_that_lose_workers_with_owner_and_gpus(
    sim: SimCluster, synced: Cluster, olga: User, alice: User
) -> None:
    job = submit(alice, synced, "ppo", task("worker", replicas=2))
    sync_until(synced, lambda: job.tasks.get().workers.filter(node_name__gt="").count() == 2)
    worker = job.tasks.get().workers.exclude(node_name="").first()
    assert worker is not None
    node = worker.node_name
    shown = node_actions.preview(olga, synced, node)
    at_risk = next(j for j in shown.jobs if j.job_id == job.pk)
    assert (at_risk.name, at_risk.owner, at_risk.project, at_risk.gpus) == (
        "ppo",
        "alice",
        "vision",
        2,
    )
    assert at_risk.gpus_on_node >= 1 and at_risk.pods


def test_it_leaves_a_held_drain_alone_and_restarts_a_chain_a_dead_worker_broke(
    cluster: Cluster, olga: User
) -> None:
    """A pass holding the lease (or a worker killed mid-pass) is not doubled; once the lease
    ran out and no pass came for three intervals, the beat's `resume_drains` finds the drain."""
    now = timezone.now()
    run = DrainRun.objects.create(
        cluster=cluster, node_name=NODE, requested_by_name="olga",
        lease_until=now + timedelta(seconds=60), last_pass_at=now,
    )  # fmt: skip
    assert advance_drain(run.pk) is None
    assert DrainRun.objects.get(pk=run.pk).last_pass_at == now  # no pass ran
    assert stalled_drains(now) == []
    assert stalled_drains(now + timedelta(seconds=61)) == [run.pk]
    DrainRun.objects.filter(pk=run.pk).update(state=DrainState.STOPPED)
    assert stalled_drains(now + timedelta(seconds=61)) == []
