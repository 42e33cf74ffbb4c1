"""The notifications' JSON API exactly as issue 32 §Build 5 names it: channels (never their URL
or secret in clear), their test send and delivery log, subscriptions; 4xx naming the field;
every endpoint tried as anonymous, outsider and allowed user."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from console.models import ApiToken, Cluster
from notify.choices import ChannelState
from notify.models import Channel, Delivery, Subscription
from tests.notify.conftest import channel, job_of
from tests.notify.receivers import Receiver, receiving

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.fixture(autouse=True)
def _loopback_allowed(settings: Any) -> None:
    settings.TRAINYARD_NOTIFY_ALLOWED_NETWORKS = ["127.0.0.0/8"]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving("/hooks/T0123/secret-token-abcd") as found:
        yield found


def call(method: str, path: str, user: User | None = None, body: Any = None) -> Any:
    headers = {"Authorization": f"Bearer {ApiToken.issue(user, name='t')[1]}"} if user else {}
    kwargs = {"data": json.dumps(body), "content_type": "application/json"} if body else {}
    response = getattr(Client(), method)(f"/api/v1{path}", headers=headers, **kwargs)
    assert response["Content-Type"].startswith("application/json")
    return response


def test_it_adds_a_channel_and_never_answers_its_url_or_secret(
    alice: User, receiver: Receiver
) -> None:
    body = {"name": "team bot", "kind": "webhook", "url": receiver.url, "secret": SECRET,
            "language": "zh-hans"}  # fmt: skip
    created = call("post", "/channels", alice, body)
    assert created.status_code == 201
    answer = created.json()
    assert answer["target"].startswith("http://127.0.0.1:") and answer["target"].endswith("abcd")
    assert "secret-token" not in json.dumps(answer) and SECRET not in json.dumps(answer)
    assert (answer["state"], answer["broken_reason"], answer["signed"]) == ("ok", "", True)
    listed = call("get", "/channels", alice).json()
    assert [c["id"] for c in listed] == [answer["id"]]
    assert "secret-token" not in json.dumps(listed)
    with connection.cursor() as cursor:  # encrypted at rest
        cursor.execute("SELECT target, secret FROM notify_channel")
        stored = cursor.fetchone()
    assert "secret-token" not in stored[0] and SECRET not in stored[1]


def test_it_names_every_wrong_field(alice: User, settings: Any) -> None:
    settings.TRAINYARD_NOTIFY_ALLOWED_NETWORKS = []
    body = {"kind": "slack", "url": "https://127.0.0.1/x", "secret": "s", "language": "fr",
            "project": "nope"}  # fmt: skip
    answer = call("post", "/channels", alice, body)
    assert answer.status_code == 422
    assert set(answer.json()["errors"]) == {"name", "url", "secret", "language", "project"}
    assert "loopback" in answer.json()["errors"]["url"]
    bad_mail = call("post", "/channels", alice, {"name": "m", "kind": "email", "address": "x"})
    assert bad_mail.json()["errors"] == {"address": "Enter a valid e-mail address."}
    bad_secret = {"name": "w", "kind": "webhook", "url": "https://93.184.216.34/x", "secret": "x"}
    assert set(call("post", "/channels", alice, bad_secret).json()["errors"]) == {"secret"}


def test_it_sends_a_test_and_answers_with_the_platforms_answer(
    alice: User, receiver: Receiver
) -> None:
    bot = channel(alice, receiver.url, kind="feishu")
    receiver.answer(200, '{"code":19021,"msg":"sign match fail"}')
    failed = call("post", f"/channels/{bot.pk}/test", alice)
    assert failed.status_code == 200
    assert failed.json() | {"id": 0, "at": ""} == {
        "id": 0, "at": "", "event": None, "job": None, "status": "failed", "attempt": 1,
        "http_status": 200, "platform_code": "19021",
        "message": '{"code":19021,"msg":"sign match fail"}',
    }  # fmt: skip
    detail = call("get", f"/channels/{bot.pk}", alice).json()
    assert detail["state"] == "broken" and "19021" in detail["broken_reason"]
    assert call("post", f"/channels/{bot.pk}/test", alice).json()["status"] == "sent"
    assert call("get", f"/channels/{bot.pk}", alice).json()["state"] == "ok"
    log = call("get", f"/channels/{bot.pk}/deliveries", alice).json()
    assert [d["status"] for d in log] == ["sent", "failed"]  # newest first


def test_it_keeps_channels_to_their_owner_and_project_members(
    alice: User, bob: User, charlie: User, receiver: Receiver
) -> None:
    own = channel(alice, receiver.url)
    shared = channel(alice, receiver.url, name="team", project=alice.memberships.get().project)
    for path in (f"/channels/{own.pk}", f"/channels/{own.pk}/deliveries"):
        assert call("get", path).status_code == 401
        assert call("get", path, charlie).status_code == 404
        assert call("get", path, bob).status_code == 404
    assert call("get", f"/channels/{shared.pk}", bob).status_code == 200  # a project member
    assert call("get", f"/channels/{shared.pk}", charlie).status_code == 404
    assert call("post", f"/channels/{own.pk}/test", charlie).status_code == 404
    assert call("delete", f"/channels/{own.pk}", charlie).status_code == 404
    assert call("delete", f"/channels/{own.pk}", alice).status_code == 200
    assert not Channel.objects.filter(pk=own.pk).exists()


def test_it_subscribes_only_to_what_the_reader_can_read(
    alice: User, charlie: User, cluster: Cluster, receiver: Receiver
) -> None:
    job = job_of(alice, cluster)
    mine = channel(alice, receiver.url)
    body = {"channel": mine.pk, "scope": {"kind": "job", "job": job.pk},
            "events": ["workload.stalled", "job.failed"], "repeat_hours": 0}  # fmt: skip
    created = call("post", "/subscriptions", alice, body)
    assert created.status_code == 201
    assert created.json() | {"id": 0, "created_at": ""} == {
        "id": 0, "created_at": "", "channel": mine.pk, "scope": {"kind": "job", "job": job.pk},
        "events": ["job.failed", "workload.stalled"], "pending_minutes": 30, "repeat_hours": 0,
    }  # fmt: skip
    theirs = channel(charlie, receiver.url)
    refused = call("post", "/subscriptions", charlie, body | {"channel": theirs.pk})
    assert refused.status_code == 422 and set(refused.json()["errors"]) == {"scope.job"}
    stolen = call("post", "/subscriptions", charlie, {**body, "scope": {"kind": "mine"}})
    assert set(stolen.json()["errors"]) == {"channel"}  # alice's channel
    wrong = {"channel": mine.pk, "scope": {"kind": "project", "project": "speech"},
             "events": ["job.exploded"], "pending_minutes": -1}  # fmt: skip
    assert set(call("post", "/subscriptions", alice, wrong).json()["errors"]) == {
        "scope.project", "events", "pending_minutes",
    }  # fmt: skip
    assert [s["id"] for s in call("get", "/subscriptions", alice).json()] == [created.json()["id"]]
    assert call("get", "/subscriptions", charlie).json() == []
    sub_id = created.json()["id"]
    assert call("delete", f"/subscriptions/{sub_id}", charlie).status_code == 404
    assert call("delete", f"/subscriptions/{sub_id}", alice).status_code == 200
    assert not Subscription.objects.exists()


def test_the_openapi_document_describes_the_endpoints(alice: User) -> None:
    document = Client().get("/api/v1/openapi.json").json()
    for path in ("/api/v1/channels", "/api/v1/channels/{channel_id}/test",
                 "/api/v1/channels/{channel_id}/deliveries", "/api/v1/subscriptions"):  # fmt: skip
        assert path in document["paths"], path
    assert call("get", "/no-such-thing", alice).status_code == 404


def test_a_broken_channel_is_never_silent(alice: User, receiver: Receiver) -> None:
    bot = channel(alice, receiver.url, kind="slack")
    receiver.answer(403, "invalid_token")
    call("post", f"/channels/{bot.pk}/test", alice)
    bot.refresh_from_db()
    assert (bot.state, bot.broken_reason) == (ChannelState.BROKEN, "invalid_token")
    assert Delivery.objects.get().http_status == 403
