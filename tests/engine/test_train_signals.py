"""End to end: a Job whose head runs `sim train` on simcluster posts its signals to the console
at TRAINYARD_PUBLIC_URL with the token and pod identity the console gave it, and the console
keeps them as Signal rows of that Job.

Spec: issue 10, items 2 and 8 (signals; simcluster's training workloads report like real runs).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache

from console.kube.gateway import PODS
from console.models import Cluster
from jobs.models import Signal
from tests.engine.conftest import gateway, phase_of, submit, sync_until, task


@pytest.mark.django_db(transaction=True)
def test_a_sim_train_job_reports_its_run_to_the_console(
    alice: User, cluster: Cluster, live_server: Any, settings: Any
) -> None:
    settings.TRAINYARD_PUBLIC_URL = live_server.url
    cache.clear()  # the signal rate limit counts per pod
    command = ["sim", "train", "3", "--checkpoint-every", "2"]
    job = submit(alice, cluster, "ppo", task("head", command=command))
    sync_until(cluster, lambda: phase_of(job) == "Running")
    sync_until(cluster, lambda: Signal.objects.filter(job=job, kind="completion").exists())
    (pod,) = gateway(cluster).list(PODS, f"trainyard.io/job={job.pk}", "default")
    rows = Signal.objects.filter(job=job).order_by("seq")
    assert {(row.pod, row.uid, row.run) for row in rows} == {
        (pod["metadata"]["name"], pod["metadata"]["uid"], job.run)
    }
    progress = [row.data for row in rows if row.kind == "progress"]
    assert [(p["step"], p["max_steps"]) for p in progress] == [(1, 3), (2, 3), (3, 3)]
    assert set(progress[-1]["metrics"]) == {
        "env/return", "env/success_once", "train/actor/policy_loss",
    }  # fmt: skip
    (checkpoint,) = [row.data for row in rows if row.kind == "checkpoint"]
    assert checkpoint["step"] == 2 and checkpoint["path"].endswith("/global_step_2")
    (completion,) = [row.data for row in rows if row.kind == "completion"]
    assert completion["outcome"] == "succeeded"
    assert {"heartbeat", "phase", "ray"} <= {row.kind for row in rows}
