"""A newcomer's first job on the embedded default, in a real browser: log in, create a job with the
form, watch it go Pending -> Running on its page (spec §Job status), open a task's Worker rows
(pod name, node, IP, phase, last reported at: spec §Pod and Worker status), stop it, resume it,
clone it and delete it. Each page is saved in the screenshots folder
(`make screenshots` refreshes docs/screenshots/) to be looked at."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Locator, Page, expect

from console.models import Cluster, Membership, Project
from jobs.models import Job
from jobs.operations import create_job
from jobs.spec import JobSpec, TaskSpec
from tests.browser import conftest
from tests.browser.conftest import Syncer, shoot
from tests.conftest import open_cluster, open_project

pytestmark = pytest.mark.browser

# The job page polls every 5 s; a sync cycle every 0.5 s; pods start in about a second. LIVE is
# only an upper bound for a busy machine: every wait below ends at the event it waits for.
LIVE = 60_000


def badge(page: Page, phase: str) -> Locator:
    return page.locator(f'#job-status h1 .badge[data-status="{phase}"]')


@pytest.fixture
def newcomer(transactional_db: None) -> User:
    user = User.objects.create_user("alice", password="a-long-password")
    project = open_project("vision")
    Membership.objects.create(user=user, project=project)
    return user


def log_in(page: Page, base: str) -> None:
    conftest.log_in(page, base, landing="/jobs/")


def create_through_the_form(page: Page, base: str, folder: Path) -> None:
    page.click("text=New job")
    expect(page.locator("h1")).to_have_text("New job")
    page.fill("#id_name", "first-run")
    page.fill("#id_roles-0-role", "Worker")
    page.fill("#id_roles-0-image", "rlinf/trainer:0.4")
    page.fill("#id_roles-0-command", "python -m rlinf.train --steps 100")
    page.fill("#id_roles-0-replicas", "2")
    page.fill("#id_roles-0-memory", "4Gi")
    page.fill("#id_roles-0-gpus", "1")
    page.click("button.primary:has-text('Create job')")
    error = page.locator("#id_roles-0-role_error")
    expect(error).to_contain_text("not a valid role")
    expect(page.locator("#id_roles-0-image")).to_have_value("rlinf/trainer:0.4")
    shoot(page, folder, "job-new-errors.png")
    page.fill("#id_roles-0-role", "worker")
    page.click("button.primary:has-text('Create job')")


@pytest.mark.django_db(transaction=True)
def test_it_walks_a_newcomer_from_login_to_delete(
    page: Page, live_server: object, newcomer: User, sim_cluster: Cluster, syncer: Syncer,
    screenshots: Path,
) -> None:  # fmt: skip
    base = str(live_server)
    log_in(page, base)
    shoot(page, screenshots, "jobs-list-empty.png")

    syncer.pause()
    create_through_the_form(page, base, screenshots)
    expect(page.locator(".messages")).to_contain_text("Job first-run created")
    expect(badge(page, "Pending")).to_be_visible()
    shoot(page, screenshots, "job-pending.png")

    syncer.resume()
    expect(badge(page, "Running")).to_be_visible(timeout=LIVE)
    expect(page.locator("td.workers-count").first).to_have_text("2", timeout=LIVE)
    page.click(".workers-row summary")
    workers = page.locator(".workers-table tbody tr")
    expect(workers).to_have_count(2)
    first = workers.first
    expect(first.locator("td.pod")).to_have_text("first-run-worker-0")
    expect(first.locator("td").nth(1)).to_contain_text("sim-node-")
    expect(first.locator("td.mono")).to_have_text(re.compile(r"\d+\.\d+\.\d+\.\d+"))
    expect(first.locator('.badge[data-status="Running"]')).to_be_visible()
    expect(first.locator("time")).to_have_attribute("datetime", re.compile(r"^\d{4}-"))
    expect(page.locator(".workers-table thead")).to_contain_text("Last reported at")
    with page.expect_response(lambda answer: "part=status" in answer.url, timeout=LIVE):
        pass  # one poll of the status part: the open rows stay open
    expect(first.locator("td.pod")).to_have_text("first-run-worker-0")
    shoot(page, screenshots, "job-running.png")

    page.click("button:has-text('Stop')")
    expect(page.locator(".messages")).to_contain_text("Stop requested")
    expect(badge(page, "Stopped")).to_be_visible()
    expect(page.locator(".layer-card").first).to_contain_text("true")
    shoot(page, screenshots, "job-stopped.png")

    syncer.pause()
    page.click("button:has-text('Resume')")
    expect(page.locator(".messages")).to_contain_text("Resume requested")
    expect(badge(page, "Pending")).to_be_visible()
    syncer.resume()
    expect(badge(page, "Running")).to_be_visible(timeout=LIVE)
    expect(page.locator(".layer-card").first).to_contain_text("2")  # run 2

    page.click("a:has-text('Clone')")
    expect(page.locator("#id_name")).to_have_value("first-run-2")
    expect(page.locator("#id_roles-0-image")).to_have_value("rlinf/trainer:0.4")
    shoot(page, screenshots, "job-clone.png")
    page.click("button.primary:has-text('Create the clone')")
    expect(page.locator(".messages")).to_contain_text("Job first-run-2 created")
    clone = Job.objects.get(name="first-run-2")
    assert clone.cloned_from is not None and clone.cloned_from.name == "first-run"

    original = Job.objects.get(name="first-run")
    page.goto(f"{base}/jobs/{original.pk}/")
    page.fill("#id_confirm", "first-rnu")
    page.click("button:has-text('Delete permanently')")
    expect(page.locator("#confirm-error")).to_contain_text("type the job name, first-run")
    shoot(page, screenshots, "job-delete-confirm.png")
    page.fill("#id_confirm", "first-run")
    page.click("button:has-text('Delete permanently')")
    expect(page).to_have_url(f"{base}/jobs/")
    expect(page.locator(".messages")).to_contain_text("Deletion of first-run requested")
    expect(page.locator("td.name")).to_have_text(["first-run-2"])


def seed_other_jobs(owner: User) -> None:
    """Jobs of an unreachable cluster, in every phase, for the list (their rows are stale)."""
    far = open_cluster(
        "gpu-far", kubeconfig="x", reachable=False, message="connection refused",
        last_synced_at=timezone.now() - timedelta(minutes=20),
    )  # fmt: skip
    project = Project.objects.get(name="vision")
    phases = [("ppo-sweep-3", "Running", "actor: Running; rollout: Running"),
              ("grpo-7b", "Failed", "trainer: Failed — BackoffLimitExceeded"),
              ("eval-math", "Succeeded", "eval: Succeeded"),
              ("sft-warmup", "Stopped", "")]  # fmt: skip
    for minutes, (name, phase, message) in enumerate(phases, start=1):
        Job.objects.create(
            project=project, cluster=far, name=name, namespace="rl", owner=owner, phase=phase,
            message=message, spec={"tasks": []}, stopped=phase == "Stopped",
            created_at=timezone.now() - timedelta(hours=minutes),
            observed_at=timezone.now() - timedelta(minutes=20 + minutes),
        )  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_it_points_at_an_image_that_cannot_be_pulled(
    page: Page, live_server: object, newcomer: User, sim_cluster: Cluster, syncer: Syncer,
    screenshots: Path,
) -> None:  # fmt: skip
    """Spec §Troubleshooting: layer 4 (image) is the first that looks wrong; also the pages no
    other step shows: the YAML tab, the Worker rows without JavaScript, a phone-sized job page."""
    task = TaskSpec(role="worker", replicas=1, image="rlinf/nonexistent:1")
    job = create_job(newcomer, JobSpec(name="bad-image", cluster="sim", tasks=[task]))
    seed_other_jobs(newcomer)
    base = str(live_server)
    log_in(page, base)
    expect(page.locator("td.name")).to_have_count(5)
    shoot(page, screenshots, "jobs-list.png")
    page.goto(f"{base}/jobs/{job.pk}/")
    first_wrong = page.locator(".walk li.first-wrong")
    expect(first_wrong).to_contain_text("Image cannot be pulled", timeout=LIVE)
    expect(first_wrong).to_contain_text("4. Image, resources, storage and network")
    shoot(page, screenshots, "job-image-pull.png")

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    shoot(page, screenshots, "job-phone.png")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page scrolls sideways on a phone ({width} px)"
    page.set_viewport_size({"width": 1280, "height": 800})

    task_pk = job.tasks.get().pk
    page.goto(f"{base}/jobs/{job.pk}/tasks/{task_pk}/workers/")
    expect(page.locator(".workers-table")).to_contain_text("ImagePullBackOff", timeout=LIVE)
    shoot(page, screenshots, "job-workers.png")
    page.goto(f"{base}/jobs/new/?mode=yaml")
    expect(page.locator("#id_yaml")).to_contain_text("cluster: sim")
    shoot(page, screenshots, "job-new-yaml.png")
