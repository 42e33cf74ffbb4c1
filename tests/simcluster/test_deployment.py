"""Deployments (through ReplicaSets) and DaemonSets: rollouts, their conditions, and a rollout
that never becomes ready hitting the progress deadline.

Spec: the brief's Deployment/DaemonSet section (rollouts, ProgressDeadlineExceeded).
"""

from __future__ import annotations

from tests.simcluster.conftest import Kube, condition, container, deployment_manifest, wait_for


def deployment(kube: Kube, name: str):
    return kube.apps.read_namespaced_deployment(name, kube.namespace)


def progressing(kube: Kube, name: str):
    return condition(deployment(kube, name).status.conditions, "Progressing")


def test_it_rolls_a_deployment_out_to_a_new_image(kube: Kube) -> None:
    kube.apps.create_namespaced_deployment(
        kube.namespace, deployment_manifest("api", 3, "nginx:1.27")
    )
    wait_for(lambda: (c := progressing(kube, "api")) and c.reason == "NewReplicaSetAvailable")
    first = deployment(kube, "api")
    assert (
        first.status.replicas,
        first.status.ready_replicas,
        first.status.available_replicas,
        first.status.updated_replicas,
    ) == (3, 3, 3, 3)
    available = condition(first.status.conditions, "Available")
    assert (available.status, available.reason, available.message) == (
        "True",
        "MinimumReplicasAvailable",
        "Deployment has minimum availability.",
    )
    assert first.metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    pod = kube.core.list_namespaced_pod(kube.namespace, label_selector="app=api").items[0]
    assert (
        pod.metadata.owner_references[0].kind == "ReplicaSet"
        and "pod-template-hash" in pod.metadata.labels
    )
    kube.apps.patch_namespaced_deployment(
        "api",
        kube.namespace,
        {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:1.28"}]}}}},
    )

    def rolled_out():
        d = deployment(kube, "api")
        c = condition(d.status.conditions, "Progressing")
        done = (
            d.status.observed_generation == 2
            and c.reason == "NewReplicaSetAvailable"
            and d.status.updated_replicas == 3
            and d.status.replicas == 3
        )
        return done and d

    done = wait_for(rolled_out, timeout=20)
    assert done.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    new_rs = f"api-{done.spec.template.metadata.labels.get('pod-template-hash', '')}"
    assert condition(done.status.conditions, "Progressing").message.endswith(
        "has successfully progressed."
    )
    images = {
        p.spec.containers[0].image
        for p in kube.core.list_namespaced_pod(kube.namespace, label_selector="app=api").items
        if not p.metadata.deletion_timestamp
    }
    assert images == {"nginx:1.28"}
    replica_sets = {
        rs.metadata.name: rs.spec.replicas
        for rs in kube.apps.list_namespaced_replica_set(kube.namespace).items
    }
    assert sorted(replica_sets.values()) == [0, 3] and new_rs not in replica_sets
    events = {
        e.message
        for e in kube.core.list_namespaced_event(
            kube.namespace, field_selector="involvedObject.name=api,reason=ScalingReplicaSet"
        ).items
    }
    assert any(m.startswith("Scaled down replica set api-") for m in events)


def test_it_reports_a_stuck_rollout_past_its_progress_deadline(kube: Kube) -> None:
    kube.apps.create_namespaced_deployment(
        kube.namespace, deployment_manifest("stuck", 2, "nginx:1.27", progressDeadlineSeconds=30)
    )
    wait_for(lambda: (c := progressing(kube, "stuck")) and c.reason == "NewReplicaSetAvailable")
    bad = {
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "main", "image": "nginx:nonexistent-tag"}]}
            }
        }
    }
    kube.apps.patch_namespaced_deployment("stuck", kube.namespace, bad)
    timed_out = wait_for(
        lambda: (c := progressing(kube, "stuck")) and c.status == "False" and c, timeout=20
    )
    assert timed_out.reason == "ProgressDeadlineExceeded"
    assert timed_out.message.startswith('ReplicaSet "stuck-') and timed_out.message.endswith(
        '" has timed out progressing.'
    )
    status = deployment(kube, "stuck").status
    assert status.available_replicas >= 1 and status.unavailable_replicas >= 1
    assert condition(status.conditions, "Available").status == "True"


def test_it_runs_a_daemonset_pod_per_node_and_rolls_it(kube: Kube) -> None:
    labels = {"app": "agent"}
    daemonset = {
        "metadata": {"name": "agent", "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [container(image="fluent/fluent-bit:3.1")]},
            },
        },
    }
    kube.apps.create_namespaced_daemon_set(kube.namespace, daemonset)
    status = wait_for(
        lambda: (
            (s := kube.apps.read_namespaced_daemon_set("agent", kube.namespace).status).number_ready
            == 3
            and s
        )
    )
    assert (
        status.desired_number_scheduled,
        status.current_number_scheduled,
        status.number_misscheduled,
    ) == (3, 3, 0)
    nodes = {
        p.spec.node_name
        for p in kube.core.list_namespaced_pod(kube.namespace, label_selector="app=agent").items
    }
    assert nodes == {"sim-node-0", "sim-node-1", "sim-node-2"}
    kube.apps.patch_namespaced_daemon_set(
        "agent",
        kube.namespace,
        {
            "spec": {
                "template": {
                    "spec": {"containers": [{"name": "main", "image": "fluent/fluent-bit:3.2"}]}
                }
            }
        },
    )

    def rolled():
        s = kube.apps.read_namespaced_daemon_set("agent", kube.namespace).status
        pods = [
            p
            for p in kube.core.list_namespaced_pod(kube.namespace, label_selector="app=agent").items
            if not p.metadata.deletion_timestamp
        ]
        return (
            s.observed_generation == 2
            and s.updated_number_scheduled == 3
            and s.number_ready == 3
            and {p.spec.containers[0].image for p in pods} == {"fluent/fluent-bit:3.2"}
        )

    wait_for(rolled, timeout=20)
