"""The ledger's part of a sync cycle (usage.ledger.after_sync) in a number of statements that does
not grow with the pods (issue 33, Show: the ledger adds at most 10% to a sync cycle with 100
changes; ARCHITECTURE §Principles: writes proportional to change, not per row), writing what
the model would: intervals closed at the pods' own moments, new facts stored, the roll-ups."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from console.models import Cluster, Project
from jobs.choices import JobPhase, UsageClass
from jobs.models import Job, Task
from usage import ledger
from usage.models import GpuInterval, UsageDay, UsageGroupDay, UsageHour, UsageTotal

NOW = datetime(2026, 5, 4, 12, 30, tzinfo=UTC)
RUNNING_SINCE = NOW - timedelta(minutes=10)


def running_job(alice: User, project: Project, cluster: Cluster, pods: int) -> list[GpuInterval]:
    """A Running Job (no workload report: silent) whose pods of one GPU each have run for ten
    minutes, each with its open interval."""
    job = Job.objects.create(
        project=project, cluster=cluster, name="ppo", namespace="default", owner=alice,
        spec={"tasks": []}, phase=JobPhase.RUNNING,
    )  # fmt: skip
    task = Task.objects.create(job=job, role="worker", template={})
    return [interval(job, task, index) for index in range(pods)]


def interval(job: Job, task: Task, index: int) -> GpuInterval:
    return GpuInterval.objects.create(
        job=job, run=1, task=task, cluster=job.cluster, pod_uid=f"uid-{index}",
        pod_name=f"ppo-worker-{index}", node_name="node-a", gpus=1,
        usage_class=UsageClass.SILENT, started_at=RUNNING_SINCE,
        bound_at=RUNNING_SINCE - timedelta(seconds=30), running_at=RUNNING_SINCE,
    )  # fmt: skip


def seen(row: GpuInterval) -> ledger.Pod:
    """The pod as the cluster reports it, unchanged."""
    observed = ledger.Seen(
        row.pod_name, row.node_name, "Running", row.gpus, row.bound_at, row.running_at, None, None
    )
    return ledger.Pod(row.pod_uid, row.job_id, row.run, row.task_id, row.cluster_id, observed)


def moved(row: GpuInterval) -> ledger.Pod:
    pod = seen(row)
    assert pod.observation is not None
    return replace(pod, observation=replace(pod.observation, node_name="node-b"))


def ended(row: GpuInterval, at: datetime) -> ledger.Pod:
    pod = seen(row)
    assert pod.observation is not None
    return replace(pod, observation=replace(pod.observation, phase="Succeeded", finished_at=at))


def sync(cluster: Cluster, pods: list[ledger.Pod]) -> list[str]:
    """The ledger's part of a cycle that saw `pods` change: its SQL statements."""
    with CaptureQueriesContext(connection) as queries:
        ledger.after_sync(cluster.pk, pods, {pod.job_id for pod in pods}, NOW)
    return [query["sql"] for query in queries.captured_queries]


def test_it_runs_the_same_statements_for_one_changed_pod_or_many(
    alice: User, project: Project, cluster: Cluster
) -> None:
    rows = running_job(alice, project, cluster, pods=8)
    one = sync(cluster, [moved(rows[0]), ended(rows[1], NOW - timedelta(minutes=1))])
    many = sync(
        cluster,
        [*(moved(row) for row in rows[2:5]), *(ended(row, NOW) for row in rows[5:8])],
    )
    assert len(one) == len(many)


def test_it_closes_at_the_pods_own_moments_and_rolls_them_up(
    alice: User, project: Project, cluster: Cluster
) -> None:
    rows = running_job(alice, project, cluster, pods=4)
    sync(cluster, [moved(rows[0]), ended(rows[1], NOW - timedelta(minutes=4))])
    stored = {row.pod_uid: row for row in GpuInterval.objects.all()}
    assert len(stored) == 4  # nothing opened: the ended pod has no next class
    assert stored["uid-0"].node_name == "node-b" and stored["uid-0"].ended_at is None
    assert stored["uid-1"].ended_at == NOW - timedelta(minutes=4)
    assert stored["uid-1"].due_at is None
    assert stored["uid-2"].node_name == "node-a" and stored["uid-2"].ended_at is None
    six_minutes = 6 * 60.0
    [hour] = UsageHour.objects.all()
    assert (hour.hour, hour.usage_class, hour.gpu_seconds) == (
        datetime(2026, 5, 4, 12, tzinfo=UTC), UsageClass.SILENT, six_minutes
    )  # fmt: skip
    assert (hour.job_name, hour.project_name, hour.username) == ("ppo", project.name, "alice")
    [day] = UsageDay.objects.all()
    [group] = UsageGroupDay.objects.all()
    [total] = UsageTotal.objects.all()
    assert day.gpu_seconds == group.gpu_seconds == total.gpu_seconds == six_minutes


def test_it_closes_an_interval_once_when_judged_twice(
    alice: User, project: Project, cluster: Cluster
) -> None:
    """A second pass with the same news (a sync and a signal, one after the other) finds the
    interval closed: nothing is added twice."""
    rows = running_job(alice, project, cluster, pods=2)
    news = [ended(rows[0], NOW - timedelta(minutes=4))]
    sync(cluster, news)
    sync(cluster, news)
    assert [hour.gpu_seconds for hour in UsageHour.objects.all()] == [6 * 60.0]
    assert GpuInterval.objects.filter(ended_at__isnull=True).count() == 1


def test_a_pods_own_moment_still_to_come_makes_its_interval_due_then(
    alice: User, project: Project, cluster: Cluster
) -> None:
    """The cluster's clock ahead of the console's: a pod reported running from a moment the
    console has not reached is judged again at that moment, not only at its run's."""
    rows = running_job(alice, project, cluster, pods=2)
    ahead = NOW + timedelta(seconds=20)
    pod = seen(rows[0])
    assert pod.observation is not None
    restarted = replace(pod, observation=replace(pod.observation, running_at=ahead))
    ledger.after_sync(cluster.pk, [restarted], set(), NOW)
    current = GpuInterval.objects.get(pod_uid="uid-0", ended_at__isnull=True)
    assert current.due_at == ahead
    assert GpuInterval.objects.get(pod_uid="uid-1").due_at is None
