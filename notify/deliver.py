"""Delivery that loses nothing and spams nobody (issue 32 §Build 3): the outbox drained by
claims, each message sent with its platform's wire format, every attempt a Delivery row.

- A worker claims a row by a conditional UPDATE of `claimed_until`; another takes it only once
  the claim ran out (a worker killed mid-send): a webhook is then sent again with the same
  `webhook-id`, so at most one duplicate reaches a receiver, which can drop it.
- Network errors, 5xx, 429 and the platforms' rate-limit codes are retried with exponential
  back-off and jitter (the first retry within 10 s, `Retry-After` always honoured), for at most
  24 h; a configuration error is not retried: the channel is Broken with the platform's own
  answer until a test send succeeds, and its messages wait for it (for those 24 h).
- Per channel, the platforms' rate limits: a burst beyond them is merged into one digest
  message, never dropped.
"""

from __future__ import annotations

import random
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from notify import outbound
from notify.choices import ChannelState, Kind, SendStatus
from notify.models import Channel, Delivery, Outbox, new_message_id
from notify.render import render, trial_message
from notify.senders import Outcome, Target, Verdict, dingtalk, email, feishu, slack, webhook, wecom

CLAIM = timedelta(seconds=60)  # longer than one send can take (outbound: 10 s timeouts)
GIVE_UP = timedelta(hours=24)
FIRST_RETRY = 5.0  # seconds, then doubling up to an hour
LONGEST_WAIT = 3600.0
BATCH = 200
# The platforms' own limits per channel: (window in seconds, messages).
RATE_LIMITS: Mapping[str, tuple[tuple[float, int], ...]] = {
    Kind.FEISHU: ((1, 5), (60, 100)),
    Kind.DINGTALK: ((60, 20),),
    Kind.WECOM: ((60, 20),),
    Kind.SLACK: ((1, 1),),
}
WIRE = {Kind.FEISHU: feishu, Kind.DINGTALK: dingtalk, Kind.WECOM: wecom, Kind.SLACK: slack}


# --- one send ----------------------------------------------------------------------------------


def target_of(channel: Channel, message_id: str) -> Target:
    return Target(
        channel.kind, channel.target, channel.secret, channel.previous_secret, channel.language,
        message_id,
    )  # fmt: skip


def send_once(
    channel: Channel, facts: Mapping[str, Any], message_id: str, now: datetime
) -> Outcome:
    """One attempt: the message laid out for the platform, posted, its answer judged."""
    target = target_of(channel, message_id)
    rendered = render(facts, channel.language, now) if facts else trial_message(channel.language)
    if channel.kind == Kind.EMAIL:
        return email.send(target, rendered, now)
    if channel.kind == Kind.WEBHOOK:
        request = webhook.request(target, facts, now, channel.secret_rotated_at)
        judge = webhook.judge
    else:
        wire = WIRE[Kind(channel.kind)]
        request, judge = wire.request(target, rendered, now), wire.judge
    try:
        answer = outbound.post(request.url, request.body, request.headers)
    except outbound.AddressRefused as error:
        return Outcome(Verdict.BROKEN, str(error))
    except outbound.Unreachable as error:
        return Outcome(Verdict.RETRY, str(error))
    outcome = judge(answer, now)
    return Outcome(outcome.verdict, outcome.message, outcome.http_status, outcome.platform_code,
                   outcome.retry_after, answer.latency_ms)  # fmt: skip


def retry_delay(attempt: int, retry_after: float | None, jitter: float) -> float:
    """Seconds before attempt `attempt + 1`: 5 s, 10 s, 20 s... up to an hour, times a jitter in
    [0.8, 1.2] (the first retry within 10 s), never sooner than the platform's Retry-After."""
    wait = min(FIRST_RETRY * 2 ** (attempt - 1), LONGEST_WAIT) * jitter
    return max(wait, retry_after or 0.0)


# --- the outbox ------------------------------------------------------------------------------


