"""Notifications in a real browser (issue 32 §Show): add a channel, send a test and read the
platform's answer, subscribe from the Job page with Notify me, see the delivery log once a Job
failed; at 1400 px and 390 px, in English and 简体中文. Screenshots go to the screenshots folder
to be looked at."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Page, expect

from console.models import Cluster, Membership
from jobs.choices import JobPhase
from jobs.models import Job
from notify.models import Subscription
from notify.outbound import forget_pools
from notify.tasks import drain_outbox
from notify.watch import after_cycle
from tests.browser.conftest import log_in
from tests.conftest import KUBECONFIG, open_cluster, open_project
from tests.notify.receivers import Receiver, receiving

pytestmark = pytest.mark.browser


@pytest.fixture
def alice(transactional_db: None) -> User:
    user = User.objects.create_user("alice", password="a-long-password")
    Membership.objects.create(user=user, project=open_project("vision"))
    return user


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    settings.TRAINYARD_NOTIFY_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    with receiving("/hooks/demo-token-1234") as found:
        found.default = (200, "ok", {})
        yield found
    forget_pools()  # its kept-alive connections go with the receiver


def test_it_adds_a_channel_tests_it_subscribes_and_logs_deliveries(
    page: Page, live_server: Any, alice: User, receiver: Receiver, screenshots: Path
) -> None:
    base = str(live_server)
    cluster = open_cluster("gpu-a", kubeconfig=KUBECONFIG, namespace="default")
    job = Job.objects.create(
        project=alice.memberships.get().project, cluster=cluster, name="ppo-7b", owner=alice,
        namespace="default", spec={"tasks": []}, phase=JobPhase.RUNNING,
    )  # fmt: skip
    page.set_viewport_size({"width": 1400, "height": 900})
    log_in(page, base)
    page.get_by_role("link", name="Notifications").click()
    expect(page.get_by_role("heading", name="Notifications", level=1)).to_be_visible()
    page.fill("#channel-name", "team hook")
    page.select_option("#channel-kind", "webhook")
    page.fill("#channel-target", receiver.url)
    page.get_by_role("button", name="Add channel").click()
    expect(page.get_by_text("Channel team hook added")).to_be_visible()
    expect(page.locator(".notify-table")).not_to_contain_text("demo-token")
    page.get_by_role("button", name="Send a test to team hook").click()
    expect(page.get_by_text("The platform answered: HTTP 200: ok")).to_be_visible()
    assert len(receiver.received) == 1

    page.goto(f"{base}/jobs/{job.pk}/")
    page.get_by_role("button", name="Notify me").click()
    expect(page.get_by_text("You will be told about ppo-7b on team hook")).to_be_visible()
    assert Subscription.objects.get().job == job

    Job.objects.filter(pk=job.pk).update(phase=JobPhase.FAILED)
    after_cycle(Cluster.objects.get(pk=cluster.pk), {job.pk}, {}, timezone.now())
    drain_outbox()  # as the commit of the cycle's transaction starts it
    assert receiver.received[-1].json()["type"] == "job.failed"
    page.goto(f"{base}/notifications/")
    log = page.locator("#deliveries + .table-wrap")
    expect(log).to_contain_text("job.failed")
    expect(log).to_contain_text("ppo-7b")
    page.screenshot(path=str(screenshots / "notifications.png"), full_page=True)

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width == 390  # the tables scroll inside their frames, the page does not
    page.screenshot(path=str(screenshots / "notifications-phone.png"), full_page=True)

    page.set_viewport_size({"width": 1400, "height": 900})
    page.select_option("#language", "zh-hans")
    page.get_by_role("button", name="Switch").click()
    expect(page.get_by_role("heading", name="通知", level=1)).to_be_visible()
    expect(page.get_by_role("heading", name="投递记录")).to_be_visible()
    page.screenshot(path=str(screenshots / "zh-notifications.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{base}/jobs/{job.pk}/")
    expect(page.get_by_role("button", name="通知我")).to_be_visible()
    page.screenshot(path=str(screenshots / "zh-job-notify-phone.png"), full_page=True)
