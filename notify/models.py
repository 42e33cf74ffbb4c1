"""Channels (where a message goes), Subscriptions (who wants which events of which Jobs),
Conditions (an event's occurrence, open while it lasts), the Outbox (one message due to one
channel, written in the transaction of the state change that causes it) and Deliveries (every
attempt to send one)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from console.models import Cluster, Project
from jobs.models import Job
from notify.choices import ChannelState, Event, Kind, Language, Part, ScopeKind, SendStatus
from notify.fields import SecretField

PENDING_MINUTES = 30  # job.pending_too_long: the default threshold of a subscription
REPEAT_HOURS = 4  # a lasting condition is said again this often (0: never)


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


class Channel(models.Model):
    """A user's, or a project's (managed by its members), bot, webhook or e-mail address."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.CASCADE, related_name="notify_channels"
    )
    project = models.ForeignKey(
        Project, models.CASCADE, null=True, blank=True, related_name="notify_channels"
    )
    name = models.CharField(_("name"), max_length=100)
    kind = models.CharField(_("kind"), max_length=16, choices=Kind.choices)
    language = models.CharField(
        _("language"), max_length=8, choices=Language.choices, default=Language.EN
    )
    # The webhook URL, or the e-mail address: encrypted at rest, shown masked.
    target = SecretField(_("URL or address"))
    secret = SecretField(_("signing secret"), blank=True)
    # Standard Webhooks: a rotated secret still signs beside the new one for 24 hours.
    previous_secret = SecretField(_("previous signing secret"), blank=True)
    secret_rotated_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(
        _("state"), max_length=8, choices=ChannelState.choices, default=ChannelState.OK
    )
    broken_reason = models.TextField(_("why it is broken"), blank=True)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)

    class Meta:
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return self.name


