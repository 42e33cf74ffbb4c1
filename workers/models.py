"""The Worker view (a Task joined with one of its Pods) and the history of every Pod instance."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from jobs.choices import PodPhase
from jobs.models import Task


class Worker(models.Model):
    """The latest report for one pod slot of a Task, not a retry history (spec §Pod and Worker).

    A row whose `last_reported_at` is older than its Task's `observed_at` was missing from the
    last sync: it is shown as such, never silently dropped.
    """

    task = models.ForeignKey(Task, models.CASCADE, related_name="workers")
    pod_name = models.CharField(_("pod name"), max_length=253)
    pod_uid = models.CharField(_("pod UID"), max_length=64, blank=True)
    node_name = models.CharField(_("node"), max_length=253, blank=True)
    ip = models.CharField(_("IP"), max_length=45, blank=True)
    phase = models.CharField(_("pod phase"), max_length=16, choices=PodPhase.choices)
    ready = models.BooleanField(_("ready"), default=False)
    reason = models.CharField(_("reason"), max_length=128, blank=True)
    message = models.TextField(_("message"), blank=True)
    restart_count = models.PositiveIntegerField(_("restarts"), default=0)
    last_reported_at = models.DateTimeField(_("last reported at"))

    class Meta:
        ordering = ["task", "pod_name"]
        constraints = [
            models.UniqueConstraint(fields=["task", "pod_name"], name="one_worker_per_pod")
        ]

    def __str__(self) -> str:
        return self.pod_name


class PodInstance(models.Model):
    """One Pod instance (UID) as the console saw it: the timeline operators would build by hand."""

    task = models.ForeignKey(Task, models.CASCADE, related_name="pod_instances")
    uid = models.CharField(_("pod UID"), max_length=64, unique=True)
    pod_name = models.CharField(_("pod name"), max_length=253)
    node_name = models.CharField(_("node"), max_length=253, blank=True)
    ip = models.CharField(_("IP"), max_length=45, blank=True)
    phase = models.CharField(_("pod phase"), max_length=16, choices=PodPhase.choices)
    restart_count = models.PositiveIntegerField(_("restarts"), default=0)
    last_exit_code = models.IntegerField(_("last exit code"), null=True, blank=True)
    termination_reason = models.CharField(_("termination reason"), max_length=128, blank=True)
    created_at = models.DateTimeField(_("pod created at"), null=True, blank=True)
    first_seen_at = models.DateTimeField(_("first seen at"))
    # Written on change only: while `gone_at` is empty the instance is still listed, and was
    # last seen at the cluster's last successful sync (jobs.status.freshness.instance_last_seen_at).
    last_seen_at = models.DateTimeField(_("last seen at"))
    gone_at = models.DateTimeField(_("gone since"), null=True, blank=True)

    class Meta:
        ordering = ["task", "pod_name", "first_seen_at"]
        indexes = [
            models.Index(fields=["task", "pod_name"], name="instance_task_pod"),
            models.Index(
                fields=["task"], condition=models.Q(gone_at__isnull=True), name="instance_present"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pod_name} ({self.uid})"
