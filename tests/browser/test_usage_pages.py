"""The GPU usage pages in a real browser (issue 33, Show): the Usage page, the dashboard's
panel of GPUs held by runs that are not progressing, and the job page's GPU-hours, in English
and 简体中文, at 1400 and 390 px. Each is saved in the screenshots folder to be looked at."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Page, expect

from console.models import Cluster, Membership, Project
from jobs.choices import JobPhase, UsageClass
from jobs.models import Job
from tests.browser.conftest import PASSWORD, log_in, shoot
from tests.conftest import open_cluster, open_project
from tests.usage.test_api import held
from usage.models import PodUtilisation

pytestmark = pytest.mark.browser


@pytest.fixture
def alice(transactional_db: None) -> User:
    user = User.objects.create_user("alice", password=PASSWORD)
    Membership.objects.create(user=user, project=open_project("vision"))
    return user


def jobs(alice: User) -> dict[str, Job]:
    """A run that progressed then stalled (8 GPUs held now), one that finished but holds 4, one
    that progresses: the last six hours."""
    project = Project.objects.get(name="vision")
    cluster: Cluster = open_cluster("gpu-a", namespace="default")
    now = timezone.now().replace(microsecond=0)
    made = {}
    for name in ("ppo-stalled", "sft-finished", "grpo-ok"):
        made[name] = Job.objects.create(
            project=project, cluster=cluster, name=name, namespace="default", owner=alice,
            spec={"tasks": [], "policies": {"stop_when_idle_minutes": 120}},
            phase=JobPhase.RUNNING, started_at=now - timedelta(hours=6),
        )  # fmt: skip
    hours = [now - timedelta(hours=h) for h in (6, 5, 3, 2, 1)]
    held(made["ppo-stalled"], UsageClass.STARTING, 8, hours[0], hours[0] + timedelta(minutes=20))
    held(made["ppo-stalled"], UsageClass.PROGRESSING, 8, hours[0] + timedelta(minutes=20), hours[2])
    held(made["ppo-stalled"], UsageClass.STALLED, 8, hours[2], None)
    held(made["sft-finished"], UsageClass.PROGRESSING, 4, hours[1], hours[3])
    held(made["sft-finished"], UsageClass.FINISHED, 4, hours[3], None)
    held(made["grpo-ok"], UsageClass.SILENT, 2, hours[1], hours[4])
    held(made["grpo-ok"], UsageClass.PROGRESSING, 2, hours[4], None)
    # What the DCGM exporter said of the stalled run: busy GPUs while it progressed, then a hung
    # collective at 97 % (it informs: the run stays stalled).
    PodUtilisation.objects.create(
        job=made["ppo-stalled"], run=1, cluster=cluster, pod_uid="ppo-0", pod_name="worker-0",
        gpus=8, percent=97.0, measured_at=now, counted_until=now,
        busy_gpu_seconds=8 * 2.5 * 3600, low_gpu_seconds=8 * 0.3 * 3600,
    )  # fmt: skip
    return made


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_it_shows_the_usage_pages(
    page: Page, live_server: object, alice: User, screenshots: Path, language: str
) -> None:
    made = jobs(alice)
    base = str(live_server)
    log_in(page, base)
    if language != "en":
        page.select_option("#language", language)
        page.click("form:has(#language) button")
        expect(page.locator("html")).to_have_attribute("lang", language)
    for width, height in ((1400, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{base}/usage/?period=day&group_by=job")
        expect(page.locator(".usage-table")).to_be_visible()
        expect(page.locator(".usage-time rect.u-stalled").first).to_be_attached()
        expect(page.locator(".usage-table a", has_text="ppo-stalled")).to_be_visible()
        shoot(page, screenshots, f"usage-{language}-{width}.png")
        page.goto(f"{base}/")
        panel = page.locator(".usage-held")
        expect(panel.locator('tr[data-held="ppo-stalled"] button')).to_be_visible()
        expect(panel.locator('tr[data-held="sft-finished"]')).to_be_visible()
        expect(panel.locator('tr[data-held="grpo-ok"]')).to_have_count(0)
        shoot(page, screenshots, f"usage-dashboard-{language}-{width}.png")
        page.goto(f"{base}/jobs/{made['ppo-stalled'].pk}/#usage")
        expect(page.locator("#usage svg.usage-bar")).to_be_visible()
        expect(page.locator("#usage td", has_text="97 %")).to_be_visible()
        page.locator("#usage").screenshot(
            path=str(screenshots / f"usage-job-{language}-{width}.png")
        )
