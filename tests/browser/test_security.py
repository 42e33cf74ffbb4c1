"""Security in a real browser (issue 12, item 5): every page works under the strict
Content-Security-Policy with no violation logged, and a page whose session ended while it
polled goes to the login form as a whole. The audit page is saved in the screenshots folder."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import ConsoleMessage, Page, expect

from console.models import Cluster, Membership, Project
from jobs.operations import create_job
from jobs.spec import parse_job_spec
from tests.browser.conftest import PASSWORD, Syncer, log_in, shoot
from tests.conftest import make_operator

pytestmark = pytest.mark.browser

PAGES = (
    "/", "/jobs/", "/jobs/{job}/", "/jobs/{job}/logs/", "/jobs/new/", "/jobs/{job}/clone/",
    "/workflows/",
    "/clusters/", "/nodes/", "/addons/", "/account/tokens/", "/audit/", "/api/v1/docs",
)  # fmt: skip
VIOLATION = re.compile(r"Content.Security.Policy|Refused to", re.IGNORECASE)


@pytest.fixture
def olga(transactional_db: None) -> User:
    """An operator who is also a member of `vision`, so that she can create a Job there."""
    user = make_operator(User.objects.create_user("olga", password=PASSWORD))
    Membership.objects.create(user=user, project=Project.objects.create(name="vision"))
    return user


def watch_console(page: Page) -> list[str]:
    """Every CSP violation the browser reports, as console messages or page errors."""
    seen: list[str] = []

    def on_message(message: ConsoleMessage) -> None:
        if VIOLATION.search(message.text):
            seen.append(message.text)

    page.on("console", on_message)
    page.on("pageerror", lambda error: seen.append(str(error)))
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation', e =>"
        " console.error('Content-Security-Policy violation: ' + e.violatedDirective));"
    )
    return seen


def test_every_page_works_under_the_csp_with_no_violation(
    page: Page, live_server: object, olga: User, sim_cluster: Cluster, syncer: Syncer,
    screenshots: Path,
) -> None:  # fmt: skip
    task = {"role": "w", "kind": "StatefulSet", "image": "rlinf/trainer:0.4"}
    spec = {"name": "train", "cluster": "sim", "tasks": [task]}
    job = create_job(olga, parse_job_spec(spec, olga))
    violations = watch_console(page)
    base = str(live_server)
    log_in(page, base, "olga")
    for path in PAGES:
        response = page.goto(base + path.format(job=job.pk))
        assert response is not None and response.ok, path
        assert "default-src 'self'" in response.headers["content-security-policy"], path
        page.wait_for_load_state("load")
    page.goto(f"{base}/jobs/{job.pk}/")
    with page.expect_response(lambda answer: "part=status" in answer.url, timeout=20_000):
        pass  # one live refresh of the status, swapped in by htmx under the policy
    page.locator("details.workers-details summary").first.click()
    expect(page.locator(".workers-slot").first).not_to_be_empty()
    page.goto(f"{base}/audit/")
    page.set_viewport_size({"width": 1400, "height": 900})
    shoot(page, screenshots, "audit-1400.png")
    page.set_viewport_size({"width": 390, "height": 844})
    shoot(page, screenshots, "audit-390.png")
    assert violations == []


def test_a_polling_page_whose_session_ended_goes_to_the_login_form(
    page: Page, live_server: object, olga: User
) -> None:
    base = str(live_server)
    log_in(page, base, "olga", landing="/clusters/")
    with time_machine.travel(timezone.now() + timedelta(hours=9)):
        expect(page).to_have_url(
            re.compile(r"/accounts/login/\?next=%2Fclusters%2F$"), timeout=20_000
        )
    expect(page.locator("#id_username")).to_be_visible()
    expect(page.locator("#cluster-rows")).to_have_count(0)
