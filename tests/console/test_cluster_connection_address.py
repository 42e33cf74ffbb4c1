"""The server URL is checked like an outbound webhook (issue 36, Build 1) at entry and again at
every connection: the engine's client asks about the address it actually reached, after the TCP
connect and before TLS or any byte of a request, so a DNS answer changed since entry (DNS
rebinding) cannot lead a cluster's token to a metadata or link-local address."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from console import cluster_actions, outbound
from console.engine.cycle import sync_cluster
from console.kube import client
from console.kube.gateway import ClusterUnreachable, Gateway
from console.kubeconfig import validate_kubeconfig
from console.models import Cluster
from simcluster.api import Request, Response
from simcluster.server import SimCluster

REFUSED = "a test-refused address"


@pytest.fixture(params=[False, True], ids=["http", "https"])
def sim(request: pytest.FixtureRequest) -> Iterator[SimCluster]:
    with SimCluster(nodes=1, gpus_per_node=8, seed=0, speed=50.0, tls=request.param) as cluster:
        yield cluster


def test_it_allows_the_addresses_api_servers_live_at_and_refuses_metadata_ones() -> None:
    assert outbound.peer_refusal("127.0.0.1") is None
    assert outbound.peer_refusal("::1") is None
    assert outbound.peer_refusal("10.20.0.1") is None
    assert outbound.peer_refusal("192.168.1.10") is None
    assert outbound.peer_refusal("169.254.169.254") == "a cloud metadata address"
    assert outbound.peer_refusal("::ffff:169.254.169.254") == "a cloud metadata address"
    assert outbound.peer_refusal("169.254.10.1") == "a link-local address"
    assert outbound.peer_refusal("fe80::1%eth0") == "a link-local address"


def test_it_refuses_a_reached_address_before_sending_a_byte(
    sim: SimCluster, tmp_path: Path
) -> None:
    served: list[str] = []
    answer = sim.handle

    def counting(request: Request) -> Response:
        served.append(request.path)
        return answer(request)

    sim.handle = counting  # type: ignore[method-assign]
    text = sim.write_kubeconfig(tmp_path / "kubeconfig").read_text()

    def refuse_loopback(address: str) -> str | None:
        return REFUSED if address == "127.0.0.1" else None

    checked = client.one_off_client(validate_kubeconfig(text), "", refuse_loopback)
    try:
        with pytest.raises(ClusterUnreachable) as refused:
            Gateway(checked, (2, 2)).version()
    finally:
        checked.close()
    assert refused.value.code == "address"
    assert str(refused.value) == f"the API server's address 127.0.0.1 is {REFUSED}: refused"
    assert served == []
    allowed = client.one_off_client(validate_kubeconfig(text), "", outbound.peer_refusal)
    try:
        assert Gateway(allowed, (2, 2)).version()["gitVersion"] == "v1.33.0-simcluster"
    finally:
        allowed.close()
    assert served == ["/version"]


def test_it_stops_the_engine_when_the_address_reached_is_refused_at_sync_time(
    sim: SimCluster, olga: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As if the server's name resolved to a metadata address after it was entered: the rule
    refuses the loopback address here, the only one simcluster can listen on."""
    body = {
        "server": sim.url,
        "ca": sim.ca_pem,
        "token": sim.token,
        "insecure": sim.url.startswith("http:"),
    }
    cluster, _report = cluster_actions.register(olga, "gpu-a", body)
    monkeypatch.setattr(outbound, "peer_refusal", lambda address: REFUSED)
    result = sync_cluster(cluster.pk)
    assert not result.reachable
    assert "127.0.0.1" in result.message and REFUSED in result.message
    assert not Cluster.objects.get(pk=cluster.pk).reachable
    report = cluster_actions.check_connection(olga, Cluster.objects.get(pk=cluster.pk))
    assert not report.reached and REFUSED in report.error
