"""Reconcile against a simulated cluster: idempotent, repairs drift, touches only its own
objects, applies on demand (reconcile_job) and records the applied layer."""

from __future__ import annotations

from django.contrib.auth.models import User

from console.engine.cycle import sync_cluster
from console.engine.one_job import reconcile_job
from console.kube.gateway import STATEFULSETS
from console.models import Cluster
from jobs.messages import render_text
from jobs.models import Operation, Task, Workflow, WorkflowEdge
from tests.engine.conftest import gateway, phase_of, submit, sync_until, task


def replicas(cluster: Cluster, name: str) -> int | None:
    sts = gateway(cluster).get(STATEFULSETS, "default", name)
    return None if sts is None else int(sts["spec"]["replicas"])


def test_it_makes_no_api_write_when_reconciled_twice(alice: User, cluster: Cluster) -> None:
    """ARCHITECTURE §Principles: level-triggered and idempotent."""
    job = submit(alice, cluster, "train", task("head"), task("worker", replicas=3))
    assert sync_cluster(cluster.pk).api_writes == 4
    assert sync_cluster(cluster.pk).api_writes == 0
    sync_until(cluster, lambda: phase_of(job) == "Running")
    again = [sync_cluster(cluster.pk).api_writes for _ in range(3)]
    assert again == [0, 0, 0]


def test_it_applies_a_job_on_demand_and_marks_the_operation_applied(
    alice: User, cluster: Cluster
) -> None:
    """What the operations' on_commit hook runs (console.tasks.reconcile_job)."""
    job = submit(alice, cluster, "train", task("worker", replicas=2))
    reconcile_job(job.pk)
    assert replicas(cluster, "train-worker") == 2
    assert Operation.objects.get(job=job).result == "applied"
    assert Task.objects.get(job=job).applied_at is not None
    assert sync_cluster(cluster.pk).api_writes == 0


def test_it_recreates_a_statefulset_deleted_behind_its_back(alice: User, cluster: Cluster) -> None:
    job = submit(alice, cluster, "train", task("worker", replicas=2))
    sync_until(cluster, lambda: phase_of(job) == "Running")
    gateway(cluster).delete(STATEFULSETS, "default", "train-worker")
    assert replicas(cluster, "train-worker") is None
    assert sync_cluster(cluster.pk).api_writes == 1
    assert replicas(cluster, "train-worker") == 2
    assert phase_of(job) == "Running"  # no arrow back to Pending (spec §Job status)


def test_it_sets_replicas_changed_behind_its_back_back(alice: User, cluster: Cluster) -> None:
    job = submit(alice, cluster, "train", task("worker", replicas=2))
    sync_until(cluster, lambda: phase_of(job) == "Running")
    gateway(cluster).patch(STATEFULSETS, "default", "train-worker", {"spec": {"replicas": 5}})
    sync_cluster(cluster.pk)
    assert replicas(cluster, "train-worker") == 2


def test_it_never_touches_objects_it_does_not_manage(alice: User, cluster: Cluster) -> None:
    foreign = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "train-worker", "namespace": "default", "labels": {"app": "mine"}},
        "spec": {
            "replicas": 1,
            "serviceName": "x",
            "selector": {"matchLabels": {"app": "mine"}},
            "template": {
                "metadata": {"labels": {"app": "mine"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }
    gateway(cluster).create(STATEFULSETS, "default", foreign)
    job = submit(alice, cluster, "train", task("worker", replicas=3))
    sync_cluster(cluster.pk)
    sts = gateway(cluster).get(STATEFULSETS, "default", "train-worker")
    assert sts is not None and sts["metadata"]["labels"] == {"app": "mine"}
    assert sts["spec"]["replicas"] == 1
    task_row = Task.objects.get(job=job)
    assert "does not belong to this run of this job" in task_row.apply_error
    operation = Operation.objects.get(job=job)
    assert operation.result == "accepted" and "does not belong" in render_text(operation.message)


def test_it_fails_the_operation_on_an_invalid_object(alice: User, cluster: Cluster) -> None:
    """Contract: 422 from the API server is permanent: the Operation is failed."""
    job = submit(
        alice, cluster, "train", task("worker", resources={"cpu": "1", "memory": "1Gi", "gpu": 1})
    )
    Task.objects.filter(job=job).update(
        template={"role": "worker", "image": "img", "resources": {"cpu": "-1"}}
    )
    sync_cluster(cluster.pk)
    operation = Operation.objects.get(job=job)
    assert operation.result == "failed" and "422" in render_text(operation.message)
    assert "422" in Task.objects.get(job=job).apply_error


def test_it_starts_a_workflow_child_only_after_its_upstream_succeeded(
    alice: User, cluster: Cluster
) -> None:
    """Spec §Workflow status; contract: a blocked child gets no workloads and says why."""
    prepare = submit(
        alice, cluster, "prepare", task("eval", kind="Job", command=["sim", "run", "30"])
    )
    train = submit(alice, cluster, "train", task("worker"))
    workflow = Workflow.objects.create(project=prepare.project, name="pipeline")
    type(prepare).objects.filter(pk__in=[prepare.pk, train.pk]).update(workflow=workflow)
    WorkflowEdge.objects.create(workflow=workflow, upstream=prepare, downstream=train)
    sync_cluster(cluster.pk)
    assert replicas(cluster, "train-worker") is None
    train.refresh_from_db()
    assert render_text(train.message) == "Waiting for upstream jobs: prepare."
    assert (
        render_text(Operation.objects.get(job=train).message)
        == "Waiting for upstream jobs: prepare."
    )
    sync_until(cluster, lambda: phase_of(train) == "Running")
    assert phase_of(prepare) == "Succeeded"
    workflow.refresh_from_db()
    assert workflow.phase == "Running" and render_text(workflow.message) == "1/2 jobs succeeded"
