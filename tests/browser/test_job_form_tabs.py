"""The create page in a real browser: the Form and YAML tabs show one spec, so switching carries
what was typed across, both ways, errors included; with JavaScript (htmx replaces the spec in
place, focus on the tab shown, nothing blocked by the CSP) and without it (the tabs post the
spec). Screenshots at 1400 px and 390 px, in English and 简体中文, go to the screenshots folder
(`make screenshots` refreshes docs/screenshots/)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from playwright.sync_api import Browser, ConsoleMessage, Page, Response, expect

from console.models import Membership
from jobs.models import Job
from tests.browser.conftest import log_in
from tests.conftest import open_cluster, open_project

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def alice(transactional_db: None) -> User:
    user = User.objects.create_user("alice", password="a-long-password")
    Membership.objects.create(user=user, project=open_project("vision"))
    open_cluster("gpu-a", kubeconfig="", namespace="default")
    return user


@pytest.fixture
def no_script_page(browser: Browser, browser_context_args: dict[str, Any]) -> Iterator[Page]:
    context = browser.new_context(**browser_context_args, java_script_enabled=False)
    yield context.new_page()
    context.close()


def fill_the_form(page: Page, replicas: str = "3") -> None:
    page.fill("#id_name", "ppo-math")
    page.select_option("#id_cluster", "gpu-a")
    page.fill("#id_roles-0-role", "learner")
    page.fill("#id_roles-0-image", "rlinf/rlinf:0.3")
    page.fill("#id_roles-0-replicas", replicas)
    page.fill("#id_roles-0-command", "python -m rlinf.train")
    page.fill("#id_roles-0-env", "RAY_ADDRESS=auto")


def switch_to(page: Page, tab: str) -> None:
    page.click(f'.tabs button[name="switch"][value="{tab}"]')
    label = {"yaml": "YAML", "form": "Form"}[tab]
    expect(page.locator('#job-spec .tabs [aria-current="page"]')).to_have_text(label)


def shown_yaml(page: Page) -> Any:
    return yaml.safe_load(page.input_value("#id_yaml"))


def mark(page: Page, in_place: bool) -> None:
    """With JavaScript only the create buttons load a page: a mark set on the window after a
    load must still be there after the switches that follow."""
    if in_place:
        page.evaluate("window.loaded = true")


def still_marked(page: Page, in_place: bool) -> None:
    if in_place:
        assert page.evaluate("window.loaded") is True, "a tab switch loaded a new page"


def walk_both_ways(page: Page, in_place: bool) -> None:
    """Form -> YAML -> edited YAML -> Form, then errors from the form to YAML and back."""
    mark(page, in_place)
    fill_the_form(page)
    switch_to(page, "yaml")
    task = shown_yaml(page)["tasks"][0]
    assert shown_yaml(page)["name"] == "ppo-math"
    assert (task["role"], task["replicas"], task["env"]) == ("learner", 3, {"RAY_ADDRESS": "auto"})
    page.fill("#id_yaml", page.input_value("#id_yaml").replace("replicas: 3", "replicas: 5"))
    switch_to(page, "form")
    expect(page.locator("#id_roles-0-replicas")).to_have_value("5")
    expect(page.locator("#id_roles-0-command")).to_have_value("python -m rlinf.train")
    still_marked(page, in_place)
    page.fill("#id_roles-0-replicas", "three")
    page.click("button.primary")
    expect(page.locator("#id_roles-0-replicas_error")).to_have_text("Must be a whole number.")
    mark(page, in_place)
    switch_to(page, "yaml")
    expect(page.locator("#id_yaml_error")).to_contain_text("tasks.0.replicas: Must be a whole")
    page.fill("#id_yaml", page.input_value("#id_yaml").replace("replicas: three", "replicas: -1"))
    page.click("button.primary")
    expect(page.locator("#id_yaml_error")).to_contain_text("tasks.0.replicas: Must be at least 0.")
    mark(page, in_place)
    switch_to(page, "form")
    expect(page.locator("#id_roles-0-replicas_error")).to_have_text("Must be at least 0.")
    expect(page.locator("#id_roles-0-replicas")).to_have_value("-1")
    still_marked(page, in_place)
    assert not Job.objects.exists()


def test_it_carries_the_spec_between_the_tabs_in_place(
    page: Page, live_server: object, alice: User, screenshots: Path
) -> None:
    problems: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        """CSP refusals and htmx errors; failed loads are checked by URL below."""
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            problems.append(message.text)

    def on_response(response: Response) -> None:
        if response.status >= 400 and not response.url.endswith("/favicon.ico"):
            problems.append(f"{response.status} {response.url}")

    page.on("console", on_console)
    page.on("response", on_response)
    page.set_viewport_size({"width": 1400, "height": 900})
    log_in(page, str(live_server))
    page.goto(f"{live_server}/jobs/new/")
    walk_both_ways(page, in_place=True)
    # focus moves once htmx has settled the swap (static/job-form.js): waited for, not read at once
    expect(page.locator("#job-spec .tabs [aria-current]")).to_be_focused()
    page.screenshot(path=str(screenshots / "job-new-form-errors.png"), full_page=True)
    switch_to(page, "yaml")
    page.screenshot(path=str(screenshots / "job-new-yaml-errors.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(screenshots / "job-new-yaml-phone.png"), full_page=True)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the create page scrolls sideways on a phone ({width} px)"
    assert not problems, problems


def test_it_carries_the_spec_between_the_tabs_without_javascript(
    no_script_page: Page, live_server: object, alice: User
) -> None:
    log_in(no_script_page, str(live_server))
    no_script_page.goto(f"{live_server}/jobs/new/")
    walk_both_ways(no_script_page, in_place=False)


def test_it_switches_in_chinese(
    page: Page, live_server: object, alice: User, screenshots: Path
) -> None:
    log_in(page, str(live_server))
    page.goto(f"{live_server}/jobs/new/")
    page.select_option("#language", "zh-hans")
    page.click("form:has(#language) button")
    expect(page.locator("#language")).to_have_value("zh-hans")
    fill_the_form(page, replicas="three")
    page.click("button.primary")
    page.click('.tabs button[name="switch"][value="yaml"]')
    expect(page.locator("#id_yaml_error")).to_contain_text("tasks.0.replicas: 必须是整数。")
    page.set_viewport_size({"width": 1400, "height": 900})
    page.screenshot(path=str(screenshots / "job-new-yaml-zh.png"), full_page=True)
    page.click('.tabs button[name="switch"][value="form"]')
    expect(page.locator("#id_roles-0-replicas_error")).to_have_text("必须是整数。")
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(screenshots / "job-new-form-zh-phone.png"), full_page=True)
