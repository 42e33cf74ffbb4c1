"""`manage.py issue_token USERNAME [--name N]`: the token is printed once, only its hash stored."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from console.management.commands.issue_token import Command
from console.models import ApiToken


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def issue(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("issue_token", *args, stdout=out, stderr=err)
    return out.getvalue().strip(), err.getvalue()


def test_it_prints_a_token_that_opens_the_api(alice: User) -> None:
    plain, warning = issue("alice", "--name", "laptop")
    record = ApiToken.objects.get()
    assert (record.user, record.name) == (alice, "laptop")
    assert record.token_hash == ApiToken.hash(plain) != plain
    assert "cannot be shown again" in warning
    response = Client().get("/api/v1/jobs", headers={"Authorization": f"Bearer {plain}"})
    assert response.status_code == 200


def test_every_token_is_new(alice: User) -> None:
    assert issue("alice")[0] != issue("alice")[0]
    assert ApiToken.objects.filter(user=alice).count() == 2


def test_it_refuses_an_unknown_user(db: None) -> None:
    with pytest.raises(CommandError, match="No user named 'nobody'"):
        issue("nobody")
    assert not ApiToken.objects.exists()


def test_an_unknown_user_exits_with_status_1(db: None, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        Command().run_from_argv(["manage.py", "issue_token", "nobody"])
    assert exited.value.code == 1
    assert "No user named 'nobody'" in capsys.readouterr().err


def test_it_refuses_an_inactive_user(alice: User) -> None:
    User.objects.filter(pk=alice.pk).update(is_active=False)
    with pytest.raises(CommandError, match="inactive"):
        issue("alice")
