"""The downward API: the pod object keeps `valueFrom` (apiVersion defaulted to v1), the
container's environment has the pod's own values, and an unsupported field path is refused as
a real API server refuses it."""

from __future__ import annotations

import orjson
import pytest
from kubernetes.client.exceptions import ApiException

from simcluster.server import SimCluster
from tests.simcluster.conftest import Kube, container, pod_manifest, wait_for

ENV = [
    {"name": "PLAIN", "value": "1"},
    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    {"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
    {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
]


def test_it_resolves_field_refs_in_the_containers_environment(
    kube: Kube, shared_sim: SimCluster
) -> None:
    kube.core.create_namespaced_pod(kube.namespace, pod_manifest("down", container(env=ENV)))
    pod = wait_for(
        lambda: (p := kube.core.read_namespaced_pod("down", kube.namespace)).spec.node_name and p
    )
    declared = pod.spec.containers[0].env
    assert (declared[1].value_from.field_ref.api_version, declared[1].value) == ("v1", None)
    env = wait_for(lambda: _env(shared_sim, pod.metadata.uid))
    assert env == {
        "PLAIN": "1", "POD": "down", "UID": pod.metadata.uid, "NODE": pod.spec.node_name,
        "APP": "down",
    }  # fmt: skip


def _env(sim: SimCluster, uid: str) -> dict[str, str] | None:
    try:
        return sim.container_env(uid, "main")
    except KeyError:  # not yet admitted by its node
        return None


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.containers"}}},
         "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath"),
        ({"name": "X", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
         "spec.containers[0].env[0].valueFrom"),
    ],
)  # fmt: skip
def test_it_refuses_what_the_api_server_refuses(kube: Kube, item: dict, field: str) -> None:
    with pytest.raises(ApiException) as caught:
        kube.core.create_namespaced_pod(kube.namespace, pod_manifest("bad", container(env=[item])))
    assert caught.value.status == 422
    causes = orjson.loads(caught.value.body or "{}")["details"]["causes"]
    assert [cause["field"] for cause in causes] == [field]