class Subscription(models.Model):
    """A user's wish to hear of some events of their Jobs, a project's or one Job's."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.CASCADE, related_name="notify_subscriptions"
    )
    channel = models.ForeignKey(Channel, models.CASCADE, related_name="subscriptions")
    scope = models.CharField(_("scope"), max_length=8, choices=ScopeKind.choices)
    project = models.ForeignKey(
        Project, models.CASCADE, null=True, blank=True, related_name="notify_subscriptions"
    )
    job = models.ForeignKey(
        Job, models.CASCADE, null=True, blank=True, related_name="notify_subscriptions"
    )
    events = models.JSONField(_("events"), default=list)
    pending_minutes = models.PositiveIntegerField(_("pending threshold"), default=PENDING_MINUTES)
    repeat_hours = models.PositiveIntegerField(_("repeat every (hours)"), default=REPEAT_HOURS)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["scope", "user"], name="subscription_mine"),
            models.Index(fields=["project"], name="subscription_project"),
            models.Index(fields=["job"], name="subscription_job"),
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.scope} -> {self.channel}"


class Condition(models.Model):
    """One occurrence of an event of a subject (a Job's run, a cluster, an add-on): opened when
    it begins, resolved when it ends (at once for an event that does not last). Its unique key
    makes two workers, a re-run or a restarted sync open it once."""

    subject = models.CharField(max_length=300)  # "job:7", "cluster:2", "addon:2:gpu-operator"
    event = models.CharField(max_length=32, choices=Event.choices)
    run = models.PositiveIntegerField(default=0)
    occurrence = models.PositiveIntegerField(default=1)
    job = models.ForeignKey(Job, models.CASCADE, null=True, blank=True, related_name="+")
    cluster = models.ForeignKey(Cluster, models.CASCADE, related_name="+")
    detail = models.TextField(blank=True)  # the add-on's name, the cluster's error
    opened_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    # When its messages are next due (notify.fanout.fan_out): at once when it opens or ends,
    # then a subscriber's pending threshold or repeat; None: nothing more.
    next_check_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["subject", "event", "run", "occurrence"], name="one_condition_occurrence"
            ),
        ]
        indexes = [
            models.Index(
                fields=["next_check_at"],
                name="condition_due",
                condition=Q(next_check_at__isnull=False),
            ),
            models.Index(fields=["job", "run"], name="condition_job"),
        ]

    def __str__(self) -> str:
        return f"{self.event} {self.subject} run {self.run} #{self.occurrence}"


class Watch(models.Model):
    """When a followed Job's workload state must be judged again (notify.watch): the moment
    time alone may turn it (jobs.status.workload.next_turn_at), or at once when a message or a
    new subscription may have turned it. A sync cycle reads only the rows due (one indexed
    query), so its notification step costs what changed, not what is followed."""

    job = models.OneToOneField(Job, models.CASCADE, primary_key=True, related_name="notify_watch")
    cluster = models.ForeignKey(Cluster, models.CASCADE, related_name="+")
    due_at = models.DateTimeField(null=True, blank=True)  # None: no clock runs
    # Raised by whoever marks the row due: a cycle that judged from an older reading leaves
    # a newer mark as it is (notify.watch.remember).
    marks = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["cluster", "due_at"], name="watch_due")]

    def __str__(self) -> str:
        return f"watch of job {self.job_id} due {self.due_at}"


class Outbox(models.Model):
    """One message due to one channel. Unique per (subscription, subject, run, event,
    occurrence, part, repeat): never twice, whatever re-runs (issue 32 §Build 1)."""

    subscription = models.ForeignKey(
        Subscription, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    channel = models.ForeignKey(Channel, models.CASCADE, related_name="outbox")
    subject = models.CharField(max_length=300)
    event = models.CharField(max_length=32, choices=Event.choices)
    run = models.PositiveIntegerField(default=0)
    occurrence = models.PositiveIntegerField(default=1)
    part = models.CharField(max_length=8, choices=Part.choices, default=Part.OPENED)
    repeat = models.PositiveIntegerField(default=0)
    job = models.ForeignKey(Job, models.SET_NULL, null=True, blank=True, related_name="+")
    # What the message says, fixed when it was written (the Job may be gone when it is sent).
    facts = models.JSONField(default=dict)
    # Standard Webhooks' `webhook-id`: the same on every attempt, so a receiver drops a repeat.
    message_id = models.CharField(max_length=40, default=new_message_id, unique=True)
    status = models.CharField(max_length=8, choices=SendStatus.choices, default=SendStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    # A worker's claim: another worker takes the row only after it (a worker killed mid-send).
    claimed_until = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=32, blank=True, default="")
    digest = models.ForeignKey(
        "self", models.SET_NULL, null=True, blank=True, related_name="merged"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["subscription", "subject", "run", "event", "occurrence", "part", "repeat"],
                condition=Q(subscription__isnull=False),
                name="one_message_per_occurrence",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="outbox_due"),
            models.Index(fields=["channel", "-created_at"], name="outbox_channel"),
        ]

    def __str__(self) -> str:
        return f"{self.event} {self.subject} -> {self.channel_id} ({self.status})"


class Delivery(models.Model):
    """One attempt to send a message (or a test send): when, what the platform answered."""

    channel = models.ForeignKey(Channel, models.CASCADE, related_name="deliveries")
    outbox = models.ForeignKey(
        Outbox, models.CASCADE, null=True, blank=True, related_name="deliveries"
    )
    event = models.CharField(max_length=32, blank=True)  # "" for a test send
    job = models.ForeignKey(Job, models.SET_NULL, null=True, blank=True, related_name="+")
    attempt = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=8, choices=SendStatus.choices)
    http_status = models.PositiveIntegerField(null=True, blank=True)
    platform_code = models.CharField(max_length=32, blank=True)
    message = models.TextField(blank=True)  # the platform's own answer, cut to 2 KiB
    latency_ms = models.PositiveIntegerField(default=0)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["channel", "-at"], name="delivery_channel")]

    def __str__(self) -> str:
        return f"{self.channel_id} {self.status} at {self.at}"
