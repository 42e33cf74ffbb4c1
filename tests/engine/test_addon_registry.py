"""The add-on registry against simcluster (issue 36, Build 3 and Show): install by server-side
apply, Pending -> Installing -> Ready; an upgrade to an image that never pulls, Upgrading ->
Failed (ProgressDeadlineExceeded); a rollback back to Ready; a worker killed mid-install ends
Failed (its lease ran out), never Installing for ever. Spec §Node and Addon status: Ready means
the desired version is reached."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import time_machine
import yaml
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.utils import timezone

from console import addon_actions
from console.engine.addons import (
    ATTEMPT_SECONDS,
    LEASE_SECONDS,
    PASS_SECONDS,
    advance_attempt,
    observe_addons,
    phase_of,
)
from console.engine.connection import refresh_access
from console.models import Addon, AddonAttempt, ApiToken, AuditEvent, Cluster
from console.node_actions import ActionRefused
from jobs.status.addons import LEASE_RAN_OUT
from simcluster.access import rules_from_rbac
from simcluster.server import SimCluster


def manifest(image: str, deadline: int = 30) -> str:
    return f"""
apiVersion: apps/v1
kind: Deployment
metadata:
  name: metrics-agent
spec:
  replicas: 2
  progressDeadlineSeconds: {deadline}
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


