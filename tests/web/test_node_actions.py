"""The node actions from the pages and the JSON API (issue 36, Show): the operators' alone —
members get 403 in pages, fragments, forms and API — every action audited, the API paths
exactly as the issue names them.

Spec §Node and Addon status: cordon sets `spec.unschedulable`; Online/Offline does not change.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from console.engine.connection import ACCESS_SECONDS, access_due, refresh_access
from console.models import ApiToken, AuditEvent, Cluster, DrainRun, Node
from jobs.choices import DrainState
from simcluster.server import SimCluster
from tests.conftest import register_sim
from tests.engine.conftest import SPEED, sync_until

NODE = "sim-node-1"
API = "/api/v1"


@pytest.fixture
def synced(db: None, tmp_path: Path) -> Iterator[Cluster]:
    """A simulated cluster, registered and synced once: its nodes are known."""
    with SimCluster(nodes=3, gpus_per_node=8, seed=0, speed=SPEED) as sim:
        cluster = register_sim(sim, tmp_path)
        sync_until(cluster, lambda: Node.objects.filter(cluster=cluster).count() == 3)
        yield cluster


@pytest.fixture(autouse=True)
def no_broker(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The drain's task is not run here (tests/engine/test_node_drain.py runs its passes)."""
    queued: list[int] = []
    monkeypatch.setattr("console.tasks.drain_node.delay", queued.append)
    return queued


def call(method: str, path: str, user: User, body: Any = None) -> Any:
    headers = {"Authorization": f"Bearer {ApiToken.issue(user, name='t')[1]}"}
    sends = body is not None and method != "get"
    kwargs = {"data": json.dumps(body), "content_type": "application/json"} if sends else {}
    response = getattr(Client(enforce_csrf_checks=True), method)(
        f"{API}{path}", headers=headers, **kwargs
    )
    assert response["Content-Type"].startswith("application/json"), response.content
    return response


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def node_paths(cluster: str, drain_id: int) -> list[tuple[str, str]]:
    return [
        ("post", f"/clusters/{cluster}/nodes/{NODE}/cordon"),
        ("post", f"/clusters/{cluster}/nodes/{NODE}/uncordon"),
        ("get", f"/clusters/{cluster}/nodes/{NODE}/drain-preview"),
        ("post", f"/clusters/{cluster}/nodes/{NODE}/drain"),
        ("get", f"/drains/{drain_id}"),
        ("post", f"/drains/{drain_id}/stop"),
    ]


def test_it_answers_403_to_members_in_the_api_and_401_without_a_token(
    synced: Cluster, bob: User, olga: User
) -> None:
    run = DrainRun.objects.create(cluster=synced, node_name=NODE, requested_by_name="olga")
    for method, path in node_paths(synced.name, run.pk):
        answer = call(method, path, bob, {"reason": "x"})
        assert answer.status_code == 403, (path, answer.content)
        anonymous = getattr(Client(), method)(f"{API}{path}")
        assert anonymous.status_code == 401, path
    assert not Node.objects.get(cluster=synced, name=NODE).unschedulable
    assert DrainRun.objects.get(pk=run.pk).state == DrainState.RUNNING


def test_it_answers_403_to_members_in_pages_fragments_and_forms(synced: Cluster, bob: User) -> None:
    run = DrainRun.objects.create(cluster=synced, node_name=NODE, requested_by_name="olga")
    client = logged_in(bob)
    pages = [f"/nodes/{synced.name}/{NODE}/", f"/drains/{run.pk}/"]
    for page in pages:
        assert client.get(page).status_code == 403
        assert client.get(page, headers={"HX-Request": "true"}).status_code == 403
    for form in ("cordon", "uncordon", "drain"):
        assert (
            client.post(f"/nodes/{synced.name}/{NODE}/{form}/", {"reason": "x"}).status_code == 403
        )
    assert client.post(f"/drains/{run.pk}/stop/").status_code == 403
    assert Client().get(pages[0]).status_code == 302  # to the login page
    nodes = client.get("/nodes/").content.decode()
    assert f"/nodes/{synced.name}/{NODE}/" not in nodes


