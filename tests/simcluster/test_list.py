"""LIST semantics: List kinds, selectors, limit/continue over a consistent snapshot, 410 Expired
after compaction, and the raw-JSON path the console uses.

Spec: the brief's LIST section; List apiVersions per KUBERNETES-FACTS.md (Workloads).
"""

from __future__ import annotations

import orjson
import pytest
from kubernetes.client.exceptions import ApiException

from simcluster.server import SimCluster
from tests.simcluster.conftest import (
    Kube,
    error_body,
    job_manifest,
    pod_manifest,
    raw_call,
    statefulset_manifest,
)


def make_pods(kube: Kube, count: int, **labels: str) -> list[str]:
    names = []
    for index in range(count):
        manifest = pod_manifest(f"p{index:02d}")
        manifest["metadata"]["labels"].update(
            {"index": str(index), "parity": "even" if index % 2 == 0 else "odd", **labels}
        )
        if index == 0:
            manifest["metadata"]["labels"]["special"] = "yes"
        kube.core.create_namespaced_pod(kube.namespace, manifest)
        names.append(manifest["metadata"]["name"])
    return names


def names(items: list) -> list[str]:
    return [item.metadata.name for item in items]


def test_it_pages_with_limit_and_continue(kube: Kube) -> None:
    expected = make_pods(kube, 7)
    first = kube.core.list_namespaced_pod(kube.namespace, limit=3)
    assert names(first.items) == expected[:3]
    assert first.metadata._continue and first.metadata.remaining_item_count == 4
    second = kube.core.list_namespaced_pod(
        kube.namespace, limit=3, _continue=first.metadata._continue
    )
    assert names(second.items) == expected[3:6] and second.metadata.remaining_item_count == 1
    assert second.metadata.resource_version == first.metadata.resource_version
    third = kube.core.list_namespaced_pod(
        kube.namespace, limit=3, _continue=second.metadata._continue
    )
    assert names(third.items) == expected[6:]
    assert third.metadata._continue is None and third.metadata.remaining_item_count is None


def test_it_continues_from_the_snapshot_of_the_first_page(kube: Kube) -> None:
    make_pods(kube, 4)
    first = kube.core.list_namespaced_pod(kube.namespace, limit=2)
    kube.core.create_namespaced_pod(kube.namespace, pod_manifest("p99"))
    kube.core.delete_namespaced_pod("p03", kube.namespace, grace_period_seconds=0)
    rest = kube.core.list_namespaced_pod(
        kube.namespace, limit=10, _continue=first.metadata._continue
    )
    assert names(rest.items) == ["p02", "p03"]
    assert names(kube.core.list_namespaced_pod(kube.namespace).items) == [
        "p00",
        "p01",
        "p02",
        "p99",
    ]


def test_it_pages_a_cluster_wide_list(kube: Kube) -> None:
    make_pods(kube, 3)
    seen, token = [], None
    while True:
        page = kube.core.list_pod_for_all_namespaces(limit=2, _continue=token)
        seen += [(p.metadata.namespace, p.metadata.name) for p in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert seen == sorted(seen) and len(seen) == len(set(seen))
    assert {(kube.namespace, n) for n in ("p00", "p01", "p02")} <= set(seen)


def test_it_answers_410_expired_for_a_token_older_than_a_compaction(
    kube: Kube, shared_sim: SimCluster
) -> None:
    make_pods(kube, 5)
    first = kube.core.list_namespaced_pod(kube.namespace, limit=2)
    kube.core.patch_namespaced_pod("p04", kube.namespace, {"metadata": {"labels": {"moved": "on"}}})
    code, answer = raw_call(kube, "POST", "/_sim/compact")
    assert code == 200 and answer["compactedRevision"] >= int(first.metadata.resource_version)
    with pytest.raises(ApiException) as caught:
        kube.core.list_namespaced_pod(kube.namespace, limit=2, _continue=first.metadata._continue)
    body = error_body(caught.value)
    assert (caught.value.status, body["reason"], body["code"]) == (410, "Expired", 410)
    inconsistent = body["metadata"]["continue"]
    rest = kube.core.list_namespaced_pod(kube.namespace, _continue=inconsistent)
    assert names(rest.items) == ["p02", "p03", "p04"]


def test_it_compacts_by_itself_once_the_window_is_passed(tmp_path) -> None:
    from tests.simcluster.conftest import connect

    with SimCluster(nodes=1, gpus_per_node=0, speed=0, addons=False, compaction_window=50) as sim:
        kube = connect(sim, tmp_path)
        try:
            make_pods(kube, 4)
            first = kube.core.list_namespaced_pod("default", limit=1)
            for index in range(120):
                kube.core.patch_namespaced_pod(
                    "p03", "default", {"metadata": {"labels": {"n": str(index)}}}
                )
            with pytest.raises(ApiException) as caught:
                kube.core.list_namespaced_pod(
                    "default", limit=1, _continue=first.metadata._continue
                )
            assert caught.value.status == 410
        finally:
            kube.api.close()


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("parity=even", ["p00", "p02", "p04"]),
        ("parity==odd", ["p01", "p03"]),
        ("parity!=even", ["p01", "p03"]),
        ("index in (1,4)", ["p01", "p04"]),
        ("index notin (0,1,2)", ["p03", "p04"]),
        ("special", ["p00"]),
        ("!special", ["p01", "p02", "p03", "p04"]),
        ("parity=even,!special", ["p02", "p04"]),
    ],
)
def test_it_filters_by_label_selector(kube: Kube, selector: str, expected: list[str]) -> None:
    make_pods(kube, 5)
    assert (
        names(kube.core.list_namespaced_pod(kube.namespace, label_selector=selector).items)
        == expected
    )


