"""Onboarding in a real browser: a newcomer in no project finds "New job", learns what they lack
and that olga can grant it; olga, an operator (not staff), creates a project in the console,
adds the newcomer as a member and gives the project a cluster; the newcomer can then create a
job there. Screenshots of the pages at 1400 px and 390 px go to the screenshots folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, ViewportSize, expect

from console.models import Cluster, Membership
from tests.browser.conftest import log_in, shoot
from tests.conftest import make_operator

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDE: ViewportSize = {"width": 1400, "height": 900}
PHONE: ViewportSize = {"width": 390, "height": 844}


@pytest.fixture
def people(transactional_db: None) -> None:
    User.objects.create_user("nina", password="a-long-password")
    make_operator(User.objects.create_user("olga", password="a-long-password"))
    Cluster.objects.create(name="gpu-a", kubeconfig="", namespace="default")


def both_widths(page: Page, screenshots: Path, name: str) -> None:
    for width, viewport in (("wide", WIDE), ("phone", PHONE)):
        page.set_viewport_size(viewport)
        shoot(page, screenshots, f"{name}-{width}.png")
    page.set_viewport_size(WIDE)


def test_a_newcomer_is_told_who_can_add_them_and_an_operator_does_it_in_the_console(
    page: Page, browser: Browser, live_server: object, people: None, screenshots: Path
) -> None:
    base = str(live_server)
    log_in(page, base, "nina", landing="/jobs/")
    expect(page.locator("#cannot-create-note")).to_contain_text("you are a member of none")
    page.click("text=New job")
    card = page.locator("#cannot-create")
    expect(card).to_contain_text("You are not a member of any project")
    expect(card.locator("#operators")).to_contain_text("olga")
    both_widths(page, screenshots, "onboarding-cannot-create")

    operator = browser.new_page(viewport=WIDE)
    log_in(operator, base, "olga", landing="/projects/")
    operator.fill("#id_name", "robotics")
    operator.click("text=Create project")
    expect(operator.locator(".messages")).to_contain_text("Project robotics created.")
    operator.fill("#id_username", "nina")
    operator.select_option("#id_role", "member")
    operator.click("text=Add member")
    expect(operator.locator('tr[data-user="nina"]')).to_be_visible()
    operator.check('label:text-is("gpu-a") >> xpath=preceding-sibling::input')
    operator.click("text=Save clusters")
    expect(operator.locator(".messages")).to_contain_text("The clusters of robotics are saved.")
    both_widths(operator, screenshots, "onboarding-project")
    operator.goto(f"{base}/projects/")
    both_widths(operator, screenshots, "onboarding-projects")
    operator.close()

    assert Membership.objects.filter(user__username="nina", project__name="robotics").exists()
    page.goto(f"{base}/jobs/new/")
    expect(page.locator("#id_project")).to_have_value("robotics")
    expect(page.locator("#id_cluster option", has_text="gpu-a")).to_have_count(1)
