"""Why a run failed, in a real browser (issue 34, items 2 and 5): an operator opens a Failed
Job, reads the banner that names its NCCL timeout, follows its link to the line in the kept log,
and picks the runs kept (and not kept) on the Logs tab; in English and 简体中文, at 1400 and
390 px. The kept log is simcluster's `sim fail nccl-timeout` output, judged for real
(failures.judge), stored in the filesystem storage as in production."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, ViewportSize, expect

from console.models import Membership
from failures import judge, store
from failures.models import KeptLog
from jobs.choices import JobPhase, PodPhase, TaskPhase
from jobs.models import Job, Task
from simcluster.behaviour import FAILURES
from tests.browser import conftest
from tests.browser.conftest import shoot
from tests.conftest import make_operator, open_cluster, open_project
from workers.models import PodInstance

pytestmark = pytest.mark.browser

WIDE: ViewportSize = {"width": 1400, "height": 900}
PHONE: ViewportSize = {"width": 390, "height": 844}
STARTED = datetime(2026, 3, 2, 3, 10, tzinfo=UTC)
POD = "grpo-worker-2"


def stamped(lines: list[str], at: datetime) -> str:
    return "".join(f"{at.isoformat().replace('+00:00', 'Z')} {line}\n" for line in lines)


@pytest.fixture(autouse=True)
def kept_in_tmp(settings: Any, tmp_path: Path) -> None:
    settings.STORAGES = {
        **settings.STORAGES,
        "kept_logs": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "kept")},
        },
    }


@pytest.fixture
def failed(transactional_db: None) -> Job:
    """A Failed Job whose worker-2 died of an NCCL timeout at 03:12 after restarting once: the
    run before (restart 0) was not kept, the last (restart 1) was."""
    olga = make_operator(User.objects.create_user("olga", password=conftest.PASSWORD))
    project = open_project("vision")
    Membership.objects.create(user=olga, project=project)
    job = Job.objects.create(
        project=project, cluster=open_cluster("gpu-a"), name="grpo", namespace="default",
        owner=olga, spec={"tasks": []}, phase=JobPhase.FAILED,
    )  # fmt: skip
    task = Task.objects.create(job=job, role="worker", template={}, phase=TaskPhase.FAILED)
    PodInstance.objects.create(
        task=task, uid="uid-2", pod_name=POD, phase=PodPhase.FAILED, restart_count=1,
        first_seen_at=STARTED, last_seen_at=STARTED + timedelta(minutes=3),
    )  # fmt: skip
    steps = [f"step {n} loss=0.{80 - n}" for n in range(40)]
    text = stamped(steps, STARTED) + stamped(
        FAILURES["nccl-timeout"], STARTED + timedelta(minutes=2)
    )
    store.save(job, KeptLog.Why.FAILED, [store.Tail(POD, "uid-2", "main", 1, text, False)], STARTED)
    finding = judge.judge(job.pk, STARTED + timedelta(minutes=3))
    assert finding is not None and finding.code == "nccl_timeout"
    return job


@pytest.fixture
def chinese(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(locale="zh-CN", timezone_id="UTC", viewport=WIDE)
    yield context.new_page()
    context.close()


def check_width(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"], f"page is {width} px wide"  # type: ignore[index]


def test_it_names_the_failure_and_opens_its_line_in_the_kept_log(
    page: Page, chinese: Page, live_server: Any, failed: Job, screenshots: Path
) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    base = str(live_server)
    page.set_viewport_size(WIDE)
    conftest.log_in(page, base, "olga", landing="/jobs/")
    expect(page.locator("td.message .failure-label")).to_have_text(
        "Why: NCCL timeout (network/collective)"
    )
    page.goto(f"{base}/jobs/{failed.pk}/")
    banner = page.locator("#failure")
    expect(banner).to_contain_text(f"Failed: NCCL timeout (network/collective) on {POD} at")
    expect(banner).to_contain_text("first error: [Rank 1] Watchdog caught collective operation")
    expect(banner).to_contain_text("What to do: A collective")
    shoot(page, screenshots, "failure-banner-wide.png")
    page.set_viewport_size(PHONE)
    check_width(page)
    shoot(page, screenshots, "failure-banner-phone.png")

    # The link opens the kept log at the line, shown and scrolled to.
    page.set_viewport_size(WIDE)
    page.click("#failure-log-link")
    line = page.locator("pre.log .log-line:target")
    expect(line).to_contain_text("Watchdog caught collective operation timeout")
    expect(line).to_be_in_viewport()
    expect(page.locator("#kept-log-head")).to_contain_text("run 1, restart 1")

    # The picker: the run kept, and the run before it, not kept.
    rows = page.locator("#kept-runs tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("the Job turned Failed")
    expect(rows.nth(1)).to_contain_text("not kept")
    page.fill("#log-q", "DistBackendError")
    expect(page.locator("pre.log .log-line:not([hidden])")).to_have_count(2)
    expect(page.locator("[data-log-matches]")).to_have_text("2")
    shoot(page, screenshots, "kept-logs-wide.png")
    page.set_viewport_size(PHONE)
    check_width(page)
    shoot(page, screenshots, "kept-logs-phone.png")

    conftest.log_in(chinese, base, "olga", landing="/jobs/")
    chinese.goto(f"{base}/jobs/{failed.pk}/")
    expect(chinese.locator("#failure")).to_contain_text(
        f"失败： NCCL 超时（网络/集合通信），在 {POD} 上"
    )
    expect(chinese.locator("#failure")).to_contain_text("怎么办：")
    shoot(chinese, screenshots, "failure-banner-zh-wide.png")
    chinese.set_viewport_size(PHONE)
    check_width(chinese)
    shoot(chinese, screenshots, "failure-banner-zh-phone.png")
    chinese.click("#failure-log-link")
    expect(chinese.locator("#kept-runs")).to_contain_text("未保留")
    expect(chinese.locator("#kept-runs")).to_contain_text("Job 变为 Failed")
    check_width(chinese)
    shoot(chinese, screenshots, "kept-logs-zh-phone.png")
    chinese.set_viewport_size(WIDE)
    shoot(chinese, screenshots, "kept-logs-zh-wide.png")
    assert errors == []