def test_it_cordons_drains_stops_and_uncordons_through_the_api(
    synced: Cluster,
    olga: User,
    no_broker: list[int],
    django_capture_on_commit_callbacks: Any,
) -> None:
    base = f"/clusters/{synced.name}/nodes/{NODE}"
    assert call("post", f"{base}/cordon", olga, {}).status_code == 422
    cordoned = call("post", f"{base}/cordon", olga, {"reason": "disk swap"})
    assert cordoned.status_code == 200
    assert cordoned.json() | {"at": None} == {
        "cluster": "sim", "node": NODE, "unschedulable": True, "reason": "disk swap",
        "by": "olga", "at": None,
    }  # fmt: skip
    assert Node.objects.get(cluster=synced, name=NODE).phase == Node.Phase.ONLINE

    preview = call("get", f"{base}/drain-preview", olga).json()
    assert {pod["action"] for pod in preview["pods"]} <= {"evict", "skip", "blocked"}
    assert any(p["reason"] == "daemonset" and p["action"] == "skip" for p in preview["pods"])

    with django_capture_on_commit_callbacks(execute=True):
        started = call("post", f"{base}/drain", olga, {"timeout_seconds": 120})
    assert started.status_code == 202, started.content
    body = started.json()
    assert body["state"] == "running" and no_broker == [body["id"]]
    assert {"namespace", "name", "status", "reason"} <= set(body["pods"][0])
    assert call("post", f"{base}/drain", olga, {}).status_code == 409
    assert call("get", f"/drains/{body['id']}", olga).json()["id"] == body["id"]
    stopped = call("post", f"/drains/{body['id']}/stop", olga)
    assert (stopped.status_code, stopped.json()["state"]) == (200, "stopped")
    assert call("post", f"/drains/{body['id']}/stop", olga).status_code == 409
    assert Node.objects.get(cluster=synced, name=NODE).unschedulable

    assert call("post", f"{base}/uncordon", olga).json()["unschedulable"] is False
    assert (
        call("post", f"/clusters/nope/nodes/{NODE}/cordon", olga, {"reason": "x"}).status_code
        == 404
    )
    audited = AuditEvent.objects.filter(action__startswith="node.").values_list("action", "result")
    assert set(audited) >= {
        ("node.cordon", "refused"), ("node.cordon", "succeeded"), ("node.drain", "accepted"),
        ("node.drain", "refused"), ("node.drain_stop", "succeeded"),
        ("node.drain_stop", "refused"), ("node.uncordon", "succeeded"),
    }  # fmt: skip


def test_it_shows_the_reason_beside_scheduling_disabled_on_the_pages(
    synced: Cluster, olga: User, no_broker: list[int]
) -> None:
    client = logged_in(olga)
    page = client.get(f"/nodes/{synced.name}/{NODE}/")
    assert page.status_code == 200
    assert 'id="drain-preview"' in page.content.decode()
    answer = client.post(f"/nodes/{synced.name}/{NODE}/cordon/", {"reason": "firmware"})
    assert answer.status_code == 302
    shown = client.get(f"/nodes/{synced.name}/{NODE}/").content.decode()
    assert "SchedulingDisabled" in shown and "firmware" in shown and "olga" in shown
    listing = client.get(f"/nodes/?cluster={synced.name}").content.decode()
    assert "SchedulingDisabled" in listing and "firmware" in listing
    drained = client.post(f"/nodes/{synced.name}/{NODE}/drain/", {"timeout_minutes": "2"})
    run = DrainRun.objects.get()
    assert drained["Location"] == f"/drains/{run.pk}/"
    drain_page = client.get(f"/drains/{run.pk}/").content.decode()
    assert 'id="drain-pods" class="stack"' in drain_page and "data-poll" in drain_page
    assert client.post(f"/drains/{run.pk}/stop/").status_code == 302
    fragment = client.get(f"/drains/{run.pk}/", headers={"HX-Request": "true"}).content.decode()
    assert 'data-state="stopped"' in fragment and "data-poll" not in fragment


def test_it_offers_node_actions_only_when_the_credentials_allow_them(
    synced: Cluster, olga: User
) -> None:
    """Issue 36, Build 4: SelfSubjectAccessReviews, cached per cycle, decide what is shown."""
    client = logged_in(olga)
    page = client.get(f"/nodes/{synced.name}/{NODE}/").content.decode()
    assert 'data-missing="cordon"' in page and "have not been checked yet" in page
    assert 'id="drain-form"' not in page
    assert access_due(timezone.now()) == [synced.pk]
    assert refresh_access(synced.pk)  # simcluster allows everything by default
    assert access_due(timezone.now()) == []
    page = client.get(f"/nodes/{synced.name}/{NODE}/").content.decode()
    assert 'id="cordon-reason"' in page and 'id="drain-form"' in page
    missing = {key: False for key in ("create core/pods/eviction",)}
    Cluster.objects.filter(pk=synced.pk).update(
        access=Cluster.objects.get(pk=synced.pk).access | missing
    )
    page = client.get(f"/nodes/{synced.name}/{NODE}/").content.decode()
    assert 'id="cordon-reason"' in page and 'id="drain-form"' not in page
    assert "lack create core/pods/eviction" in page


def test_a_permission_check_that_cannot_finish_is_queued_again_only_a_period_later(
    synced: Cluster,
) -> None:
    """A slow or unreachable cluster's check (one review per need) is not queued at every beat
    tick: the queued checks would fill every worker and starve the syncs (the scale-out test)."""
    now = timezone.now()
    assert access_due(now) == [synced.pk]
    assert access_due(now + timedelta(seconds=2)) == []  # the next tick, the check unfinished
    assert access_due(now + timedelta(seconds=ACCESS_SECONDS + 1)) == [synced.pk]
