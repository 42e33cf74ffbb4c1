"""The admin, for operators: registering a cluster refuses an unsafe kubeconfig at entry, and
never shows a stored one back."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from console.models import Cluster
from tests.conftest import KUBECONFIG


def admin_client(olga: User) -> Client:
    olga.is_superuser = olga.is_staff = True
    olga.save()
    client = Client()
    client.force_login(olga)
    return client


def add(client: Client, kubeconfig: str, **more: str) -> str:
    data = {"name": "gpu-b", "kubeconfig": kubeconfig, "namespace": "default", "context": "",
            **more}  # fmt: skip
    return client.post("/admin/console/cluster/add/", data).content.decode()


def test_it_registers_a_cluster_with_a_token_kubeconfig(olga: User) -> None:
    """Its server is plain http: the token travels in clear, so only when marked insecure."""
    page = add(admin_client(olga), KUBECONFIG)
    assert "speaks plain http://" in page
    assert not Cluster.objects.filter(name="gpu-b").exists()
    add(admin_client(olga), KUBECONFIG, insecure="on")
    cluster = Cluster.objects.get(name="gpu-b")
    assert cluster.insecure and cluster.insecure_since is not None


def test_it_refuses_a_kubeconfig_that_runs_a_command(olga: User) -> None:
    unsafe = KUBECONFIG.replace('user: {token: "t"}', "user: {exec: {command: /bin/sh}}")
    html = add(admin_client(olga), unsafe)
    assert not Cluster.objects.filter(name="gpu-b").exists()
    assert "exec" in html


def test_it_never_shows_a_stored_kubeconfig(olga: User, cluster: Cluster) -> None:
    html = admin_client(olga).get(f"/admin/console/cluster/{cluster.pk}/change/").content.decode()
    assert cluster.name in html
    assert 'token: "t"' not in html and "127.0.0.1:9" not in html
