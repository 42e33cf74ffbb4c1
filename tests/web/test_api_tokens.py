"""The API tokens page: every logged-in user lists, creates and revokes their own tokens; a new
token's secret is shown once and only its hash is stored."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from console.models import ApiToken

PAGE = "/account/tokens/"


def revoke_url(token: ApiToken) -> str:
    return f"/account/tokens/{token.pk}/revoke/"


def api_status(secret: str) -> int:
    response = Client().get("/api/v1/jobs", headers={"Authorization": f"Bearer {secret}"})
    return response.status_code


def shown_secret(html: str) -> str:
    match = re.search(r'id="new-token"[^>]*value="(ty_[^"]+)"', html)
    assert match, "no new token on the page"
    return match.group(1)


@pytest.fixture
def alices_token(alice: User) -> tuple[ApiToken, str]:
    return ApiToken.issue(alice, name="laptop")


def test_it_sends_an_anonymous_visitor_to_the_login_page(
    client: Client, alices_token: tuple[ApiToken, str]
) -> None:
    token, _ = alices_token
    assert client.get(PAGE)["Location"] == f"/accounts/login/?next={PAGE}"
    assert client.post(PAGE, {"name": "sneaky"}).status_code == 302
    assert client.post(revoke_url(token)).status_code == 302
    assert list(ApiToken.objects.values_list("name", flat=True)) == ["laptop"]


def test_it_lists_only_the_users_own_tokens(
    client: Client, alice: User, bob: User, alices_token: tuple[ApiToken, str]
) -> None:
    ApiToken.issue(bob, name="bobs-ci")
    client.force_login(alice)
    html = client.get(PAGE).content.decode()
    assert "laptop" in html and "bobs-ci" not in html
    assert "Created at" in html and "Last used at" in html
    assert 'id="new-token"' not in html


def test_it_is_linked_from_the_user_menu(client: Client, alice: User) -> None:
    client.force_login(alice)
    assert f'href="{PAGE}"' in client.get("/").content.decode()


def test_it_creates_a_token_and_shows_its_secret_once(client: Client, alice: User) -> None:
    client.force_login(alice)
    response = client.post(PAGE, {"name": "notebook"})
    assert response.status_code == 200
    secret = shown_secret(response.content.decode())
    token = ApiToken.objects.get(user=alice)
    assert (token.name, token.token_hash) == ("notebook", ApiToken.hash(secret))
    assert secret not in ApiToken.objects.values_list("token_hash", flat=True)
    assert api_status(secret) == 200
    assert secret not in client.get(PAGE).content.decode()


def test_it_refuses_a_token_without_a_name(client: Client, alice: User) -> None:
    client.force_login(alice)
    html = client.post(PAGE, {"name": "  "}).content.decode()
    assert 'aria-invalid="true"' in html and "This field is required." in html
    assert not ApiToken.objects.exists()


def test_it_revokes_the_users_own_token(
    client: Client, alice: User, alices_token: tuple[ApiToken, str]
) -> None:
    token, secret = alices_token
    client.force_login(alice)
    response = client.post(revoke_url(token), follow=True)
    assert response.redirect_chain == [(PAGE, 302)]
    assert "Token laptop revoked" in response.content.decode()
    assert not ApiToken.objects.exists()
    assert api_status(secret) == 401


def test_charlie_cannot_revoke_alices_token(
    client: Client, charlie: User, alices_token: tuple[ApiToken, str]
) -> None:
    token, secret = alices_token
    client.force_login(charlie)
    assert client.post(revoke_url(token)).status_code == 404
    assert ApiToken.objects.filter(pk=token.pk).exists()
    assert api_status(secret) == 200


def test_state_changes_are_post_only_and_need_the_csrf_token(
    alice: User, alices_token: tuple[ApiToken, str]
) -> None:
    token, _ = alices_token
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.get(revoke_url(token)).status_code == 405
    assert client.post(revoke_url(token)).status_code == 403
    assert client.post(PAGE, {"name": "forged"}).status_code == 403
    assert list(ApiToken.objects.values_list("name", flat=True)) == ["laptop"]
