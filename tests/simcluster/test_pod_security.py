"""Pod Security admission: a namespace's `pod-security.kubernetes.io/enforce` label refuses the
pods that break its level, with the API server's message; a StatefulSet whose pods are refused
records FailedCreate and has no pod.

Spec: the Pod Security Standards (baseline, restricted) and admission's 403 wording.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.simcluster.conftest import Kube, container, pod_manifest, statefulset_manifest, wait_for

RESTRICTED_CONTEXT = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
RESTRICTED_POD = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}


def label(kube: Kube, level: str) -> None:
    labels = {"pod-security.kubernetes.io/enforce": level}
    kube.core.patch_namespace(kube.namespace, {"metadata": {"labels": labels}})


def refusal(kube: Kube, pod: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(ApiException) as refused:
        kube.core.create_namespaced_pod(kube.namespace, pod)
    assert refused.value.status == 403
    status: dict[str, Any] = json.loads(str(refused.value.body))
    return status


def test_restricted_refuses_a_plain_pod_with_every_reason_worded_as_the_api_server_does(
    kube: Kube,
) -> None:
    label(kube, "restricted")
    status = refusal(kube, pod_manifest("plain"))
    assert (status["reason"], status["details"]) == ("Forbidden", {"name": "plain", "kind": "pods"})
    assert status["message"] == (
        'pods "plain" is forbidden: violates PodSecurity "restricted:latest": '
        'allowPrivilegeEscalation != false (container "main" must set '
        "securityContext.allowPrivilegeEscalation=false), "
        'unrestricted capabilities (container "main" must set '
        'securityContext.capabilities.drop=["ALL"]), '
        'runAsNonRoot != true (pod or container "main" must set '
        "securityContext.runAsNonRoot=true), "
        'seccompProfile (pod or container "main" must set securityContext.seccompProfile.type to '
        '"RuntimeDefault" or "Localhost")'
    )


def test_restricted_admits_a_pod_that_meets_it(kube: Kube) -> None:
    label(kube, "restricted")
    main = container(securityContext=RESTRICTED_CONTEXT)
    pod = pod_manifest("fine", main, securityContext={**RESTRICTED_POD, "runAsUser": 1000})
    created = kube.core.create_namespaced_pod(kube.namespace, pod)
    assert created.spec.security_context.run_as_user == 1000


def test_restricted_refuses_root_and_added_capabilities(kube: Kube) -> None:
    label(kube, "restricted")
    context = {**RESTRICTED_CONTEXT, "capabilities": {"drop": ["ALL"], "add": ["SYS_PTRACE"]}}
    pod = pod_manifest(
        "root",
        container(securityContext=context),
        securityContext={**RESTRICTED_POD, "runAsUser": 0},
    )
    message = refusal(kube, pod)["message"]
    assert 'unrestricted capabilities (container "main" must not include "SYS_PTRACE"' in message
    assert "runAsUser=0 (pod must not set runAsUser=0)" in message


def test_baseline_refuses_privileged_and_host_access_only(kube: Kube) -> None:
    label(kube, "baseline")
    kube.core.create_namespaced_pod(kube.namespace, pod_manifest("plain"))  # restricted: refused
    privileged = container(securityContext={"privileged": True})
    volume = {"name": "host", "hostPath": {"path": "/var"}}
    pod = pod_manifest("admin", privileged, hostNetwork=True, volumes=[volume])
    assert refusal(kube, pod)["message"] == (
        'pods "admin" is forbidden: violates PodSecurity "baseline:latest": '
        "host namespaces (hostNetwork=true), "
        'privileged (container "main" must not set securityContext.privileged=true), '
        'hostPath volumes (volume "host")'
    )


def test_a_statefulset_whose_pods_are_refused_records_failed_create_and_has_no_pod(
    kube: Kube,
) -> None:
    label(kube, "restricted")
    kube.apps.create_namespaced_stateful_set(kube.namespace, statefulset_manifest("train", 2))

    def failed_create() -> list[Any]:
        events = kube.core.list_namespaced_event(kube.namespace).items
        return [e for e in events if e.reason == "FailedCreate"]

    event = wait_for(failed_create)[0]
    assert event.involved_object.kind == "StatefulSet" and event.type == "Warning"
    assert 'violates PodSecurity "restricted:latest"' in event.message
    assert kube.core.list_namespaced_pod(kube.namespace).items == []
