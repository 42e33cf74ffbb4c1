"""Cluster faults (issue 13, item 1), each injected with simcluster's fault controls while a Job
runs: no Job, Task, Worker, pod instance or Node moves while the cluster cannot be read; the
cluster is marked unreachable with the error and keeps the time of its last successful sync; the
first cycle after the fault ends recovers. A hung cluster never delays another one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from console.engine.cycle import SyncResult, sync_cluster
from console.kube import gateway as kube_gateway
from console.kube.gateway import SERVICES, STATEFULSETS, Gateway
from console.models import Cluster
from jobs.models import Job, Task
from simcluster.server import SimCluster
from tests.engine.conftest import SPEED, gateway, phase_of, submit, sync_until, task
from tests.engine.test_unreachable import snapshot

FAULT_SECONDS = 0.6
Recorder = Callable[[str, object], None]  # pytest's record_property
CLOCK = {"last_heartbeat_at", "observed_at"}  # move with the cluster's clock, not its state


def statuses(job: Job) -> list[object]:
    """The snapshot of the job's rows and the nodes without the times a heartbeat moves."""
    return [
        [{key: value for key, value in row.items() if key not in CLOCK} for row in rows]
        for rows in snapshot(job)
        if isinstance(rows, list)
    ]


def inject_for_a_while(
    sim: SimCluster, seconds: float = FAULT_SECONDS, **fault: Any
) -> Callable[[], None]:
    """The fault, ending on its own; the returned call waits for its end."""
    sim.set_fault(seconds=seconds, **fault)
    return lambda: _wait(lambda: not sim.faults.active())


def stopped_for_a_while(sim: SimCluster) -> Callable[[], None]:
    """The API server stopped (connections refused), started again on the same address."""
    sim.stop()
    return lambda: _restart(sim)


def _restart(sim: SimCluster) -> None:
    sim.start()


