"""The API tokens page in a real browser: reached from the user menu, a new token's secret shown
once and accepted by the API, revoked with a POST; at 1400 px and 390 px, in English and 简体中文.
Screenshots go to the screenshots folder
(`make screenshots` refreshes docs/screenshots/) to be looked at."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from console.models import ApiToken, Membership
from tests.browser.conftest import log_in
from tests.conftest import open_project

pytestmark = pytest.mark.browser


@pytest.fixture
def alice(transactional_db: None) -> User:
    user = User.objects.create_user("alice", password="a-long-password")
    Membership.objects.create(user=user, project=open_project("vision"))
    ApiToken.issue(user, name="ci-runner")
    return user


def test_it_creates_shows_once_and_revokes_a_token(
    page: Page, live_server: object, alice: User, screenshots: Path
) -> None:
    base = str(live_server)
    page.set_viewport_size({"width": 1400, "height": 900})
    log_in(page, base)
    page.get_by_role("link", name="API tokens").click()
    expect(page.get_by_role("heading", name="API tokens", level=1)).to_be_visible()
    page.fill("#id_name", "laptop")
    page.get_by_role("button", name="Create token").click()
    secret = page.locator("#new-token").input_value()
    assert secret.startswith("ty_")
    expect(page.locator("#token-" + str(ApiToken.objects.get(name="laptop").pk))).to_be_visible()
    answer = page.request.get(f"{base}/api/v1/jobs", headers={"Authorization": f"Bearer {secret}"})
    assert answer.status == 200
    page.screenshot(path=str(screenshots / "tokens.png"), full_page=True)

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{base}/account/tokens/")
    expect(page.locator("#new-token")).to_have_count(0)  # shown once
    page.screenshot(path=str(screenshots / "tokens-phone.png"), full_page=True)

    page.get_by_role("button", name="Revoke laptop").click()
    expect(page.get_by_text("Token laptop revoked")).to_be_visible()
    assert not ApiToken.objects.filter(name="laptop").exists()
    answer = page.request.get(f"{base}/api/v1/jobs", headers={"Authorization": f"Bearer {secret}"})
    assert answer.status == 401

    page.set_viewport_size({"width": 1400, "height": 900})
    page.select_option("#language", "zh-hans")
    page.get_by_role("button", name="Switch").click()
    expect(page.get_by_role("heading", name="API 令牌", level=1)).to_be_visible()
    page.screenshot(path=str(screenshots / "zh-tokens.png"), full_page=True)
