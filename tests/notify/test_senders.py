"""Every channel kind against a local receiver (issue 32 §Show): the platforms' signatures with
known vectors, the bodies, the success rules, retries on 5xx/429 with Retry-After, no retry on a
configuration error, the digest under a burst, no duplicate across two workers."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

import pytest
import time_machine
from django.contrib.auth.models import User
from standardwebhooks.webhooks import Webhook

from notify import deliver
from notify.choices import ChannelState, Kind, SendStatus
from notify.deliver import drain, retry_delay, send_test
from notify.models import Channel, Delivery, Outbox
from notify.outbound import AddressRefused, resolve
from notify.senders import dingtalk, feishu, wecom
from tests.notify.conftest import channel
from tests.notify.receivers import Receiver, receiving

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
JOB = {
    "id": 7, "name": "ppo-7b", "project": "vision", "cluster": "gpu-a",
    "url": "https://console.example.com/jobs/7/", "phase": "Running",
}  # fmt: skip
FACTS: dict[str, Any] = {
    "event": "workload.stalled", "resolved": False, "at": T0.isoformat(),
    "job": {"id": 7, "name": "ppo-7b", "project": "vision", "cluster": "gpu-a",
            "url": "https://console.example.com/jobs/7/", "phase": "Running"},
    "workload": {"state": "Stalled", "source": "signal", "reported_at": T0.isoformat(),
                 "reason": "", "step": 18200, "max_steps": 50000},
    "gpus": 8, "gpus_since": (T0 - timedelta(hours=3)).isoformat(), "cluster": "gpu-a",
}  # fmt: skip


@pytest.fixture(autouse=True)
def _loopback_allowed(settings: Any) -> None:
    settings.TRAINYARD_NOTIFY_ALLOWED_NETWORKS = ["127.0.0.0/8"]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as found:
        yield found


def queue(target: Channel, count: int = 1, **facts: Any) -> list[Outbox]:
    return [
        Outbox.objects.create(
            channel=target,
            subject=f"job:{n}",
            event="workload.stalled",
            facts=FACTS | facts,
            created_at=T0,
            next_attempt_at=T0,
        )
        for n in range(count)
    ]


def status_of(row: Outbox) -> str:
    row.refresh_from_db()
    return row.status


# --- the platforms' signatures, with known vectors -----------------------------------------------


def test_it_signs_feishu_as_the_platform_documents() -> None:
    """HMAC-SHA256 keyed by timestamp + "\\n" + secret over an empty message, base64 (vector
    computed with openssl)."""
    assert (
        feishu.sign(1599360473, "feishu-secret") == "GnmU6lMJMtXPkxW7kXxgtXI0SJxjk0TQFnFuz93Dt+0="
    )


def test_it_signs_dingtalk_as_the_platform_documents() -> None:
    """HMAC-SHA256 keyed by the secret over timestamp_ms + "\\n" + secret, base64, URL-encoded."""
    signed = dingtalk.sign(1577262236757, "SEC0123456789abcdef")
    assert unquote(signed) == "Pgr6tpIpjVrMPPJUPkaI9sivFPPTYOy5zIOMF2GPFMA="
    assert signed == "Pgr6tpIpjVrMPPJUPkaI9sivFPPTYOy5zIOMF2GPFMA%3D"


def test_it_signs_webhooks_as_standard_webhooks_1_0_says() -> None:
    """The specification's own test vector."""
    from notify.senders.webhook import signature

    at = datetime.fromtimestamp(1614265330, UTC)
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    signed = signature([secret], "msg_p5jXN8AQM9LWM0D4loKWxJek", at, '{"test": 2432232314}')
    assert signed == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


# --- each kind against a receiver -----------------------------------------------------------------


