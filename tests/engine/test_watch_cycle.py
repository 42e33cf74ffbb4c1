"""The incremental cycle (console.engine): after one relist, every cycle watches from its cursors
and applies only what changed; faults, expired cursors and a killed worker fall back to a relist
and converge (ARCHITECTURE §Principles: never a transition invented from missing data)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from console.engine import cycle, memory
from console.engine.cycle import SyncResult, sync_cluster
from console.engine.memory import Touched
from console.engine.rows import load_state
from console.kube.gateway import PODS, STATEFULSETS
from console.models import Cluster, ObservedObject
from jobs import operations
from jobs.models import Job, Task
from jobs.status import freshness
from simcluster.server import SimCluster
from tests.engine.conftest import gateway, phase_of, submit, sync_until, task
from tests.engine.test_celery import database_url
from workers.models import PodInstance, Worker


def running(alice: User, cluster: Cluster, name: str = "train", replicas: int = 2) -> Job:
    job = submit(alice, cluster, name, task("worker", replicas=replicas))
    sync_until(cluster, lambda: phase_of(job) == "Running" and ready(job) == replicas)
    return job


def ready(job: Job) -> int:
    return Task.objects.values_list("ready_replicas", flat=True).get(job=job)


def cursors(cluster: Cluster) -> dict[str, str]:
    return dict(Cluster.objects.values_list("watch_cursors", flat=True).get(pk=cluster.pk))


def facts(job: Job) -> list[Any]:
    """Everything the console shows of a Job, to compare before and after."""
    return [
        list(Job.objects.filter(pk=job.pk).values_list("phase", "message", "observed_at")),
        list(Task.objects.filter(job=job).values_list("phase", "ready_replicas", "observed_at")),
        sorted(Worker.objects.filter(task__job=job).values_list("pod_name", "pod_uid", "phase")),
        sorted(PodInstance.objects.filter(task__job=job).values_list("uid", "gone_at")),
    ]


def until_watched(cluster: Cluster, condition: Any) -> list[SyncResult]:
    """Cycles until `condition()`, every one of them a watch (none relisted)."""
    results: list[SyncResult] = []
    for _attempt in range(200):
        results.append(sync_cluster(cluster.pk))
        if condition():
            break
    else:
        raise AssertionError(f"condition not met; last cycle: {results[-1]}")
    assert not any(result.relisted for result in results), results
    return results


def test_it_watches_after_the_first_relist_and_reads_nothing_while_quiet(
    alice: User, cluster: Cluster
) -> None:
    first = sync_cluster(cluster.pk)
    assert first.relisted and set(cursors(cluster)) == {
        "statefulsets", "jobs", "services", "pods", "nodes", "daemonsets", "deployments",
        "addon_pods", "observations",
    }  # fmt: skip
    job = submit(alice, cluster, "train", task("worker", replicas=2))
    until_watched(cluster, lambda: phase_of(job) == "Running" and ready(job) == 2)
    quiet = next(r for r in (sync_cluster(cluster.pk) for _ in range(10)) if not r.changes)
    assert not quiet.relisted and quiet.jobs == 0 and quiet.rows_written == 0
    assert quiet.bytes_received < 2_000  # bookmarks only: no object body
    stored = ObservedObject.objects.filter(cluster=cluster, stream="pods", job_id=job.pk)
    assert stored.count() == 2


def test_it_sees_a_kill_a_scale_and_a_delete_through_events(
    alice: User, cluster: Cluster, sim: SimCluster
) -> None:
    job = running(alice, cluster)
    sim.kill_pod("default", "train-worker-0")
    until_watched(
        cluster, lambda: Worker.objects.filter(task__job=job, restart_count__gt=0).exists()
    )
    gateway(cluster).patch(STATEFULSETS, "default", "train-worker", {"spec": {"replicas": 5}})
    until_watched(
        cluster,
        lambda: (
            (gateway(cluster).get(STATEFULSETS, "default", "train-worker") or {})["spec"][
                "replicas"
            ]
            == 2
        ),
    )  # drift repaired from the MODIFIED event
    uid = (gateway(cluster).get(PODS, "default", "train-worker-1") or {})["metadata"]["uid"]
    gateway(cluster).delete(PODS, "default", "train-worker-1")
    until_watched(
        cluster, lambda: PodInstance.objects.filter(uid=uid, gone_at__isnull=False).exists()
    )
    operations.delete_job(alice, Job.objects.get(pk=job.pk), confirm="train")
    until_watched(cluster, lambda: not Job.objects.filter(pk=job.pk).exists())
    assert gateway(cluster).get(STATEFULSETS, "default", "train-worker") is None


def test_it_relists_when_its_cursor_expired_and_converges(
    alice: User, cluster: Cluster, sim: SimCluster
) -> None:
    job = running(alice, cluster)
    uid = (gateway(cluster).get(PODS, "default", "train-worker-0") or {})["metadata"]["uid"]
    gateway(cluster).delete(PODS, "default", "train-worker-0")
    sim.compact()  # the cursors are older than the API server's window now: 410 Expired
    result = sync_cluster(cluster.pk)
    assert result.relisted and result.reachable
    sync_until(cluster, lambda: PodInstance.objects.filter(uid=uid, gone_at__isnull=False).exists())
    sync_until(cluster, lambda: ready(job) == 2)
    assert not sync_cluster(cluster.pk).relisted


@pytest.mark.parametrize("fault", ["truncate", "garbage"])
def test_a_cut_or_garbled_watch_changes_no_phase_and_marks_the_cluster(
    alice: User, cluster: Cluster, sim: SimCluster, fault: str
) -> None:
    job = running(alice, cluster)
    sim.kill_pod("default", "train-worker-0")  # an event is waiting in the stream
    before = facts(job)
    sim.set_fault(**{fault: True}, seconds=30)
    result = sync_cluster(cluster.pk)
    assert not result.reachable
    stored = Cluster.objects.get(pk=cluster.pk)
    assert (stored.reachable, set(stored.watch_cursors)) == (False, {"observations"})
    assert facts(job) == before
    sim.clear_faults()
    assert sync_cluster(cluster.pk).relisted  # the next cycle relists and carries on
    sync_until(cluster, lambda: Worker.objects.filter(task__job=job, restart_count__gt=0).exists())


def test_it_notices_pods_deleted_while_it_could_not_read_the_cluster(
    alice: User, cluster: Cluster, sim: SimCluster
) -> None:
    job = running(alice, cluster)
    gone = [
        (gateway(cluster).get(PODS, "default", f"train-worker-{i}") or {})["metadata"]["uid"]
        for i in (0, 1)
    ]
    gateway(cluster).delete(STATEFULSETS, "default", "train-worker")  # and its pods with it
    sim.set_fault(status=503, seconds=30)
    assert not sync_cluster(cluster.pk).reachable
    assert phase_of(job) == "Running"  # nothing invented while unreadable
    sim.clear_faults()
    sync_until(cluster, lambda: PodInstance.objects.filter(uid__in=gone, gone_at=None).count() == 0)
    sync_until(cluster, lambda: ready(job) == 2)  # and the drift was repaired


def test_it_forgets_observations_stored_under_other_fields_and_derives_everything(
    alice: User, cluster: Cluster
) -> None:
    """A release whose observations have other fields must not read the old ones back."""
    running(alice, cluster)
    Cluster.objects.filter(pk=cluster.pk).update(
        watch_cursors={**cursors(cluster), "observations": "old"}
    )
    ObservedObject.objects.filter(cluster=cluster).update(data="{}")  # unreadable by this one
    result = sync_cluster(cluster.pk)
    assert result.relisted and result.reachable and result.jobs == 1
    assert ObservedObject.objects.filter(cluster=cluster, data="{}").count() == 0


def test_events_applied_twice_change_nothing(
    alice: User, cluster: Cluster, sim: SimCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cycle whose rows were committed but whose cursors were not (the worker died in
    between) is read again by the next one: the same changes, applied again, write no row."""
    job = running(alice, cluster)
    original = cycle.finish

    def lose_the_cursors(cluster_id: int, lease: Any, **fields: Any) -> None:
        fields.pop("watch_cursors", None)
        original(cluster_id, lease, **fields)

    kept = cursors(cluster)
    sim.kill_pod("default", "train-worker-1")
    monkeypatch.setattr(cycle, "finish", lose_the_cursors)
    sync_until(cluster, lambda: Worker.objects.filter(task__job=job, restart_count__gt=0).exists())
    monkeypatch.setattr(cycle, "finish", original)
    assert cursors(cluster) == kept
    before = facts(job)
    again = sync_cluster(cluster.pk)  # every change since `kept`, once more
    assert not again.relisted and again.changes > 0
    assert facts(job) == before


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_before_committing_leaves_the_events_to_the_next_cycle(
    alice: User, cluster: Cluster, sim: SimCluster, tmp_path: Path
) -> None:
    """SIGKILL between reading the events and committing them: the cursors stay, the next
    cycle (once the dead worker's lease expired) reads the same events and converges."""
    job = running(alice, cluster)
    kept = cursors(cluster)
    sim.kill_pod("default", "train-worker-0")
    script = textwrap.dedent(f"""
        import os, signal, django
        django.setup()
        from console.engine import cycle, memory
        memory.save = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
        cycle.sync_cluster({cluster.pk})
    """)
    env = {**os.environ, "DATABASE_URL": database_url(), "TRAINYARD_VAR_DIR": str(tmp_path)}
    env["TRAINYARD_FIELD_KEYS"] = ",".join(settings.TRAINYARD_FIELD_KEYS)  # this run's rows' key
    env["DJANGO_SETTINGS_MODULE"] = "console.settings"
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=settings.BASE_DIR, timeout=120
    )
    assert done.returncode == -signal.SIGKILL
    assert cursors(cluster) == kept
    assert not Worker.objects.filter(task__job=job, restart_count__gt=0).exists()
    Cluster.objects.filter(pk=cluster.pk).update(sync_lease_until=None)  # the lease expired
    until_watched(
        cluster, lambda: Worker.objects.filter(task__job=job, restart_count__gt=0).exists()
    )


