"""A cluster registered over HTTPS (issue 36, Build 1): "TLS verified against the CA (insecure
only when the operator ticks it, shown on the cluster for ever after)". simcluster serves HTTPS
here with a certificate for 127.0.0.1 signed by a CA of its own; a second, unrelated CA stands
for an operator's mistake."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from console import cluster_actions
from console.engine.cycle import sync_cluster
from console.models import ApiToken, AuditEvent, Cluster
from console.node_actions import ActionRefused
from simcluster.server import SimCluster
from simcluster.tls import CertificateAuthority

UNTRUSTED = "the API server's certificate is not trusted"


@pytest.fixture(scope="module")
def other_ca() -> str:
    return CertificateAuthority("someone-else-ca").pem


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster(nodes=1, gpus_per_node=8, seed=0, speed=50.0, tls=True) as cluster:
        yield cluster


def body(sim: SimCluster, **more: Any) -> dict[str, Any]:
    return {"server": sim.url, "ca": sim.ca_pem, "token": sim.token, "namespace": "default",
            **more}  # fmt: skip


def api(method: str, path: str, user: User, data: Any = None) -> Any:
    headers = {"Authorization": f"Bearer {ApiToken.issue(user)[1]}"}
    extra = {"data": json.dumps(data), "content_type": "application/json"} if data else {}
    return getattr(Client(), method)(f"/api/v1{path}", headers=headers, **extra)


def test_it_registers_an_https_cluster_verified_against_its_ca(sim: SimCluster, olga: User) -> None:
    assert sim.url.startswith("https://127.0.0.1:")
    cluster, report = cluster_actions.register(olga, "gpu-tls", body(sim))
    assert (report.reached, report.error) == (True, "")
    assert report.version == "v1.33.0-simcluster"
    assert report.checks and all(check.allowed for check in report.checks)
    assert cluster.insecure is False
    stored = Cluster.objects.get(name="gpu-tls")
    assert "certificate-authority-data" in stored.kubeconfig
    assert "insecure-skip-tls-verify" not in stored.kubeconfig


def test_it_refuses_a_wrong_ca_naming_the_certificate_problem_and_stores_nothing(
    sim: SimCluster, olga: User, other_ca: str
) -> None:
    with pytest.raises(ActionRefused) as refused:
        cluster_actions.register(olga, "gpu-tls", body(sim, ca=other_ca))
    assert refused.value.status == 422
    assert UNTRUSTED in refused.value.message
    assert "unable to get local issuer certificate" in refused.value.message
    assert refused.value.extra["errors"].keys() == {"server"}
    assert not Cluster.objects.exists()
    event = AuditEvent.objects.get(action=AuditEvent.Action.CLUSTER_CREATE)
    assert event.result == AuditEvent.Result.REFUSED and UNTRUSTED in event.detail
    answer = api("post", "/clusters", olga, {"name": "gpu-tls", **body(sim, ca=other_ca)})
    assert answer.status_code == 422 and UNTRUSTED in answer.json()["message"]
    assert not Cluster.objects.exists()
    page = Client()
    page.force_login(olga)
    form = page.post("/clusters/new/", {"name": "gpu-tls", **body(sim, ca=other_ca)})
    assert form.status_code == 422
    assert "unable to get local issuer certificate" in form.content.decode()
    assert sim.token not in form.content.decode()
    by_name = body(sim, server=sim.url.replace("127.0.0.1", "localhost"))
    with pytest.raises(ActionRefused) as refused:  # the certificate names 127.0.0.1 only
        cluster_actions.register(olga, "gpu-tls", by_name)
    assert UNTRUSTED in refused.value.message and "Hostname mismatch" in refused.value.message
    assert not Cluster.objects.exists()


def test_it_registers_an_insecure_cluster_only_when_ticked_and_shows_it_for_ever_after(
    sim: SimCluster, olga: User, other_ca: str
) -> None:
    answer = api("post", "/clusters", olga, {"name": "gpu-tls", **body(sim, ca=other_ca),
                                             "insecure": True})  # fmt: skip
    assert answer.status_code == 201, answer.content
    assert answer.json()["insecure"] is True and answer.json()["connection"]["reached"] is True
    cluster = Cluster.objects.get(name="gpu-tls")
    assert cluster.insecure and "insecure-skip-tls-verify: true" in cluster.kubeconfig
    assert "certificate-authority-data" not in cluster.kubeconfig  # the CA was not what was used
    assert sync_cluster(cluster.pk).reachable
    assert cluster_actions.check_connection(olga, cluster).reached
    listed = {c["name"]: c for c in api("get", "/clusters", olga).json()}
    assert listed["gpu-tls"]["insecure"] is True
    page = Client()
    page.force_login(olga)
    html = page.get("/clusters/gpu-tls/").content.decode()
    assert "TLS not verified" in html and "insecure-skip-tls-verify" in html
    assert "TLS not verified" in page.get("/clusters/").content.decode()
    event = AuditEvent.objects.get(action=AuditEvent.Action.CLUSTER_CREATE)
    assert "insecure" in event.detail


def test_it_still_shows_a_cluster_was_insecure_after_rotating_to_verified_credentials(
    sim: SimCluster, olga: User, other_ca: str
) -> None:
    """ "Shown on the cluster for ever after": the current credentials verify TLS again, and the
    cluster still says when its credentials first did not."""
    answer = api("post", "/clusters", olga, {"name": "gpu-tls", **body(sim, ca=other_ca),
                                             "insecure": True})  # fmt: skip
    since = Cluster.objects.get(name="gpu-tls").insecure_since
    assert since is not None and answer.json()["insecure_since"]
    cluster_actions.rotate(olga, Cluster.objects.get(name="gpu-tls"), body(sim))
    rotated = Cluster.objects.get(name="gpu-tls")
    assert (rotated.insecure, rotated.insecure_since) == (False, since)
    assert "insecure-skip-tls-verify" not in rotated.kubeconfig
    listed = {c["name"]: c for c in api("get", "/clusters", olga).json()}["gpu-tls"]
    assert listed["insecure"] is False and listed["insecure_since"] is not None
    page = Client()
    page.force_login(olga)
    html = page.get("/clusters/gpu-tls/").content.decode()
    assert "Was insecure" in html and "TLS not verified" not in html
    assert "Was insecure" in page.get("/clusters/").content.decode()
    cluster_actions.rotate(olga, rotated, {**body(sim), "insecure": True})
    again = Cluster.objects.get(name="gpu-tls")
    assert (again.insecure, again.insecure_since) == (True, since)  # the first time is kept


def test_it_keeps_the_old_credentials_when_a_rotation_brings_a_wrong_ca(
    sim: SimCluster, olga: User, other_ca: str
) -> None:
    cluster, _report = cluster_actions.register(olga, "gpu-tls", body(sim))
    before = Cluster.objects.get(pk=cluster.pk)
    with pytest.raises(ActionRefused) as refused:
        cluster_actions.rotate(olga, cluster, body(sim, ca=other_ca))
    assert UNTRUSTED in refused.value.message
    after = Cluster.objects.get(pk=cluster.pk)
    assert after.kubeconfig == before.kubeconfig and after.credentials_rotated_at is None
    assert cluster_actions.check_connection(olga, after).reached
    rotate = AuditEvent.objects.get(action=AuditEvent.Action.CLUSTER_ROTATE)
    assert rotate.result == AuditEvent.Result.REFUSED


def test_it_syncs_against_the_https_cluster_with_the_stored_ca(sim: SimCluster, olga: User) -> None:
    cluster, _report = cluster_actions.register(olga, "gpu-tls", body(sim))
    result = sync_cluster(cluster.pk)
    assert result.reachable, result
    synced = Cluster.objects.get(pk=cluster.pk)
    assert synced.reachable and synced.last_synced_at is not None
    assert synced.nodes.count() == 1
