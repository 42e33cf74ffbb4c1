"""A node going offline, seen through the API: NotReady conditions and taints, stale pods, the
taint manager's eviction after 300 s, and the StatefulSet pod coming back elsewhere.

Spec: KUBERNETES-FACTS.md, Nodes (kubelet gone) and Pods (node lost).
"""

from __future__ import annotations

from datetime import timedelta

from simcluster.server import SimCluster
from tests.simcluster.conftest import (
    Kube,
    condition,
    pod_manifest,
    raw_call,
    statefulset_manifest,
    wait_for,
)


def test_it_takes_a_node_offline_and_moves_its_pods(own_kube: Kube, own_sim: SimCluster) -> None:
    kube = own_kube
    kube.apps.create_namespaced_stateful_set("default", statefulset_manifest("train", 1))
    wait_for(
        lambda: (
            kube.apps.read_namespaced_stateful_set("train", "default").status.ready_replicas == 1
        )
    )
    pod = kube.core.read_namespaced_pod("train-0", "default")
    lost = pod.spec.node_name

    assert raw_call(kube, "POST", f"/_sim/nodes/{lost}/offline")[0] == 200
    # The kubelet is gone: its last heartbeat is the one the node shows from now on.
    heartbeat = condition(kube.core.read_node(lost).status.conditions, "Ready").last_heartbeat_time
    own_sim.advance(45)
    node = kube.core.read_node(lost)
    assert {(c.type, c.status, c.reason, c.message) for c in node.status.conditions} == {
        (t, "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
    }
    ready = condition(node.status.conditions, "Ready")
    assert ready.last_heartbeat_time == heartbeat
    assert ready.last_transition_time >= ready.last_heartbeat_time + timedelta(seconds=40)
    assert sorted((t.key, t.effect) for t in node.spec.taints) == [
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoSchedule"),
    ]
    assert all(t.time_added for t in node.spec.taints)
    stale = kube.core.read_namespaced_pod("train-0", "default")
    assert stale.status.phase == "Running" and stale.status.container_statuses[0].ready
    assert condition(stale.status.conditions, "Ready").status == "False"
    assert kube.core.list_namespaced_event(
        "default", field_selector="involvedObject.name=train-0,reason=NodeNotReady"
    ).items

    own_sim.advance(300)
    evicted = kube.core.read_namespaced_pod("train-0", "default")
    target = condition(evicted.status.conditions, "DisruptionTarget")
    assert (target.status, target.reason) == ("True", "DeletionByTaintManager")
    assert (
        evicted.metadata.deletion_timestamp is not None and evicted.metadata.uid == pod.metadata.uid
    )

    own_sim.advance(35)
    moved = wait_for(
        lambda: (
            (p := kube.core.read_namespaced_pod("train-0", "default")).metadata.uid
            != pod.metadata.uid
            and condition(p.status.conditions, "Ready")
            and condition(p.status.conditions, "Ready").status == "True"
            and p
        )
    )
    assert moved.spec.node_name != lost

    own_sim.node_online(lost)
    back = wait_for(
        lambda: (
            (n := kube.core.read_node(lost))
            and condition(n.status.conditions, "Ready").status == "True"
            and n
        )
    )
    assert not back.spec.taints


def test_it_reports_its_state_on_the_control_surface(own_kube: Kube) -> None:
    code, state = raw_call(own_kube, "GET", "/_sim/state")
    assert (
        code == 200 and state["counts"]["nodes"] == 3 and set(state["nodes"].values()) == {"online"}
    )
    assert raw_call(own_kube, "POST", "/_sim/nodes/no-such-node/offline")[0] == 404
    assert raw_call(own_kube, "POST", "/_sim/namespaces/default/pods/ghost/kill")[0] == 404
    own_kube.core.create_namespaced_pod("default", pod_manifest("victim"))
    wait_for(
        lambda: own_kube.core.read_namespaced_pod("victim", "default").status.phase == "Running"
    )
    assert raw_call(own_kube, "POST", "/_sim/namespaces/default/pods/victim/kill") == (
        200,
        {"killed": ["main"]},
    )
    victim = "victim"
    status = wait_for(
        lambda: (
            own_kube.core.read_namespaced_pod(victim, "default")
            .status.container_statuses[0]
            .last_state.terminated
        )
    )
    assert (status.exit_code, status.reason) == (137, "Error")


def test_a_pod_evicted_for_node_pressure_reads_as_kubernetes_writes_it(own_kube: Kube) -> None:
    """KUBERNETES-FACTS, Pods (Evicted): phase Failed, `status.reason: Evicted` with the node's
    words, a DisruptionTarget condition TerminationByKubelet, Ready False (PodFailed), the
    container terminated (reason Error) and not restarted, a Warning event Evicted."""
    own_kube.core.create_namespaced_pod("default", pod_manifest("pressed"))
    wait_for(
        lambda: own_kube.core.read_namespaced_pod("pressed", "default").status.phase == "Running"
    )
    path = "/_sim/namespaces/default/pods/pressed/evict"
    assert raw_call(own_kube, "POST", path) == (200, {"evicted": True})
    assert raw_call(own_kube, "POST", path) == (200, {"evicted": False})  # once only
    status = own_kube.core.read_namespaced_pod("pressed", "default").status
    assert (status.phase, status.reason) == ("Failed", "Evicted")
    assert status.message.startswith("The node was low on resource: memory.")
    target = condition(status.conditions, "DisruptionTarget")
    assert (target.status, target.reason) == ("True", "TerminationByKubelet")
    ready = condition(status.conditions, "Ready")
    assert (ready.status, ready.reason) == ("False", "PodFailed")
    (container,) = status.container_statuses
    assert container.state.terminated.reason == "Error" and container.restart_count == 0
    events = own_kube.core.list_namespaced_event("default").items
    assert any(e.reason == "Evicted" and e.type == "Warning" for e in events)
