"""The gateway's bounded WATCH against simcluster over real HTTP (KUBERNETES-FACTS.md, Watch):
LIST gives the cursor, a watch from it returns the events after it and the cursor absorbed;
410 Expired, a cut stream and a garbage line are reported, never taken for events."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.kube import client
from console.kube.gateway import (
    NODES,
    PODS,
    ClusterUnreachable,
    Gateway,
    Watch,
    WatchExpired,
)
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
    return Gateway(client.api_client(sim.port, text, "", validate_kubeconfig), client.timeouts())


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


def test_it_reads_several_watches_at_once(gateway: Gateway) -> None:
    cursor = gateway.listing(PODS).resource_version
    gateway.create(PODS, "default", pod_manifest("a"))
    gateway.create(PODS, "default", pod_manifest("b"))
    watches = [
        Watch(PODS, cursor, selector="app=b"),
        Watch(PODS, cursor, namespace="default"),
        Watch(NODES, gateway.listing(NODES).resource_version),
    ]
    only_b, both, nodes = gateway.watches(watches, 1)
    assert {e.object["metadata"]["name"] for e in only_b.events} == {"b"}
    assert {e.object["metadata"]["name"] for e in both.events} == {"a", "b"}
    assert nodes.cursor


def test_a_slow_api_server_delays_the_watches_once_not_once_each(
    gateway: Gateway, sim: SimCluster
) -> None:
    """All are sent before any answer is awaited: four watches behind 2 s of latency take about
    3 s (one latency, one timeout), where one after another they would take 9 s."""
    cursors = [Watch(PODS, gateway.listing(PODS).resource_version) for _ in range(4)]
    sim.set_fault(latency_ms=2000, seconds=60)
    started = time.monotonic()
    assert len(gateway.watches(cursors, 1)) == 4
    assert time.monotonic() - started < 6


def test_it_reads_every_watch_before_reporting_an_expired_cursor(
    gateway: Gateway, sim: SimCluster
) -> None:
    old = gateway.listing(PODS).resource_version
    gateway.create(PODS, "default", pod_manifest("c"))
    sim.compact()
    fresh = gateway.listing(PODS).resource_version
    with pytest.raises(WatchExpired):
        gateway.watches([Watch(PODS, old), Watch(PODS, fresh)], 1)
    assert gateway.list(PODS, namespace="default")  # the connections are still good


def test_a_broken_stream_drops_the_answers_not_yet_read(gateway: Gateway, sim: SimCluster) -> None:
    cursor = gateway.listing(PODS).resource_version
    gateway.create(PODS, "default", pod_manifest("d"))
    sim.set_fault(truncate=True, seconds=30)
    with pytest.raises(ClusterUnreachable, match="truncated"):
        gateway.watches([Watch(PODS, cursor), Watch(PODS, cursor), Watch(PODS, cursor)], 1)
    sim.clear_faults()
    batch = gateway.watch(PODS, cursor, 1, namespace="default")  # whole answers again
    assert {e.object["metadata"]["name"] for e in batch.events} == {"d"}
