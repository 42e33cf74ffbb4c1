"""The logs of a Job's pod in a real browser (issue 10, item 1): a member opens the Logs tab of
a running Job, sees the tail, sees new lines appear while following (the view stays scrolled to
the bottom), and searches the shown lines as she types. Screenshots at 1400 px and 390 px, in
English and Chinese, go to the screenshots folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, ViewportSize, expect

from console.models import Cluster, Membership
from jobs.models import Job
from jobs.operations import create_job
from jobs.spec import JobSpec, TaskSpec
from tests.browser import conftest
from tests.browser.conftest import Syncer, shoot
from tests.conftest import make_operator, open_project

pytestmark = pytest.mark.browser

LIVE = 60_000  # an upper bound for a busy machine; every wait ends at the event it waits for
WIDE: ViewportSize = {"width": 1400, "height": 900}
PHONE: ViewportSize = {"width": 390, "height": 844}
LINES = "#log-view pre.log .log-line"
SHOWN = "#log-view pre.log .log-line:not([hidden])"


@pytest.fixture
def alice(transactional_db: None) -> User:
    user = User.objects.create_user("alice", password=conftest.PASSWORD)
    Membership.objects.create(user=user, project=open_project("vision"))
    return user


@pytest.fixture
def training(alice: User, sim_cluster: Cluster) -> Job:
    train = TaskSpec(role="worker", replicas=1, image="rlinf/trainer:0.4",
                     command=["sim", "run", "3600"])  # fmt: skip
    return create_job(alice, JobSpec(name="ppo-math", cluster="sim", tasks=[train]))


@pytest.fixture
def chinese_page(browser: Browser, live_server: Any) -> Iterator[Page]:
    context = browser.new_context(locale="zh-CN", timezone_id="UTC", viewport=WIDE)
    page = context.new_page()
    yield page
    context.close()


def open_logs(page: Page, base: str, job: Job) -> None:
    conftest.log_in(page, base, "alice", landing="/jobs/")
    page.goto(f"{base}/jobs/{job.pk}/")
    expect(page.locator('#job-status h1 .badge[data-status="Running"]')).to_be_visible(timeout=LIVE)
    page.click("#logs-tab")
    expect(page.locator(LINES).first).to_have_text("[sim] sim run 3600", timeout=LIVE)


def count(page: Page, selector: str) -> int:
    return int(page.evaluate(f"document.querySelectorAll('{selector}').length"))


def test_it_follows_and_searches_the_tail_of_a_pod(
    page: Page, chinese_page: Page, live_server: Any, training: Job, syncer: Syncer,
    screenshots: Path,
) -> None:  # fmt: skip
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_viewport_size(WIDE)
    base = str(live_server)
    open_logs(page, base, training)

    # New lines appear while following, and the view stays at the bottom.
    before = count(page, LINES)
    page.wait_for_function(
        f"() => document.querySelectorAll('{LINES}').length > {before}", timeout=LIVE
    )
    at_bottom = "(log) => log.scrollTop + log.clientHeight >= log.scrollHeight - 8"
    assert page.locator("pre.log").evaluate(at_bottom)
    shoot(page, screenshots, "job-logs-wide.png")

    # Searching hides the other lines at once, and keeps hiding them in the next refreshes.
    page.fill("#log-q", "WORKING FOR")
    expect(page.locator(SHOWN)).to_have_count(1)
    expect(page.locator(SHOWN)).to_have_text("[sim] working for 3600s, then exiting 0")
    expect(page.locator("[data-log-matches]")).to_have_text("1")
    total = count(page, LINES)
    page.wait_for_function(
        f"() => document.querySelectorAll('{LINES}').length > {total}", timeout=LIVE
    )
    expect(page.locator(SHOWN)).to_have_count(1)
    page.fill("#log-q", "")
    expect(page.locator(SHOWN)).to_have_count(count(page, LINES))

    page.set_viewport_size(PHONE)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"page is {width} px wide"
    shoot(page, screenshots, "job-logs-phone.png")

    conftest.log_in(chinese_page, base, "alice", landing="/jobs/")
    chinese_page.goto(f"{base}/jobs/{training.pk}/logs/")
    expect(chinese_page.locator("nav.tabs")).to_contain_text("日志")
    expect(chinese_page.locator(LINES).first).to_be_visible(timeout=LIVE)
    shoot(chinese_page, screenshots, "job-logs-zh.png")
    assert errors == []


def test_it_shows_an_operator_the_pods_events(
    page: Page, live_server: Any, training: Job, syncer: Syncer, screenshots: Path
) -> None:
    """Spec §Pod and Worker: live Kubernetes events are for authorised operators."""
    make_operator(User.objects.create_user("olga", password=conftest.PASSWORD))
    page.set_viewport_size(WIDE)
    base = str(live_server)
    conftest.log_in(page, base, "olga", landing="/jobs/")
    page.goto(f"{base}/jobs/{training.pk}/")
    expect(page.locator('#job-status h1 .badge[data-status="Running"]')).to_be_visible(timeout=LIVE)
    page.goto(f"{base}/jobs/{training.pk}/logs/")
    expect(page.locator(".events-table")).to_contain_text("Scheduled")
    expect(page.locator('input[name="previous"]')).to_be_visible()
    shoot(page, screenshots, "job-logs-operator.png")
