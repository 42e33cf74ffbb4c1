"""The workload's word with no code change, over real HTTP against a simulated cluster (issue
10, item 3; docs/workload-signals.md, "Fallbacks"): a completion JSON a container wrote to its
termination message, read by the poller."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone

from console.engine.completions import record_completions
from console.engine.observe import change_of
from console.engine.streams import BY_NAME
from console.kube.gateway import PODS, STATEFULSETS
from console.models import Cluster
from jobs import operations
from jobs.choices import WorkloadState
from jobs.models import Job, Operation, Signal, Task, WorkloadReport
from jobs.spec import parse_job_spec
from jobs.workload.report import workload_of
from tests.engine.conftest import gateway, phase_of, sync_until, task
from workers.models import PodInstance


def completion(outcome: str, **fields: Any) -> str:
    return json.dumps({"trainyard": "completion", "outcome": outcome, **fields})


def submit(user: User, cluster: Cluster, name: str, command: list[str], **policies: Any) -> Job:
    data = {"name": name, "cluster": cluster.name, "tasks": [task("head", command=command)]}
    return operations.create_job(user, parse_job_spec(data | {"policies": policies}, user))


def workload(job: Job) -> dict[str, Any]:
    fresh = Job.objects.select_related("workload").get(pk=job.pk)
    state = workload_of(fresh, timezone.now())
    return {"state": state.state, "source": state.source, "completion": state.completion}


def test_it_reads_a_failed_completion_from_the_termination_message(
    alice: User, cluster: Cluster
) -> None:
    """The container exits 3 after writing its completion: the workload is Failed with its
    reason, read from the termination log, while the Job keeps its Kubernetes phase (its
    StatefulSet restarts the container, and the message is then read from lastState)."""
    message = completion("failed", exit_code=3, reason="NaNLoss", message="loss is NaN at 812")
    job = submit(alice, cluster, "nan", ["sim", "crash", "5", "3", message])

    sync_until(cluster, lambda: workload(job)["state"] == WorkloadState.FAILED)

    shown = workload(job)
    assert shown["source"] == "termination-log"
    assert shown["completion"]["reason"] == "NaNLoss"
    assert shown["completion"]["exit_code"] == 3
    assert shown["completion"]["message"] == "loss is NaN at 812"
    # spec §Job status: the workload's word is beside the Kubernetes phase, never in its place
    assert phase_of(job) in ("Pending", "Running")
    row = Signal.objects.get(job=job)
    assert (row.kind, row.source, row.pod) == ("completion", "termination-log", "nan-head-0")


def test_it_reads_a_pod_again_at_no_cost(alice: User, cluster: Cluster) -> None:
    """Every change of a pod reads its termination message again: the same container run is a
    duplicate, neither stored nor folded twice (one query, docs/decisions.md)."""
    job = submit(alice, cluster, "again", ["sim", "crash", "5", "3", completion("failed")])
    sync_until(cluster, lambda: Signal.objects.filter(job=job).exists())
    report = WorkloadReport.objects.get(job=job)
    pod = gateway(cluster).get(PODS, job.namespace, "again-head-0")
    changes = [change_of(BY_NAME["pods"], pod)]

    recorded = [len(record_completions(cluster.pk, changes)) for _ in range(2)]

    new_runs = Signal.objects.filter(job=job).count() - 1
    assert recorded == [new_runs, 0]  # only a run that ended since the last cycle is new
    if not new_runs:
        assert WorkloadReport.objects.get(job=job).last_received_at == report.last_received_at


def test_it_stops_the_job_on_a_succeeded_completion_with_stop_on_completion(
    alice: User, cluster: Cluster
) -> None:
    """Policy `stop_on_completion`: the Job becomes Stopped and its StatefulSet is scaled to 0,
    recorded as an Operation of the console's own."""
    job = submit(
        alice, cluster, "done", ["sim", "run", "5", completion("succeeded", exit_code=0)],
        stop_on_completion=True,
    )  # fmt: skip

    sync_until(cluster, lambda: phase_of(job) == "Stopped")
    sync_until(cluster, lambda: Task.objects.get(job=job).phase == "Stopped")

    assert workload(job)["state"] == WorkloadState.SUCCEEDED
    assert workload(job)["source"] == "termination-log"
    stop = Operation.objects.get(job=job, action="stop")
    assert stop.user is None and stop.result == "applied"
    (statefulset,) = gateway(cluster).list(STATEFULSETS, namespace=job.namespace)
    assert statefulset["spec"]["replicas"] == 0


def test_it_ignores_a_termination_message_that_is_not_a_completion(
    alice: User, cluster: Cluster
) -> None:
    job = submit(alice, cluster, "plain", ["sim", "crash", "5", "1", "CUDA error: out of memory"])

    sync_until(cluster, lambda: PodInstance.objects.filter(task__job=job, last_exit_code=1))

    assert not Signal.objects.filter(job=job).exists()
    assert workload(job)["state"] == WorkloadState.SILENT
