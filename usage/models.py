"""The GPU-hours ledger: each pod instance's GPUs over time, classed (jobs.status.usage), and
hourly roll-ups so that reports never scan the history (docs/usage.md)."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from console.models import Cluster
from jobs.choices import UsageClass
from jobs.models import Job, Task


class GpuInterval(models.Model):
    """One pod instance's GPUs held in one class, from `started_at` until `ended_at` (None while
    open). The pod's facts as Kubernetes reported them are kept on its open interval, so a class
    change needs nothing else; `due_at` is when time alone may change the class or the idle
    policy act (the sync re-judges the run then)."""

    job = models.ForeignKey(Job, models.CASCADE, related_name="gpu_intervals")
    run = models.PositiveIntegerField(_("run"))
    task = models.ForeignKey(Task, models.CASCADE, related_name="gpu_intervals")
    cluster = models.ForeignKey(Cluster, models.CASCADE, related_name="gpu_intervals")
    pod_uid = models.CharField(_("pod UID"), max_length=64)
    pod_name = models.CharField(_("pod name"), max_length=253)
    node_name = models.CharField(_("node"), max_length=253, blank=True)
    gpus = models.PositiveIntegerField(_("GPUs"))
    usage_class = models.CharField(_("class"), max_length=16, choices=UsageClass.choices)
    started_at = models.DateTimeField(_("from"))
    ended_at = models.DateTimeField(_("until"), null=True, blank=True)
    bound_at = models.DateTimeField(_("bound at"), null=True, blank=True)
    running_at = models.DateTimeField(_("running since"), null=True, blank=True)
    stopping_at = models.DateTimeField(_("stopping since"), null=True, blank=True)
    waiting_since = models.DateTimeField(_("waiting since"), null=True, blank=True)
    due_at = models.DateTimeField(_("judge again at"), null=True, blank=True)

    class Meta:
        ordering = ["job", "started_at", "pk"]
        indexes = [
            models.Index(fields=["pod_uid", "started_at"], name="usage_interval_pod"),
            models.Index(fields=["job", "started_at"], name="usage_interval_job"),
            models.Index(fields=["ended_at"], name="usage_interval_ended"),
            models.Index(
                fields=["cluster", "due_at"],
                condition=models.Q(ended_at__isnull=True),
                name="usage_interval_open",
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["pod_uid"],
                condition=models.Q(ended_at__isnull=True),
                name="usage_one_open_interval_per_pod",
            )
        ]

    def __str__(self) -> str:
        return f"{self.pod_name} {self.usage_class} {self.started_at:%Y-%m-%d %H:%M:%S}"


class UsageHour(models.Model):
    """The GPU-seconds of the closed intervals of one run and class within one hour. Names are
    copied so that a report reads no other table and outlives a deleted Job. On PostgreSQL the
    roll-ups have covering indexes on their hour or day (migration 0003): a report over a
    range is an index-only aggregate."""

    hour = models.DateTimeField(_("hour"))
    job_id = models.PositiveIntegerField(_("Job"))
    run = models.PositiveIntegerField(_("run"))
    usage_class = models.CharField(_("class"), max_length=16, choices=UsageClass.choices)
    job_name = models.CharField(_("Job name"), max_length=40)
    project_name = models.CharField(_("project"), max_length=100)
    username = models.CharField(_("owner"), max_length=150, blank=True)
    cluster_name = models.CharField(_("cluster"), max_length=100)
    gpu_seconds = models.FloatField(_("GPU-seconds"), default=0.0)
    wasted_gpu_seconds = models.FloatField(_("wasted GPU-seconds"), default=0.0)

    class Meta:
        ordering = ["hour", "job_id", "run", "usage_class"]
        constraints = [
            models.UniqueConstraint(
                fields=["hour", "job_id", "run", "usage_class"], name="usage_one_row_per_hour"
            )
        ]
        indexes = [models.Index(fields=["job_id", "run"], name="usage_hour_job")]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.job_name} {self.usage_class}"


class UsageDay(models.Model):
    """The same sums as `UsageHour` for a whole day (UTC): a report reads its whole days here,
    so a month is some 30 rows per run and class, not 720."""

    day = models.DateTimeField(_("day"))
    job_id = models.PositiveIntegerField(_("Job"))
    run = models.PositiveIntegerField(_("run"))
    usage_class = models.CharField(_("class"), max_length=16, choices=UsageClass.choices)
    job_name = models.CharField(_("Job name"), max_length=40)
    project_name = models.CharField(_("project"), max_length=100)
    username = models.CharField(_("owner"), max_length=150, blank=True)
    cluster_name = models.CharField(_("cluster"), max_length=100)
    gpu_seconds = models.FloatField(_("GPU-seconds"), default=0.0)
    wasted_gpu_seconds = models.FloatField(_("wasted GPU-seconds"), default=0.0)

    class Meta:
        ordering = ["day", "job_id", "run", "usage_class"]
        constraints = [
            models.UniqueConstraint(
                fields=["day", "job_id", "run", "usage_class"], name="usage_one_row_per_day"
            )
        ]

    def __str__(self) -> str:
        return f"{self.day:%Y-%m-%d} {self.job_name} {self.usage_class}"


class UsageGroupDay(models.Model):
    """A day's sums per project, person, cluster and class, every Job together: what a report
    grouped by project, person or cluster reads for its whole days (rows as many as the groups,
    not the Jobs)."""

    day = models.DateTimeField(_("day"))
    project_name = models.CharField(_("project"), max_length=100)
    username = models.CharField(_("owner"), max_length=150, blank=True)
    cluster_name = models.CharField(_("cluster"), max_length=100)
    usage_class = models.CharField(_("class"), max_length=16, choices=UsageClass.choices)
    gpu_seconds = models.FloatField(_("GPU-seconds"), default=0.0)
    wasted_gpu_seconds = models.FloatField(_("wasted GPU-seconds"), default=0.0)

    class Meta:
        ordering = ["day", "project_name", "username", "cluster_name", "usage_class"]
        constraints = [
            models.UniqueConstraint(
                fields=["day", "project_name", "username", "cluster_name", "usage_class"],
                name="usage_one_row_per_group_day",
            )
        ]

    def __str__(self) -> str:
        return f"{self.day:%Y-%m-%d} {self.project_name} {self.username} {self.usage_class}"


class UsageTotal(models.Model):
    """The GPU-seconds of a run's closed intervals in one class, all hours together: what a
    Job object and a Jobs list read (prefetched, a few rows per Job), kept with the roll-ups."""

    job = models.ForeignKey(Job, models.CASCADE, related_name="usage_totals")
    run = models.PositiveIntegerField(_("run"))
    usage_class = models.CharField(_("class"), max_length=16, choices=UsageClass.choices)
    gpu_seconds = models.FloatField(_("GPU-seconds"), default=0.0)
    wasted_gpu_seconds = models.FloatField(_("wasted GPU-seconds"), default=0.0)

    class Meta:
        ordering = ["job", "run", "usage_class"]
        constraints = [
            models.UniqueConstraint(
                fields=["job", "run", "usage_class"], name="usage_one_total_per_class"
            )
        ]

    def __str__(self) -> str:
        return f"job {self.job_id} run {self.run} {self.usage_class}"


class PodUtilisation(models.Model):
    """A pod instance's GPU utilisation as the cluster's Prometheus reported it (the DCGM
    exporter's series; usage/utilisation.py): the latest value, and its progressing
    GPU-seconds split into busy and low-utilisation, counted up to `counted_until` (each sample
    once). It informs: no class of the ledger depends on it."""

    job = models.ForeignKey(Job, models.CASCADE, related_name="pod_utilisations")
    run = models.PositiveIntegerField(_("run"))
    cluster = models.ForeignKey(Cluster, models.CASCADE, related_name="pod_utilisations")
    pod_uid = models.CharField(_("pod UID"), max_length=64, unique=True)
    pod_name = models.CharField(_("pod name"), max_length=253)
    gpus = models.PositiveIntegerField(_("GPUs"))
    percent = models.FloatField(_("GPU utilisation (%)"))
    measured_at = models.DateTimeField(_("measured at"))
    counted_until = models.DateTimeField(_("counted until"))
    busy_gpu_seconds = models.FloatField(_("busy GPU-seconds"), default=0.0)
    low_gpu_seconds = models.FloatField(_("low-utilisation GPU-seconds"), default=0.0)

    class Meta:
        ordering = ["job", "run", "pod_name"]
        indexes = [models.Index(fields=["job", "run"], name="usage_utilisation_run")]

    def __str__(self) -> str:
        return f"{self.pod_name} {self.percent:.0f}% at {self.measured_at:%Y-%m-%d %H:%M:%S}"
