"""Registering, testing, rotating and retiring a cluster from the console (issue 36, Build 1
and Show): credentials tested before they are stored, one SelfSubjectAccessReview per needed
permission as a checklist, the server's address checked like an outbound webhook; everything
operator-only and audited."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.test import Client

from console import cluster_actions
from console.models import ApiToken, AuditEvent, Cluster
from console.node_actions import ActionRefused
from console.outbound import AddressRefused, address_problem, check_server
from jobs.choices import JobPhase
from jobs.models import Job
from simcluster.server import SimCluster

EXEC_KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://10.0.0.1:6443", certificate-authority-data: "eA=="}
users:
- name: u
  user:
    exec: {command: "/bin/sh", args: ["-c", "curl evil"]}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
"""


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster(nodes=1, gpus_per_node=8, seed=0, speed=50.0, tls=True) as cluster:
        yield cluster


def body(sim: SimCluster, **more: Any) -> dict[str, Any]:
    return {"server": sim.url, "ca": sim.ca_pem, "token": sim.token, "namespace": "default",
            **more}  # fmt: skip


def test_it_registers_a_cluster_after_its_connection_test_with_a_checklist(
    sim: SimCluster, olga: User
) -> None:
    sim.set_access_rules([
        {"verbs": ["get", "list", "watch"], "apiGroups": ["*"], "resources": ["*"]},
        {"verbs": ["create", "patch"], "apiGroups": ["*"], "resources": ["*"],
         "namespaces": ["default"]},
        {"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]},
    ])  # fmt: skip
    _cluster, report = cluster_actions.register(olga, "gpu-b", body(sim))
    assert report.reached and report.version == "v1.33.0-simcluster"
    checklist = {c["permission"]: c for c in cluster_actions.report_json(report)["checklist"]}
    assert checklist["list core/pods"]["allowed"] is True
    assert checklist["create apps/statefulsets (namespace)"]["allowed"] is True
    missing = checklist["create core/pods/eviction"]
    assert (missing["allowed"], missing["required"]) == (False, False)
    assert missing["breaks"] == "drains are not offered"
    assert checklist["patch core/nodes"]["breaks"] == "cordon and uncordon are not offered"
    stored = Cluster.objects.get(name="gpu-b")
    assert (stored.namespace, stored.insecure, stored.server_version) == (
        "default", False, "v1.33.0-simcluster",
    )  # fmt: skip
    assert stored.access["patch core/nodes"] is False and stored.access["list core/pods"] is True
    assert sim.token in stored.kubeconfig  # stored (encrypted at rest), never shown
    event = AuditEvent.objects.get(action=AuditEvent.Action.CLUSTER_CREATE)
    assert (event.actor_name, event.target, event.result) == ("olga", "cluster gpu-b", "succeeded")
    assert sim.token not in event.detail


def test_it_refuses_an_exec_kubeconfig_a_link_local_server_and_a_dead_one(
    sim: SimCluster, olga: User
) -> None:
    with pytest.raises(ActionRefused) as refused:
        cluster_actions.register(olga, "evil", {"kubeconfig": EXEC_KUBECONFIG})
    assert refused.value.status == 422 and "exec" in refused.value.message
    for server in (
        "http://169.254.169.254",
        "https://[fe80::1]:6443",
        "http://metadata.google.internal",
    ):
        with pytest.raises(ActionRefused) as refused:
            cluster_actions.register(
                olga, "meta", {"server": server, "token": "t", "insecure": True}
            )
        assert refused.value.extra["errors"].keys() == {"server"}, server
    with pytest.raises(ActionRefused) as refused:
        cluster_actions.register(olga, "gone", {"server": "http://127.0.0.1:9", "token": "t",
                                                "insecure": True})  # fmt: skip
    assert "connection test failed" in refused.value.message
    with pytest.raises(ActionRefused) as refused:
        cluster_actions.register(olga, "no-ca", {"server": "https://10.1.2.3", "token": "t"})
    assert refused.value.extra["errors"].keys() == {"ca"}
    assert not Cluster.objects.exists()
    assert AuditEvent.objects.filter(result="refused").count() == 6


def test_it_checks_addresses_like_an_outbound_webhook() -> None:
    assert address_problem(ipaddress.ip_address("169.254.169.254")) == "a cloud metadata address"
    assert address_problem(ipaddress.ip_address("169.254.1.1")) == "a link-local address"
    assert address_problem(ipaddress.ip_address("::ffff:169.254.169.254")) is not None
    assert address_problem(ipaddress.ip_address("10.0.0.5")) is None
    assert address_problem(ipaddress.ip_address("127.0.0.1")) is None
    with pytest.raises(AddressRefused):
        check_server("https://api.example", resolver=lambda host: ["10.0.0.1", "169.254.0.9"])
    check_server("https://api.example", resolver=lambda host: ["10.0.0.1"])


def test_it_rotates_credentials_only_once_the_new_ones_work(sim: SimCluster, olga: User) -> None:
    cluster, _report = cluster_actions.register(olga, "gpu-b", body(sim))
    with pytest.raises(ActionRefused):
        cluster_actions.rotate(olga, cluster, {"server": "http://127.0.0.1:9", "token": "new",
                                               "insecure": True})  # fmt: skip
    assert Cluster.objects.get(pk=cluster.pk).credentials_rotated_at is None
    sim.stop()
    sim.token = "rotated-token"
    sim.start()
    assert not cluster_actions.check_connection(olga, Cluster.objects.get(pk=cluster.pk)).reached
    report = cluster_actions.rotate(olga, cluster, body(sim))
    assert report.reached
    rotated = Cluster.objects.get(pk=cluster.pk)
    assert "rotated-token" in rotated.kubeconfig and rotated.credentials_rotated_at is not None
    assert cluster_actions.check_connection(olga, rotated).reached
    assert AuditEvent.objects.filter(action=AuditEvent.Action.CLUSTER_ROTATE).count() == 2


def test_it_retires_a_cluster_only_without_live_jobs_and_keeps_its_history(
    sim: SimCluster, olga: User, alice: User
) -> None:
    cluster, _report = cluster_actions.register(olga, "gpu-b", body(sim))
    job = Job.objects.create(
        project=alice.memberships.get().project, cluster=cluster, name="ppo", namespace="default",
        spec={"tasks": []}, phase=JobPhase.RUNNING, owner=alice,
    )  # fmt: skip
    with pytest.raises(ActionRefused) as refused:
        cluster_actions.retire(olga, cluster)
    assert refused.value.status == 409
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.SUCCEEDED)
    cluster_actions.retire(olga, cluster)
    retired = Cluster.objects.get(pk=cluster.pk)
    assert retired.retired_at is not None and retired.kubeconfig == ""
    assert Job.objects.filter(pk=job.pk).exists()
    with pytest.raises(ActionRefused):
        cluster_actions.check_connection(olga, retired)


