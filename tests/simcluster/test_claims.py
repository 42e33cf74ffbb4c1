"""PersistentVolumeClaims and the pods that mount them: a claim binds at once (one dynamic
provisioner, class `standard`), a pod whose claim is missing stays Pending with the scheduler's
VolumeBinding message until the claim appears, and the API server's volume rules.

Spec: issue 11, item 3; KUBERNETES-FACTS.md, Pods (Unschedulable).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.simcluster.conftest import Kube, condition, container, error_body, pod_manifest, wait_for

MISSING = (
    '0/3 nodes are available: persistentvolumeclaim "outputs" not found. '
    "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
)


def claim_manifest(name: str, storage: str = "10Gi", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": storage}},
            **spec,
        },
    }


def claimed_pod(name: str, claim: str) -> dict[str, Any]:
    mounts = [
        {"name": "outputs", "mountPath": "/outputs"},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    volumes = [
        {"name": "outputs", "persistentVolumeClaim": {"claimName": claim}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
    ]
    tolerations = [{"key": "pool", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}]
    return pod_manifest(
        name, container(volumeMounts=mounts), volumes=volumes, tolerations=tolerations
    )


def test_a_created_claim_binds_at_once_as_a_dynamic_provisioner_binds_it(kube: Kube) -> None:
    created = kube.core.create_namespaced_persistent_volume_claim(
        kube.namespace, claim_manifest("outputs")
    )
    claim = kube.core.read_namespaced_persistent_volume_claim("outputs", kube.namespace)
    assert created.metadata.uid == claim.metadata.uid
    assert (claim.spec.storage_class_name, claim.spec.volume_mode) == ("standard", "Filesystem")
    assert claim.spec.volume_name == f"pvc-{claim.metadata.uid}"
    assert claim.metadata.annotations["pv.kubernetes.io/bind-completed"] == "yes"
    assert claim.status.phase == "Bound"
    assert (claim.status.access_modes, claim.status.capacity) == (
        ["ReadWriteOnce"],
        {"storage": "10Gi"},
    )
    listed = kube.core.list_namespaced_persistent_volume_claim(kube.namespace)
    assert [c.metadata.name for c in listed.items] == ["outputs"]
    kube.core.delete_namespaced_persistent_volume_claim("outputs", kube.namespace)
    assert kube.core.list_namespaced_persistent_volume_claim(kube.namespace).items == []


def test_a_claim_of_a_class_that_does_not_exist_stays_pending(kube: Kube) -> None:
    kube.core.create_namespaced_persistent_volume_claim(
        kube.namespace, claim_manifest("fast", storageClassName="fast-nvme")
    )
    claim = kube.core.read_namespaced_persistent_volume_claim("fast", kube.namespace)
    assert (claim.status.phase, claim.spec.volume_name) == ("Pending", None)
    event = kube.core.list_namespaced_event(
        kube.namespace, field_selector="involvedObject.name=fast"
    ).items[0]
    assert (event.type, event.reason, event.message) == (
        "Warning",
        "ProvisioningFailed",
        'storageclass.storage.k8s.io "fast-nvme" not found',
    )


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({"accessModes": []}, "spec.accessModes", "at least 1 access mode is required"),
        ({"accessModes": ["ReadWrite"]}, "spec.accessModes", 'Unsupported value: "ReadWrite"'),
        ({"resources": {"requests": {}}}, "spec.resources[storage]", "Required value"),
    ],
)
def test_it_refuses_a_claim_the_api_server_refuses(
    kube: Kube, spec: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(ApiException) as refused:
        kube.core.create_namespaced_persistent_volume_claim(
            kube.namespace, claim_manifest("bad", **spec)
        )
    assert refused.value.status == 422
    [cause] = error_body(refused.value)["details"]["causes"]
    assert cause["field"] == field and message in cause["message"]


def test_a_pod_whose_claim_is_missing_is_pending_until_the_claim_exists(kube: Kube) -> None:
    kube.core.create_namespaced_pod(kube.namespace, claimed_pod("trainer", "outputs"))
    scheduled = wait_for(
        lambda: condition(
            kube.core.read_namespaced_pod("trainer", kube.namespace).status.conditions,
            "PodScheduled",
        )
    )
    assert (scheduled.status, scheduled.reason, scheduled.message) == (
        "False",
        "Unschedulable",
        MISSING,
    )
    event = wait_for(
        lambda: (
            kube.core.list_namespaced_event(
                kube.namespace, field_selector="involvedObject.name=trainer,reason=FailedScheduling"
            ).items
        )
    )[0]
    assert (event.type, event.message) == ("Warning", MISSING)
    kube.core.create_namespaced_persistent_volume_claim(kube.namespace, claim_manifest("outputs"))
    pod = wait_for(
        lambda: (
            (p := kube.core.read_namespaced_pod("trainer", kube.namespace)).status.phase
            == "Running"
            and p
        )
    )
    assert pod.spec.node_name
    assert [v.empty_dir.medium for v in pod.spec.volumes if v.empty_dir] == ["Memory"]


def test_a_pod_whose_claim_is_unbound_waits_for_it(kube: Kube) -> None:
    kube.core.create_namespaced_persistent_volume_claim(
        kube.namespace, claim_manifest("slow", storageClassName="fast-nvme")
    )
    kube.core.create_namespaced_pod(kube.namespace, claimed_pod("waiter", "slow"))
    scheduled = wait_for(
        lambda: condition(
            kube.core.read_namespaced_pod("waiter", kube.namespace).status.conditions,
            "PodScheduled",
        )
    )
    assert scheduled.message == (
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (
            lambda pod: pod["spec"]["containers"][0]["volumeMounts"][0].update(name="nowhere"),
            "spec.containers[0].volumeMounts[0].name",
            'Not found: "nowhere"',
        ),
        (
            lambda pod: pod["spec"]["containers"][0]["volumeMounts"][1].update(
                mountPath="/outputs"
            ),
            "spec.containers[0].volumeMounts[1].mountPath",
            'Invalid value: "/outputs": must be unique',
        ),
        (
            lambda pod: pod["spec"]["containers"][0]["volumeMounts"][0].update(subPath="/abs"),
            "spec.containers[0].volumeMounts[0].subPath",
            'Invalid value: "/abs": must be a relative path',
        ),
        (
            lambda pod: pod["spec"]["volumes"][0].update(persistentVolumeClaim={"claimName": ""}),
            "spec.volumes[0].persistentVolumeClaim.claimName",
            "Required value",
        ),
        (
            lambda pod: pod["spec"]["volumes"][1].update(name="outputs"),
            "spec.volumes[1].name",
            'Duplicate value: "outputs"',
        ),
        (
            lambda pod: pod["spec"]["volumes"][1]["emptyDir"].update(sizeLimit="lots"),
            "spec.volumes[1].emptyDir.sizeLimit",
            'Invalid value: "lots"',
        ),
    ],
)
def test_it_refuses_volumes_the_api_server_refuses(
    kube: Kube, change: Any, field: str, message: str
) -> None:
    pod = claimed_pod("bad", "outputs")
    change(pod)
    with pytest.raises(ApiException) as refused:
        kube.core.create_namespaced_pod(kube.namespace, pod)
    assert refused.value.status == 422
    causes = error_body(refused.value)["details"]["causes"]
    assert [c["field"] for c in causes if message in c["message"]] == [field]
