"""End to end on simcluster: `sim train` runs post their signals to a live console, and the
workload state the console derives says what the run does, beside the Kubernetes phase.

Spec: issue 10 ("Show"): a run that finishes shows workload Succeeded while the Job stays
Running; a hang becomes Stalled, then Unresponsive; a killed Ray worker gives Degraded, then
Progressing again once its pod is re-created.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache

from console.engine.log_progress import read_progress_from_logs
from console.models import Cluster
from jobs.models import Job, WorkloadReport
from jobs.workload.report import workload_of
from simcluster.server import SimCluster
from tests.engine.conftest import phase_of, submit, sync_until, task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _console(live_server: Any, settings: Any) -> Iterator[None]:
    """The pods post to this live console (TRAINYARD_PUBLIC_URL), each pod within its rate."""
    settings.TRAINYARD_PUBLIC_URL = live_server.url
    cache.clear()
    yield


def state(job: Job, later: float = 0.0) -> str:
    """The workload state now, or `later` seconds after the last message was received."""
    job = Job.objects.select_related("workload").get(pk=job.pk)
    report = WorkloadReport.objects.filter(job=job).first()
    now = report.last_received_at + timedelta(seconds=later) if later and report else None
    return str(workload_of(job, now).state)


def with_policies(job: Job, **policies: Any) -> None:
    Job.objects.filter(pk=job.pk).update(spec={**job.spec, "policies": policies})


def test_a_run_that_finishes_is_succeeded_while_the_job_stays_running(
    alice: User, cluster: Cluster
) -> None:
    job = submit(alice, cluster, "ppo", task("head", command=["sim", "train", "4"]))
    sync_until(cluster, lambda: state(job) == "Succeeded")
    assert phase_of(job) == "Running"  # a StatefulSet Job never reports Succeeded
    workload = workload_of(Job.objects.get(pk=job.pk))
    assert (workload.step, workload.max_steps) == (4, 4)
    assert workload.completion is not None and workload.completion["outcome"] == "succeeded"


def test_a_hang_is_stalled_then_unresponsive(
    alice: User, cluster: Cluster, sim: SimCluster
) -> None:
    command = ["sim", "train", "100", "--hang-at", "3", "--heartbeat-seconds", "1"]
    job = submit(alice, cluster, "ppo", task("head", command=command))
    with_policies(job, stall_after_seconds=5, heartbeat_seconds=5)
    sync_until(
        cluster, lambda: WorkloadReport.objects.filter(job=job, latest__progress__step=3).exists()
    )
    sim.cluster.signals.flush(5.0)  # whatever was said before the hang has arrived
    # Heartbeats stop with the steps: judged from the last message received.
    assert state(job, later=4) == "Progressing"
    assert state(job, later=6) == "Stalled"
    assert state(job, later=16) == "Unresponsive"


def on(node: str) -> dict[str, str]:
    return {"kubernetes.io/hostname": node}


def test_a_lost_ray_worker_gives_degraded_then_progressing_again(
    alice: User, cluster: Cluster, sim: SimCluster
) -> None:
    head = task(
        "head", command=["sim", "train", "100000", "--nodes", "2"], node_selector=on("sim-node-0")
    )
    joins = ["sim", "ray-worker", "ppo-head-0.ppo-head"]
    job = submit(
        alice, cluster, "ppo", head, task("worker", command=joins, node_selector=on("sim-node-1"))
    )
    sync_until(cluster, lambda: state(job) == "Progressing")
    sim.node_offline("sim-node-1")  # the worker's node stops: its pod turns NotReady
    sync_until(cluster, lambda: state(job) == "Degraded")
    degraded = workload_of(Job.objects.get(pk=job.pk))
    assert degraded.ray is not None and degraded.ray["alive_nodes"] == 1
    assert degraded.reason is not None and degraded.reason.params == {"alive": 1, "expected": 2}
    sim.node_online("sim-node-1")
    sync_until(cluster, lambda: state(job) == "Progressing")  # the worker joined again


def test_a_run_that_posts_nothing_is_read_from_its_log(alice: User, cluster: Cluster) -> None:
    """The fallback with no code change: RLinf's metric tables give progress read from logs."""
    command = ["sim", "train", "100000", "--no-signals"]
    job = submit(alice, cluster, "ppo", task("head", command=command))
    with_policies(job, progress_from_logs=True)
    sync_until(cluster, lambda: phase_of(job) == "Running")

    def read() -> bool:
        read_progress_from_logs()
        return state(job) == "Progressing"

    sync_until(cluster, read)
    workload = workload_of(Job.objects.get(pk=job.pk))
    assert workload.source == "logs" and workload.max_steps == 100000
    assert workload.step_seconds == pytest.approx(5.0, abs=0.5)  # the lines' own times
    assert "env/return" in workload.metrics


def test_a_completion_in_the_termination_message_fails_the_workload_and_stops_the_job(
    alice: User, cluster: Cluster
) -> None:
    command = ["sim", "train", "30", "--fail-at", "3", "--exit-code", "3", "--no-signals"]
    job = submit(alice, cluster, "ppo", task("head", command=command))
    with_policies(job, stop_on_completion=True)
    sync_until(cluster, lambda: state(job) == "Failed")
    failed = workload_of(Job.objects.get(pk=job.pk))
    assert failed.source == "termination-log"
    assert failed.completion is not None and failed.completion["exit_code"] == 3
    assert "simulated training failure at global step 3" in failed.completion["message"]
    sync_until(cluster, lambda: phase_of(job) == "Stopped")