def test_it_lets_no_one_but_operators_act_on_clusters(sim: SimCluster, bob: User) -> None:
    with pytest.raises(PermissionDenied):
        cluster_actions.register(bob, "gpu-b", body(sim))
    assert not Cluster.objects.filter(name="gpu-b").exists()


def test_it_registers_and_retires_through_the_api_at_the_issues_paths(
    sim: SimCluster, olga: User, bob: User
) -> None:
    def call(method: str, path: str, user: User, data: Any = None) -> Any:
        headers = {"Authorization": f"Bearer {ApiToken.issue(user)[1]}"}
        extra = {"data": json.dumps(data), "content_type": "application/json"} if data else {}
        return getattr(Client(), method)(f"/api/v1{path}", headers=headers, **extra)

    assert call("post", "/clusters", bob, {"name": "gpu-b", **body(sim)}).status_code == 403
    refused = call(
        "post", "/clusters", olga, {"name": "x", "server": "http://169.254.169.254", "token": "t"}
    )
    assert refused.status_code == 422 and "server" in refused.json()["errors"]
    refused = call(
        "post", "/clusters", olga, {"name": "x", **body(sim), "prometheus_url": "ftp://p"}
    )
    assert refused.status_code == 422 and "prometheus_url" in refused.json()["errors"]
    named = {"name": "gpu-b", **body(sim), "prometheus_url": "http://prometheus.monitoring:9090"}
    created = call("post", "/clusters", olga, named)
    assert created.status_code == 201
    assert Cluster.objects.get(name="gpu-b").prometheus_url == "http://prometheus.monitoring:9090"
    answer = created.json()
    assert answer["connection"]["reached"] is True and answer["connection"]["checklist"]
    assert call("post", "/clusters/gpu-b/test", olga).json()["reached"] is True
    assert call("post", "/clusters/gpu-b/credentials", olga, body(sim)).json()["reached"]
    retired = call("delete", "/clusters/gpu-b", olga)
    assert retired.status_code == 200 and retired.json()["retired_at"]


