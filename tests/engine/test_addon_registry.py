"""The add-on registry against simcluster (issue 36, Build 3 and Show): install by server-side
apply, Pending -> Installing -> Ready; an upgrade to an image that never pulls, Upgrading ->
Failed (ProgressDeadlineExceeded); a rollback back to Ready; a worker killed mid-install ends
Failed (its lease ran out), never Installing for ever. Spec §Node and Addon status: Ready means
the desired version is reached."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.utils import timezone

from console import addon_actions
from console.engine.addons import advance_attempt, observe_addons, phase_of
from console.models import Addon, AddonAttempt, ApiToken, AuditEvent, Cluster
from console.node_actions import ActionRefused
from simcluster.server import SimCluster


def manifest(image: str) -> str:
    return f"""
apiVersion: apps/v1
kind: Deployment
metadata:
  name: metrics-agent
spec:
  replicas: 2
  progressDeadlineSeconds: 30
  selector:
    matchLabels: {{app: metrics-agent}}
  template:
    metadata:
      labels: {{app: metrics-agent}}
    spec:
      containers:
      - name: main
        image: {image}
"""


VERSIONS = {"1.0": manifest("ghcr.io/example/agent:1.0"),
            "2.0": manifest("ghcr.io/example/nonexistent-agent:2.0")}  # fmt: skip


def run(addon: Addon, timeout: float = 20.0) -> Addon:
    """The attempt's passes as its task chains them (without the wait), until it ends."""
    attempt = addon.attempts.order_by("-started_at", "-pk").first()
    assert attempt is not None
    deadline = time.monotonic() + timeout
    while advance_attempt(attempt.pk) is not None:
        assert time.monotonic() < deadline, "the attempt did not end"
        time.sleep(0.05)
    return Addon.objects.get(pk=addon.pk)


def phase(addon: Addon) -> str:
    return phase_of(Addon.objects.get(pk=addon.pk), timezone.now())[0]


def test_it_installs_fails_an_upgrade_and_rolls_back(
    sim: SimCluster, cluster: Cluster, olga: User
) -> None:
    addon = addon_actions.create_addon(
        olga, cluster, {"name": "metrics", "namespace": "kube-system", "versions": VERSIONS}
    )
    assert phase(addon) == Addon.Phase.PENDING
    addon = addon_actions.change_addon(olga, addon, {"desired_version": "1.0"})
    assert phase(addon) == Addon.Phase.INSTALLING
    addon = run(addon)
    assert (phase_of(addon, timezone.now()), addon.applied_version) == (
        (Addon.Phase.READY, ""), "1.0",
    )  # fmt: skip
    with sim.cluster.store.lock:
        deployed = sim.cluster.store.get("deployments", ("kube-system", "metrics-agent"))
    assert deployed is not None
    assert deployed["metadata"]["managedFields"][0]["manager"] == "trainyard"

    addon = addon_actions.change_addon(olga, addon, {"desired_version": "2.0"})
    assert phase(addon) == Addon.Phase.UPGRADING
    addon = run(addon)
    found, reason = phase_of(addon, timezone.now())
    assert found == Addon.Phase.FAILED and "ProgressDeadlineExceeded" in reason
    attempt = addon.attempts.first()
    assert attempt is not None and attempt.outcome == AddonAttempt.Outcome.FAILED

    addon = addon_actions.rollback(olga, addon)
    assert addon.desired_version == "1.0"
    addon = run(addon)
    assert (phase_of(addon, timezone.now()), addon.applied_version) == (
        (Addon.Phase.READY, ""), "1.0",
    )  # fmt: skip
    shown = addon_actions.addon_json(addon)
    phases = [t["phase"] for t in shown["transitions"]]  # newest first
    assert phases[-4:] == ["Failed", "Upgrading", "Ready", "Installing"] and phases[0] == "Ready"
    assert [a["kind"] for a in shown["attempts"]] == ["rollback", "upgrade", "install"]
    assert AuditEvent.objects.filter(action__startswith="addon.").count() == 4


def test_a_worker_killed_mid_install_ends_failed_not_installing(
    sim: SimCluster, cluster: Cluster, olga: User
) -> None:
    addon = addon_actions.create_addon(
        olga, cluster, {"name": "metrics", "versions": VERSIONS, "desired_version": "1.0"}
    )
    attempt = addon.attempts.get()
    assert advance_attempt(attempt.pk) == 2.0  # applied; the worker dies before the next pass
    assert phase(addon) == Addon.Phase.INSTALLING
    AddonAttempt.objects.filter(pk=attempt.pk).update(
        lease_until=timezone.now() - timedelta(seconds=1)
    )
    found, reason = phase_of(Addon.objects.get(pk=addon.pk), timezone.now())
    assert found == Addon.Phase.FAILED and "lease ran out" in reason
    assert advance_attempt(attempt.pk) is None  # a late pass does not take the lease again
    transition = Addon.objects.get(pk=addon.pk).transitions.first()
    assert transition is not None and transition.phase == Addon.Phase.FAILED