def _due(now: datetime) -> list[Outbox]:
    waiting = Q(status__in=[SendStatus.PENDING, SendStatus.RETRYING], next_attempt_at__lte=now)
    free = Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
    rows = Outbox.objects.filter(waiting, free, channel__state=ChannelState.OK)
    return list(rows.select_related("channel").order_by("next_attempt_at", "pk")[:BATCH])


def claim(rows: Sequence[Outbox], now: datetime) -> list[Outbox]:
    """The rows this worker won, in one conditional UPDATE marked with its own token: a row
    another worker claimed first (and holds) is left out."""
    if not rows:
        return []
    token = uuid.uuid4().hex
    free = Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
    waiting = [SendStatus.PENDING, SendStatus.RETRYING]
    Outbox.objects.filter(free, pk__in=[row.pk for row in rows], status__in=waiting).update(
        claimed_until=now + CLAIM, claimed_by=token
    )
    won = set(Outbox.objects.filter(claimed_by=token).values_list("pk", flat=True))
    for row in rows:
        row.claimed_until, row.claimed_by = now + CLAIM, token
    return [row for row in rows if row.pk in won]


def drain(now: datetime | None = None) -> int:
    """Sends what is due (the Celery task's second step), a batch at a time until nothing is
    left; returns the attempts made. A row retried or postponed is due later, so this ends."""
    now = now or timezone.now()
    expire(now)
    attempts = 0
    while batch := drain_batch(now):
        attempts += batch
    return attempts


def drain_batch(now: datetime) -> int:
    """One batch of due rows (at most BATCH), claimed, sent channel by channel."""
    by_channel: dict[int, list[Outbox]] = defaultdict(list)
    for row in claim(_due(now), now):
        by_channel[row.channel_id].append(row)
    attempts = 0
    for rows in by_channel.values():
        attempts += send_channel(rows[0].channel, rows, now)
    return attempts


def expire(now: datetime) -> int:
    """Messages that waited 24 h (retries, a Broken channel) fail, each with a Delivery row."""
    old = Outbox.objects.filter(
        status__in=[SendStatus.PENDING, SendStatus.RETRYING], created_at__lt=now - GIVE_UP
    )
    count = 0
    for row in old:
        if Outbox.objects.filter(pk=row.pk, status=row.status).update(status=SendStatus.FAILED):
            _record(row, Outcome(Verdict.BROKEN, "Not delivered within 24 hours."), now,
                    SendStatus.FAILED)  # fmt: skip
            count += 1
    return count


def capacity(channel: Channel, now: datetime) -> int:
    """How many messages the channel may take now under its platform's limits."""
    limits = RATE_LIMITS.get(Kind(channel.kind))
    if not limits:
        return BATCH
    longest = max(window for window, _ in limits)
    recent = list(
        Delivery.objects.filter(channel=channel, at__gt=now - timedelta(seconds=longest))
        .exclude(status=SendStatus.MERGED)
        .values_list("at", flat=True)
    )
    room = [limit - sum(1 for at in recent if at > now - timedelta(seconds=window))
            for window, limit in limits]  # fmt: skip
    return max(0, min(room))


def send_channel(channel: Channel, rows: list[Outbox], now: datetime) -> int:
    """The channel's due rows within its limit; beyond it, merged into one digest that is
    sent in the last place the limit leaves (or as soon as the window frees)."""
    room = capacity(channel, now)
    if room == 0:
        _postpone(rows, now + timedelta(seconds=1))
        return 0
    if len(rows) > room:
        digest = merge(channel, rows[room - 1 :], now)
        rows = [*rows[: room - 1], digest]
    for row in rows:
        attempt(channel, row, now)
        if channel.state == ChannelState.BROKEN:
            _postpone(rows[rows.index(row) + 1 :], now)
            break
    return len(rows)


def _postpone(rows: Sequence[Outbox], until: datetime) -> None:
    Outbox.objects.filter(pk__in=[row.pk for row in rows]).update(
        claimed_until=None, next_attempt_at=until
    )


