"""The gateway's bounded WATCH against simcluster over real HTTP (KUBERNETES-FACTS.md, Watch):
LIST gives the cursor, a watch from it returns the events after it and the cursor absorbed;
410 Expired, a cut stream and a garbage line are reported, never taken for events."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from console.kube import client
from console.kube.gateway import PODS, ClusterUnreachable, Gateway, WatchExpired
from console.kubeconfig import validate_kubeconfig
from simcluster.server import SimCluster
from tests.simcluster.conftest import pod_manifest


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster(nodes=1, seed=4, speed=50, bookmark_seconds=0.3) as cluster:
        yield cluster


@pytest.fixture
def gateway(sim: SimCluster, tmp_path: Path) -> Gateway:
    text = sim.write_kubeconfig(tmp_path / "kubeconfig").read_text()
    return Gateway(client.api_client(sim.port, validate_kubeconfig(text), ""), client.timeouts())


def test_it_continues_a_list_with_the_changes_after_it(gateway: Gateway) -> None:
    listing = gateway.listing(PODS, namespace="default")
    assert listing.items == [] and listing.resource_version
    gateway.create(PODS, "default", pod_manifest("w"))
    batch = gateway.watch(PODS, listing.resource_version, 1, namespace="default")
    assert batch.events[0].type == "ADDED"
    assert {e.object["metadata"]["name"] for e in batch.events} == {"w"}
    assert batch.cursor != listing.resource_version
    quiet = gateway.watch(PODS, batch.cursor, 1, selector="app=nothing", namespace="default")
    assert quiet.events == [] and quiet.cursor  # only bookmarks: the cursor still moves on


def test_it_reports_an_expired_cursor_so_the_caller_relists(
    gateway: Gateway, sim: SimCluster
) -> None:
    cursor = gateway.listing(PODS).resource_version
    gateway.create(PODS, "default", pod_manifest("x"))
    sim.compact()
    with pytest.raises(WatchExpired, match="too old resource version"):
        gateway.watch(PODS, cursor, 1)


@pytest.mark.parametrize("fault", ["truncate", "garbage"])
def test_it_never_takes_a_broken_stream_for_events(
    gateway: Gateway, sim: SimCluster, fault: str
) -> None:
    cursor = gateway.listing(PODS).resource_version
    gateway.create(PODS, "default", pod_manifest("y"))
    sim.set_fault(**{fault: True}, seconds=30)
    with pytest.raises(ClusterUnreachable, match=r"truncated|malformed"):
        gateway.watch(PODS, cursor, 1)
