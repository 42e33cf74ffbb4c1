"""Jobs, their Tasks, Workflows over Jobs, and the Operation record of every user action."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeAlias

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from console.models import Cluster, Project
from jobs.choices import (
    Action,
    JobPhase,
    SignalSource,
    TaskKind,
    TaskPhase,
    WorkflowPhase,
    WorkloadState,
)
from jobs.status.lifecycle import counted_phase


class Workflow(models.Model):
    """A DAG of child Jobs (spec §Workflow status); its phase is aggregated from them."""

    project = models.ForeignKey(Project, models.CASCADE, related_name="workflows")
    name = models.CharField(_("name"), max_length=63)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, related_name="workflows"
    )
    phase = models.CharField(
        _("phase"), max_length=16, choices=WorkflowPhase.choices, default=WorkflowPhase.PENDING
    )
    message = models.TextField(_("message"), blank=True)
    # Chosen at creation (jobs.spec.WorkflowPolicies): {"advance_on_workload_success": bool}.
    policies = models.JSONField(_("policies"), default=dict, blank=True)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    # Set when what the Workflow counts of a child changed where no watch sees it (its
    # workload's outcome, a stop, a resume, a delete: jobs.records.recount_workflow); the
    # next sync cycle of any cluster derives the Workflow again and clears it.
    recount_requested_at = models.DateTimeField(_("recount requested at"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="one_workflow_per_name"),
        ]
        indexes = [
            # Every sync cycle asks for the marked Workflows: few, usually none.
            models.Index(
                fields=["recount_requested_at"],
                name="workflow_recount",
                condition=models.Q(recount_requested_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("workflow", args=[self.pk])


@dataclass(frozen=True)
class Child:
    """A child Job of a Workflow with its phase as the Workflow counts it."""

    pk: int
    name: str
    workflow_id: int | None
    phase: JobPhase


class JobQuerySet(models.QuerySet["Job"]):
    def counted_children(self, phases: Mapping[int, JobPhase] | None = None) -> list[Child]:
        """These Jobs as children, each with its phase as its Workflow counts it
        (lifecycle.counted_phase): with the Workflow's `advance_on_workload_success`, a child
        whose workload reported success in its current run counts as Succeeded. `phases`
        overrides stored phases (the sync's fresh ones). One query."""
        rows = self.values_list(
            "pk", "name", "workflow_id", "phase", "run", "workload__run", "workload__outcome",
            "workflow__policies",
        )  # fmt: skip
        phases = phases or {}
        counted = []
        for pk, name, workflow_id, phase, run, report_run, outcome, policies in rows:
            succeeded = report_run == run and outcome == "succeeded"
            advance = bool((policies or {}).get("advance_on_workload_success"))
            own = phases.get(pk, JobPhase(phase))
            counted.append(
                Child(
                    pk,
                    name,
                    workflow_id,
                    counted_phase(own, workload_succeeded=succeeded, advance=advance),
                )
            )
        return counted


class Job(models.Model):
    """What a user submits. `spec` is the original task template that resume re-creates from."""

    project = models.ForeignKey(Project, models.CASCADE, related_name="jobs")
    name = models.CharField(_("name"), max_length=40)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, related_name="jobs"
    )
    cluster = models.ForeignKey(Cluster, models.PROTECT, related_name="jobs")
    namespace = models.CharField(_("namespace"), max_length=63)
    spec = models.JSONField(_("task template"))
    stopped = models.BooleanField(_("spec.stopped"), default=False)
    # Incremented by resume: workloads labelled with an older run are re-created from `spec`.
    run = models.PositiveIntegerField(_("run"), default=1)
    phase = models.CharField(
        _("phase"), max_length=16, choices=JobPhase.choices, default=JobPhase.PENDING
    )
    message = models.TextField(_("message"), blank=True)
    workflow = models.ForeignKey(
        Workflow, models.CASCADE, null=True, blank=True, related_name="jobs"
    )
    cloned_from = models.ForeignKey(
        "self", models.SET_NULL, null=True, blank=True, related_name="clones"
    )
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    started_at = models.DateTimeField(_("started at"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    observed_at = models.DateTimeField(_("observed at"), null=True, blank=True)
    # A Failed Job needs a look until a member of its project opens its page (or clones it):
    # the dashboard lists it until then (jobs.operations.note_failure_seen).
    failure_seen_at = models.DateTimeField(_("failure seen at"), null=True, blank=True)
    failure_seen_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("failure seen by"),
    )
    # Delete is irreversible: reconcile removes the cluster objects, then this row.
    delete_requested_at = models.DateTimeField(_("delete requested at"), null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["phase", "cluster"], name="job_phase_cluster"),
            models.Index(fields=["project", "-created_at"], name="job_project_created"),
            # The Jobs list: its three orders (each read forwards or backwards) and its COUNT
            # (covering: the visible jobs of a project) stay index-only with 10,000 jobs.
            models.Index(fields=["created_at", "id"], name="job_created"),
            models.Index(fields=["name", "id"], name="job_name"),
            models.Index(fields=["phase", "-created_at", "-id"], name="job_phase_created"),
            models.Index(fields=["project", "delete_requested_at"], name="job_project_live"),
        ]
        constraints = [
            # Workload names derive from the job name, so it is unique where they live.
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="one_job_per_name"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("job", args=[self.pk])


class Task(models.Model):
    """One role of a Job, materialised as a StatefulSet or a batch Job named `<job>-<role>`."""

    job = models.ForeignKey(Job, models.CASCADE, related_name="tasks")
    role = models.CharField(_("role"), max_length=12)
    kind = models.CharField(
        _("kind"), max_length=16, choices=TaskKind.choices, default=TaskKind.STATEFULSET
    )
    template = models.JSONField(_("template"))
    node_selector = models.JSONField(_("node selector"), default=dict, blank=True)
    desired_replicas = models.PositiveIntegerField(_("desired replicas"), default=1)
    ready_replicas = models.PositiveIntegerField(_("ready replicas"), default=0)
    # The desired replicas of the workload as the cluster last reported it (0 once stopped,
    # spec §Task status), beside the template's `desired_replicas`; None: no workload seen.
    workload_replicas = models.PositiveIntegerField(
        _("workload's desired replicas"), null=True, blank=True
    )
    phase = models.CharField(
        _("phase"), max_length=16, choices=TaskPhase.choices, default=TaskPhase.PENDING
    )
    message = models.TextField(_("message"), blank=True)
    observed_at = models.DateTimeField(_("observed at"), null=True, blank=True)
    # The applied layer: what the console last told the cluster, and what came back.
    applied_at = models.DateTimeField(_("applied at"), null=True, blank=True)
    apply_error = models.TextField(_("apply error"), blank=True)

    class Meta:
        ordering = ["job", "pk"]
        constraints = [models.UniqueConstraint(fields=["job", "role"], name="one_task_per_role")]

    def __str__(self) -> str:
        return self.name

    @property
    def name(self) -> str:
        return f"{self.job.name}-{self.role}"


class WorkflowEdge(models.Model):
    """`downstream` may start only after `upstream` Succeeded."""

    workflow = models.ForeignKey(Workflow, models.CASCADE, related_name="edges")
    upstream = models.ForeignKey(Job, models.CASCADE, related_name="downstream_edges")
    downstream = models.ForeignKey(Job, models.CASCADE, related_name="upstream_edges")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["upstream", "downstream"], name="one_edge_per_pair"),
        ]

    def __str__(self) -> str:
        return f"{self.upstream_id} -> {self.downstream_id}"


