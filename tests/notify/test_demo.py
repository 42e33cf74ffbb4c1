"""`make run`'s demo webhook receiver (notify.demo): the demo user's channel to it, and a demo
Job's event arriving signed and shown on its page."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from console.models import Cluster, Membership
from jobs.choices import JobPhase
from notify import demo
from notify.models import Channel, Subscription
from notify.tasks import drain_outbox
from notify.watch import after_cycle
from tests.notify.conftest import job_of
from tests.notify.receivers import PORTS


@pytest.fixture
def inbox(settings: Any) -> Iterator[tuple[demo.Inbox, str]]:
    settings.TRAINYARD_NOTIFY_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    found = demo.Inbox(demo.new_secret())
    for port in PORTS:
        try:
            server = demo.serve(found, port)
            break
        except OSError:
            continue
    try:
        yield found, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def demo_user(project: Any) -> User:
    user = User.objects.create_user("demo", password="trainyard-demo")
    Membership.objects.create(user=user, project=project)
    return user


def test_it_gives_the_demo_user_one_channel_kept_across_restarts(demo_user: User) -> None:
    demo.register(demo_user, "http://127.0.0.1:8025/hook", "whsec_" + "A" * 44)
    second = demo.new_secret()
    channel = demo.register(demo_user, "http://127.0.0.1:8025/hook", second)
    assert Channel.objects.get() == channel and channel.secret == second
    sub = Subscription.objects.get()
    assert sub.scope == "mine" and "workload.stalled" in sub.events


def test_a_demo_jobs_event_arrives_signed_and_is_shown(
    demo_user: User, cluster: Cluster, inbox: tuple[demo.Inbox, str]
) -> None:
    received, url = inbox
    demo.register(demo_user, f"{url}/hook", received.secret)
    job = job_of(demo_user, cluster, name="ppo-deadlock", phase=JobPhase.FAILED)
    after_cycle(cluster, {job.pk}, {}, timezone.now())
    drain_outbox()  # as the commit of the cycle's transaction starts it
    (message,) = received.messages
    assert message.verified and message.body["type"] == "job.failed"
    with urllib.request.urlopen(f"{url}/") as answer:
        shown = answer.read().decode()
    assert "job.failed" in shown and "ppo-deadlock" in shown and "✔ signed" in shown


def test_it_refuses_a_message_it_cannot_verify(inbox: tuple[demo.Inbox, str]) -> None:
    received, _url = inbox
    taken = received.take(b'{"type": "job.failed"}', {"webhook-id": "msg_x"})
    assert not taken.verified
