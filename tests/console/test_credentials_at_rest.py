"""Credentials at rest (issue 12, item 4): a kubeconfig is stored encrypted, keys rotate without
losing a row, a file reference is read at use time, and TLS is verified unless an operator says
otherwise (the Clusters page shows it)."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client

from console.kubeconfig import KubeconfigRejected, validate_kubeconfig
from console.models import Cluster
from tests.conftest import KUBECONFIG, open_to_every_project

TOKEN = "tok-" + "s3cr3t" * 6
SECRET_KUBECONFIG = KUBECONFIG.replace('token: "t"', f'token: "{TOKEN}"')
INSECURE = KUBECONFIG.replace(
    'server: "http://127.0.0.1:9"',
    'server: "https://10.0.0.1:6443", insecure-skip-tls-verify: true',
)
OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def stored_column(cluster: Cluster) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT kubeconfig FROM console_cluster WHERE id = %s", [cluster.pk])
        return str(cursor.fetchone()[0])


def test_it_stores_the_kubeconfig_encrypted(db: None) -> None:
    cluster = Cluster.objects.create(name="gpu-a", kubeconfig=SECRET_KUBECONFIG)
    stored = stored_column(cluster)
    assert TOKEN not in stored and "apiVersion" not in stored
    assert Cluster.objects.get(pk=cluster.pk).kubeconfig == SECRET_KUBECONFIG


def test_an_old_key_still_decrypts_until_the_rows_are_rotated(db: None, settings: Any) -> None:
    settings.TRAINYARD_FIELD_KEYS = [OLD]
    cluster = Cluster.objects.create(name="gpu-a", kubeconfig=SECRET_KUBECONFIG)
    settings.TRAINYARD_FIELD_KEYS = [NEW, OLD]
    assert Cluster.objects.get(pk=cluster.pk).kubeconfig == SECRET_KUBECONFIG
    before = stored_column(cluster)
    out = StringIO()
    call_command("rotate_keys", stdout=out)
    assert "Re-encrypted 1 kubeconfig(s)" in out.getvalue()
    assert stored_column(cluster) != before
    settings.TRAINYARD_FIELD_KEYS = [NEW]
    assert Cluster.objects.get(pk=cluster.pk).kubeconfig == SECRET_KUBECONFIG


def test_a_removed_key_fails_the_use_not_the_page(db: None, settings: Any, alice: User) -> None:
    settings.TRAINYARD_FIELD_KEYS = [OLD]
    Cluster.objects.create(name="gpu-a", kubeconfig=SECRET_KUBECONFIG)
    settings.TRAINYARD_FIELD_KEYS = [NEW]
    cluster = Cluster.objects.get(name="gpu-a")
    with pytest.raises(KubeconfigRejected, match="rotate_keys"):
        cluster.kubeconfig  # noqa: B018
    client = Client()
    client.force_login(alice)
    assert client.get("/clusters/").status_code == 200
    with pytest.raises(CommandError, match="gpu-a"):
        call_command("rotate_keys", stdout=StringIO())


def test_it_prints_a_new_key_that_fernet_accepts() -> None:
    out = StringIO()
    call_command("rotate_keys", "--new-key", stdout=out)
    Fernet(out.getvalue().strip())


def test_a_file_reference_is_read_at_every_use(db: None, tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    call_command("add_cluster", "gpu-a", "--kubeconfig-path", str(path), stdout=StringIO())
    cluster = Cluster.objects.get(name="gpu-a")
    assert stored_column(cluster) == "" and cluster.kubeconfig_path == str(path)
    path.write_text(SECRET_KUBECONFIG)  # the mounted Secret was rotated
    assert Cluster.objects.get(name="gpu-a").kubeconfig == SECRET_KUBECONFIG
    path.unlink()
    with pytest.raises(KubeconfigRejected, match="cannot be read"):
        Cluster.objects.get(name="gpu-a").kubeconfig  # noqa: B018


def test_it_refuses_to_skip_tls_verification_unless_the_cluster_is_flagged(
    db: None, tmp_path: Path
) -> None:
    with pytest.raises(KubeconfigRejected, match="insecure-skip-tls-verify"):
        validate_kubeconfig(INSECURE)
    path = tmp_path / "kubeconfig"
    path.write_text(INSECURE)
    with pytest.raises(CommandError, match="insecure-skip-tls-verify"):
        call_command("add_cluster", "gpu-a", "--kubeconfig", str(path), stdout=StringIO())
    call_command("add_cluster", "gpu-a", "--kubeconfig", str(path), "--insecure", stdout=StringIO())
    cluster = Cluster.objects.get(name="gpu-a")
    assert cluster.insecure and cluster.kubeconfig == INSECURE
    Cluster.objects.filter(pk=cluster.pk).update(insecure=False)
    with pytest.raises(KubeconfigRejected, match="insecure-skip-tls-verify"):
        Cluster.objects.get(pk=cluster.pk).kubeconfig  # noqa: B018


def test_it_refuses_a_proxy_url() -> None:
    proxied = KUBECONFIG.replace(
        'server: "http://127.0.0.1:9"', 'server: "http://127.0.0.1:9", proxy-url: "http://p:3128"'
    )
    with pytest.raises(KubeconfigRejected, match="proxy-url"):
        validate_kubeconfig(proxied, insecure=True)


def test_the_clusters_page_shows_an_insecure_cluster(db: None, alice: User) -> None:
    open_to_every_project(Cluster.objects.create(name="gpu-a", kubeconfig=INSECURE, insecure=True))
    client = Client()
    client.force_login(alice)
    html = client.get("/clusters/").content.decode()
    assert "TLS not verified" in html
    assert TOKEN not in html


def test_the_admin_stores_a_pasted_kubeconfig_encrypted_and_refuses_an_insecure_one(
    olga: User,
) -> None:
    olga.is_superuser = olga.is_staff = True  # the admin is for staff
    olga.save()
    client = Client()
    client.force_login(olga)
    data = {"name": "gpu-b", "kubeconfig": INSECURE, "namespace": "default", "context": ""}
    html = client.post("/admin/console/cluster/add/", data).content.decode()
    assert "insecure-skip-tls-verify" in html and not Cluster.objects.exists()
    # SECRET_KUBECONFIG's server is plain http: accepted when marked insecure, as on the page
    client.post("/admin/console/cluster/add/", {**data, "kubeconfig": SECRET_KUBECONFIG,
                                                "insecure": "on"})  # fmt: skip
    cluster = Cluster.objects.get(name="gpu-b")
    assert TOKEN not in stored_column(cluster)
    change = client.get(f"/admin/console/cluster/{cluster.pk}/change/").content.decode()
    assert TOKEN not in change


def test_the_admin_changes_a_referenced_cluster_and_says_when_its_file_is_gone(
    olga: User, tmp_path: Path
) -> None:
    olga.is_superuser = olga.is_staff = True  # the admin is for staff
    olga.save()
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    cluster = Cluster.objects.create(name="gpu-a", kubeconfig_path=str(path))
    client = Client()
    client.force_login(olga)
    form = {
        "name": "gpu-a",
        "kubeconfig_path": str(path),
        "namespace": "ml",
        "context": "",
        "insecure": "on",
    }  # fmt: skip (its server is plain http)
    assert client.post(f"/admin/console/cluster/{cluster.pk}/change/", form).status_code == 302
    assert Cluster.objects.get(pk=cluster.pk).namespace == "ml"
    path.unlink()
    answer = client.post(f"/admin/console/cluster/{cluster.pk}/change/", form)
    assert answer.status_code == 200 and "cannot be read" in answer.content.decode()
