"""WATCH as kube-apiserver 1.30+ serves it (KUBERNETES-FACTS.md, Watch), driven through the
official client's `watch.Watch`: events after a resourceVersion in order, selectors, bookmarks,
`resourceVersion=0`, 410 Expired as an ERROR event, and the fault controls on a stream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import ProtocolError

from simcluster.server import SimCluster
from tests.simcluster.conftest import SPEED, Kube, connect, pod_manifest, statefulset_manifest


@pytest.fixture
def quick_sim() -> Iterator[SimCluster]:
    """A cluster of this module's own: bookmarks every 0.2 s, faults and compaction private."""
    with SimCluster(nodes=2, gpus_per_node=8, seed=3, speed=SPEED, bookmark_seconds=0.2) as sim:
        yield sim
        assert not sim.tick_errors, sim.tick_errors[0]


@pytest.fixture
def kube(quick_sim: SimCluster, tmp_path: Path) -> Iterator[Kube]:
    kube = connect(quick_sim, tmp_path)
    yield kube
    kube.api.close()


def events(kube: Kube, seconds: int = 1, **options: Any) -> list[dict[str, Any]]:
    stream = watch.Watch().stream(
        kube.core.list_namespaced_pod, kube.namespace, timeout_seconds=seconds, **options
    )
    return list(stream)


def labelled(name: str, team: str) -> dict[str, Any]:
    manifest = pod_manifest(name)
    manifest["metadata"]["labels"]["team"] = team
    return manifest


def summary(found: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["raw_object"]["metadata"].get("name", "")) for e in found]


def test_it_streams_the_changes_after_a_resource_version_in_order(kube: Kube) -> None:
    start = kube.core.list_namespaced_pod(kube.namespace).metadata.resource_version
    kube.core.create_namespaced_pod(kube.namespace, pod_manifest("w1"))
    kube.core.delete_namespaced_pod("w1", kube.namespace, grace_period_seconds=0)
    found = events(kube, resource_version=start)
    assert summary(found)[0] == ("ADDED", "w1") and summary(found)[-1] == ("DELETED", "w1")
    assert {kind for kind, _ in summary(found)[1:-1]} <= {"MODIFIED"}
    versions = [e["raw_object"]["metadata"]["resourceVersion"] for e in found]
    assert len(set(versions)) == len(versions)
    assert found[0]["object"].metadata.name == "w1"  # typed by the client: a valid V1Pod
    assert found[0]["raw_object"]["kind"] == "Pod" and found[0]["raw_object"]["apiVersion"] == "v1"


def test_it_filters_by_label_and_sends_a_pod_leaving_the_selector_as_deleted(kube: Kube) -> None:
    start = kube.core.list_namespaced_pod(kube.namespace).metadata.resource_version
    kube.core.create_namespaced_pod(kube.namespace, labelled("mine", "a"))
    kube.core.create_namespaced_pod(kube.namespace, labelled("other", "b"))
    kube.core.patch_namespaced_pod("mine", kube.namespace, {"metadata": {"labels": {"team": "c"}}})
    found = events(kube, resource_version=start, label_selector="team=a")
    assert {name for _, name in summary(found)} == {"mine"}
    assert summary(found)[0] == ("ADDED", "mine") and summary(found)[-1] == ("DELETED", "mine")
    assert found[-1]["raw_object"]["metadata"]["labels"]["team"] == "c"  # the new state


def test_it_starts_with_synthetic_added_events_from_resource_version_0(kube: Kube) -> None:
    for name in ("a0", "b0"):
        kube.core.create_namespaced_pod(kube.namespace, pod_manifest(name))
    found = events(kube, resource_version="0", field_selector="metadata.name=b0")
    assert summary(found)[0] == ("ADDED", "b0")
    assert all(name == "b0" for _, name in summary(found))


def test_it_sends_bookmarks_when_asked_and_before_closing(kube: Kube) -> None:
    start = kube.core.list_namespaced_pod(kube.namespace).metadata.resource_version
    found = events(kube, resource_version=start, allow_watch_bookmarks=True)
    bookmarks = [e for e in found if e["type"] == "BOOKMARK"]
    assert len(bookmarks) >= 2 and found[-1]["type"] == "BOOKMARK"
    assert set(bookmarks[-1]["raw_object"]) == {"kind", "apiVersion", "metadata"}
    assert set(bookmarks[-1]["raw_object"]["metadata"]) == {"resourceVersion"}
    assert not [e for e in events(kube, resource_version=start) if e["type"] == "BOOKMARK"]


def test_it_answers_410_expired_as_an_error_event_after_compaction(
    kube: Kube, quick_sim: SimCluster
) -> None:
    start = kube.core.list_namespaced_pod(kube.namespace).metadata.resource_version
    kube.core.create_namespaced_pod(kube.namespace, pod_manifest("old"))
    quick_sim.compact()
    with pytest.raises(ApiException) as expired:
        events(kube, resource_version=start)
    assert expired.value.status == 410
    assert f"Expired: too old resource version: {start}" in str(expired.value.reason)


def test_it_cuts_a_stream_and_sends_garbage_when_told(kube: Kube, quick_sim: SimCluster) -> None:
    start = kube.core.list_namespaced_pod(kube.namespace).metadata.resource_version
    for name in ("c1", "c2"):
        kube.core.create_namespaced_pod(kube.namespace, pod_manifest(name))
    quick_sim.set_fault(truncate=True, seconds=30)
    received: list[dict[str, Any]] = []
    with pytest.raises(ProtocolError, match="ended prematurely"):  # cut after the first event
        for event in watch.Watch().stream(
            kube.core.list_namespaced_pod, kube.namespace, resource_version=start,
            timeout_seconds=1,
        ):  # fmt: skip
            received.append(event)
    assert summary(received) == [("ADDED", "c1")]
    quick_sim.clear_faults()
    quick_sim.set_fault(garbage=True, seconds=30)
    found = events(kube, resource_version=start)
    assert found[0] is None and summary(found[1:])[0] == ("ADDED", "c1")  # not JSON, then events
    quick_sim.clear_faults()
    quick_sim.set_fault(status=503, seconds=30)
    with pytest.raises(ApiException) as refused:
        events(kube, resource_version=start)
    assert refused.value.status == 503


def test_it_watches_workloads_of_a_group_with_their_own_kind(kube: Kube) -> None:
    start = kube.apps.list_namespaced_stateful_set(kube.namespace).metadata.resource_version
    kube.apps.create_namespaced_stateful_set(kube.namespace, statefulset_manifest("ws", 1))
    stream = watch.Watch().stream(
        kube.apps.list_namespaced_stateful_set, kube.namespace, resource_version=start,
        timeout_seconds=1,
    )  # fmt: skip
    found = list(stream)
    assert found[0]["type"] == "ADDED" and found[0]["raw_object"]["apiVersion"] == "apps/v1"
    assert found[0]["raw_object"]["kind"] == "StatefulSet"


def test_it_refuses_a_resource_version_that_is_not_one(kube: Kube) -> None:
    with pytest.raises(ApiException) as refused:
        events(kube, resource_version="abc")
    assert refused.value.status == 400
