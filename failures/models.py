"""Why a run failed (issue 34): container logs kept before Kubernetes loses them, the first error
found in them, and the failure signatures operators add to the shipped ones."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from console.models import Project
from jobs.choices import FailureClass
from jobs.models import Job


class KeptLog(models.Model):
    """The tail of one container run's log (a pod UID and a restart count), kept at a moment
    it would be lost. The text lives in the `kept_logs` storage, compressed (failures.store);
    the row survives the pod, the run, a stop and (for TRAINYARD_LOG_KEEP_AFTER_DELETE_DAYS)
    the Job's deletion."""

    class Why(models.TextChoices):
        RESTART = "restart", _("the container restarted")
        COMPLETION = "completion", _("the workload reported its end")
        FAILED = "failed", _("the Job turned Failed")
        STOP = "stop", _("before a stop")
        RESUME = "resume", _("before a resume")
        DELETE = "delete", _("before a delete")

    project = models.ForeignKey(Project, models.CASCADE, related_name="kept_logs")
    job = models.ForeignKey(Job, models.SET_NULL, null=True, related_name="kept_logs")
    job_name = models.CharField(_("Job"), max_length=40)
    run = models.PositiveIntegerField(_("run"))
    pod_name = models.CharField(_("pod name"), max_length=253)
    pod_uid = models.CharField(_("pod UID"), max_length=64)
    container = models.CharField(_("container"), max_length=63)
    # The container run: its restart count (0 for the first run).
    attempt = models.PositiveIntegerField(_("attempt"))
    why = models.CharField(_("kept because"), max_length=16, choices=Why.choices)
    kept_at = models.DateTimeField(_("kept at"), default=timezone.now)
    first_line_at = models.DateTimeField(_("first line at"), null=True, blank=True)
    last_line_at = models.DateTimeField(_("last line at"), null=True, blank=True)
    lines = models.PositiveIntegerField(_("lines"), default=0)
    text_bytes = models.PositiveIntegerField(_("size"), default=0)
    stored_bytes = models.PositiveIntegerField(_("stored size"), default=0)
    cut = models.BooleanField(_("older lines left out"), default=False)
    name = models.CharField(_("stored as"), max_length=255)
    # Set when the Job is deleted: the row and its text go at this time (retention otherwise).
    delete_after = models.DateTimeField(_("deleted after"), null=True, blank=True)

    class Meta:
        ordering = ["-kept_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["pod_uid", "container", "attempt"], name="one_kept_log_per_attempt"
            )
        ]
        indexes = [
            models.Index(fields=["job", "run"], name="kept_log_job_run"),
            models.Index(fields=["project", "kept_at"], name="kept_log_project_age"),
        ]

    def __str__(self) -> str:
        return f"{self.pod_name}/{self.container} #{self.attempt}"


class Finding(models.Model):
    """The first error of a Job's run, judged from its kept logs (jobs.status.failure) or, when
    they name nothing, from the reason Kubernetes gave. One per run, replaced on a new judgement."""

    job = models.ForeignKey(Job, models.CASCADE, related_name="findings")
    run = models.PositiveIntegerField(_("run"))
    code = models.CharField(_("signature"), max_length=64, blank=True)
    label = models.CharField(_("label"), max_length=200)
    failure_class = models.CharField(_("class"), max_length=32, choices=FailureClass.choices)
    first_error = models.TextField(_("first error"), blank=True)
    raised_at = models.CharField(_("raised at"), max_length=300, blank=True)
    pod_name = models.CharField(_("pod name"), max_length=253, blank=True)
    container = models.CharField(_("container"), max_length=63, blank=True)
    attempt = models.PositiveIntegerField(_("attempt"), null=True, blank=True)
    line_number = models.PositiveIntegerField(_("line"), null=True, blank=True)
    at = models.DateTimeField(_("at"), null=True, blank=True)
    kept_log = models.ForeignKey(KeptLog, models.SET_NULL, null=True, blank=True)
    consequence = models.BooleanField(_("only a consequence was found"), default=False)
    judged_at = models.DateTimeField(_("judged at"), default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "run"], name="one_finding_per_run")]

    def __str__(self) -> str:
        return f"{self.job_id} run {self.run}: {self.label}"


class Signature(models.Model):
    """A failure signature an operator added (the shipped ones are jobs.status.failure's): an
    RE2 pattern matched against each line, with its label, class and advice in both languages.
    Operators' signatures are tried before the shipped ones."""

    code = models.SlugField(_("code"), max_length=64, unique=True)
    label = models.CharField(_("label"), max_length=200)
    label_zh = models.CharField(_("label (简体中文)"), max_length=200, blank=True)
    failure_class = models.CharField(_("class"), max_length=32, choices=FailureClass.choices)
    pattern = models.TextField(_("pattern"))
    advice = models.TextField(_("advice"), blank=True)
    advice_zh = models.TextField(_("advice (简体中文)"), blank=True)
    consequence = models.BooleanField(
        _("a consequence"), default=False,
        help_text=_("It names what follows a failure, never its cause (like ray.kill)."),
    )  # fmt: skip
    enabled = models.BooleanField(_("enabled"), default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)

    class Meta:
        ordering = ["code"]

    def __str__(self) -> str:
        return self.code
