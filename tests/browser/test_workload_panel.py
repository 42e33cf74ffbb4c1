"""The job page's Workload panel in a browser, in English and 简体中文, at 1400 px and 390 px: a
run that progresses, one that stalled, one whose Ray cluster lost a node and one that reported
success and was stopped by its stop_on_completion policy (issue 10, "Show": screenshots of the
panel, looked at). The state is shown in words and an icon beside the Kubernetes phase."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from itertools import count
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Page, expect

from console.models import Cluster, Membership
from jobs.choices import JobPhase, TaskPhase
from jobs.models import Job, Task
from jobs.operations import create_job
from jobs.spec import parse_job_spec
from jobs.workload.intake import BATCH
from jobs.workload.report import record
from tests.browser.conftest import log_in
from tests.conftest import KUBECONFIG, open_cluster, open_project

pytestmark = pytest.mark.browser

WIDTHS = {"wide": 1400, "phone": 390}
SEQ = count(1)


@pytest.fixture
def alice(transactional_db: None) -> User:
    user = User.objects.create_user("alice", password="a-long-password")
    Membership.objects.create(user=user, project=open_project("vision"))
    return user


def running_job(alice: User, name: str, **policies: Any) -> Job:
    """A Running StatefulSet Job of two replicas, as the sync leaves it."""
    spec = {"name": name, "cluster": "gpu-a", "policies": policies,
            "tasks": [{"role": "trainer", "replicas": 2, "image": "rlinf:0.4"}]}  # fmt: skip
    job = create_job(alice, parse_job_spec(spec, alice))
    now = timezone.now()
    Task.objects.filter(job=job).update(
        phase=TaskPhase.RUNNING, ready_replicas=2, workload_replicas=2, observed_at=now
    )
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.RUNNING, observed_at=now, started_at=now)
    job.refresh_from_db()
    return job


def fresh() -> None:
    """The cluster just synced and reported on every Job (no stale mark on the pictures)."""
    now = timezone.now()
    Cluster.objects.update(last_synced_at=now, last_attempt_at=now)
    Job.objects.update(observed_at=now)


def say(job: Job, *messages: dict[str, Any], at: datetime | None = None) -> None:
    """The job's head pod posts `messages` (received at `at`, default now)."""
    items = BATCH.validate_python(
        [{"pod": f"{job.name}-trainer-0", "uid": "u-1", "seq": next(SEQ), **m} for m in messages]
    )
    if at is None:
        record(job.pk, job.run, items)
        return
    with time_machine.travel(at, tick=False):
        record(job.pk, job.run, items)


def train(job: Job, steps: range, end: datetime, seconds: float = 12.0) -> None:
    """Progress every `seconds`, ending at `end`, with three metrics that move like a run's."""
    for index, step in enumerate(steps):
        at = end - timedelta(seconds=seconds * (len(steps) - 1 - index))
        metrics = {"loss": round(2.0 / (1 + step / 40), 4), "reward": round(step / 500, 4),
                   "entropy": round(1.2 - step / 2000, 4)}  # fmt: skip
        message = {"kind": "progress", "step": step, "max_steps": 1000, "metrics": metrics}
        say(job, message, at=at)


def jobs(alice: User) -> Iterator[tuple[Job, str]]:
    now = timezone.now()
    open_cluster("gpu-a", kubeconfig=KUBECONFIG, namespace="default", reachable=True,
                 last_synced_at=now, last_attempt_at=now)  # fmt: skip
    progressing = running_job(alice, "ppo-progressing")
    say(progressing, {"kind": "phase", "phase": "training"}, at=now - timedelta(minutes=9))
    train(progressing, range(0, 420, 6), now)
    say(progressing, {"kind": "checkpoint", "step": 400, "path": "/out/ckpt/global_step_400"})
    say(progressing, {"kind": "ray", "expected_nodes": 2, "alive_nodes": 2, "gpus": 16},
        {"kind": "heartbeat"})  # fmt: skip
    yield progressing, "Progressing"
    stalled = running_job(alice, "ppo-stalled")
    train(stalled, range(0, 300, 5), now - timedelta(minutes=6))
    say(stalled, {"kind": "heartbeat"})
    yield stalled, "Stalled"
    degraded = running_job(alice, "ppo-degraded")
    train(degraded, range(0, 200, 4), now)
    say(degraded, {"kind": "ray", "expected_nodes": 4, "alive_nodes": 3, "gpus": 24})
    yield degraded, "Degraded"
    done = running_job(alice, "ppo-succeeded", stop_on_completion=True)
    train(done, range(0, 1001, 20), now - timedelta(seconds=30))
    say(done, {"kind": "checkpoint", "step": 1000, "path": "/out/ckpt/global_step_1000"})
    say(done, {"kind": "completion", "outcome": "succeeded", "exit_code": 0,
               "message": "runner.run() returned after 1000 steps"})  # fmt: skip
    yield done, "Succeeded"


@pytest.mark.django_db(transaction=True)
def test_it_shows_the_workload_beside_the_kubernetes_phase_in_both_languages(
    page: Page, live_server: object, alice: User, screenshots: Path
) -> None:
    base = str(live_server)
    log_in(page, base)
    for job, state in list(jobs(alice)):
        phase = "Stopped" if state == "Succeeded" else "Running"
        for language in ("en", "zh-hans"):
            page.context.add_cookies([{"name": "django_language", "value": language, "url": base}])
            for width_name, width in WIDTHS.items():
                page.set_viewport_size({"width": width, "height": 900})
                fresh()
                page.goto(f"{base}/jobs/{job.pk}/")
                panel = page.locator("#workload")
                expect(panel).to_have_attribute("data-workload-state", state)
                expect(panel.locator(f'.workload-state [data-status="{state}"]')).to_be_visible()
                expect(page.locator(f'h1 [data-status="{phase}"]')).to_be_visible()
                name = f"workload-{state.lower()}-{language}-{width_name}.png"
                panel.screenshot(path=str(screenshots / name))
    for language, width_name in (("en", "wide"), ("zh-hans", "phone")):
        page.context.add_cookies([{"name": "django_language", "value": language, "url": base}])
        page.set_viewport_size({"width": WIDTHS[width_name], "height": 900})
        fresh()
        page.goto(f"{base}/jobs/")
        expect(page.locator('td.workload [data-status="Stalled"]')).to_be_visible()
        name = f"jobs-list-workload-{language}-{width_name}.png"
        page.screenshot(path=str(screenshots / name), full_page=True)
