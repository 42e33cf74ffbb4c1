"""The REST surface through the official client: discovery, typed reads of every kind, CRUD,
patch flavours, optimistic concurrency, validation, auth and the Status error shape.

Spec: the brief's API section; Status shapes and nodeInfo per KUBERNETES-FACTS.md (Nodes).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from simcluster.cluster import Cluster
from simcluster.server import SimCluster
from tests.simcluster.conftest import (
    Kube,
    container,
    deployment_manifest,
    error_body,
    pod_manifest,
    raw_call,
    statefulset_manifest,
    wait_for,
)


def status_of(error: ApiException) -> dict:
    body = error_body(error)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    assert body["code"] == error.status
    return body


def test_it_serves_discovery_and_version(kube: Kube) -> None:
    assert client.CoreApi(kube.api).get_api_versions().versions == ["v1"]
    groups = {g.name for g in client.ApisApi(kube.api).get_api_versions().groups}
    assert {"apps", "batch"} <= groups
    assert client.VersionApi(kube.api).get_code().git_version.startswith("v1.")
    core = {r.name for r in kube.core.get_api_resources().resources}
    assert {
        "pods",
        "pods/status",
        "pods/log",
        "nodes",
        "nodes/status",
        "namespaces",
        "services",
        "events",
    } <= core
    apps = {r.name for r in kube.apps.get_api_resources().resources}
    assert {
        "statefulsets",
        "statefulsets/scale",
        "statefulsets/status",
        "deployments",
        "daemonsets",
        "replicasets",
    } <= apps
    assert {r.name for r in kube.batch.get_api_resources().resources} >= {"jobs", "jobs/status"}


def test_it_answers_typed_reads_of_every_kind(kube: Kube) -> None:
    kube.apps.create_namespaced_stateful_set(kube.namespace, statefulset_manifest("web", 1))
    kube.core.create_namespaced_service(
        kube.namespace,
        {
            "metadata": {"name": "web"},
            "spec": {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"port": 80}]},
        },
    )
    wait_for(
        lambda: (
            kube.apps.read_namespaced_stateful_set("web", kube.namespace).status.ready_replicas == 1
        )
    )
    node = kube.core.list_node().items[0]
    info = node.status.node_info
    assert (
        info.kubelet_version and info.kube_proxy_version == "" and info.machine_id and info.boot_id
    )
    assert kube.core.read_node(node.metadata.name).status.allocatable["nvidia.com/gpu"] == "8"
    assert kube.core.read_namespace(kube.namespace).status.phase == "Active"
    assert kube.core.read_namespaced_pod("web-0", kube.namespace).status.phase == "Running"
    assert kube.core.list_pod_for_all_namespaces().items
    assert kube.core.read_namespaced_service("web", kube.namespace).spec.cluster_ip == "None"
    assert kube.core.list_namespaced_event(kube.namespace).items
    assert kube.core.list_event_for_all_namespaces().items
    assert kube.apps.list_stateful_set_for_all_namespaces().items
    assert (
        kube.apps.read_namespaced_deployment(
            "kuberay-operator", "kube-system"
        ).status.ready_replicas
        == 1
    )
    assert kube.apps.list_replica_set_for_all_namespaces().items
    assert (
        kube.apps.read_namespaced_daemon_set(
            "nvidia-device-plugin", "kube-system"
        ).status.desired_number_scheduled
        == 3
    )
    assert kube.batch.list_job_for_all_namespaces().items == []


def test_it_seeds_addons_whose_version_is_the_image_tag(kube: Kube) -> None:
    addons = {}
    for workload in (
        kube.apps.list_namespaced_daemon_set(
            "kube-system", label_selector="trainyard.io/addon"
        ).items
        + kube.apps.list_namespaced_deployment(
            "kube-system", label_selector="trainyard.io/addon"
        ).items
    ):
        addons[workload.metadata.labels["trainyard.io/addon"]] = (
            workload.spec.template.spec.containers[0].image.rsplit(":", 1)[1]
        )
    assert addons == {"nvidia-device-plugin": "v0.17.0", "kuberay-operator": "v1.3.0"}


def test_it_sets_metadata_as_an_api_server_does(kube: Kube) -> None:
    created = kube.core.create_namespaced_pod(kube.namespace, pod_manifest("meta"))
    meta = created.metadata
    assert (
        meta.uid
        and meta.creation_timestamp
        and meta.generation == 1
        and meta.namespace == kube.namespace
    )
    assert (
        created.spec.service_account_name == "default" and created.spec.restart_policy == "Always"
    )
    assert created.spec.containers[0].image_pull_policy == "IfNotPresent"
    assert {t.key for t in created.spec.tolerations} == {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    }
    again = kube.core.read_namespaced_pod("meta", kube.namespace)
    later = kube.core.patch_namespaced_pod(
        "meta", kube.namespace, {"metadata": {"labels": {"x": "y"}}}
    )
    assert int(later.metadata.resource_version) > int(again.metadata.resource_version)
    assert later.metadata.generation == 1
    generated = kube.core.create_namespaced_pod(
        kube.namespace,
        {"metadata": {"generateName": "gen-"}, "spec": {"containers": [container()]}},
    )
    assert generated.metadata.name.startswith("gen-") and len(generated.metadata.name) == 9


def test_it_refuses_a_duplicate_with_409_already_exists(kube: Kube) -> None:
    kube.core.create_namespaced_pod(kube.namespace, pod_manifest("twice"))
    with pytest.raises(ApiException) as caught:
        kube.core.create_namespaced_pod(kube.namespace, pod_manifest("twice"))
    body = status_of(caught.value)
    assert (caught.value.status, body["reason"]) == (409, "AlreadyExists")
    assert body["message"] == 'pods "twice" already exists'
    assert body["details"] == {"name": "twice", "kind": "pods"}


def test_it_refuses_a_stale_update_with_409_conflict(kube: Kube) -> None:
    kube.core.create_namespaced_service(
        kube.namespace, {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}}
    )
    first = kube.core.read_namespaced_service("svc", kube.namespace)
    first.metadata.labels = {"v": "1"}
    kube.core.replace_namespaced_service("svc", kube.namespace, first)
    first.metadata.labels = {"v": "2"}
    with pytest.raises(ApiException) as caught:
        kube.core.replace_namespaced_service("svc", kube.namespace, first)
    body = status_of(caught.value)
    assert (caught.value.status, body["reason"]) == (409, "Conflict")
    assert "the object has been modified" in body["message"]
    stale = {"metadata": {"resourceVersion": first.metadata.resource_version, "labels": {"v": "3"}}}
    with pytest.raises(ApiException) as patched:
        kube.core.patch_namespaced_service("svc", kube.namespace, stale)
    assert patched.value.status == 409


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (pod_manifest("Bad_Name"), "metadata.name"),
        ({"metadata": {"name": "empty"}, "spec": {"containers": []}}, "spec.containers"),
        (pod_manifest("noimage", {"name": "main"}), "spec.containers[0].image"),
        (pod_manifest("bad-restart", restart="Sometimes"), "spec.restartPolicy"),
    ],
)
def test_it_rejects_invalid_pods_with_422(kube: Kube, body: dict, field: str) -> None:
    with pytest.raises(ApiException) as caught:
        kube.core.create_namespaced_pod(kube.namespace, body)
    status = status_of(caught.value)
    assert (caught.value.status, status["reason"]) == (422, "Invalid")
    assert status["message"].startswith(f'Pod "{body["metadata"]["name"]}" is invalid: {field}')
    assert status["details"]["causes"][0]["field"] == field


def test_it_rejects_invalid_workloads_with_422(kube: Kube) -> None:
    negative = statefulset_manifest("neg", -1)
    with pytest.raises(ApiException) as caught:
        kube.apps.create_namespaced_stateful_set(kube.namespace, negative)
    status = status_of(caught.value)
    assert status["message"] == (
        'StatefulSet.apps "neg" is invalid: '
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    )
    mismatched = deployment_manifest("mis", 1, "nginx:1.27")
    mismatched["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    with pytest.raises(ApiException) as selector:
        kube.apps.create_namespaced_deployment(kube.namespace, mismatched)
    assert "`selector` does not match template `labels`" in status_of(selector.value)["message"]
    kube.apps.create_namespaced_stateful_set(kube.namespace, statefulset_manifest("ok", 0))
    with pytest.raises(ApiException) as frozen:
        kube.apps.patch_namespaced_stateful_set(
            "ok", kube.namespace, {"spec": {"serviceName": "changed"}}
        )
    assert status_of(frozen.value)["details"]["causes"][0]["reason"] == "FieldValueForbidden"


def test_it_answers_404_for_missing_objects_and_paths(kube: Kube) -> None:
    with pytest.raises(ApiException) as caught:
        kube.core.read_namespaced_pod("ghost", kube.namespace)
    body = status_of(caught.value)
    assert (body["reason"], body["message"]) == ("NotFound", 'pods "ghost" not found')
    with pytest.raises(ApiException) as grouped:
        kube.apps.read_namespaced_stateful_set("ghost", kube.namespace)
    assert status_of(grouped.value)["message"] == 'statefulsets.apps "ghost" not found'
    with pytest.raises(ApiException) as namespace:
        kube.core.create_namespaced_pod("no-such-namespace", pod_manifest("p"))
    assert status_of(namespace.value)["message"] == 'namespaces "no-such-namespace" not found'
    assert raw_call(kube, "GET", "/apis/example.com/v1/widgets")[0] == 404


def test_it_answers_405_for_verbs_a_resource_does_not_serve(kube: Kube) -> None:
    kube.core.create_namespaced_pod(kube.namespace, pod_manifest("verbs"))
    code, body = raw_call(kube, "POST", f"/api/v1/namespaces/{kube.namespace}/pods/verbs", {})
    assert (code, body["reason"], body["code"]) == (405, "MethodNotAllowed", 405)
    code, body = raw_call(kube, "DELETE", f"/api/v1/namespaces/{kube.namespace}/pods/verbs/log")
    assert code == 405
    with pytest.raises(ApiException) as apply:
        kube.core.patch_namespaced_pod(
            "verbs", kube.namespace, {"a": 1}, _content_type="application/apply-patch+yaml"
        )
    assert (apply.value.status, status_of(apply.value)["reason"]) == (415, "UnsupportedMediaType")


def test_it_answers_401_without_the_right_token(shared_sim: SimCluster, tmp_path: Path) -> None:
    path = shared_sim.write_kubeconfig(tmp_path / "bad.yaml")
    path.write_text(path.read_text().replace(shared_sim.token, "wrong-token"))
    api = config.new_client_from_config(config_file=str(path))
    try:
        with pytest.raises(ApiException) as caught:
            client.CoreV1Api(api).list_namespace()
    finally:
        api.close()
    body = status_of(caught.value)
    assert (caught.value.status, body["reason"], body["message"]) == (
        401,
        "Unauthorized",
        "Unauthorized",
    )


def test_it_applies_the_three_patch_flavours(kube: Kube) -> None:
    pod = pod_manifest(
        "patchy", container(env=[{"name": "A", "value": "1"}]), container("sidecar", "busybox:1.36")
    )
    pod["metadata"]["labels"].update({"drop": "me"})
    kube.core.create_namespaced_pod(kube.namespace, pod)
    # The typed methods pick the patch type from the body: a dict is a strategic merge patch,
    # so containers merge by name and env by name.
    strategic = kube.core.patch_namespaced_pod(
        "patchy",
        kube.namespace,
        {"spec": {"containers": [{"name": "main", "image": "python:3.13"}]}},
    )
    assert [c.image for c in strategic.spec.containers] == ["python:3.13", "busybox:1.36"]
    assert strategic.spec.containers[0].env[0].name == "A"
    # list body -> JSON patch.
    json_patched = kube.core.patch_namespaced_pod(
        "patchy",
        kube.namespace,
        [
            {"op": "add", "path": "/metadata/labels/added", "value": "yes"},
            {"op": "remove", "path": "/metadata/labels/drop"},
        ],
    )
    assert json_patched.metadata.labels == {"app": "patchy", "added": "yes"}
    # explicit merge patch: null removes.
    merge = kube.core.patch_namespaced_pod(
        "patchy",
        kube.namespace,
        {"metadata": {"labels": {"added": None}}},
        _content_type="application/merge-patch+json",
    )
    assert merge.metadata.labels == {"app": "patchy"}
    with pytest.raises(ApiException) as failed:
        kube.core.patch_namespaced_pod(
            "patchy", kube.namespace, [{"op": "test", "path": "/metadata/name", "value": "other"}]
        )
    assert failed.value.status == 422


def test_it_keeps_status_and_spec_apart(kube: Kube) -> None:
    kube.core.create_namespaced_pod(kube.namespace, pod_manifest("split", nodeName="sim-node-0"))
    wait_for(
        lambda: kube.core.read_namespaced_pod("split", kube.namespace).status.phase == "Running"
    )
    pod = kube.core.read_namespaced_pod("split", kube.namespace)
    pod.status.message = "through the main resource"
    pod.metadata.labels["touched"] = "yes"
    replaced = kube.core.replace_namespaced_pod("split", kube.namespace, pod)
    assert replaced.status.message is None and replaced.metadata.labels["touched"] == "yes"
    via_status = kube.core.patch_namespaced_pod_status(
        "split",
        kube.namespace,
        {"status": {"message": "hello"}, "metadata": {"labels": {"ignored": "yes"}}},
    )
    assert via_status.status.message == "hello" and "ignored" not in via_status.metadata.labels
    node = kube.core.read_node_status("sim-node-0")
    assert node.status.conditions[-1].type == "Ready"


def test_it_bumps_generation_on_spec_changes_only(kube: Kube) -> None:
    kube.apps.create_namespaced_stateful_set(kube.namespace, statefulset_manifest("gen", 1))
    kube.apps.patch_namespaced_stateful_set(
        "gen", kube.namespace, {"metadata": {"labels": {"a": "b"}}}
    )
    assert kube.apps.read_namespaced_stateful_set("gen", kube.namespace).metadata.generation == 1
    kube.apps.patch_namespaced_stateful_set("gen", kube.namespace, {"spec": {"replicas": 2}})
    assert kube.apps.read_namespaced_stateful_set("gen", kube.namespace).metadata.generation == 2
    wait_for(
        lambda: (
            kube.apps.read_namespaced_stateful_set("gen", kube.namespace).status.observed_generation
            == 2
        )
    )


def test_it_serves_the_scale_subresource(kube: Kube) -> None:
    kube.apps.create_namespaced_stateful_set(kube.namespace, statefulset_manifest("scaled", 2))
    scale = kube.apps.read_namespaced_stateful_set_scale("scaled", kube.namespace)
    assert (scale.spec.replicas, scale.status.selector) == (2, "app=scaled")
    patched = kube.apps.patch_namespaced_stateful_set_scale(
        "scaled", kube.namespace, {"spec": {"replicas": 4}}
    )
    assert patched.spec.replicas == 4
    wait_for(
        lambda: (
            kube.apps.read_namespaced_stateful_set("scaled", kube.namespace).status.ready_replicas
            == 4
        )
    )
    scale = kube.apps.read_namespaced_stateful_set_scale("scaled", kube.namespace)
    assert scale.status.replicas == 4
    scale.spec.replicas = 1
    assert (
        kube.apps.replace_namespaced_stateful_set_scale(
            "scaled", kube.namespace, scale
        ).spec.replicas
        == 1
    )
    assert kube.apps.read_namespaced_stateful_set("scaled", kube.namespace).spec.replicas == 1
    with pytest.raises(ApiException) as stale:
        kube.apps.replace_namespaced_stateful_set_scale("scaled", kube.namespace, scale)
    assert stale.value.status == 409
    kube.apps.create_namespaced_deployment(
        kube.namespace, deployment_manifest("d", 1, "nginx:1.27")
    )
    assert (
        kube.apps.patch_namespaced_deployment_scale(
            "d", kube.namespace, {"spec": {"replicas": 3}}
        ).spec.replicas
        == 3
    )


def test_it_serves_services_and_events(kube: Kube) -> None:
    service = kube.core.create_namespaced_service(
        kube.namespace,
        {
            "metadata": {"name": "api"},
            "spec": {"selector": {"app": "x"}, "ports": [{"port": 8080}]},
        },
    )
    assert (
        service.spec.cluster_ip.startswith("10.96.") and service.spec.ports[0].target_port == 8080
    )
    kube.core.create_namespaced_pod(kube.namespace, pod_manifest("evented"))
    events = wait_for(
        lambda: (
            kube.core.list_namespaced_event(
                kube.namespace, field_selector="involvedObject.name=evented,reason=Started"
            ).items
        )
    )
    assert events[0].source.component == "kubelet" and events[0].involved_object.kind == "Pod"
    kube.core.delete_namespaced_service("api", kube.namespace)
    with pytest.raises(ApiException):
        kube.core.read_namespaced_service("api", kube.namespace)


def test_it_never_repeats_a_uid_across_clusters_of_the_same_seed() -> None:
    """UIDs are unique across clusters in Kubernetes; a console caching parsed objects by UID
    and resourceVersion must not take one simulated cluster's object for another's."""

    def node_uids(cluster: Cluster) -> set[str]:
        keys = cluster.store.keys("nodes")
        return {cluster.store.get("nodes", key)["metadata"]["uid"] for key in keys}  # type: ignore[index]

    first, second = Cluster(nodes=2, seed=0), Cluster(nodes=2, seed=0)
    assert len(node_uids(first)) == 2 and not node_uids(first) & node_uids(second)
