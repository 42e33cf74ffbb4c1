"""The job page of a job whose pod cannot pull its image, read in 简体中文 and in English, at
1400 px and 390 px: the console's messages are in the reader's language and Kubernetes' message
is shown as written, labelled "from Kubernetes" (issue 8, item 12; spec §Task status)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Page, expect

from console.kube.observations import parse_pod, parse_statefulset
from console.models import Membership
from jobs.choices import PodPhase, TaskKind
from jobs.models import Job, Task
from jobs.operations import create_job
from jobs.spec import parse_job_spec
from jobs.status.lifecycle import TaskState, job_message
from jobs.status.observed import task_view
from jobs.status.problems import pod_reason
from tests.browser.conftest import log_in
from tests.conftest import KUBECONFIG, open_cluster, open_project
from tests.engine import k8s_json as k8s
from workers.models import Worker

pytestmark = pytest.mark.browser

WIDTHS = {"wide": 1400, "phone": 390}


@pytest.fixture
def alice(transactional_db: None) -> User:
    user = User.objects.create_user("alice", password="a-long-password")
    Membership.objects.create(user=user, project=open_project("vision"))
    return user


def image_pull_job(alice: User) -> Job:
    """A job as the sync leaves it when its pod cannot pull its image."""
    now = timezone.now()
    open_cluster("gpu-a", kubeconfig=KUBECONFIG, namespace="default", reachable=True,
                 last_synced_at=now)  # fmt: skip
    spec = {"name": "train", "cluster": "gpu-a", "tasks": [{"role": "worker", "replicas": 2,
                                                          "image": "rlinf:1"}]}  # fmt: skip
    job = create_job(alice, parse_job_spec(spec, alice))
    pod = parse_pod(k8s.image_pull_pod())
    sts = parse_statefulset(k8s.statefulset(replicas=2, ready=0))
    view = task_view(TaskKind.STATEFULSET, False, sts, [pod], {})
    task = Task.objects.get(job=job)
    Task.objects.filter(pk=task.pk).update(phase=view.phase, message=view.message, observed_at=now)
    aggregate = job_message([TaskState("worker", view.phase, view.message)])
    Job.objects.filter(pk=job.pk).update(message=aggregate, observed_at=now)
    reason, message = pod_reason(pod, {})
    Worker.objects.create(task=task, pod_name=pod.name, phase=PodPhase.PENDING, reason=reason,
                          message=message, node_name="node-1", last_reported_at=now)  # fmt: skip
    return job


@pytest.mark.django_db(transaction=True)
def test_it_shows_console_messages_in_the_readers_language_and_kubernetes_text_as_written(
    page: Page, live_server: object, alice: User, screenshots: Path
) -> None:
    job, base = image_pull_job(alice), str(live_server)
    log_in(page, base)
    for language, progress, label in (
        ("zh-hans", "0/2 个副本就绪", "来自 Kubernetes"),
        ("en", "0/2 replicas ready", "from Kubernetes"),
    ):
        page.context.add_cookies([{"name": "django_language", "value": language, "url": base}])
        for width_name, width in WIDTHS.items():
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(f"{base}/jobs/{job.pk}/")
            message = page.locator("tr.task-message td")
            expect(message).to_contain_text(progress)
            expect(message.locator(".kube-tag")).to_have_text(label)
            expect(message.locator("q[lang=en]")).to_contain_text('Back-off pulling image "ghcr')
            name = f"messages-job-image-pull-{language}-{width_name}.png"
            page.screenshot(path=str(screenshots / name), full_page=True)
            task = job.tasks.get()
            page.goto(f"{base}/jobs/{job.pk}/tasks/{task.pk}/workers/")
            row = page.locator("td.message").first
            expect(row.locator(".kube-tag")).to_have_text(label)
            expect(row.locator("q[lang=en]")).to_contain_text('Back-off pulling image "ghcr')
            name = f"messages-workers-image-pull-{language}-{width_name}.png"
            page.screenshot(path=str(screenshots / name), full_page=True)