def test_it_sends_a_signed_feishu_card_and_counts_only_code_0_as_success(
    alice: User, receiver: Receiver
) -> None:
    bot = channel(alice, receiver.url, kind=Kind.FEISHU, secret="feishu-secret")
    row = queue(bot)[0]
    receiver.answer(200, '{"code":0,"msg":"success"}')
    drain(T0)
    body = receiver.received[0].json()
    assert body["sign"] == feishu.sign(int(body["timestamp"]), "feishu-secret")
    assert body["msg_type"] == "interactive"
    button = body["card"]["elements"][1]["actions"][0]
    assert button["url"] == "https://console.example.com/jobs/7/"
    assert "ppo-7b" in body["card"]["header"]["title"]["content"]
    assert status_of(row) == SendStatus.SENT
    bad = queue(bot)[0]
    receiver.answer(
        200, '{"code":19021,"msg":"sign match fail or timestamp is not within one hour"}'
    )
    drain(T0 + timedelta(seconds=2))
    assert status_of(bad) == SendStatus.FAILED  # HTTP 200 carrying 19021 is a failure
    bot.refresh_from_db()
    assert bot.state == ChannelState.BROKEN and "19021" in bot.broken_reason
    delivery = Delivery.objects.filter(outbox=bad).get()
    assert (delivery.http_status, delivery.platform_code) == (200, "19021")
    queue(bot)
    drain(T0 + timedelta(minutes=5))  # Broken: nothing is sent until a test send succeeds
    assert len(receiver.received) == 2


def test_it_sends_dingtalk_markdown_signed_in_the_query(alice: User, receiver: Receiver) -> None:
    robot = channel(alice, receiver.url + "?access_token=abc", kind=Kind.DINGTALK,
                    secret="SEC0123456789abcdef")  # fmt: skip
    row = queue(robot)[0]
    drain(T0)
    got = receiver.received[0]
    timestamp = got.query["timestamp"][0]
    message = f"{timestamp}\nSEC0123456789abcdef".encode()
    expected = hmac.new(b"SEC0123456789abcdef", message, hashlib.sha256).digest()
    assert got.query["sign"][0] == base64.b64encode(expected).decode()
    assert got.query["access_token"] == ["abc"]
    assert got.json()["msgtype"] == "markdown"
    assert "18200" in got.json()["markdown"]["text"].replace(",", "")
    assert status_of(row) == SendStatus.SENT


def test_it_retries_a_platforms_rate_limit_code(alice: User, receiver: Receiver) -> None:
    robot = channel(alice, receiver.url, kind=Kind.DINGTALK)
    row = queue(robot)[0]
    receiver.answer(200, '{"errcode":130101,"errmsg":"send too fast"}')
    drain(T0)
    assert status_of(row) == SendStatus.RETRYING
    row.refresh_from_db()
    assert T0 + timedelta(seconds=3) < row.next_attempt_at <= T0 + timedelta(seconds=10)
    drain(row.next_attempt_at)
    assert status_of(row) == SendStatus.SENT
    assert [d.status for d in Delivery.objects.filter(outbox=row).order_by("pk")] == [
        "retrying", "sent",
    ]  # fmt: skip


def test_it_cuts_a_wecom_message_to_4096_bytes_on_a_character_boundary(
    alice: User, receiver: Receiver
) -> None:
    robot = channel(alice, receiver.url, kind=Kind.WECOM, language="zh-hans")
    long_name = "训练" * 3000
    queue(robot, job={**JOB, "name": long_name})
    drain(T0)
    content = receiver.received[0].json()["markdown"]["content"]
    assert len(content.encode()) <= 4096
    assert content.endswith("(https://console.example.com/jobs/7/)")
    assert "…" in content
    assert wecom.cut("ab", "", 4) == "ab"


def test_it_sends_slack_blocks_and_honours_retry_after_on_429(
    alice: User, receiver: Receiver
) -> None:
    hook = channel(alice, receiver.url, kind=Kind.SLACK)
    row = queue(hook)[0]
    receiver.answer(429, "rate_limited", Retry_After="30")
    drain(T0)
    row.refresh_from_db()
    assert row.status == SendStatus.RETRYING and row.next_attempt_at >= T0 + timedelta(seconds=30)
    receiver.answer(200, "ok")
    drain(row.next_attempt_at)
    body = receiver.received[1].json()
    assert body["text"].startswith("[Trainyard]") and body["blocks"][0]["type"] == "header"
    assert status_of(row) == SendStatus.SENT