def _wait(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the fault did not end"
        time.sleep(0.05)


# What each fault does, and the words the cluster's message must hold.
FAULTS: dict[str, tuple[Callable[[SimCluster], Callable[[], None]], str]] = {
    "connection refused": (stopped_for_a_while, "cannot connect to the API server"),
    "500": (lambda sim: inject_for_a_while(sim, status=500), "HTTP 500"),
    "503": (lambda sim: inject_for_a_while(sim, status=503), "HTTP 503"),
    "429 Retry-After": (
        lambda sim: inject_for_a_while(sim, status=429),
        "throttling requests (429 Too Many Requests); retry after 1 s",
    ),
    # Hung for longer than a watch's read timeout (the read timeout plus the watch's 1 s).
    "read timeout": (lambda sim: inject_for_a_while(sim, 3, timeout=True), "timeout"),
    "truncated body": (lambda sim: inject_for_a_while(sim, truncate=True), "truncated"),
    "non-JSON body": (lambda sim: inject_for_a_while(sim, garbage=True), "malformed"),
}


@pytest.fixture
def running(alice: User, cluster: Cluster) -> Job:
    """A Job Running with two Workers, its cluster synced by watch (cursors held)."""
    job = submit(alice, cluster, "train", task("worker", replicas=2))
    sync_until(cluster, lambda: phase_of(job) == "Running")
    assert sync_cluster(cluster.pk).reachable
    return job


@pytest.mark.parametrize("fault", list(FAULTS))
@override_settings(TRAINYARD_KUBE_CONNECT_TIMEOUT=1, TRAINYARD_KUBE_READ_TIMEOUT=1)
def test_it_survives_the_fault_and_recovers_in_the_first_cycle_after_it(
    cluster: Cluster, sim: SimCluster, running: Job, fault: str, record_property: Recorder
) -> None:
    inject, words = FAULTS[fault]
    cluster.refresh_from_db()
    last_synced_at, before = cluster.last_synced_at, snapshot(running)
    assert last_synced_at is not None
    without_clock = statuses(running)
    ended = inject(sim)
    started = time.monotonic()
    result = sync_cluster(cluster.pk)
    record_property("message", result.message)  # bench/faults.py tabulates what was seen
    record_property("seconds", f"{time.monotonic() - started:.1f}")
    assert time.monotonic() - started < 5  # no sleeping inside the cycle (429: none at all)
    assert not result.reachable and words in result.message, result
    cluster.refresh_from_db()
    assert (cluster.reachable, cluster.last_synced_at) == (False, last_synced_at)
    assert cluster.message and cluster.sync_lease_until is None
    assert snapshot(running) == before
    ended()
    recovered = sync_cluster(cluster.pk)
    assert recovered.reachable and recovered.relisted, recovered  # the dropped cursors: relist
    cluster.refresh_from_db()
    assert (cluster.reachable, cluster.message) == (True, "")
    assert cluster.last_synced_at is not None and cluster.last_synced_at > last_synced_at
    assert statuses(running) == without_clock  # nothing was invented, nothing lost


# --- 410 Gone --------------------------------------------------------------------------------


def expire_continue_tokens(sim: SimCluster, cluster: Cluster) -> None:
    """One write (an unmanaged Service), then a compaction at the revision after it: every
    continue token issued before is older than the compacted revision (410 Expired)."""
    name = f"bystander-{sim.cluster.store.revision}"
    body = {"metadata": {"name": name}, "spec": {"ports": [{"port": 80}]}}
    gateway(cluster).create(SERVICES, "default", body)
    sim.compact()


@pytest.fixture
def paginated(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Pages of one item, so that every LIST with two items or more continues; yields the log
    of the pages read ("first" or "continued") with their HTTP answer."""
    monkeypatch.setattr(kube_gateway, "PAGE_SIZE", 1)
    pages: list[str] = []
    send = Gateway._send

    def logged(self: Gateway, method: str, path: str, query: Any, *rest: Any, **more: Any) -> Any:
        answer = send(self, method, path, query, *rest, **more)
        if any(key == "continue" for key, _ in query):
            pages.append(f"continued {answer[0]}")
        elif any(key == "limit" for key, _ in query):
            pages.append(f"first {answer[0]}")
        return answer

    monkeypatch.setattr(Gateway, "_send", logged)
    yield pages


def test_it_restarts_a_list_whose_continue_token_expired_mid_way(
    cluster: Cluster, sim: SimCluster, running: Job, paginated: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    before = snapshot(running)
    page = Gateway._page
    expired: list[bool] = []

    def compacting(self: Gateway, path: str, query: list[tuple[str, str]]) -> dict[str, Any]:
        answer = page(self, path, query)
        if path.endswith("/pods") and not expired:  # after the first page of the pods' LIST
            expired.append(True)
            expire_continue_tokens(sim, cluster)
        return answer

    monkeypatch.setattr(Gateway, "_page", compacting)
    Cluster.objects.filter(pk=cluster.pk).update(relisted_at=None)  # this cycle relists
    result = sync_cluster(cluster.pk)
    assert result.reachable and result.relisted, result
    assert "continued 410" in paginated  # the API server did answer 410 mid-LIST
    assert snapshot(running) == before


def test_it_marks_the_cluster_unreachable_when_every_list_keeps_expiring(
    cluster: Cluster, sim: SimCluster, running: Job, paginated: list[str],
    monkeypatch: pytest.MonkeyPatch, record_property: Recorder,
) -> None:  # fmt: skip
    cluster.refresh_from_db()
    last_synced_at, before = cluster.last_synced_at, snapshot(running)
    page = Gateway._page

    def compacting(self: Gateway, path: str, query: list[tuple[str, str]]) -> dict[str, Any]:
        answer = page(self, path, query)
        if path.endswith("/nodes"):
            expire_continue_tokens(sim, cluster)
        return answer

    monkeypatch.setattr(Gateway, "_page", compacting)
    Cluster.objects.filter(pk=cluster.pk).update(relisted_at=None)
    result = sync_cluster(cluster.pk)
    record_property("message", result.message)
    assert not result.reachable and "listing nodes kept expiring (410 Gone)" in result.message
    cluster.refresh_from_db()
    assert (cluster.reachable, cluster.last_synced_at) == (False, last_synced_at)
    assert snapshot(running) == before
    monkeypatch.setattr(Gateway, "_page", page)
    assert sync_cluster(cluster.pk).reachable
    assert snapshot(running) == before


def test_it_relists_when_the_watch_cursor_expired(
    cluster: Cluster, sim: SimCluster, running: Job
) -> None:
    """410 Expired on a watch is no fault of the cluster: the same cycle relists, reachable."""
    cluster.refresh_from_db()
    assert not sync_cluster(cluster.pk).relisted  # by watch, from the cursors
    before = snapshot(running)
    expire_continue_tokens(sim, cluster)  # the cursors are older than the compacted revision
    result = sync_cluster(cluster.pk)
    assert result.reachable and result.relisted, result
    cluster.refresh_from_db()
    assert (cluster.reachable, cluster.message) == (True, "")
    assert snapshot(running) == before
    assert not sync_cluster(cluster.pk).relisted  # the relist's cursors hold again


# --- 409 Conflict ----------------------------------------------------------------------------


def test_it_reports_a_create_that_meets_a_foreign_object_without_a_false_transition(
    alice: User, cluster: Cluster, sim: SimCluster, record_property: Recorder
) -> None:
    """409 AlreadyExists on a StatefulSet another owner holds: the Task says so, the Job stays
    Pending, the cluster stays reachable (a refused write is not an unreadable cluster)."""
    assert sync_cluster(cluster.pk).reachable
    foreign = {
        "metadata": {"name": "clash-worker"},
        "spec": {
            "replicas": 0, "serviceName": "clash", "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}},
                         "spec": {"containers": [{"name": "main", "image": "busybox"}]}},
        },
    }  # fmt: skip
    gateway(cluster).create(STATEFULSETS, "default", foreign)
    job = submit(alice, cluster, "clash", task("worker"))
    for _cycle in range(3):
        result = sync_cluster(cluster.pk)
        assert result.reachable, result
    assert phase_of(job) == "Pending"
    error = Task.objects.get(job=job).apply_error
    record_property("message", error)
    assert "already exists" in error and "does not belong to this run of this job" in error
    ours = gateway(cluster).get(STATEFULSETS, "default", "clash-worker")
    assert ours is not None and ours["spec"]["replicas"] == 0  # never taken over


def test_it_takes_a_create_that_meets_its_own_object_as_done(
    alice: User, cluster: Cluster, sim: SimCluster
) -> None:
    """409 AlreadyExists on the very object this run asked for (another reconcile got there
    first): success, no error, one StatefulSet."""
    job = submit(alice, cluster, "twice", task("worker"))
    sync_until(cluster, lambda: phase_of(job) == "Running")
    api = gateway(cluster)
    created = api.get(STATEFULSETS, "default", "twice-worker")
    assert created is not None
    api.delete(STATEFULSETS, "default", "twice-worker")
    _wait(lambda: api.get(STATEFULSETS, "default", "twice-worker") is None)
    manifest = {key: created[key] for key in ("metadata", "spec")}
    manifest["metadata"] = {
        key: created["metadata"][key] for key in ("name", "namespace", "labels", "annotations")
        if key in created["metadata"]
    }  # fmt: skip
    real_create = Gateway.create
    answers: list[int] = []

    def racing(self: Gateway, resource: Any, namespace: str, body: dict[str, Any]) -> Any:
        real_create(self, resource, namespace, manifest)  # the other reconcile, first
        try:
            return real_create(self, resource, namespace, body)
        except kube_gateway.ApplyError as error:
            answers.append(error.status)
            raise

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Gateway, "create", racing)
        sync_until(cluster, lambda: answers)
    assert answers == [409]
    sync_until(cluster, lambda: phase_of(job) == "Running")
    assert Task.objects.get(job=job).apply_error == ""
    assert len(api.list(STATEFULSETS, namespace="default")) == 1


# --- a hung cluster never delays another -----------------------------------------------------


@pytest.fixture
def hung_sim() -> Iterator[SimCluster]:
    with SimCluster(nodes=2, gpus_per_node=8, seed=1, speed=SPEED) as other:
        yield other


@pytest.mark.django_db(transaction=True)
@override_settings(
    TRAINYARD_KUBE_CONNECT_TIMEOUT=1, TRAINYARD_KUBE_READ_TIMEOUT=4, TRAINYARD_SYNC_INTERVAL=2
)
def test_it_keeps_syncing_a_healthy_cluster_on_time_while_another_hangs(
    cluster: Cluster, sim: SimCluster, hung_sim: SimCluster, tmp_path: Path,
    record_property: Recorder,
) -> None:  # fmt: skip
    """Each cluster's cycle is a task of its own (console.tasks.sync_cluster) bounded by its
    time limit; run side by side, the healthy cluster's cycles keep their cadence while the
    hung one's cycle waits out its read timeout."""
    kubeconfig = hung_sim.write_kubeconfig(tmp_path / "hung", namespace="default")
    call_command("add_cluster", "hung", kubeconfig=str(kubeconfig), stdout=StringIO())
    hung = Cluster.objects.get(name="hung")
    assert sync_cluster(hung.pk).reachable and sync_cluster(cluster.pk).reachable
    hung_sim.set_fault(timeout=True, seconds=60)
    stuck: list[SyncResult] = []

    def sync_hung() -> None:
        try:
            stuck.append(sync_cluster(hung.pk))
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=sync_hung)
    thread.start()
    healthy: list[float] = []
    while thread.is_alive():
        started = time.monotonic()
        assert sync_cluster(cluster.pk).reachable
        healthy.append(time.monotonic() - started)
    thread.join()
    if stuck:
        record_property("message", stuck[0].message)
        record_property("seconds", f"{stuck[0].seconds:.1f}")
    record_property("healthy", ", ".join(f"{seconds:.1f}" for seconds in healthy))
    assert stuck and not stuck[0].reachable and "timeout" in stuck[0].message
    # It hung for its whole read timeout (4 s, plus the watch's 1 s) ...
    assert stuck[0].seconds >= 4
    # ... while the other's cycles (each about the 1 s watch window) went on: at least three of
    # them in that time, and none waited for the hung cluster (each far shorter than its 4 s read
    # timeout; one cycle of two watch windows happens on a loaded machine and blocks nobody).
    assert len(healthy) >= 3 and max(healthy) < 4, healthy
    annotations = django_settings.CELERY_TASK_ANNOTATIONS["console.tasks.sync_cluster"]
    assert annotations["time_limit"] == django_settings.TRAINYARD_TASK_TIME_LIMIT  # a bound
