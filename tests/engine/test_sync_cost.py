"""What a sync cycle costs and how cycles exclude each other (ARCHITECTURE §Principles: writes
proportional to change; one sync per cluster at a time)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings
from django.utils import timezone

from console.engine import memory
from console.engine.cycle import SyncResult, sync_cluster
from console.engine.derive import Index, derive_jobs
from console.engine.memory import Touched
from console.engine.observe import relist_all
from console.engine.rows import load_state
from console.engine.write import Changes, write
from console.kube.gateway import STATEFULSETS
from console.models import Cluster
from jobs import operations
from jobs.models import Job, Task
from simcluster.server import SimCluster
from tests.engine.conftest import gateway, submit, sync_until, task


def all_ready(cluster: Cluster) -> bool:
    phases = set(Task.objects.filter(job__cluster=cluster).values_list("phase", flat=True))
    return phases == {"Running"}


def quiet_cycle(cluster: Cluster) -> tuple[SyncResult, list[str]]:
    """A cycle in which nothing changed: its result and its SQL statements. The simulated
    kubelets post their Node's status every 5 simulated minutes (3 s here): a cycle that saw one
    is not quiet, and the next one is taken."""
    sync_until(cluster, lambda: all_ready(cluster))
    sync_cluster(cluster.pk)  # records whatever the last change was
    for _attempt in range(10):
        with CaptureQueriesContext(connection) as queries:
            result = sync_cluster(cluster.pk)
        if result.changes == 0:
            break
    return result, [query["sql"] for query in queries.captured_queries]


def writes(statements: list[str]) -> list[str]:
    return [sql for sql in statements if sql.split()[0] in ("INSERT", "UPDATE", "DELETE")]


@override_settings(TRAINYARD_STALE_AFTER=3600)  # no heartbeat-only node writes in the window
def test_it_writes_nothing_but_the_cluster_row_when_nothing_changed(
    alice: User, cluster: Cluster
) -> None:
    submit(alice, cluster, "train", task("head"), task("worker", replicas=2))
    result, statements = quiet_cycle(cluster)
    assert (result.changes, result.rows_written, result.api_writes) == (0, 0, 0)
    assert all('"console_cluster"' in sql for sql in writes(statements))
    assert len(writes(statements)) == 2  # take the lease; release it with the result


@override_settings(TRAINYARD_STALE_AFTER=3600)
def test_it_runs_the_same_number_of_statements_whatever_the_number_of_pods(
    alice: User, cluster: Cluster
) -> None:
    submit(alice, cluster, "one", task("worker"))
    _, small = quiet_cycle(cluster)
    for name in ("two", "three", "four"):
        submit(alice, cluster, name, task("head"), task("worker", replicas=3))
    result, large = quiet_cycle(cluster)
    assert (result.changes, result.jobs) == (0, 0)
    assert Cluster.objects.get(pk=cluster.pk).observed_objects.filter(stream="pods").count() == 13
    assert len(large) == len(small)


@pytest.mark.django_db(transaction=True)
def test_it_never_runs_two_cycles_of_a_cluster_at_once(
    alice: User, cluster: Cluster, sim: SimCluster
) -> None:
    """Overlapping beats: one caller syncs, the others return at once saying they skipped."""
    submit(alice, cluster, "train", task("worker", replicas=2))
    sim.set_fault(latency_ms=150, seconds=30)  # every request is slow: the cycles overlap
    start = threading.Barrier(4)
    results: list[SyncResult] = []

    def beat() -> None:
        try:
            start.wait()
            results.append(sync_cluster(cluster.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=beat) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    sim.clear_faults()
    assert sorted(result.skipped for result in results) == [False, True, True, True]
    ran = next(result for result in results if not result.skipped)
    assert ran.reachable and ran.api_writes == 2
    assert Cluster.objects.get(pk=cluster.pk).sync_lease_until is None
    assert sync_cluster(cluster.pk).skipped is False  # released: the next beat runs


@pytest.mark.django_db(transaction=True)
@override_settings(
    TRAINYARD_SYNC_INTERVAL=1, TRAINYARD_KUBE_CONNECT_TIMEOUT=1, TRAINYARD_KUBE_READ_TIMEOUT=1
)
def test_it_writes_nothing_once_its_lease_was_taken_over(
    alice: User, cluster: Cluster, sim: SimCluster
) -> None:
    """A cycle that outlived its lease (9 s here) finds at renewal that another cycle took the
    cluster over, and stops without writing."""
    job = submit(alice, cluster, "train", task("worker"))
    sim.set_fault(latency_ms=700, seconds=30)  # 8 LISTs: past half the lease before writing
    results: list[SyncResult] = []

    def slow_cycle() -> None:
        try:
            results.append(sync_cluster(cluster.pk))
        finally:
            connection.close()

    thread = threading.Thread(target=slow_cycle)
    thread.start()
    time.sleep(1)
    taken_over = timezone.now() + timedelta(minutes=1)
    Cluster.objects.filter(pk=cluster.pk).update(sync_lease_until=taken_over)
    thread.join(timeout=30)
    sim.clear_faults()
    assert results[0].skipped
    assert Cluster.objects.get(pk=cluster.pk).sync_lease_until == taken_over
    assert Cluster.objects.get(pk=cluster.pk).last_synced_at is None
    assert gateway(cluster).get(STATEFULSETS, "default", "train-worker") is None
    assert Task.objects.get(job=job).observed_at is None


def test_it_takes_over_a_lease_its_holder_let_expire(alice: User, cluster: Cluster) -> None:
    """A worker that died mid-cycle blocks its cluster only until the lease expires."""
    Cluster.objects.filter(pk=cluster.pk).update(
        sync_lease_until=timezone.now() + timedelta(minutes=5)
    )
    assert sync_cluster(cluster.pk).skipped
    Cluster.objects.filter(pk=cluster.pk).update(
        sync_lease_until=timezone.now() - timedelta(seconds=1)
    )
    assert not sync_cluster(cluster.pk).skipped


def test_it_never_overwrites_a_stop_made_during_the_cycle(alice: User, cluster: Cluster) -> None:
    """Spec §Job status: Stopped wins. A cycle that read the Job before a concurrent stop writes
    neither its phase nor its Tasks (conditional UPDATE on the phase and flag it read)."""
    job = submit(alice, cluster, "train", task("worker"))
    sync_cluster(cluster.pk)
    sts = lambda: gateway(cluster).get(STATEFULSETS, "default", "train-worker") or {}  # noqa: E731
    deadline = time.monotonic() + 20
    while sts().get("status", {}).get("readyReplicas") != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    everything = Touched(everything=True)
    state = load_state(Cluster.objects.get(pk=cluster.pk), everything)
    reading = relist_all(gateway(cluster), memory.stored(cluster.pk))
    snapshot = memory.load(cluster.pk, everything, reading.changes)
    changes = Changes()
    derive_jobs(state, Index.of(snapshot), changes, timezone.now())
    assert [change.fields["phase"] for change in changes.jobs] == ["Running"]
    operations.stop_job(alice, Job.objects.get(pk=job.pk))  # lands while the cycle runs
    write(changes, state)
    assert Job.objects.get(pk=job.pk).phase == "Stopped"
    assert Task.objects.get(job=job).phase == "Pending"
