"""The workload's completion acting on Jobs and Workflows against a simulated cluster:
stop_on_completion scales the StatefulSets to 0, and a Workflow of StatefulSet Jobs finishes
through advance_on_workload_success (spec §Workflow status: otherwise it never does)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from console.engine.cycle import sync_cluster
from console.kube.gateway import STATEFULSETS
from console.models import Cluster
from jobs import operations
from jobs.models import Job, Operation, Workflow
from jobs.spec import parse_workflow_spec
from jobs.workload.intake import BATCH
from jobs.workload.report import record, workload_of
from tests.engine.conftest import gateway, phase_of, submit, sync_until, task


def complete(job: Job, outcome: str = "succeeded") -> None:
    """What the job's head pod posts when its training ends (jobs.workload.report.record, as the
    signals endpoint calls it)."""
    job.refresh_from_db()
    message = {"kind": "completion", "pod": f"{job.name}-head-0", "uid": "u", "seq": 1}
    recorded = record(job.pk, job.run, BATCH.validate_python([message | {"outcome": outcome}]))
    if recorded.stopped:
        operations.schedule_reconcile(job.pk)


def replicas(cluster: Cluster, name: str) -> int | None:
    sts = gateway(cluster).get(STATEFULSETS, "default", name)
    return None if sts is None else int(sts["spec"]["replicas"])


def test_stop_on_completion_scales_the_job_to_zero(alice: User, cluster: Cluster) -> None:
    job = submit(alice, cluster, "ppo", task("head"), task("worker", replicas=2))
    Job.objects.filter(pk=job.pk).update(
        spec={**job.spec, "policies": {"stop_on_completion": True}}
    )
    sync_until(cluster, lambda: phase_of(job) == "Running")
    complete(job)
    sync_until(cluster, lambda: replicas(cluster, "ppo-worker") == 0)
    job.refresh_from_db()
    assert (job.phase, replicas(cluster, "ppo-head")) == ("Stopped", 0)
    assert workload_of(job).state == "Succeeded"
    assert Operation.objects.filter(job=job, action="stop", user=None).count() == 1


def test_a_workflow_of_statefulset_jobs_finishes_through_workload_success(
    alice: User, cluster: Cluster
) -> None:
    def child(name: str, **more: Any) -> dict[str, Any]:
        tasks = [task("head")]
        return {"name": name, "cluster": cluster.name, "tasks": tasks, **more}

    spec = {
        "name": "pipeline",
        "policies": {"advance_on_workload_success": True},
        "jobs": [
            child("prepare", policies={"stop_on_completion": True}),
            child("train", depends_on=["prepare"]),
        ],
    }
    workflow = operations.create_workflow(alice, parse_workflow_spec(spec, alice))
    prepare, train = (Job.objects.get(workflow=workflow, name=n) for n in ("prepare", "train"))
    sync_until(cluster, lambda: phase_of(prepare) == "Running")
    sync_cluster(cluster.pk)
    assert replicas(cluster, "train-head") is None  # waits for prepare
    complete(prepare)
    sync_until(cluster, lambda: phase_of(train) == "Running")
    assert phase_of(prepare) == "Stopped" and replicas(cluster, "prepare-head") == 0
    workflow.refresh_from_db()
    assert workflow.phase == "Running"
    complete(train)  # train keeps running (no stop policy); the Workflow still finishes
    sync_until(cluster, lambda: Workflow.objects.get(pk=workflow.pk).phase == "Succeeded")
    assert phase_of(train) == "Running"
    workflow.refresh_from_db()
    assert workflow.finished_at is not None