def test_a_ready_addon_that_loses_availability_says_so_beside_ready(
    sim: SimCluster, cluster: Cluster, olga: User
) -> None:
    addon = run(addon_actions.create_addon(
        olga, cluster, {"name": "metrics", "versions": VERSIONS, "desired_version": "1.0"}
    ))  # fmt: skip
    assert phase(addon) == Addon.Phase.READY
    with sim.cluster.store.lock:
        pods = [p for p in sim.cluster.store.objects("pods", "kube-system")
                if p["metadata"]["name"].startswith("metrics-agent-")]  # fmt: skip
        node = pods[0]["spec"]["nodeName"]
    sim.node_offline(node)
    sim.advance(60)
    assert observe_addons() == 1
    found, reason = phase_of(Addon.objects.get(pk=addon.pk), timezone.now())
    assert found == Addon.Phase.READY and "availability lost" in reason


def test_it_refuses_bad_manifests_and_non_operators(
    cluster: Cluster, olga: User, bob: User
) -> None:
    with pytest.raises(PermissionDenied):
        addon_actions.create_addon(bob, cluster, {"name": "metrics", "versions": VERSIONS})
    bad = {"1.0": "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"}
    with pytest.raises(ActionRefused) as refused:
        addon_actions.create_addon(olga, cluster, {"name": "metrics", "versions": bad})
    assert refused.value.extra["errors"].keys() == {"versions.1.0"}
    aliased = {"1.0": "a: &x [1]\nb: *x\n"}
    with pytest.raises(ActionRefused):
        addon_actions.create_addon(olga, cluster, {"name": "metrics", "versions": aliased})
    assert not Addon.objects.filter(managed=True).exists()


def test_the_api_registers_changes_and_rolls_back_at_the_issues_paths(
    sim: SimCluster, cluster: Cluster, olga: User, bob: User,
    django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    queued: list[int] = []
    monkeypatch.setattr("console.tasks.apply_addon.delay", queued.append)

    def call(method: str, path: str, user: User, data: Any = None) -> Any:
        headers = {"Authorization": f"Bearer {ApiToken.issue(user)[1]}"}
        extra = {"data": json.dumps(data), "content_type": "application/json"} if data else {}
        with django_capture_on_commit_callbacks(execute=True):
            return getattr(Client(), method)(f"/api/v1{path}", headers=headers, **extra)

    body = {"name": "metrics", "namespace": "kube-system", "versions": VERSIONS,
            "desired_version": "1.0"}  # fmt: skip
    assert call("post", "/clusters/sim/addons", bob, body).status_code == 403
    created = call("post", "/clusters/sim/addons", olga, body)
    assert created.status_code == 201, created.content
    shown = created.json()
    assert (shown["phase"], shown["desired_version"], shown["applied_version"]) == (
        "Installing", "1.0", "",
    )  # fmt: skip
    assert len(queued) == 1 and shown["attempts"][0]["kind"] == "install"
    run(Addon.objects.get(name="metrics"))
    ready = call("get", "/clusters/sim/addons/metrics", olga).json()
    assert (ready["phase"], ready["applied_version"]) == ("Ready", "1.0")
    assert call("post", "/clusters/sim/addons/metrics/rollback", olga).status_code == 409
    patched = call("patch", "/clusters/sim/addons/metrics", olga, {"desired_version": "2.0"})
    assert patched.json()["phase"] == "Upgrading" and len(queued) == 2
    assert (
        call("patch", "/clusters/sim/addons/metrics", olga, {"desired_version": "1.0"}).status_code
        == 409
    )
    assert [a["name"] for a in call("get", "/clusters/sim/addons", olga).json()] == ["metrics"]


def test_the_pages_register_install_and_show_the_phase_to_operators_only(
    sim: SimCluster, cluster: Cluster, olga: User, bob: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("console.tasks.apply_addon.delay", lambda attempt_id: None)
    Cluster.objects.filter(pk=cluster.pk).update(
        access={"patch apps/deployments (namespace)": True}
    )
    member = Client()
    member.force_login(bob)
    assert member.get(f"/addons/{cluster.name}/new/").status_code == 403
    client = Client()
    client.force_login(olga)
    form = {"name": "metrics", "namespace": "kube-system", "version": "1.0",
            "manifest": VERSIONS["1.0"], "install": "on"}  # fmt: skip
    answer = client.post(f"/addons/{cluster.name}/new/", form)
    assert answer.status_code == 302 and answer["Location"] == f"/addons/{cluster.name}/metrics/"
    run(Addon.objects.get(name="metrics"))
    page = client.get(answer["Location"]).content.decode()
    assert 'data-phase="Ready"' in page and 'id="desired-form"' in page
    assert 'data-outcome="succeeded"' in page
    assert member.get(answer["Location"]).status_code == 403
    listing = client.get(f"/addons/?cluster={cluster.name}").content.decode()
    assert f'href="/addons/{cluster.name}/metrics/"' in listing
    Cluster.objects.filter(pk=cluster.pk).update(access={})
    assert 'data-missing="addons"' in client.get(answer["Location"]).content.decode()