def test_it_signs_the_generic_webhook_and_keeps_its_id_across_retries(
    alice: User, receiver: Receiver
) -> None:
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    hook = channel(alice, receiver.url, kind=Kind.WEBHOOK, secret=secret)
    row = queue(hook)[0]
    receiver.answer(503, "busy")
    drain(T0)
    assert status_of(row) == SendStatus.RETRYING
    row.refresh_from_db()
    drain(row.next_attempt_at)
    first, second = receiver.received
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == row.message_id
    signed = f"{row.message_id}.{second.headers['webhook-timestamp']}.{second.body.decode()}"
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = base64.b64encode(hmac.new(key, signed.encode(), hashlib.sha256).digest()).decode()
    assert second.headers["webhook-signature"] == f"v1,{digest}"
    with time_machine.travel(T0, tick=False):  # what a receiver runs, at the time it was sent
        assert Webhook(secret).verify(second.body, second.headers)["type"] == "workload.stalled"
    payload = second.json()
    assert payload["type"] == "workload.stalled"
    assert payload["data"]["job"] == {
        "id": 7, "name": "ppo-7b", "project": "vision", "cluster": "gpu-a",
        "url": "https://console.example.com/jobs/7/",
    }  # fmt: skip
    assert payload["data"]["workload"]["step"] == 18200 and payload["data"]["gpus"] == 8
    assert status_of(row) == SendStatus.SENT


def test_it_signs_with_both_secrets_for_a_day_after_a_rotation(
    alice: User, receiver: Receiver
) -> None:
    new, old = (
        "whsec_" + base64.b64encode(b"n" * 24).decode(),
        "whsec_" + base64.b64encode(b"o" * 24).decode(),
    )
    hook = channel(alice, receiver.url, kind=Kind.WEBHOOK, secret=new, previous_secret=old,
                   secret_rotated_at=T0 - timedelta(hours=1))  # fmt: skip
    queue(hook)
    drain(T0)
    got = receiver.received[0]
    assert len(got.headers["webhook-signature"].split(" ")) == 2
    Channel.objects.filter(pk=hook.pk).update(secret_rotated_at=T0 - timedelta(hours=25))
    queue(hook)
    drain(T0 + timedelta(seconds=1))
    assert len(receiver.received[1].headers["webhook-signature"].split(" ")) == 1


def test_it_does_not_retry_a_configuration_error(alice: User, receiver: Receiver) -> None:
    hook = channel(alice, receiver.url, kind=Kind.SLACK)
    row = queue(hook)[0]
    receiver.answer(404, "no_service")
    drain(T0)
    drain(T0 + timedelta(hours=1))
    assert status_of(row) == SendStatus.FAILED and len(receiver.received) == 1
    hook.refresh_from_db()
    assert (hook.state, hook.broken_reason) == (ChannelState.BROKEN, "no_service")
    receiver.answer(200, "ok")
    assert send_test(hook, T0 + timedelta(hours=2)).status == SendStatus.SENT
    hook.refresh_from_db()
    assert (hook.state, hook.broken_reason) == (ChannelState.OK, "")


def test_it_merges_a_burst_beyond_the_rate_limit_into_one_digest(
    alice: User, receiver: Receiver
) -> None:
    """Slack takes one message a second: five at once become one digest, none dropped."""
    hook = channel(alice, receiver.url, kind=Kind.SLACK)
    receiver.default = (200, "ok", {})
    rows = queue(hook, 5)
    drain(T0)
    assert len(receiver.received) == 1
    text = receiver.received[0].json()["text"]
    assert "5 messages" in text and text.count("ppo-7b") == 5
    assert {status_of(row) for row in rows} == {SendStatus.MERGED}
    assert Delivery.objects.filter(status=SendStatus.MERGED).count() == 5
    digest = Outbox.objects.get(event="digest")
    assert digest.status == SendStatus.SENT


def test_it_waits_for_the_window_when_the_limit_is_used(alice: User, receiver: Receiver) -> None:
    robot = channel(alice, receiver.url, kind=Kind.FEISHU)
    queue(robot, 5)
    drain(T0)
    assert len(receiver.received) == 5  # Feishu: 5 a second
    late = queue(robot)[0]
    drain(T0 + timedelta(milliseconds=500))
    assert status_of(late) == SendStatus.PENDING and len(receiver.received) == 5
    drain(T0 + timedelta(seconds=2))
    assert status_of(late) == SendStatus.SENT


