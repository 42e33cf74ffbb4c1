"""The vocabularies of notifications (issue 32): the event names as the API, the pages and the
payloads say them, channel kinds, and the states of a channel and of a message."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class Event(models.TextChoices):
    JOB_FAILED = "job.failed", _("Job failed")
    WORKLOAD_SUCCEEDED = "workload.succeeded", _("Workload succeeded")
    WORKLOAD_FAILED = "workload.failed", _("Workload failed")
    WORKLOAD_STALLED = "workload.stalled", _("Workload stalled")
    WORKLOAD_UNRESPONSIVE = "workload.unresponsive", _("Workload unresponsive")
    WORKLOAD_DEGRADED = "workload.degraded", _("Workload degraded")
    WORKLOAD_LOST = "workload.lost", _("Workload lost")
    JOB_PENDING_TOO_LONG = "job.pending_too_long", _("Job pending too long")
    JOB_STOPPED_BY_CONSOLE = "job.stopped_by_console", _("Job stopped by a policy")
    CLUSTER_UNREACHABLE = "cluster.unreachable", _("Cluster unreachable")
    CLUSTER_RECOVERED = "cluster.recovered", _("Cluster recovered")
    ADDON_FAILED = "addon.failed", _("Add-on failed")


class Kind(models.TextChoices):
    FEISHU = "feishu", _("Feishu / Lark")
    DINGTALK = "dingtalk", _("DingTalk")
    WECOM = "wecom", _("WeCom")
    SLACK = "slack", _("Slack")
    WEBHOOK = "webhook", _("Webhook")
    EMAIL = "email", _("E-mail")


WEBHOOK_KINDS = frozenset(kind for kind in Kind if kind != Kind.EMAIL)


class Language(models.TextChoices):
    EN = "en", "English"
    ZH_HANS = "zh-hans", "简体中文"


class ChannelState(models.TextChoices):
    OK = "ok", _("OK")
    BROKEN = "broken", _("Broken")


class ScopeKind(models.TextChoices):
    MINE = "mine", _("My Jobs")
    PROJECT = "project", _("A project")
    JOB = "job", _("One Job")


class Part(models.TextChoices):
    """Which message of an occurrence: its opening, a repeat while it lasts, its end."""

    OPENED = "opened", _("opened")
    REPEAT = "repeat", _("repeat")
    RESOLVED = "resolved", _("resolved")


class SendStatus(models.TextChoices):
    """A message's state in the outbox, and each delivery attempt's outcome (API `status`)."""

    PENDING = "pending", _("Pending")
    SENT = "sent", _("Sent")
    RETRYING = "retrying", _("Retrying")
    FAILED = "failed", _("Failed")
    MERGED = "merged", _("Merged into a digest")


SEND_TERMINAL = frozenset({SendStatus.SENT, SendStatus.FAILED, SendStatus.MERGED})


# What "Notify me" on a Job page subscribes to: everything that can happen to that Job.
JOB_PAGE_EVENTS = (
    Event.JOB_FAILED,
    Event.WORKLOAD_SUCCEEDED,
    Event.WORKLOAD_FAILED,
    Event.WORKLOAD_STALLED,
    Event.WORKLOAD_UNRESPONSIVE,
    Event.WORKLOAD_DEGRADED,
    Event.WORKLOAD_LOST,
    Event.JOB_PENDING_TOO_LONG,
    Event.JOB_STOPPED_BY_CONSOLE,
)
