"""End to end on simcluster: a Job made from the "RLinf on Ray" template, its pods exactly as the
console renders them, run by simcluster from their scripts (Ray's head with the driver wrapper
in front, workers joining it) and heard by a live console.

The clock is frozen (speed 0) and moved a few seconds at a time, so no test waits on the
simulated clock; the console syncs where it must act. Spec: issue "RLinf-ready jobs", item 5.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

from console.engine.cycle import sync_cluster
from console.models import ApiToken, Cluster
from jobs.models import Job, Signal
from jobs.workload.report import workload_of
from simcluster.server import SimCluster
from tests.engine.conftest import phase_of
from tests.simcluster.conftest import connect

pytestmark = pytest.mark.django_db(transaction=True)

STEPS = 12
STEP = 3  # shorter than the 5 s between the wrapper's looks at Ray, and than a worker's rejoin
LIMIT = 300
STORAGE = {"requests": {"storage": "1Ti"}}
OVERRIDES = [f"runner.max_steps={STEPS}", "runner.save_interval=4"]
SIM_ENV = {"SIMCLUSTER_TRAIN": "--step-seconds 1 --heartbeat-seconds 2"}


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster(nodes=3, gpus_per_node=8, seed=0, speed=0) as cluster:
        yield cluster
        assert not cluster.tick_errors, cluster.tick_errors[0]


@pytest.fixture(autouse=True)
def _console(live_server: Any, settings: Any) -> Iterator[None]:
    """The pods post to this live console (TRAINYARD_PUBLIC_URL), each pod within its rate."""
    settings.TRAINYARD_PUBLIC_URL = live_server.url
    cache.clear()
    yield


RLINF = {
    "image": "rlinf/rlinf:agentic-rlinf0.1", "nodes": 3, "gpus_per_node": 1, "cpu": "2",
    "memory": "4Gi", "config_name": "maniskill_ppo_openvlaoft",
    "overrides": OVERRIDES, "output_claim": "rlinf-outputs", "env": SIM_ENV,
}  # fmt: skip


def outputs(cluster: Cluster, sim: SimCluster, tmp_path: Path) -> None:
    """The Nodes synced (the template checks its GPUs against them) and the output claim."""
    sync_cluster(cluster.pk)
    kube = connect(sim, tmp_path)
    kube.core.create_namespaced_persistent_volume_claim(
        "default",
        {
            "metadata": {"name": "rlinf-outputs"},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "resources": STORAGE,
            },
        },
    )
    kube.api.close()


def create(alice: User, cluster: Cluster, sim: SimCluster, tmp_path: Path, **policies: Any) -> Job:
    """`POST /api/v1/jobs` with the template: 3 Ray nodes of 1 GPU, an output claim that
    exists, steps of 1 s and a heartbeat of 2 s (SIMCLUSTER_TRAIN, read by simcluster only)."""
    outputs(cluster, sim, tmp_path)
    body = {"template": "rlinf", "name": "ppo", "cluster": cluster.name, "rlinf": RLINF}
    if policies:
        body["policies"] = policies
    token = ApiToken.issue(alice, "t")[1]
    client = Client(headers={"Authorization": f"Bearer {token}"})
    answer = client.post("/api/v1/jobs", json.dumps(body), "application/json")
    assert answer.status_code == 201, answer.json()
    return Job.objects.get(pk=answer.json()["id"])


def create_on_the_page(alice: User, cluster: Cluster, sim: SimCluster, tmp_path: Path) -> Job:
    """The same choices typed into the create page's template form, its defaults kept
    (stop on completion checked)."""
    outputs(cluster, sim, tmp_path)
    client = Client()
    client.force_login(alice)
    page = client.get("/jobs/new/?template=rlinf").content.decode()
    assert 'name="stop_on_completion"' in page
    typed = {key: str(value) for key, value in RLINF.items() if key not in ("overrides", "env")}
    form = typed | {
        "template": "rlinf", "name": "ppo", "project": "vision", "cluster": cluster.name,
        "namespace": "", "entry": "embodied", "log_path": "", "resume_from": "",
        "placement": "", "overrides": "\n".join(OVERRIDES),
        "env": "\n".join(f"{k}={v}" for k, v in SIM_ENV.items()),
        "stop_on_completion": "on", "heartbeat_seconds": "30", "stall_after_seconds": "",
    }  # fmt: skip
    answer = client.post("/jobs/new/", form)
    job = Job.objects.get(name="ppo")
    assert answer.status_code == 302 and answer["Location"] == job.get_absolute_url()
    return job


def run_until(
    sim: SimCluster, condition: Callable[[], Any], engine: Cluster | None = None, step: int = STEP
) -> None:
    """`step` simulated seconds at a time: the pods act and what they said arrives (each pod's
    client sends at most every 0.5 s); with `engine`, a sync cycle follows (about one watch
    timeout, 1 s of wall time: only where the console must act or see the pods)."""
    for _ in range(LIMIT // step):
        sim.advance(step)
        assert sim.cluster.signals.flush(10.0)
        if engine is not None:
            sync_cluster(engine.pk)
        if condition():
            return
    raise AssertionError(f"condition not met within {LIMIT} simulated seconds")


def workload(job: Job) -> Any:
    return workload_of(Job.objects.select_related("workload").get(pk=job.pk))


def state(job: Job) -> str:
    return str(workload(job).state)


def test_a_template_job_from_the_create_page_forms_its_ray_cluster_succeeds_and_is_stopped(
    alice: User, cluster: Cluster, sim: SimCluster, tmp_path: Path
) -> None:
    job = create_on_the_page(alice, cluster, sim, tmp_path)
    run_until(sim, lambda: state(job) == "Progressing", cluster)
    progressing = workload(job)
    assert progressing.ray is not None and progressing.ray["alive_nodes"] == 3
    # The membership formed: the wrapper waited for the nodes, seeing fewer than 3 alive first.
    said = Signal.objects.filter(job=job).order_by("pk")
    assert said.filter(kind="phase", data__phase="waiting_for_nodes").exists()
    alive = [data["alive_nodes"] for data in said.filter(kind="ray").values_list("data", flat=True)]
    assert alive[0] < 3 and alive[-1] == 3
    assert progressing.max_steps == STEPS
    run_until(sim, lambda: state(job) == "Succeeded", step=10)
    done = workload(job)
    assert done.step == STEPS and done.completion is not None
    assert done.completion["outcome"] == "succeeded"
    assert done.last_checkpoint is not None and done.last_checkpoint["step"] == 12
    checkpoint = "/output/ppo/maniskill_ppo_openvlaoft/checkpoints/global_step_12"
    assert done.last_checkpoint["path"] == checkpoint
    run_until(sim, lambda: phase_of(job) == "Stopped", cluster)  # stop_on_completion
    client = Client()
    client.force_login(alice)
    page = client.get(job.get_absolute_url()).content.decode()
    assert "Made by the RLinf on Ray template" in page and "Succeeded" in page


def test_a_killed_worker_degrades_the_run_until_its_container_joins_again(
    alice: User, cluster: Cluster, sim: SimCluster, tmp_path: Path
) -> None:
    job = create(alice, cluster, sim, tmp_path)
    run_until(sim, lambda: state(job) == "Progressing", cluster)
    assert sim.kill_pod("default", "ppo-worker-1") == ["main"]
    run_until(sim, lambda: state(job) == "Degraded")
    degraded = workload(job)
    assert degraded.ray is not None and degraded.ray["alive_nodes"] == 2
    run_until(sim, lambda: state(job) == "Progressing")  # restarted, joined again
    run_until(sim, lambda: state(job) == "Succeeded", step=10)


def test_a_head_recreated_after_completion_reports_it_again_and_does_not_train(
    alice: User, cluster: Cluster, sim: SimCluster, tmp_path: Path
) -> None:
    job = create(alice, cluster, sim, tmp_path, stop_on_completion=False)
    run_until(sim, lambda: phase_of(job) == "Running", cluster)
    run_until(sim, lambda: state(job) == "Succeeded", step=10)
    first = Signal.objects.get(job=job, kind="completion").uid
    kube = connect(sim, tmp_path)
    kube.core.delete_namespaced_pod("ppo-head-0", "default")
    kube.api.close()

    def completions() -> set[str]:
        return set(Signal.objects.filter(job=job, kind="completion").values_list("uid", flat=True))

    run_until(sim, lambda: len(completions()) == 2)
    (again,) = completions() - {first}
    assert not Signal.objects.filter(job=job, uid=again, kind__in=["progress", "phase"]).exists()
    sync_cluster(cluster.pk)
    assert state(job) == "Succeeded" and phase_of(job) == "Running"
