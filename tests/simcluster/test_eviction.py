"""The `pods/eviction` subresource and PodDisruptionBudgets, as the API server answers them
(pkg/registry/core/pod/storage/eviction.go and the disruption controller): a budget that allows
no disruption answers 429 with its cause, two budgets a 500, an evicted pod terminates within
its grace period; DaemonSet and mirror pods look as a drain expects.

Spec: issue 36, "simcluster grows what this needs" (Eviction, budgets, graceful termination,
DaemonSet and mirror pods)."""

from __future__ import annotations

from typing import Any

from simcluster.server import SimCluster
from tests.simcluster.conftest import Kube, deployment_manifest, raw_call, wait_for


def budget(name: str, app: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": app}}, **spec},
    }


def evict(kube: Kube, pod: str, **options: Any) -> tuple[int, Any]:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod}}
    if options:
        body["deleteOptions"] = options
    path = f"/api/v1/namespaces/{kube.namespace}/pods/{pod}/eviction"
    return raw_call(kube, "POST", path, body)


def pods_of(kube: Kube, app: str) -> list[Any]:
    return kube.core.list_namespaced_pod(kube.namespace, label_selector=f"app={app}").items


def ready_pods(kube: Kube, app: str, count: int) -> list[Any]:
    def ready() -> list[Any]:
        pods = [
            p for p in pods_of(kube, app)
            if p.metadata.deletion_timestamp is None
            and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
        ]  # fmt: skip
        return pods if len(pods) == count else []

    return wait_for(ready)


def read_budget(kube: Kube, name: str) -> dict[str, Any]:
    return raw_call(
        kube, "GET", f"/apis/policy/v1/namespaces/{kube.namespace}/poddisruptionbudgets/{name}"
    )[1]


def create_budget(kube: Kube, manifest: dict[str, Any]) -> None:
    path = f"/apis/policy/v1/namespaces/{kube.namespace}/poddisruptionbudgets"
    status, body = raw_call(kube, "POST", path, manifest)
    assert status == 201, body


def test_it_evicts_a_pod_without_a_budget_and_lets_it_terminate_gracefully(kube: Kube) -> None:
    kube.apps.create_namespaced_deployment(kube.namespace, deployment_manifest("web", 1, "nginx"))
    pod = ready_pods(kube, "web", 1)[0]
    status, body = evict(kube, pod.metadata.name)
    assert (status, body["kind"], body["status"], body["code"]) == (201, "Status", "Success", 201)
    evicted = kube.core.read_namespaced_pod(pod.metadata.name, kube.namespace)
    target = next(c for c in evicted.status.conditions if c.type == "DisruptionTarget")
    assert (target.status, target.reason) == ("True", "EvictionByEvictionAPI")
    assert evicted.metadata.deletion_timestamp is not None
    assert evicted.metadata.deletion_grace_period_seconds == 30

    def gone() -> bool:
        names = {p.metadata.name for p in pods_of(kube, "web")}
        return pod.metadata.name not in names

    wait_for(gone)


def test_it_answers_429_while_a_budget_allows_no_disruption(kube: Kube) -> None:
    kube.apps.create_namespaced_deployment(kube.namespace, deployment_manifest("api", 2, "nginx"))
    pods = ready_pods(kube, "api", 2)
    create_budget(kube, budget("api-pdb", "api", minAvailable=2))
    wait_for(lambda: read_budget(kube, "api-pdb").get("status", {}).get("expectedPods") == 2)
    shown = read_budget(kube, "api-pdb")["status"]
    assert (shown["currentHealthy"], shown["desiredHealthy"], shown["disruptionsAllowed"]) == (
        2, 2, 0,
    )  # fmt: skip
    status, body = evict(kube, pods[0].metadata.name)
    assert (status, body["reason"], body["message"]) == (
        429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.",
    )  # fmt: skip
    assert body["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget api-pdb needs 2 healthy pods and has 2 currently",
        }
    ]
    kept = kube.core.read_namespaced_pod(pods[0].metadata.name, kube.namespace)
    assert kept.metadata.deletion_timestamp is None


def test_it_spends_one_disruption_per_eviction_until_the_replacement_is_ready(kube: Kube) -> None:
    kube.apps.create_namespaced_deployment(kube.namespace, deployment_manifest("db", 3, "nginx"))
    pods = ready_pods(kube, "db", 3)
    create_budget(kube, budget("db-pdb", "db", maxUnavailable=1))
    wait_for(lambda: read_budget(kube, "db-pdb").get("status", {}).get("disruptionsAllowed") == 1)
    assert evict(kube, pods[0].metadata.name)[0] == 201
    assert evict(kube, pods[1].metadata.name)[0] == 429
    ready_pods(kube, "db", 3)  # the replacement runs and is Ready
    wait_for(lambda: read_budget(kube, "db-pdb")["status"]["disruptionsAllowed"] == 1)
    assert evict(kube, pods[1].metadata.name)[0] == 201


def test_it_answers_500_for_a_pod_under_two_budgets(kube: Kube) -> None:
    kube.apps.create_namespaced_deployment(kube.namespace, deployment_manifest("q", 2, "nginx"))
    pods = ready_pods(kube, "q", 2)
    create_budget(kube, budget("q-one", "q", maxUnavailable=1))
    create_budget(kube, budget("q-two", "q", maxUnavailable=1))
    status, body = evict(kube, pods[0].metadata.name)
    assert (status, body["status"], body["code"]) == (500, "Failure", 500)
    assert body["message"] == (
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
        "not support."
    )


def test_it_refuses_an_eviction_naming_another_pod_and_a_missing_pod(kube: Kube) -> None:
    kube.apps.create_namespaced_deployment(kube.namespace, deployment_manifest("m", 1, "nginx"))
    pod = ready_pods(kube, "m", 1)[0]
    path = f"/api/v1/namespaces/{kube.namespace}/pods/{pod.metadata.name}/eviction"
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "other"}}
    status, answer = raw_call(kube, "POST", path, body)
    assert (status, answer["message"]) == (
        400,
        "name in URL does not match name in Eviction object",
    )
    assert evict(kube, "nope")[0] == 404


def test_it_shows_daemonset_and_mirror_pods_as_a_drain_sees_them(
    own_sim: SimCluster, own_kube: Kube
) -> None:
    mirror = own_sim.mirror_pod("sim-node-0", "etcd")
    pod = own_kube.core.read_namespaced_pod(mirror, "kube-system")
    assert "kubernetes.io/config.mirror" in pod.metadata.annotations
    assert (pod.metadata.owner_references[0].kind, pod.spec.node_name) == ("Node", "sim-node-0")
    on_node = own_kube.core.list_pod_for_all_namespaces(field_selector="spec.nodeName=sim-node-0")
    kinds = {
        (p.metadata.owner_references or [None])[0].kind
        for p in on_node.items
        if p.metadata.owner_references
    }
    assert {"Node", "DaemonSet"} <= kinds
    groups = raw_call(own_kube, "GET", "/apis")[1]["groups"]
    assert "policy" in {group["name"] for group in groups}