@pytest.fixture(autouse=True)
def _asked(request: pytest.FixtureRequest) -> None:
    """The console's permissions on the cluster asked, as the beat does (simcluster allows
    everything unless a test gives it rules)."""
    if "cluster" in request.fixturenames:
        cluster = request.getfixturevalue("cluster")
        assert refresh_access(cluster.pk)
        cluster.refresh_from_db()


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
    # An image that never pulls, with a day's progress deadline: the rollout cannot end
    # before the worker dies, however fast the simulated clock runs.
    slow = {"1.0": manifest("ghcr.io/example/nonexistent-agent:1.0", deadline=86400)}
    addon = addon_actions.create_addon(
        olga, cluster, {"name": "metrics", "versions": slow, "desired_version": "1.0"}
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
    attempt.refresh_from_db()  # its row closed too, with the reason
    assert (attempt.outcome, attempt.reason) == (AddonAttempt.Outcome.FAILED, LEASE_RAN_OUT)
    assert attempt.finished_at is not None


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


DAEMONSET = """
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: node-agent
spec:
  selector:
    matchLabels: {app: node-agent}
  template:
    metadata:
      labels: {app: node-agent}
    spec:
      containers:
      - name: main
        image: ghcr.io/example/node-agent:1.0
"""
WITH_DAEMONSET = {
    "1.0": yaml.safe_dump([yaml.safe_load(VERSIONS["1.0"]), yaml.safe_load(DAEMONSET)])
}


def shipped_rbac(sim: SimCluster, cluster: Cluster) -> None:
    """simcluster answers reviews as deploy/rbac-data-plane.yaml plus the opt-in
    deploy/rbac-operator-actions.yaml (its add-on role bound in kube-system) would; the
    permissions asked again, as the beat does."""
    deploy = Path(__file__).resolve().parents[2] / "deploy"
    objects = [
        doc
        for name in ("rbac-data-plane.yaml", "rbac-operator-actions.yaml")
        for doc in yaml.safe_load_all((deploy / name).read_text())
        if doc
    ]
    sim.set_access_rules(rules_from_rbac(objects))
    assert refresh_access(cluster.pk)
    cluster.refresh_from_db()


def test_with_the_shipped_rbac_addons_are_offered_in_kube_system_and_not_elsewhere(
    sim: SimCluster, cluster: Cluster, olga: User, monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:  # fmt: skip
    """Issue 36, Build 4: an add-on's apply is asked in its own namespace (the cluster's
    default one is "default", where the opt-in role is not bound), for each kind its
    manifests hold; "Install now" follows the same check; a refused install is audited."""
    asked: list[int] = []
    monkeypatch.setattr("console.tasks.apply_addon.delay", lambda attempt_id: None)
    monkeypatch.setattr("console.tasks.check_access.delay", asked.append)
    shipped_rbac(sim, cluster)
    client = Client()
    client.force_login(olga)
    form = client.get(f"/addons/{cluster.name}/new/").content.decode()
    assert 'name="install"' in form and "data-missing" not in form
    answer = client.post(f"/addons/{cluster.name}/new/", {
        "name": "agents", "namespace": "kube-system", "version": "1.0",
        "manifest": WITH_DAEMONSET["1.0"], "install": "on"})  # fmt: skip
    assert answer.status_code == 302
    page = client.get(answer["Location"]).content.decode()
    assert 'id="desired-form"' in page and "data-missing" not in page

    with django_capture_on_commit_callbacks(execute=True):
        addon = addon_actions.create_addon(
            olga,
            cluster,
            {"name": "metrics", "namespace": "monitoring", "versions": WITH_DAEMONSET},
        )
    assert asked == [cluster.pk]  # a namespace never asked about is asked at once
    refresh_access(cluster.pk)
    addon = Addon.objects.select_related("cluster").get(pk=addon.pk)
    lacking = ["patch apps/deployments (namespace monitoring)",
               "patch apps/daemonsets (namespace monitoring)"]  # fmt: skip
    assert addon_actions.missing(addon) == lacking
    page = client.get(f"/addons/{cluster.name}/metrics/").content.decode()
    assert 'data-missing="addons"' in page and 'id="desired-form"' not in page
    assert all(key in page for key in lacking)
    with pytest.raises(ActionRefused) as refused:
        addon_actions.change_addon(olga, addon, {"desired_version": "1.0"})
    assert refused.value.status == 403 and lacking[0] in refused.value.message
    token = ApiToken.issue(olga)[1]
    answer = Client().patch(
        f"/api/v1/clusters/{cluster.name}/addons/metrics", json.dumps({"desired_version": "1.0"}),
        content_type="application/json", headers={"Authorization": f"Bearer {token}"},
    )  # fmt: skip
    assert (answer.status_code, answer.json()["missing"]) == (403, lacking)
    assert not addon.attempts.exists()
    form = client.get(f"/addons/{cluster.name}/new/").content.decode()
    assert 'name="install"' in form
    answer = client.post(f"/addons/{cluster.name}/new/", {
        "name": "more", "namespace": "monitoring", "version": "1.0",
        "manifest": VERSIONS["1.0"], "install": "on"})  # fmt: skip
    assert answer.status_code == 403
    shown = answer.content.decode()
    assert 'data-missing="install"' in shown and 'name="install"' not in shown
    assert not Addon.objects.filter(name="more").exists()
    refusals = AuditEvent.objects.filter(result=AuditEvent.Result.REFUSED)
    assert list(refusals.values_list("target", flat=True).order_by("pk")) == [
        "sim/metrics", "sim/metrics", "sim/more",
    ]  # fmt: skip


def test_addon_actions_are_refused_on_a_retired_cluster(
    sim: SimCluster, cluster: Cluster, olga: User
) -> None:
    addon = addon_actions.create_addon(olga, cluster, {"name": "metrics", "versions": VERSIONS})
    Cluster.objects.filter(pk=cluster.pk).update(retired_at=timezone.now(), kubeconfig="")
    addon = Addon.objects.select_related("cluster").get(pk=addon.pk)
    for act in (
        lambda: addon_actions.change_addon(olga, addon, {"desired_version": "1.0"}),
        lambda: addon_actions.rollback(olga, addon),
        lambda: addon_actions.create_addon(
            olga, addon.cluster, {"name": "b", "versions": VERSIONS}
        ),
    ):
        with pytest.raises(ActionRefused) as refused:
            act()
        assert refused.value.status == 409
    assert AuditEvent.objects.filter(result=AuditEvent.Result.REFUSED).count() == 3


def test_an_attempt_on_a_cluster_retired_meanwhile_ends_failed_naming_it(
    sim: SimCluster, cluster: Cluster, olga: User
) -> None:
    addon = addon_actions.create_addon(
        olga, cluster, {"name": "metrics", "versions": VERSIONS, "desired_version": "1.0"}
    )
    Cluster.objects.filter(pk=cluster.pk).update(retired_at=timezone.now(), kubeconfig="")
    assert advance_attempt(addon.attempts.get().pk) is None
    attempt = addon.attempts.get()
    assert (attempt.outcome, attempt.reason) == ("failed", "cluster sim was retired")
    assert phase_of(Addon.objects.get(pk=addon.pk), timezone.now()) == (
        Addon.Phase.FAILED, "cluster sim was retired",
    )  # fmt: skip


def test_an_attempt_whose_cluster_cannot_be_reached_ends_failed_at_its_deadline(
    sim: SimCluster, cluster: Cluster, olga: User
) -> None:
    """Each pass that cannot reach the cluster is retried (2 s), until the attempt's own
    deadline: then Failed, naming the cluster; never Installing for ever."""
    addon = addon_actions.create_addon(
        olga, cluster, {"name": "metrics", "versions": VERSIONS, "desired_version": "1.0"}
    )
    attempt = addon.attempts.get()
    sim.stop()  # connections refused from now on
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        for _ in range(ATTEMPT_SECONDS // 50):
            assert advance_attempt(attempt.pk) == PASS_SECONDS
            clock.shift(50)
        assert phase(addon) == Addon.Phase.INSTALLING  # 900 s: due, not past
        clock.shift(1)
        assert advance_attempt(attempt.pk) is None
        attempt.refresh_from_db()
        assert attempt.outcome == AddonAttempt.Outcome.FAILED
        assert attempt.reason.startswith("cluster sim could not be reached in time")
        assert phase(addon) == Addon.Phase.FAILED
        assert Addon.objects.get(pk=addon.pk).phase == Addon.Phase.FAILED


def test_a_worker_killed_before_its_first_pass_ends_failed_on_the_page_and_in_the_row(
    sim: SimCluster, cluster: Cluster, olga: User
) -> None:
    """The queued pass never ran: after a lease's time the beat closes the attempt's row
    failed with the reason, and the stored phase (the Add-ons list) and a transition say
    Failed, not Pending."""
    addon = addon_actions.create_addon(
        olga, cluster, {"name": "metrics", "versions": VERSIONS, "desired_version": "1.0"}
    )
    assert Addon.objects.get(pk=addon.pk).phase == Addon.Phase.PENDING
    with time_machine.travel(timezone.now() + timedelta(seconds=LEASE_SECONDS + 1)):
        assert observe_addons() == 0
    attempt = addon.attempts.get()
    assert (attempt.outcome, attempt.reason) == (AddonAttempt.Outcome.FAILED, LEASE_RAN_OUT)
    stored = Addon.objects.get(pk=addon.pk)
    assert (stored.phase, stored.message) == (Addon.Phase.FAILED, LEASE_RAN_OUT)
    transition = stored.transitions.first()
    assert transition is not None and transition.phase == Addon.Phase.FAILED
    assert advance_attempt(attempt.pk) is None  # a late first pass applies nothing
    assert Addon.objects.get(pk=addon.pk).applied_version == ""
