"""The Notifications page and the Job page's "Notify me" (issue 32 §Build 5): tried as
anonymous, outsider and allowed user; the platform's raw answer shown after a test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from console.models import Cluster
from notify.choices import ChannelState
from notify.models import Channel, Subscription
from tests.notify.conftest import channel, job_of
from tests.notify.receivers import Receiver, receiving

PAGE = "/notifications/"


@pytest.fixture(autouse=True)
def _loopback_allowed(settings: Any) -> None:
    settings.TRAINYARD_NOTIFY_ALLOWED_NETWORKS = ["127.0.0.0/8"]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving("/robot/send-token-9f3a") as found:
        yield found


def as_user(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_it_sends_an_anonymous_visitor_to_the_login_page(client: Client) -> None:
    response = client.get(PAGE)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert client.post("/notifications/channels/", {}).status_code == 302


def test_it_adds_a_channel_shows_it_masked_and_names_a_wrong_field(
    alice: User, receiver: Receiver
) -> None:
    client = as_user(alice)
    bad = client.post("/notifications/channels/", {"name": "", "kind": "slack", "target": ""})
    assert bad.status_code == 200
    assert bad.context["channel_errors"] == {
        "name": "This field is required.", "target": "This field is required.",
    }  # fmt: skip
    added = client.post("/notifications/channels/", {
        "name": "team", "kind": "dingtalk", "target": receiver.url, "language": "en",
    }, follow=True)  # fmt: skip
    html = added.content.decode()
    assert "team" in html and "send-token-9f3a" not in html and "…9f3a" in html
    assert Channel.objects.get().owner == alice


def test_it_shows_the_platforms_raw_answer_after_a_test(alice: User, receiver: Receiver) -> None:
    bot = channel(alice, receiver.url, kind="dingtalk", name="robot")
    receiver.answer(200, '{"errcode":310000,"errmsg":"keywords not in content"}')
    page = as_user(alice).post(f"/notifications/channels/{bot.pk}/test/", follow=True)
    html = page.content.decode()
    assert "keywords not in content" in html and "Broken" in html
    bot.refresh_from_db()
    assert bot.state == ChannelState.BROKEN


def test_charlie_cannot_touch_alices_channel(
    alice: User, charlie: User, receiver: Receiver
) -> None:
    bot = channel(alice, receiver.url)
    client = as_user(charlie)
    assert "robot" not in client.get(PAGE).content.decode()
    assert client.post(f"/notifications/channels/{bot.pk}/test/").status_code == 404
    assert client.post(f"/notifications/channels/{bot.pk}/delete/").status_code == 404
    assert receiver.received == [] and Channel.objects.exists()


def test_it_subscribes_from_the_page_and_from_the_job_page(
    alice: User, charlie: User, cluster: Cluster, receiver: Receiver
) -> None:
    client = as_user(alice)
    job = job_of(alice, cluster)
    assert f'action="/jobs/{job.pk}/notify/"' in client.get(f"/jobs/{job.pk}/").content.decode()
    first = client.post(f"/jobs/{job.pk}/notify/", follow=True)  # no channel yet
    assert first.redirect_chain[-1][0] == PAGE
    mine = channel(alice, receiver.url)
    after = client.post(f"/jobs/{job.pk}/notify/", follow=True)
    assert after.redirect_chain[-1][0] == f"/jobs/{job.pk}/"
    client.post(f"/jobs/{job.pk}/notify/")  # twice: one subscription
    sub = Subscription.objects.get()
    assert (sub.scope, sub.job, sub.channel) == ("job", job, mine)
    assert "job.failed" in sub.events and "cluster.unreachable" not in sub.events
    assert as_user(charlie).post(f"/jobs/{job.pk}/notify/").status_code == 404
    added = client.post("/notifications/subscriptions/", {
        "channel": mine.pk, "scope": "mine", "events": ["workload.stalled"],
        "pending_minutes": "30", "repeat_hours": "0",
    })  # fmt: skip
    assert added.status_code == 302 and Subscription.objects.count() == 2
    wrong = client.post("/notifications/subscriptions/", {
        "channel": mine.pk, "scope": "job", "job": "999999", "pending_minutes": "x",
    })  # fmt: skip
    assert set(wrong.context["subscription_errors"]) == {"scope.job", "events", "pending_minutes"}
    theirs = Subscription.objects.filter(user=alice).first()
    assert theirs is not None
    assert (
        as_user(charlie).post(f"/notifications/subscriptions/{theirs.pk}/delete/").status_code
        == 404
    )


def test_it_shows_the_page_in_chinese(alice: User, receiver: Receiver) -> None:
    channel(alice, receiver.url, name="robot")
    html = as_user(alice).get(PAGE, headers={"Accept-Language": "zh-CN"}).content.decode()
    assert "我的通知渠道" in html and "投递记录" in html


def test_it_rotates_a_webhook_secret_keeping_the_old_one_for_a_day(
    alice: User, charlie: User, receiver: Receiver
) -> None:
    old, new = "whsec_" + "A" * 44, "whsec_" + "B" * 44
    hook = channel(alice, receiver.url, secret=old)
    assert as_user(charlie).post(f"/notifications/channels/{hook.pk}/rotate/",
                                 {"secret": new}).status_code == 404  # fmt: skip
    refused = as_user(alice).post(f"/notifications/channels/{hook.pk}/rotate/",
                                  {"secret": "x"}, follow=True)  # fmt: skip
    assert "whsec_ followed by base64" in refused.content.decode()
    as_user(alice).post(f"/notifications/channels/{hook.pk}/rotate/", {"secret": new})
    hook.refresh_from_db()
    assert (hook.secret, hook.previous_secret) == (new, old)
    assert hook.secret_rotated_at is not None