class Operation(models.Model):
    """Who asked for what, when, and with what result. Kept after the Job is deleted."""

    class OperationResult(models.TextChoices):  # its name names its OpenAPI schema
        ACCEPTED = "accepted", _("Accepted")
        REFUSED = "refused", _("Refused")
        APPLIED = "applied", _("Applied")
        FAILED = "failed", _("Failed")

    Result: TypeAlias = OperationResult  # noqa: UP040 (Operation.Result.ACCEPTED at run time)

    job = models.ForeignKey(Job, models.SET_NULL, null=True, blank=True, related_name="operations")
    job_name = models.CharField(_("job"), max_length=40)
    project = models.ForeignKey(Project, models.SET_NULL, null=True, related_name="operations")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, related_name="operations"
    )
    action = models.CharField(_("action"), max_length=16, choices=Action.choices)
    result = models.CharField(_("result"), max_length=16, choices=Result.choices)
    message = models.TextField(_("message"), blank=True)
    requested_at = models.DateTimeField(_("requested at"), default=timezone.now)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)

    class Meta:
        ordering = ["-requested_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.action} {self.job_name}: {self.result}"


class Signal(models.Model):
    """One message a Job's workload posted about itself (jobs.workload.intake): the workload's
    own word, kept beside the Kubernetes facts, never in place of them. (pod, uid, seq) is
    unique so a resent message is recognised; old heartbeats and progress points are compacted."""

    job = models.ForeignKey(Job, models.CASCADE, related_name="signals")
    run = models.PositiveIntegerField(_("run"))
    pod = models.CharField(_("pod"), max_length=253)
    uid = models.CharField(_("pod UID"), max_length=64)
    seq = models.BigIntegerField(_("sequence number"))
    kind = models.CharField(_("kind"), max_length=16)
    source = models.CharField(
        _("source"), max_length=16, choices=SignalSource.choices, default=SignalSource.SIGNAL
    )
    at = models.DateTimeField(_("reported at"))
    received_at = models.DateTimeField(_("received at"), default=timezone.now)
    data = models.JSONField(_("data"), default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "pod", "uid", "seq"], name="one_signal_per_seq"),
        ]
        indexes = [
            models.Index(fields=["job", "kind", "received_at"], name="signal_job_kind"),
            models.Index(fields=["uid", "kind", "seq"], name="signal_uid_kind"),
        ]

    def __str__(self) -> str:
        return f"{self.pod} #{self.seq} {self.kind}"


