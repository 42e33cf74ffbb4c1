"""StatefulSet lifecycle: ordered creation, readiness, restarts in place, recreation with a new
UID, scale down from the highest ordinal, and cascading deletion.

Spec: KUBERNETES-FACTS.md, Workloads (StatefulSet status) and Pods (conditions, labels).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kubernetes.client import V1DeleteOptions

from simcluster.server import SimCluster
from tests.simcluster.conftest import Kube, condition, statefulset_manifest, wait_for


def pods_by_name(kube: Kube, selector: str) -> dict:
    return {
        p.metadata.name: p
        for p in kube.core.list_namespaced_pod(kube.namespace, label_selector=selector).items
    }


def ready_replicas(kube: Kube, name: str) -> int | None:
    status = kube.apps.read_namespaced_stateful_set(name, kube.namespace).status
    return status.ready_replicas  # type: ignore[no-any-return]


def has_ready(kube: Kube, name: str, count: int) -> Callable[[], bool]:
    return lambda: ready_replicas(kube, name) == count


def is_ready(pod) -> bool:
    ready = condition(pod.status.conditions, "Ready")
    return pod.status.phase == "Running" and ready is not None and ready.status == "True"


def test_it_creates_pods_in_order_and_reports_readiness(kube: Kube) -> None:
    kube.apps.create_namespaced_stateful_set(kube.namespace, statefulset_manifest("web", 3))
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        pods = pods_by_name(kube, "app=web")
        for ordinal in (1, 2):
            if f"web-{ordinal}" in pods:
                assert is_ready(pods[f"web-{ordinal - 1}"]), (
                    f"web-{ordinal} exists before web-{ordinal - 1} is Ready"
                )
        status = kube.apps.read_namespaced_stateful_set("web", kube.namespace).status
        if status.ready_replicas == 3:
            break
        time.sleep(0.01)
    assert status.replicas == 3 and status.current_replicas == 3 and status.updated_replicas == 3
    assert (
        status.available_replicas == 3
        and status.collision_count == 0
        and status.observed_generation == 1
    )
    assert status.current_revision == status.update_revision and status.update_revision.startswith(
        "web-"
    )
    pod = kube.core.read_namespaced_pod("web-1", kube.namespace)
    assert pod.metadata.labels == {
        "app": "web",
        "apps.kubernetes.io/pod-index": "1",
        "controller-revision-hash": status.update_revision,
        "statefulset.kubernetes.io/pod-name": "web-1",
    }
    owner = pod.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.controller, owner.block_owner_deletion) == (
        "StatefulSet",
        "web",
        True,
        True,
    )
    assert (pod.spec.hostname, pod.spec.subdomain) == ("web-1", "web")
    assert [c.type for c in pod.status.conditions] == [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    assert (
        pod.status.pod_ip.startswith("10.244.") and pod.status.host_ips[0].ip == pod.status.host_ip
    )
    running = pod.status.container_statuses[0]
    assert (
        running.ready
        and running.started
        and running.restart_count == 0
        and running.state.running.started_at
    )
    assert running.container_id.startswith("containerd://") and running.image_id.startswith(
        "docker.io/library/python@sha256:"
    )


def test_it_omits_zero_counts_in_statefulset_status(kube: Kube) -> None:
    kube.apps.create_namespaced_stateful_set(kube.namespace, statefulset_manifest("idle", 0))
    raw = wait_for(
        lambda: (
            kube.apps.read_namespaced_stateful_set("idle", kube.namespace, _preload_content=False)
            .json()["status"]
            .get("observedGeneration")
            and kube.apps.read_namespaced_stateful_set(
                "idle", kube.namespace, _preload_content=False
            ).json()["status"]
        )
    )
    assert raw["replicas"] == 0 and raw["availableReplicas"] == 0
    assert not {"readyReplicas", "currentReplicas", "updatedReplicas"} & set(raw)
    assert raw["collisionCount"] == 0 and raw["currentRevision"].startswith("idle-")


def test_it_restarts_a_killed_container_in_the_same_pod(kube: Kube, shared_sim: SimCluster) -> None:
    kube.apps.create_namespaced_stateful_set(kube.namespace, statefulset_manifest("kill", 1))
    wait_for(
        lambda: (
            kube.apps.read_namespaced_stateful_set("kill", kube.namespace).status.ready_replicas
            == 1
        )
    )
    before = kube.core.read_namespaced_pod("kill-0", kube.namespace)
    assert shared_sim.kill_pod(kube.namespace, "kill-0") == ["main"]
    after = wait_for(
        lambda: (
            (p := kube.core.read_namespaced_pod("kill-0", kube.namespace))
            .status.container_statuses[0]
            .restart_count
            == 1
            and is_ready(p)
            and p
        )
    )
    assert after.metadata.uid == before.metadata.uid
    terminated = after.status.container_statuses[0].last_state.terminated
    assert (terminated.exit_code, terminated.reason) == (137, "Error")
    assert (
        terminated.started_at
        and terminated.finished_at
        and terminated.container_id == before.status.container_statuses[0].container_id
    )


def test_it_recreates_a_deleted_pod_with_the_same_name_and_a_new_uid(kube: Kube) -> None:
    kube.apps.create_namespaced_stateful_set(kube.namespace, statefulset_manifest("again", 2))
    wait_for(
        lambda: (
            kube.apps.read_namespaced_stateful_set("again", kube.namespace).status.ready_replicas
            == 2
        )
    )
    old_uid = kube.core.read_namespaced_pod("again-0", kube.namespace).metadata.uid
    deleted = kube.core.delete_namespaced_pod("again-0", kube.namespace)
    assert (
        deleted.metadata.deletion_timestamp is not None
        and deleted.metadata.deletion_grace_period_seconds == 30
    )
    fresh = wait_for(
        lambda: (
            (p := _maybe_pod(kube, "again-0")) and p.metadata.uid != old_uid and is_ready(p) and p
        )
    )
    assert fresh.metadata.name == "again-0"
    events = kube.core.list_namespaced_event(
        kube.namespace, field_selector="involvedObject.name=again-0,reason=Killing"
    ).items
    assert events and events[0].message == "Stopping container main"


def test_it_scales_down_from_the_highest_ordinal(kube: Kube) -> None:
    kube.apps.create_namespaced_stateful_set(kube.namespace, statefulset_manifest("down", 3))
    wait_for(
        lambda: (
            kube.apps.read_namespaced_stateful_set("down", kube.namespace).status.ready_replicas
            == 3
        )
    )
    kube.apps.patch_namespaced_stateful_set_scale("down", kube.namespace, {"spec": {"replicas": 1}})
    seen: list[set[str]] = []

    def only_the_first_left() -> bool:
        seen.append(set(pods_by_name(kube, "app=down")))
        return seen[-1] == {"down-0"}

    wait_for(only_the_first_left)
    assert all(
        s in ({"down-0", "down-1", "down-2"}, {"down-0", "down-1"}, {"down-0"}) for s in seen
    )
    kube.apps.patch_namespaced_stateful_set_scale("down", kube.namespace, {"spec": {"replicas": 0}})
    wait_for(lambda: not pods_by_name(kube, "app=down"))
    status = wait_for(
        lambda: (
            (s := kube.apps.read_namespaced_stateful_set("down", kube.namespace).status).replicas
            == 0
            and s
        )
    )
    assert status.ready_replicas is None and status.available_replicas == 0


def test_it_keeps_a_crash_looping_first_pod_alone(kube: Kube) -> None:
    kube.apps.create_namespaced_stateful_set(
        kube.namespace, statefulset_manifest("loop", 3, ["sim", "crash", "0"])
    )
    wait_for(
        lambda: (
            (p := _maybe_pod(kube, "loop-0"))
            and p.status.container_statuses
            and p.status.container_statuses[0].restart_count >= 2
        )
    )
    status = kube.apps.read_namespaced_stateful_set("loop", kube.namespace).status
    assert status.replicas == 1 and status.ready_replicas is None
    assert set(pods_by_name(kube, "app=loop")) == {"loop-0"}


def test_it_rolls_a_new_template_out_from_the_highest_ordinal(kube: Kube) -> None:
    kube.apps.create_namespaced_stateful_set(kube.namespace, statefulset_manifest("roll", 2))
    first = wait_for(
        lambda: (
            (
                s := kube.apps.read_namespaced_stateful_set("roll", kube.namespace).status
            ).ready_replicas
            == 2
            and s
        )
    )
    kube.apps.patch_namespaced_stateful_set(
        "roll",
        kube.namespace,
        {
            "spec": {
                "template": {"spec": {"containers": [{"name": "main", "image": "python:3.13"}]}}
            }
        },
    )
    done = wait_for(
        lambda: (
            (
                s := kube.apps.read_namespaced_stateful_set("roll", kube.namespace).status
            ).observed_generation
            == 2
            and s.updated_replicas == 2
            and s.ready_replicas == 2
            and s.current_revision == s.update_revision
            and s
        )
    )
    assert done.update_revision != first.update_revision
    assert {p.spec.containers[0].image for p in pods_by_name(kube, "app=roll").values()} == {
        "python:3.13"
    }


def test_it_cascades_deletion_by_propagation_policy(kube: Kube) -> None:
    for name in ("bg", "fg", "orphan"):
        kube.apps.create_namespaced_stateful_set(kube.namespace, statefulset_manifest(name, 1))
    for name in ("bg", "fg", "orphan"):
        wait_for(has_ready(kube, name, 1))
    answer = kube.apps.delete_namespaced_stateful_set("bg", kube.namespace)
    assert (answer["kind"], answer["status"], answer["details"]["name"]) == (
        "Status",
        "Success",
        "bg",
    )
    wait_for(lambda: not pods_by_name(kube, "app=bg"))
    foreground = kube.apps.delete_namespaced_stateful_set(
        "fg", kube.namespace, body=V1DeleteOptions(propagation_policy="Foreground")
    )
    assert (
        foreground["metadata"]["finalizers"] == ["foregroundDeletion"]
        and foreground["metadata"]["deletionTimestamp"]
    )
    wait_for(
        lambda: (
            not kube.apps.list_namespaced_stateful_set(
                kube.namespace, field_selector="metadata.name=fg"
            ).items
        )
    )
    assert not pods_by_name(kube, "app=fg")
    kube.apps.delete_namespaced_stateful_set("orphan", kube.namespace, propagation_policy="Orphan")
    wait_for(
        lambda: (
            not kube.apps.list_namespaced_stateful_set(
                kube.namespace, field_selector="metadata.name=orphan"
            ).items
        )
    )
    orphan = kube.core.read_namespaced_pod("orphan-0", kube.namespace)
    assert orphan.metadata.owner_references is None and orphan.metadata.deletion_timestamp is None


def test_it_empties_a_deleted_namespace_before_removing_it(kube: Kube) -> None:
    kube.apps.create_namespaced_stateful_set(kube.namespace, statefulset_manifest("gone", 2))
    wait_for(
        lambda: (
            kube.apps.read_namespaced_stateful_set("gone", kube.namespace).status.ready_replicas
            == 2
        )
    )
    deleted = kube.core.delete_namespace(kube.namespace)
    assert deleted["status"]["phase"] == "Terminating"
    wait_for(
        lambda: (
            not [n for n in kube.core.list_namespace().items if n.metadata.name == kube.namespace]
        )
    )
    assert not kube.core.list_pod_for_all_namespaces(
        field_selector=f"metadata.namespace={kube.namespace}"
    ).items


def _maybe_pod(kube: Kube, name: str):
    found = kube.core.list_namespaced_pod(
        kube.namespace, field_selector=f"metadata.name={name}"
    ).items
    return found[0] if found else None


def test_it_retries_a_pod_whose_name_is_still_held_by_a_deleted_sets_pod(kube: Kube) -> None:
    """A StatefulSet deleted (background) and created again under the same name at once, as the
    console does on Resume: the old pods still hold the names while they terminate, so the new
    set's first creates fail with AlreadyExists. The real controller requeues the set with a
    back-off and creates the pods once the names are free; nothing else wakes it (the old pods'
    owner reference names the old UID)."""
    kube.apps.create_namespaced_stateful_set(kube.namespace, statefulset_manifest("again", 2))
    wait_for(has_ready(kube, "again", 2))
    old_uids = {pod.metadata.uid for pod in pods_by_name(kube, "app=again").values()}
    kube.apps.delete_namespaced_stateful_set("again", kube.namespace)
    created = kube.apps.create_namespaced_stateful_set(
        kube.namespace, statefulset_manifest("again", 2)
    )
    wait_for(has_ready(kube, "again", 2))
    pods = pods_by_name(kube, "app=again")
    assert not {pod.metadata.uid for pod in pods.values()} & old_uids
    assert {pod.metadata.owner_references[0].uid for pod in pods.values()} == {created.metadata.uid}