def test_a_changed_pod_rewrites_its_own_worker_and_keeps_the_others_present(
    alice: User, cluster: Cluster, sim: SimCluster
) -> None:
    """Issue 9 §3, work proportional to change: a cycle loads the Worker and instance of the
    pods that changed, not those of their Task's other pods, and the Task it writes still
    reports those others present (jobs.status.freshness.worker_missing)."""
    job = running(alice, cluster, replicas=3)
    uid = (gateway(cluster).get(PODS, "default", "train-worker-0") or {})["metadata"]["uid"]
    scope = Touched(jobs={job.pk}, pods={uid})
    snapshot = memory.load(cluster.pk, scope, [])
    state = load_state(Cluster.objects.get(pk=cluster.pk), scope, snapshot.pods)
    assert [list(workers) for workers in state.workers.values()] == [["train-worker-0"]]
    assert list(state.instances) == [uid]
    sim.kill_pod("default", "train-worker-0")
    until_watched(
        cluster, lambda: Worker.objects.filter(task__job=job, restart_count__gt=0).exists()
    )
    until_watched(cluster, lambda: ready(job) == 3)
    task_row = Task.objects.get(job=job)
    workers = Worker.objects.filter(task=task_row).order_by("pod_name")
    assert [(w.pod_name, w.restart_count > 0) for w in workers] == [
        ("train-worker-0", True), ("train-worker-1", False), ("train-worker-2", False),
    ]  # fmt: skip
    assert not any(freshness.worker_missing(worker, task_row) for worker in workers)