def test_it_filters_by_field_selector(kube: Kube) -> None:
    make_pods(kube, 3)
    kube.core.create_namespaced_pod(kube.namespace, pod_manifest("pinned", nodeName="sim-node-2"))
    assert names(
        kube.core.list_namespaced_pod(kube.namespace, field_selector="metadata.name=p01").items
    ) == ["p01"]
    on_node = kube.core.list_pod_for_all_namespaces(
        field_selector=f"spec.nodeName=sim-node-2,metadata.namespace={kube.namespace}"
    )
    assert "pinned" in names(on_node.items)
    pending = kube.core.list_namespaced_pod(
        kube.namespace, field_selector="status.phase!=Running,metadata.name=p02"
    )
    assert names(pending.items) in (["p02"], [])
    with pytest.raises(ApiException) as caught:
        kube.core.list_namespaced_pod(kube.namespace, field_selector="spec.image=x")
    assert caught.value.status == 400
    with pytest.raises(ApiException) as bad_labels:
        kube.core.list_namespaced_pod(kube.namespace, label_selector="a in ()")
    assert bad_labels.value.status == 400


def test_it_serves_raw_json_with_list_kinds(kube: Kube) -> None:
    make_pods(kube, 2)
    kube.apps.create_namespaced_stateful_set(kube.namespace, statefulset_manifest("raw", 0))
    kube.batch.create_namespaced_job(
        kube.namespace, job_manifest("raw", ["sim", "run", "1"], parallelism=0)
    )
    pods = orjson.loads(kube.core.list_namespaced_pod(kube.namespace, _preload_content=False).data)
    assert (pods["kind"], pods["apiVersion"]) == ("PodList", "v1")
    assert [p["metadata"]["name"] for p in pods["items"]] == ["p00", "p01"]
    assert pods["metadata"]["resourceVersion"].isdigit()
    sets = orjson.loads(
        kube.apps.list_namespaced_stateful_set(kube.namespace, _preload_content=False).data
    )
    assert (sets["kind"], sets["apiVersion"]) == ("StatefulSetList", "apps/v1")
    jobs = orjson.loads(kube.batch.list_namespaced_job(kube.namespace, _preload_content=False).data)
    assert (jobs["kind"], jobs["apiVersion"]) == ("JobList", "batch/v1")
    single = orjson.loads(
        kube.core.read_namespaced_pod("p00", kube.namespace, _preload_content=False).data
    )
    assert (single["kind"], single["apiVersion"]) == ("Pod", "v1")


def test_it_deletes_a_collection_by_selector(kube: Kube) -> None:
    make_pods(kube, 4)
    kube.core.delete_collection_namespaced_pod(
        kube.namespace, label_selector="parity=odd", grace_period_seconds=0
    )
    assert names(kube.core.list_namespaced_pod(kube.namespace).items) == ["p00", "p02"]
