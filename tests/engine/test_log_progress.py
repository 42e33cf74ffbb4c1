"""RLinf's progress lines read from the head pod's log (issue 10, item 3b; docs/workload-signals.md,
"Fallbacks"), over real HTTP against a simulated cluster: the `log` subresource with its
`tailLines`, `limitBytes` and `timestamps`.

The simulated head process prints the lines of tests/fixtures/rlinf_progress.log (RLinf's metric
tables), added to what its running container printed, at the simulated time they were written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth.models import User

from console.engine.log_progress import head_pod, read_progress_from_logs
from console.models import Cluster
from jobs import operations
from jobs.models import Job, Signal, WorkloadReport
from jobs.spec import parse_job_spec
from simcluster.server import SimCluster
from tests.engine.conftest import phase_of, sync_until, task
from workers.models import Worker

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "rlinf_progress.log"


def submit(user: User, cluster: Cluster, name: str, **policies: Any) -> Job:
    tasks = [task("worker", replicas=2), task("head")]  # the head Task is not the first one
    data = {"name": name, "cluster": cluster.name, "tasks": tasks, "policies": policies}
    return operations.create_job(user, parse_job_spec(data, user))


def running(cluster: Cluster, job: Job) -> None:
    sync_until(cluster, lambda: phase_of(job) == "Running")
    sync_until(
        cluster,
        lambda: Worker.objects.filter(task__job=job, phase="Running", ready=True).count() == 3,
    )


def prints(sim: SimCluster, pod_name: str, text: str) -> None:
    """The pod's running container prints `text`, one line a millisecond from now."""
    with sim.cluster.store.lock:
        runtime = next(p for p in sim.cluster.kubelet.pods.values() if p.name == pod_name)
        instance = runtime.containers[0].current
        assert instance is not None
        now = sim.cluster.ctx.now()
        instance.notes += [(now + n / 1000, line) for n, line in enumerate(text.splitlines())]


def test_it_turns_rlinfs_metric_tables_into_progress_read_from_logs(
    alice: User, cluster: Cluster, sim: SimCluster
) -> None:
    job = submit(alice, cluster, "rl", progress_from_logs=True)
    running(cluster, job)
    head = head_pod(job)
    assert head is not None and head.name == "rl-head-0"
    prints(sim, "rl-head-0", FIXTURE.read_text())

    assert read_progress_from_logs() == 4  # the closed tables: steps 41 to 44

    latest = WorkloadReport.objects.get(job=job).latest["progress"]
    assert (latest["step"], latest["max_steps"], latest["source"]) == (44, 1000, "logs")
    assert latest["metrics"]["env/success_once"] == 0.419
    assert latest["pod"] == "rl-head-0"
    rows = Signal.objects.filter(job=job).order_by("seq")
    assert [row.data["step"] for row in rows] == [41, 42, 43, 44]
    assert {row.source for row in rows} == {"logs"}
    steps = WorkloadReport.objects.get(job=job).steps
    assert [step for _at, step in steps] == [41, 42, 43, 44]
    assert steps[0][0] < steps[-1][0]  # the times the lines were printed, not the time read


def test_it_records_nothing_twice_when_it_reads_the_same_tail_again(
    alice: User, cluster: Cluster, sim: SimCluster
) -> None:
    job = submit(alice, cluster, "rl", progress_from_logs=True)
    running(cluster, job)
    prints(sim, "rl-head-0", FIXTURE.read_text())
    read_progress_from_logs()
    before = WorkloadReport.objects.get(job=job).last_received_at

    assert read_progress_from_logs() == 0

    assert WorkloadReport.objects.get(job=job).last_received_at == before
    assert Signal.objects.filter(job=job).count() == 4


def test_it_reads_only_the_running_jobs_that_asked_for_it(
    alice: User, cluster: Cluster, sim: SimCluster
) -> None:
    quiet = submit(alice, cluster, "quiet")
    running(cluster, quiet)
    prints(sim, "quiet-head-0", FIXTURE.read_text())
    stopped = submit(alice, cluster, "stopped", progress_from_logs=True)
    running(cluster, stopped)
    prints(sim, "stopped-head-0", FIXTURE.read_text())
    operations.stop_job(alice, stopped)

    assert read_progress_from_logs() == 0

    assert not Signal.objects.exists()