def test_two_workers_never_send_a_message_twice(alice: User, receiver: Receiver) -> None:
    """Worker A claimed the row (and was killed mid-send): worker B leaves it alone until the
    claim runs out, then sends it with the same webhook-id."""
    hook = channel(alice, receiver.url, kind=Kind.WEBHOOK)
    row = queue(hook)[0]
    assert deliver.claim([row], T0) == [row]
    assert deliver.claim([row], T0) == []
    drain(T0 + timedelta(seconds=1))
    assert receiver.received == []
    drain(T0 + deliver.CLAIM + timedelta(seconds=1))
    assert len(receiver.received) == 1
    assert receiver.received[0].headers["webhook-id"] == row.message_id
    drain(T0 + deliver.CLAIM + timedelta(seconds=30))
    assert len(receiver.received) == 1


def test_it_gives_up_after_24_hours(alice: User, receiver: Receiver) -> None:
    hook = channel(alice, receiver.url, kind=Kind.WEBHOOK)
    row = queue(hook)[0]
    receiver.default = (500, "down", {})
    drain(T0)
    drain(T0 + timedelta(hours=25))
    assert status_of(row) == SendStatus.FAILED
    assert Delivery.objects.filter(outbox=row).first().message == "Not delivered within 24 hours."  # type: ignore[union-attr]


def test_the_back_off_grows_with_jitter_and_honours_retry_after() -> None:
    assert retry_delay(1, None, 1.0) == 5.0
    assert retry_delay(1, None, 1.2) <= 10.0  # the first retry within 10 s
    assert retry_delay(4, None, 1.0) == 40.0
    assert retry_delay(30, None, 1.0) == 3600.0
    assert retry_delay(1, 120.0, 1.0) == 120.0


# --- outbound safety ----------------------------------------------------------------------------


def test_it_refuses_private_loopback_and_metadata_addresses(settings: Any) -> None:
    settings.TRAINYARD_NOTIFY_ALLOWED_NETWORKS = []
    for url in ("https://127.0.0.1/x", "https://10.0.0.8/x", "https://169.254.169.254/latest",
                "https://[::1]/x", "http://93.184.216.34/x", "ftp://example.com/x"):  # fmt: skip
        with pytest.raises(AddressRefused):
            resolve(url)
    assert resolve("https://93.184.216.34/x")[3].exploded == "93.184.216.34"
    settings.TRAINYARD_NOTIFY_ALLOWED_NETWORKS = ["169.254.0.0/16"]
    with pytest.raises(AddressRefused):
        resolve("https://169.254.169.254/latest")  # a metadata address, allowed networks or not


def test_a_refused_address_breaks_the_channel_without_a_request(alice: User, settings: Any) -> None:
    settings.TRAINYARD_NOTIFY_ALLOWED_NETWORKS = []
    hook = channel(alice, "https://127.0.0.1:8159/x", kind=Kind.WEBHOOK)
    delivery = send_test(hook, T0)
    hook.refresh_from_db()
    assert delivery.status == SendStatus.FAILED and "loopback" in delivery.message
    assert hook.state == ChannelState.BROKEN


def test_it_reads_at_most_64_kib_of_an_answer(alice: User, receiver: Receiver) -> None:
    hook = channel(alice, receiver.url, kind=Kind.WEBHOOK)
    receiver.answer(400, "x" * 200_000)
    delivery = send_test(hook, T0)
    assert delivery.status == SendStatus.FAILED and len(delivery.message) == 2048


def test_it_never_follows_a_redirect(alice: User, receiver: Receiver) -> None:
    hook = channel(alice, receiver.url, kind=Kind.WEBHOOK)
    receiver.answer(302, "", Location="https://169.254.169.254/latest")
    delivery = send_test(hook, T0)
    assert delivery.http_status == 302 and delivery.status == SendStatus.FAILED
    assert len(receiver.received) == 1
