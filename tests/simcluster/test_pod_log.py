"""The `log` subresource as the console reads it (issue 10, item 1), through the official client:
`limitBytes` cuts the answer, a pod of several containers needs `container` (with the API
server's own refusal otherwise), and an unknown container is refused likewise.

Spec: KUBERNETES-FACTS.md, Pods (logs).
"""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from tests.simcluster.conftest import Kube, container, error_body, pod_manifest, wait_for


def running(kube: Kube, name: str) -> bool:
    return kube.core.read_namespaced_pod(name, kube.namespace).status.phase == "Running"


def test_it_cuts_the_answer_at_limit_bytes(kube: Kube) -> None:
    pod = pod_manifest("trainer", container(command=["sim", "run", "3600"]))
    kube.core.create_namespaced_pod(kube.namespace, pod)
    wait_for(lambda: running(kube, "trainer"))
    whole = kube.core.read_namespaced_pod_log("trainer", kube.namespace, tail_lines=2)
    cut = kube.core.read_namespaced_pod_log("trainer", kube.namespace, tail_lines=2, limit_bytes=10)
    assert whole.startswith("[sim] sim run 3600\n") and cut == "[sim] sim "


def test_it_asks_for_the_container_of_a_pod_with_several(kube: Kube) -> None:
    pod = pod_manifest("pair", container("main", command=["sim", "hang"]), container("sidecar"))
    kube.core.create_namespaced_pod(kube.namespace, pod)
    wait_for(lambda: running(kube, "pair"))
    with pytest.raises(ApiException) as unnamed:
        kube.core.read_namespaced_pod_log("pair", kube.namespace)
    assert unnamed.value.status == 400
    assert error_body(unnamed.value)["message"] == (
        "a container name must be specified for pod pair, choose one of: [main sidecar]"
    )
    with pytest.raises(ApiException) as unknown:
        kube.core.read_namespaced_pod_log("pair", kube.namespace, container="nope")
    assert error_body(unknown.value)["message"] == "container nope is not valid for pod pair"
    log = kube.core.read_namespaced_pod_log("pair", kube.namespace, container="main")
    assert log.splitlines() == ["[sim] sim hang", "[sim] waiting forever"]
