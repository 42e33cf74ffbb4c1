"""Hardening (issue 12, item 5): a clean deploy check, a strict CSP, login rate limits, session
timeouts that polling does not extend, API tokens that expire and end with the password, API docs
behind login with local assets, and no probing of other projects' Job names."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from cryptography.fernet import Fernet
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from console.models import ApiToken, Cluster, Project
from jobs.models import Job
from jobs.operations import create_job
from jobs.spec import parse_job_spec

POLL = {"HX-Request": "true", "X-Trainyard-Poll": "1", "HX-Current-URL": "http://testserver/jobs/"}


def production_check(**extra: str) -> subprocess.CompletedProcess[str]:
    # A production-like environment: none of the test run's own settings (the browser tests set
    # DJANGO_ALLOW_ASYNC_UNSAFE for their live server, which the deploy check rightly refuses).
    inherited = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("TRAINYARD_") and name != "DJANGO_ALLOW_ASYNC_UNSAFE"
    }
    env = inherited | {
        "TRAINYARD_DEBUG": "false",
        "TRAINYARD_SECRET_KEY": "k" + Fernet.generate_key().decode() * 2,
        "TRAINYARD_FIELD_KEYS": Fernet.generate_key().decode(),
        "TRAINYARD_ALLOWED_HOSTS": "trainyard.example.org",
        "TRAINYARD_SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto",
        "TRAINYARD_TRUSTED_PROXIES": "10.0.0.0/8",
        "TRAINYARD_METRICS_TOKEN": Fernet.generate_key().decode(),
        **extra,
    }
    command = [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"]
    return subprocess.run(
        command, cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_deploy_check_is_clean_with_production_settings() -> None:
    result = production_check()
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_the_deploy_check_fails_when_https_is_turned_off() -> None:
    result = production_check(TRAINYARD_SECURE_SSL_REDIRECT="false")
    assert result.returncode != 0 and "security.W008" in result.stderr


def test_every_page_carries_a_strict_content_security_policy(client: Client, alice: User) -> None:
    client.force_login(alice)
    for url in ("/accounts/login/", "/", "/jobs/", "/clusters/", "/account/tokens/"):
        policy = client.get(url)["Content-Security-Policy"]
        assert "default-src 'self'" in policy and "script-src 'self'" in policy
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy


def test_it_limits_failed_logins_per_account_with_a_clear_message(alice: User) -> None:
    client = Client()
    wrong = {"username": "alice", "password": "wrong"}
    statuses = [client.post("/accounts/login/", wrong).status_code for _ in range(10)]
    assert statuses == [200] * 10
    locked = client.post("/accounts/login/", {"username": "alice", "password": "password"})
    assert locked.status_code == 429
    assert "Too many failed logins" in locked.content.decode()
    assert "_auth_user_id" not in client.session  # the right password does not get in either
    with time_machine.travel(timezone.now() + timedelta(minutes=16)):
        client.post("/accounts/login/", {"username": "alice", "password": "password"})
        assert client.session["_auth_user_id"] == str(alice.pk)


def test_it_limits_failed_logins_per_address(alice: User, settings: Any) -> None:
    settings.TRAINYARD_LOGIN_FAILURES_PER_IP = 3
    client = Client(REMOTE_ADDR="198.51.100.4")
    for name in ("a", "b", "c"):
        client.post("/accounts/login/", {"username": name, "password": "x"})
    answer = client.post("/accounts/login/", {"username": "alice", "password": "password"})
    assert answer.status_code == 429
    other = Client(REMOTE_ADDR="198.51.100.5")
    assert (
        other.post("/accounts/login/", {"username": "alice", "password": "password"}).status_code
        == 302
    )


def test_polling_does_not_extend_an_idle_session_and_ends_in_a_whole_page_redirect(
    alice: User,
) -> None:
    client = Client()
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        client.force_login(alice)
        for _hour in range(8):
            clock.shift(timedelta(hours=1))
            assert client.get("/jobs/", headers=POLL).status_code == 200
        clock.shift(timedelta(minutes=1))
        expired = client.get("/jobs/?v=x", headers=POLL)
    assert expired.status_code == 200
    assert expired["HX-Redirect"] == "/accounts/login/?next=%2Fjobs%2F"
    assert "_auth_user_id" not in client.session


def test_a_person_using_the_console_stays_logged_in_until_the_absolute_timeout(
    alice: User,
) -> None:
    client = Client()
    with time_machine.travel(timezone.now(), tick=False) as clock:
        client.force_login(alice)
        for _hour in range(7 * 24 - 1):
            clock.shift(timedelta(hours=1))
            assert client.get("/account/tokens/").status_code == 200
        clock.shift(timedelta(hours=2))
        assert client.get("/account/tokens/").status_code == 302


def test_an_api_token_expires(alice: User) -> None:
    token, plain = ApiToken.issue(alice, name="ci", days=7)
    auth = {"Authorization": f"Bearer {plain}"}
    assert Client().get("/api/v1/jobs", headers=auth).status_code == 200
    with time_machine.travel(token.expires_at + timedelta(seconds=1)):
        assert Client().get("/api/v1/jobs", headers=auth).status_code == 401


def test_a_password_change_revokes_the_users_tokens_but_a_hash_upgrade_does_not(
    alice: User, bob: User
) -> None:
    _alices, plain = ApiToken.issue(alice, name="laptop")
    ApiToken.issue(bob, name="ci")
    alice.check_password("password")  # a login; a hash upgrade saves without a new password
    assert ApiToken.objects.filter(user=alice).exists()
    alice.set_password("a-new-long-password")
    alice.save()
    assert not ApiToken.objects.filter(user=alice).exists()
    assert ApiToken.objects.filter(user=bob).exists()
    auth = {"Authorization": f"Bearer {plain}"}
    assert Client().get("/api/v1/jobs", headers=auth).status_code == 401


def test_it_limits_failed_api_tokens_per_address(alice: User, settings: Any) -> None:
    settings.TRAINYARD_LOGIN_FAILURES_PER_IP = 3
    _token, plain = ApiToken.issue(alice)
    client = Client(REMOTE_ADDR="198.51.100.8")
    for attempt in range(3):
        client.get("/api/v1/jobs", headers={"Authorization": f"Bearer ty_wrong{attempt}"})
    refused = client.get("/api/v1/jobs", headers={"Authorization": f"Bearer {plain}"})
    assert refused.status_code == 429 and "Too many invalid tokens" in refused.json()["message"]


def test_the_api_docs_need_a_login_and_load_nothing_from_elsewhere(
    client: Client, alice: User
) -> None:
    assert client.get("/api/v1/docs").status_code == 302
    assert client.get("/api/v1/openapi.json").status_code == 200
    client.force_login(alice)
    html = client.get("/api/v1/docs").content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in html
    assert "cdn" not in html.lower() and "https://" not in html


@pytest.fixture
def speech_job(other_project: Project, cluster: Cluster) -> Job:
    return Job.objects.create(
        project=other_project, name="secret-run", cluster=cluster, namespace="default",
        spec={"tasks": []},
    )  # fmt: skip


def test_another_projects_job_name_is_not_available_without_being_said_to_exist(
    alice: User, cluster: Cluster, speech_job: Job
) -> None:
    client = Client()
    client.force_login(alice)
    spec = {"name": "secret-run", "cluster": "gpu-a",
            "tasks": [{"role": "w", "kind": "StatefulSet", "image": "x:1"}]}  # fmt: skip
    answer = client.post("/api/v1/jobs", spec, content_type="application/json")
    _token, plain = ApiToken.issue(alice)
    answer = Client().post(
        "/api/v1/jobs", spec, content_type="application/json",
        headers={"Authorization": f"Bearer {plain}"},
    )  # fmt: skip
    message = answer.json()["errors"]["name"]
    assert "not available" in message and "exists" not in message and "speech" not in message


def test_clone_suggestions_and_cluster_counts_ignore_jobs_the_reader_cannot_see(
    alice: User, charlie: User, cluster: Cluster, speech_job: Job
) -> None:
    task = {"role": "w", "kind": "StatefulSet", "image": "x:1"}
    spec = {"name": "secret", "cluster": "gpu-a", "tasks": [task]}
    mine = create_job(alice, parse_job_spec(spec, alice))
    create_job(charlie, parse_job_spec({**spec, "name": "secret-2"}, charlie))
    client = Client()
    client.force_login(alice)
    html = client.get(f"/jobs/{mine.pk}/clone/").content.decode()
    assert 'value="secret-2"' in html  # not secret-3, which would tell secret-2 exists
    row = client.get("/clusters/").content.decode().split('<tr id="cluster-')[1]
    counts = [cell.split("<")[0] for cell in row.split('<td class="num">')[1:]]
    assert counts[2:] == ["1", "0"]  # alice's one Job (none Running), not the three there