def merge(channel: Channel, rows: Sequence[Outbox], now: datetime) -> Outbox:
    """One digest message for `rows`, which become `merged` (each with a Delivery row saying
    so): written together, so a crash leaves either the rows or the digest to send."""
    with transaction.atomic():
        digest = Outbox.objects.create(
            channel=channel, subject="digest", event="digest", facts={
                "event": "digest", "digest": [row.facts for row in rows],
            }, created_at=now, next_attempt_at=now, claimed_until=now + CLAIM,
        )  # fmt: skip
        Outbox.objects.filter(pk__in=[row.pk for row in rows]).update(
            status=SendStatus.MERGED, digest=digest, claimed_until=None
        )
        merged = Outcome(Verdict.SENT, f"merged into digest {digest.message_id}")
        for row in rows:
            _record(row, merged, now, SendStatus.MERGED)
    return digest


def attempt(channel: Channel, row: Outbox, now: datetime) -> Delivery:
    """One attempt at a claimed row, its result written with its Delivery row."""
    outcome = send_once(channel, row.facts, row.message_id, now)
    number = row.attempts + 1
    fields: dict[str, Any] = {"attempts": number, "claimed_until": None}
    if outcome.verdict == Verdict.SENT:
        status = SendStatus.SENT
    elif outcome.verdict == Verdict.RETRY:
        wait = retry_delay(number, outcome.retry_after, random.uniform(0.8, 1.2))
        retry_at = now + timedelta(seconds=wait)
        status = SendStatus.RETRYING if retry_at < row.created_at + GIVE_UP else SendStatus.FAILED
        fields["next_attempt_at"] = retry_at
    else:
        status = SendStatus.FAILED
    with transaction.atomic():
        Outbox.objects.filter(pk=row.pk).update(status=status, **fields)
        row.attempts, row.status = number, status
        delivery = _record(row, outcome, now, status)
        if outcome.verdict == Verdict.BROKEN:
            mark_broken(channel, outcome)
    return delivery


def mark_broken(channel: Channel, outcome: Outcome) -> None:
    reason = outcome.message or f"HTTP {outcome.http_status}"
    if outcome.platform_code:
        reason = f"{outcome.platform_code}: {reason}"
    Channel.objects.filter(pk=channel.pk).update(state=ChannelState.BROKEN, broken_reason=reason)
    channel.state, channel.broken_reason = ChannelState.BROKEN, reason


def _record(row: Outbox, outcome: Outcome, now: datetime, status: str) -> Delivery:
    return Delivery.objects.create(
        channel_id=row.channel_id, outbox=row, event=row.event, job_id=row.job_id,
        attempt=max(row.attempts, 1), status=status, http_status=outcome.http_status,
        platform_code=outcome.platform_code, message=outcome.message[:2048],
        latency_ms=outcome.latency_ms, at=now,
    )  # fmt: skip


def send_test(channel: Channel, now: datetime | None = None) -> Delivery:
    """A test message now, in the reader's request: the platform's answer recorded and shown;
    a success makes a Broken channel OK again, a configuration error makes it Broken."""
    now = now or timezone.now()
    outcome = send_once(channel, {}, new_message_id(), now)
    status = SendStatus.SENT if outcome.verdict == Verdict.SENT else SendStatus.FAILED
    delivery = Delivery.objects.create(
        channel=channel, event="", attempt=1, status=status, http_status=outcome.http_status,
        platform_code=outcome.platform_code, message=outcome.message[:2048],
        latency_ms=outcome.latency_ms, at=now,
    )  # fmt: skip
    if outcome.verdict == Verdict.SENT:
        Channel.objects.filter(pk=channel.pk).update(state=ChannelState.OK, broken_reason="")
        channel.state, channel.broken_reason = ChannelState.OK, ""
    elif outcome.verdict == Verdict.BROKEN:
        mark_broken(channel, outcome)
    return delivery