def test_it_registers_from_the_page_showing_the_rbac_first_and_the_checklist_after(
    sim: SimCluster, olga: User, bob: User
) -> None:
    member = Client()
    member.force_login(bob)
    assert member.get("/clusters/new/").status_code == 403
    client = Client()
    client.force_login(olga)
    form = client.get("/clusters/new/").content.decode()
    assert "trainyard-console-read" in form  # the least-privilege RBAC, to apply first
    refused = client.post("/clusters/new/", {"name": "x", "server": "http://169.254.169.254",
                                             "token": "secret-t", "insecure": "on"})  # fmt: skip
    assert refused.status_code == 422
    assert "link-local" in refused.content.decode() or "metadata" in refused.content.decode()
    assert "secret-t" not in refused.content.decode()
    sim.set_access_rules(
        [{"verbs": ["list", "watch", "get"], "apiGroups": ["*"], "resources": ["*"]}]
    )
    answer = client.post("/clusters/new/", {"name": "gpu-b", "server": sim.url, "ca": sim.ca_pem,
                                            "token": sim.token, "namespace": "default",
                                            "prometheus_url": "http://prom:9090/"})  # fmt: skip
    assert answer.status_code == 302 and answer["Location"] == "/clusters/gpu-b/"
    assert Cluster.objects.get(name="gpu-b").prometheus_url == "http://prom:9090"
    page = client.get("/clusters/gpu-b/").content.decode()
    assert 'data-permission="patch core/nodes" data-allowed="no"' in page
    assert "cordon and uncordon are not offered" in page
    assert 'data-permission="list core/pods" data-allowed="yes"' in page
    assert member.get("/clusters/gpu-b/").status_code == 403


@pytest.fixture
def plain() -> Iterator[SimCluster]:
    """A simcluster on plain http://, as `make run`'s demo and most tests have it."""
    with SimCluster(nodes=1, gpus_per_node=8, seed=0, speed=50.0) as cluster:
        yield cluster


PLAIN = "speaks plain http://: its token would travel in clear"


def test_it_refuses_a_plain_http_server_with_a_token_unless_marked_insecure(
    plain: SimCluster, olga: User, tmp_path: Any
) -> None:
    """A token sent over http:// can be read on the way: accepted only when the operator ticks
    insecure, then shown like skipped TLS verification."""
    headers = {"Authorization": f"Bearer {ApiToken.issue(olga)[1]}"}

    def post(data: dict[str, Any]) -> Any:
        return Client().post("/api/v1/clusters", json.dumps(data), "application/json",
                             headers=headers)  # fmt: skip

    given = {"name": "plain", "server": plain.url, "token": plain.token}
    refused = post(given)
    assert refused.status_code == 422 and PLAIN in refused.json()["message"]
    assert refused.json()["errors"].keys() == {"server"}
    kubeconfig = plain.write_kubeconfig(tmp_path / "kubeconfig").read_text()
    refused = post({"name": "plain", "kubeconfig": kubeconfig})
    assert refused.status_code == 422 and refused.json()["errors"].keys() == {"kubeconfig"}
    page = Client()
    page.force_login(olga)
    form = page.post("/clusters/new/", {**given, "namespace": "default"})
    assert form.status_code == 422 and PLAIN in form.content.decode()
    assert plain.token not in form.content.decode()
    assert not Cluster.objects.exists()

    assert page.post("/clusters/new/", {**given, "insecure": "on"}).status_code == 302
    cluster = Cluster.objects.get(name="plain")
    assert cluster.insecure and cluster.insecure_since is not None
    assert "TLS not verified" in page.get("/clusters/plain/").content.decode()
    assert "TLS not verified" in page.get("/clusters/").content.decode()
    created = post({"name": "plain-api", "kubeconfig": kubeconfig, "insecure": True})
    assert created.status_code == 201 and created.json()["insecure"] is True
    assert created.json()["insecure_since"] is not None


def test_it_rotates_with_a_kubeconfig_from_the_page(sim: SimCluster, olga: User) -> None:
    cluster, _report = cluster_actions.register(olga, "gpu-b", body(sim))
    page = Client()
    page.force_login(olga)
    html = page.get("/clusters/gpu-b/").content.decode()
    assert 'id="rotate-kubeconfig" name="kubeconfig"' in html
    sim.stop()
    sim.token = "rotated-by-kubeconfig"
    sim.start()
    kubeconfig = cluster_actions.kubeconfig_for(sim.url, sim.ca_pem, sim.token, "default", False)
    answer = page.post("/clusters/gpu-b/rotate/", {"kubeconfig": kubeconfig}, follow=True)
    assert "The new credentials work and are in use." in answer.content.decode()
    rotated = Cluster.objects.get(pk=cluster.pk)
    assert "rotated-by-kubeconfig" in rotated.kubeconfig
    assert rotated.credentials_rotated_at is not None


def test_the_empty_clusters_page_sends_operators_to_the_registration_page(
    olga: User, bob: User
) -> None:
    page = Client()
    page.force_login(olga)
    html = page.get("/clusters/").content.decode()
    assert 'No cluster is registered yet. <a href="/clusters/new/">Register a cluster</a>' in html
    assert "(scripts may use manage.py add_cluster)" in html
    member = Client()
    member.force_login(bob)
    assert "/clusters/new/" not in member.get("/clusters/").content.decode()
