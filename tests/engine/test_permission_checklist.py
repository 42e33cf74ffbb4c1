"""The connection checklist names every right the console uses (issue 36, Build 1: "one
SelfSubjectAccessReview per verb the console needs ... with what each missing one will break"),
so the checklist, the engine and deploy/ cannot drift apart:

- every request the console sends a cluster through its gateway, over a Job's whole life, logs,
  events, a cordon, a drain and an add-on install on simcluster, is covered by a checklist entry;
- every required entry is granted by deploy/rbac-data-plane.yaml, every opt-in one by
  deploy/rbac-operator-actions.yaml.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.contrib.auth.models import User

from console import addon_actions, node_actions
from console.engine import live_reads
from console.engine.addons import advance_attempt
from console.engine.connection import refresh_access
from console.engine.nodes import advance_drain
from console.engine.one_job import reconcile_job
from console.kube import apply as kube_apply
from console.kube.gateway import STATEFULSETS, Gateway
from console.models import Cluster, Node
from console.permissions import BY_KEY, NEEDS
from jobs import operations
from jobs.models import Job
from tests.deploy.test_rbac import OPT_IN, documents
from tests.engine.conftest import gateway, phase_of, submit, sync_until, task
from tests.engine.test_addon_registry import VERSIONS
from workers.models import Worker

NODE = "sim-node-0"


def right_of(method: str, path: str, query: list[tuple[str, str]]) -> tuple[str, str, bool]:
    """(verb, "group/resource[/subresource]", namespaced) of one request to the API server, as
    Kubernetes' authorizer reads it."""
    parts = path.strip("/").split("/")
    group, rest = ("core", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    namespaced = rest[0] == "namespaces"
    rest = rest[2:] if namespaced else rest
    resource, name, sub = rest[0], rest[1] if len(rest) > 1 else "", rest[2:]
    verbs = {"POST": "create", "PATCH": "patch", "DELETE": "delete", "PUT": "update"}
    if method == "GET":
        verb = "watch" if ("watch", "1") in query else "get" if name else "list"
    else:
        verb = verbs[method]
    return verb, "/".join([group, resource, *sub]), namespaced


def covered(verb: str, resource: str, namespaced: bool) -> bool:
    """A namespaced request is covered by a right in the default namespace, or in a namespace
    named (an add-on's: `patch apps/deployments (namespace kube-system)`)."""
    key = f"{verb} {resource}"
    return key in BY_KEY or (namespaced and any(k.startswith(f"{key} (namespace") for k in BY_KEY))


class Recorder:
    def __init__(self) -> None:
        self.on = True
        self.rights: set[tuple[str, str, bool]] = set()

    @contextmanager
    def paused(self) -> Iterator[None]:
        self.on = False
        try:
            yield
        finally:
            self.on = True


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """Every request any gateway sends, but /version and SelfSubjectAccessReviews (every
    authenticated identity may ask those: system:public-info-viewer, system:basic-user)."""
    recorder, send = Recorder(), Gateway._open

    def recording(self: Gateway, method: str, path: str, query: Any, *args: Any) -> Any:
        if recorder.on and path != "/version" and "/authorization.k8s.io/" not in path:
            recorder.rights.add(right_of(method, path, list(query)))
        return send(self, method, path, query, *args)

    monkeypatch.setattr(Gateway, "_open", recording)
    return recorder


def until(step: Any, ident: int, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while step(ident) is not None:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_it_maps_requests_to_the_rights_kubernetes_checks() -> None:
    assert right_of("GET", "/api/v1/namespaces/ns/pods/p/log", []) == (
        "get", "core/pods/log", True,
    )  # fmt: skip
    assert right_of("GET", "/apis/apps/v1/statefulsets", [("watch", "1")]) == (
        "watch", "apps/statefulsets", False,
    )  # fmt: skip
    assert right_of("PATCH", "/api/v1/nodes/n", []) == ("patch", "core/nodes", False)
    assert covered("list", "core/pods", namespaced=True)  # a cluster-wide right covers one
    assert not covered("patch", "apps/statefulsets", namespaced=False)  # not the reverse
    assert not covered("update", "apps/statefulsets", namespaced=True)


def test_every_request_of_a_jobs_life_and_of_operators_actions_is_in_the_checklist(
    recorded: Recorder, alice: User, olga: User, cluster: Cluster
) -> None:
    job = submit(alice, cluster, "train", task("head"), task("eval", kind="Job"))
    sync_until(cluster, lambda: phase_of(job) == "Running")
    sync_until(cluster, lambda: Node.objects.filter(cluster=cluster).count() == 3)
    reconcile_job(job.pk)
    pod = Worker.objects.filter(task__job=job).values_list("pod_name", flat=True).first()
    assert pod
    live_reads.pod_log(cluster, "default", pod, "main", 10, 4096)
    live_reads.pod_events(cluster, "default", pod)
    with recorded.paused():
        existing = gateway(cluster).get(STATEFULSETS, "default", "train-head")
    assert existing is not None  # created again: 409, then read and recognised as the Job's
    kube_apply.create(gateway(cluster), STATEFULSETS, existing)
    operations.stop_job(alice, job)
    sync_until(cluster, lambda: phase_of(job) == "Stopped")
    operations.resume_job(alice, Job.objects.get(pk=job.pk))
    sync_until(cluster, lambda: phase_of(job) == "Running")
    operations.delete_job(alice, Job.objects.get(pk=job.pk), confirm="train")
    sync_until(cluster, lambda: not Job.objects.filter(pk=job.pk).exists())

    node_actions.cordon(olga, cluster, NODE, "disk")
    node_actions.preview(olga, cluster, NODE)
    until(
        advance_drain,
        node_actions.start_drain(olga, cluster, NODE, timeout_seconds=5, skip_blocked=True).pk,
    )
    assert refresh_access(cluster.pk)  # as the beat asks, so the add-on's rights are known
    cluster.refresh_from_db()
    body = {"name": "metrics", "namespace": "kube-system", "versions": VERSIONS,
            "desired_version": "1.0"}  # fmt: skip
    addon = addon_actions.create_addon(olga, cluster, body)
    until(advance_attempt, addon.attempts.get().pk)

    reach = {
        ("watch", "core/pods", False), ("patch", "batch/jobs", True),
        ("delete", "core/services", True), ("get", "core/pods/log", True),
        ("create", "core/pods/eviction", True), ("patch", "apps/deployments", True),
    }  # fmt: skip
    assert reach <= recorded.rights  # the scenario went where the console goes
    missing = sorted(right for right in recorded.rights if not covered(*right))
    assert missing == []


def granted(file: str) -> set[tuple[str, str, bool]]:
    """(verb, "group/resource", cluster-wide) of every rule of a deploy/ file: a rule of a role
    bound by a ClusterRoleBinding holds cluster-wide, one bound by a RoleBinding in a namespace."""
    docs = documents(file)
    wide = {d["roleRef"]["name"] for d in docs if d["kind"] == "ClusterRoleBinding"}
    return {
        (verb, f"{group or 'core'}/{resource}", doc["metadata"]["name"] in wide)
        for doc in docs if doc["kind"] == "ClusterRole"
        for rule in doc["rules"] for group in rule["apiGroups"]
        for resource in rule["resources"] for verb in rule["verbs"]
    }  # fmt: skip


def test_every_checklist_entry_is_granted_by_the_rbac_shipped_in_deploy() -> None:
    required, opt_in = granted("rbac-data-plane.yaml"), granted(OPT_IN)
    for need in NEEDS:
        resource = "/".join(p for p in (need.group or "core", need.resource, need.subresource) if p)
        rules = required if need.required else opt_in
        wanted = {(need.verb, resource, True)} | (
            {(need.verb, resource, False)} if need.namespaced or need.namespace else set()
        )
        assert wanted & rules, need.key


def test_every_entry_says_what_its_absence_breaks_in_english_and_chinese() -> None:
    from django.utils import translation

    for need in NEEDS:
        english = str(need.breaks)
        with translation.override("zh-hans"):
            chinese = str(need.breaks)
        assert english and chinese != english, need.key