class SeriesOverview(models.Model):
    """A run's whole chart kept by the compaction (jobs.workload.overview): every series' lowest
    and highest point per aligned time bucket (jobs.downsample.Overview), folded from the run's
    progress messages up to `through` (a Signal id), so the whole range is read as one row plus
    the messages stored since, not as every stored message."""

    job = models.ForeignKey(Job, models.CASCADE, related_name="series_overviews")
    run = models.PositiveIntegerField(_("run"))
    through = models.BigIntegerField(_("last message folded"), default=0)
    # JSON as bytes (orjson's), not a JSONField: PostgreSQL would parse its 60,000 numbers into
    # jsonb on every write and print them back to text on every read, most of the read's time.
    data = models.BinaryField(_("data"), default=b"")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "run"], name="one_series_overview_per_run"),
        ]

    def __str__(self) -> str:
        return f"run {self.run} through #{self.through}"


class WorkloadReport(models.Model):
    """The latest of what a Job's workload said in its current run, folded from its signals as
    they arrive (jobs.workload.report), so a list of 10,000 Jobs derives every workload state from
    one joined row each (jobs.status.workload). `latest` holds the newest message of each kind,
    with its time, the time the console received it and its source; `steps` the last step
    advances as [time, step] pairs, from which the step time and the stall threshold come."""

    job = models.OneToOneField(Job, models.CASCADE, primary_key=True, related_name="workload")
    run = models.PositiveIntegerField(_("run"))
    first_received_at = models.DateTimeField(_("first message at"))
    last_received_at = models.DateTimeField(_("last message at"))
    latest = models.JSONField(_("latest message of each kind"), default=dict)
    steps = models.JSONField(_("recent step advances"), default=list)
    # The workload's completion outcome ("" until it reports one): Workflows read it.
    outcome = models.CharField(_("outcome"), max_length=16, blank=True)
    # When the run's signals were last compacted (jobs.workload.intake.compact): the fold that finds
    # it a minute old compacts them, under this row's lock, so once a minute for every web process.
    compacted_at = models.DateTimeField(_("signals compacted at"), null=True, blank=True)
    # The Job's workload policies (jobs.status.workload.Policies), copied from its spec when the
    # run's first message arrives: the fold judges the spells it records with them.
    policies = models.JSONField(_("workload policies"), default=dict, blank=True)

    def __str__(self) -> str:
        return f"workload of job {self.job_id} (run {self.run})"


class WorkloadSpell(models.Model):
    """A time a run's workload was Stalled, Unresponsive or Degraded, recorded by the fold when
    the message that ended it arrived (jobs.workload.report): the bands a chart shades. A spell
    still going on is not stored: it is the state derived now (jobs.status.workload)."""

    job = models.ForeignKey(Job, models.CASCADE, related_name="spells")
    run = models.PositiveIntegerField(_("run"))
    state = models.CharField(_("state"), max_length=16, choices=WorkloadState.choices)
    started_at = models.DateTimeField(_("started at"))
    ended_at = models.DateTimeField(_("ended at"))

    class Meta:
        indexes = [models.Index(fields=["job", "run", "started_at"], name="spell_job_run")]

    def __str__(self) -> str:
        return f"{self.state} {self.started_at:%Y-%m-%d %H:%M}"
