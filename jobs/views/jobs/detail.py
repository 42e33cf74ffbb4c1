"""The job page: spec §Where to look, in order, each value with its layer and age."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import Count, F, Q
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from console.models import Cluster, Node
from console.web import HtmxHttpRequest, not_modified, poll_version
from failures import judge
from failures.models import Finding
from jobs import rlinf
from jobs.access import get_job_for_user, jobs_for
from jobs.choices import JOB_TERMINAL, Action, JobPhase, TaskKind
from jobs.diagnostics import shows_diagnostics
from jobs.forms import DeleteForm
from jobs.messages import render_text
from jobs.models import Job, Operation
from jobs.operations import note_failure_seen
from jobs.pod_logs import reads_logs
from jobs.problem_facts import instance_details, pod_facts, task_facts
from jobs.status import freshness as status
from jobs.status.lifecycle import allowed_actions
from jobs.status.troubleshoot import ClusterFacts, Diagnosis, NodeFacts, PodFacts, diagnose
from jobs.status.workload import Policies
from jobs.views.jobs.common import ClusterState, ShownTask, can_operate, cluster_state
from jobs.views.jobs.record import record_text
from jobs.views.jobs.workload_panel import panel_key, with_sparklines, workload_panel
from usage.views import job_figures
from workers.models import Worker

HISTORY_LIMIT = 20
# Worker rows the troubleshooting panel looks at: those that are not simply fine, at most this
# many (the panel names the first few of each kind; the Worker rows show them all).
SUSPECT_LIMIT = 200
NodeRow = tuple[str, str, bool]  # name, phase, unschedulable


@login_required
def job_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The status part refreshes with htmx; 204 when what it shows has not changed, decided
    from its version's facts before the rest of the page is built."""
    job = get_job_for_user(request.user, pk)
    note_failure_seen(request.user, job)  # the dashboard lists a Failed job until a member looks
    if request.htmx and request.GET.get("part") == "status":
        facts = status_facts(request, job)
        fragment = "jobs/detail.html#status"
        return not_modified(request, facts.version) or render(
            request, fragment, job_context(request, job, facts)
        )
    context = job_context(request, job)
    context["delete_form"] = DeleteForm(job_name=job.name)
    context["reads_logs"] = reads_logs(request.user, job)
    context["record"] = record_text(request, job, context)
    context["usage_figures"] = job_figures(job, timezone.now())  # GPU-hours (usage.views)
    return render(request, "jobs/detail.html", context)


@login_required
def job_record(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The troubleshooting record as text/plain: selectable, and what the copy button copies."""
    job = get_job_for_user(request.user, pk)
    response = HttpResponse(record_text(request, job, job_context(request, job)))
    response["Content-Type"] = "text/plain; charset=utf-8"
    return response


@dataclass(frozen=True)
class StatusFacts:
    """What the status part's version is made of, read before anything else of the page: a
    poll whose version is unchanged is answered with these alone."""

    now: datetime
    cluster: ClusterState
    tasks: list[ShownTask]
    operations: list[Operation]
    actions: frozenset[Action]
    diagnostics: bool
    observed_at: datetime | None
    decision: Operation | None
    panel: dict[str, Any]
    failure: Finding | None
    version: str


def status_facts(request: HtmxHttpRequest, job: Job) -> StatusFacts:
    """The times a sync confirms (observed at, last sync) move with every cycle, so they are in
    the version only through the age step, as on the Jobs list; what a sync changes (phases,
    counts, staleness, reachability, whether a decision still waits for a report) is in it."""
    now = timezone.now()
    cluster = cluster_state(job.cluster, now)
    tasks = _task_rows(job, now)
    operations = list(job.operations.select_related("user")[:HISTORY_LIMIT])
    actions = _actions(request, job)
    diagnostics = shows_diagnostics(request.user, job)
    observed_at = status.job_freshness(job, now).observed_at
    decision = _decision(job, operations, observed_at)
    panel = workload_panel(job, now)
    failure = judge.current(job)
    version = poll_version(
        request, _job_key(job), cluster.reachable, cluster.stale, cluster.waiting,
        [_task_key(row) for row in tasks],
        [(op.pk, op.result, op.message, op.finished_at) for op in operations],
        decision and decision.pk, sorted(actions), diagnostics, panel_key(panel),
        failure and (failure.pk, failure.judged_at), now=now,
    )  # fmt: skip
    facts = (now, cluster, tasks, operations, actions, diagnostics, observed_at, decision)
    return StatusFacts(*facts, panel, failure, version)


def job_context(
    request: HtmxHttpRequest, job: Job, facts: StatusFacts | None = None
) -> dict[str, Any]:
    facts = facts or status_facts(request, job)
    cluster, tasks, actions, operations = (
        facts.cluster,
        facts.tasks,
        facts.actions,
        facts.operations,
    )
    diagnosis, capped = _diagnosis(job, cluster, tasks, facts.diagnostics)
    terminal = job.phase in JOB_TERMINAL
    return {
        "job": job, "now": facts.now, "cluster": cluster, "tasks": tasks,
        "operations": operations, "observed_at": facts.observed_at, "decision": facts.decision,
        "awaiting_first_report": job.observed_at is None and job.phase == JobPhase.PENDING,
        "cloned_from": _cloned_from(request, job),
        "last_operation": operations[0] if operations else None,
        "diagnosis": diagnosis, "suspects_capped": capped,
        "actions": {action.value for action in actions}, "can_operate": bool(actions),
        "diagnostics": facts.diagnostics, "poll": not terminal,
        "version": facts.version, "panel": with_sparklines(job, facts.panel),
        "policies": Policies.of(job.spec),
        "made_by_rlinf": job.spec.get("template") == rlinf.TEMPLATE,
        "has_statefulset": any(row.task.kind == TaskKind.STATEFULSET for row in tasks),
        "is_running": job.phase == JobPhase.RUNNING,
        "stop_keeps_failed": job.phase == JobPhase.FAILED and Action.STOP in actions,
        "failure": shown_failure(job, facts.failure, facts.diagnostics, facts.now),
    }  # fmt: skip


@dataclass(frozen=True)
class ShownFailure:
    """The failure banner (issue 34, item 5) as its reader sees it: the label, class and advice
    for every reader; the log line, where it was raised and the link to it in the kept log only
    with diagnostics (jobs.diagnostics)."""

    finding: Finding
    words: judge.Words
    failed: bool  # the run ended (Failed, or Stopped since); else it is failing (a restart)
    at: str  # local time: "03:12" today, with the date before
    at_full: str
    line: str
    raised_at: str
    log_url: str


def shown_failure(
    job: Job, finding: Finding | None, diagnostics: bool, now: datetime
) -> ShownFailure | None:
    if finding is None:
        return None
    at = timezone.localtime(finding.at) if finding.at else None
    today = at is not None and at.date() == timezone.localtime(now).date()
    log_url = ""
    if diagnostics and finding.kept_log_id is not None:
        logs = reverse("job_logs", args=[job.pk])
        log_url = f"{logs}?kept={finding.kept_log_id}#L{finding.line_number or 1}"
    return ShownFailure(
        finding, judge.words(finding), job.phase in (JobPhase.FAILED, JobPhase.STOPPED),
        at.strftime("%H:%M" if today else "%Y-%m-%d %H:%M") if at else "",
        at.strftime("%Y-%m-%d %H:%M:%S %Z") if at else "",
        finding.first_error if diagnostics else "",
        finding.raised_at if diagnostics else "", log_url,
    )  # fmt: skip


# The phase each operation sets itself (jobs.operations): Stopped on stop, Pending on resume.
DECIDED_PHASES = {Action.STOP: JobPhase.STOPPED, Action.RESUME: JobPhase.PENDING}


def _decision(
    job: Job, operations: Sequence[Operation], observed_at: datetime | None
) -> Operation | None:
    """The stop or resume whose phase the Job shows while the cluster has not reported since
    (spec §Job status): the page shows it as the console's decision, not as an observation."""
    latest = next(
        (op for op in operations
         if op.action in DECIDED_PHASES and op.result != Operation.Result.REFUSED),
        None,
    )  # fmt: skip
    if latest is None or DECIDED_PHASES[Action(latest.action)] != job.phase:
        return None
    return latest if status.decided_after_report(latest.requested_at, observed_at) else None


@dataclass(frozen=True)
class ClonedFrom:
    pk: int
    name: str  # "" when this user cannot see it (or it is being deleted)


def _cloned_from(request: HtmxHttpRequest, job: Job) -> ClonedFrom | None:
    """The source's name only for someone who may see it: a clone may cross projects."""
    if job.cloned_from_id is None:
        return None
    name = jobs_for(request.user).filter(pk=job.cloned_from_id).values_list("name", flat=True)
    return ClonedFrom(job.cloned_from_id, name.first() or "")


def _actions(request: HtmxHttpRequest, job: Job) -> frozenset[Action]:
    """Spec §Job status, for members only: viewers get no action at all."""
    if not can_operate(request.user, job):
        return frozenset()
    return allowed_actions(JobPhase(job.phase), job.stopped)


def _task_rows(job: Job, now: datetime) -> list[ShownTask]:
    """Each Task with its Worker counts, counted in the database (no row per pod)."""
    missing = Q(workers__last_reported_at__lt=F("observed_at"))
    tasks = job.tasks.annotate(
        workers_total=Count("workers"), workers_missing=Count("workers", filter=missing)
    ).order_by("pk")
    return [
        ShownTask(
            task,
            status.task_freshness(task, job.cluster, now).observed_at,
            task.workers_total - task.workers_missing,  # type: ignore[attr-defined]
            task.workers_missing,  # type: ignore[attr-defined]
        )
        for task in tasks
    ]


def _job_key(job: Job) -> tuple[object, ...]:
    return (job.phase, job.message, job.stopped, job.run, job.observed_at, job.started_at,
            job.finished_at)  # fmt: skip


def _task_key(row: ShownTask) -> tuple[object, ...]:
    task = row.task
    return (task.pk, task.phase, task.message, task.desired_replicas, task.ready_replicas,
            task.workload_replicas, task.observed_at, task.applied_at, task.apply_error,
            row.worker_count, row.unreported_count)  # fmt: skip


# --- troubleshooting -------------------------------------------------------------------------


def _diagnosis(
    job: Job, cluster: ClusterState, tasks: Sequence[ShownTask], diagnostics: bool
) -> tuple[Diagnosis, bool]:
    """Spec §Troubleshooting over what the engine stored, as this user may see it: restart
    counts, exit codes and termination reasons only with diagnostics (jobs.diagnostics).
    Also says whether the suspect pods were capped at SUSPECT_LIMIT."""
    nodes: list[NodeRow] = list(
        Node.objects.filter(cluster=job.cluster_id)
        .order_by()
        .values_list("name", "phase", "unschedulable")
    )
    offline = [name for name, phase, _ in nodes if phase == Node.Phase.OFFLINE]
    suspects = _suspect_workers(job, offline)
    details = instance_details(suspects) if diagnostics else {}
    pods: dict[int, list[PodFacts]] = {}
    for worker in suspects:
        pods.setdefault(worker.task_id, []).append(pod_facts(worker, diagnostics, details))
    now = timezone.now()
    diagnosis = diagnose(
        stopped=job.stopped,
        cluster=_cluster_facts(job.cluster, cluster),
        nodes=[NodeFacts(name, phase == Node.Phase.ONLINE, not off) for name, phase, off in nodes],
        tasks=[
            task_facts(job, row.task, pods.get(row.task.pk, []), row.worker_count, now, diagnostics)
            for row in tasks
        ],
        patience=settings.TRAINYARD_STALE_AFTER,
    )
    return diagnosis, len(suspects) >= SUSPECT_LIMIT


def _cluster_facts(cluster: Cluster, state: ClusterState) -> ClusterFacts:
    return ClusterFacts(cluster.name, state.reachable, state.stale, render_text(cluster.message))


SUSPECT_FIELDS = (
    "task_id", "pod_name", "pod_uid", "node_name", "phase", "ready", "reason", "message",
    "restart_count", "last_reported_at", "task__observed_at",
)  # fmt: skip


def _suspect_workers(job: Job, offline: Iterable[str]) -> list[Any]:
    """Worker rows that are not simply running and ready, or that the last sync did not report
    (plain named rows: the panel needs no model instances): a superset of the pods
    jobs.status.problems.classify flags, which tests/jobs/test_pod_problems.py holds."""
    suspect = (
        Q(ready=False) | ~Q(reason="") | Q(restart_count__gt=0) | Q(node_name__in=list(offline))
        | Q(last_reported_at__lt=F("task__observed_at"))
    )  # fmt: skip
    workers = Worker.objects.filter(task__job=job).filter(suspect).order_by("task_id", "pod_name")
    return list(workers.values_list(*SUSPECT_FIELDS, named=True)[:SUSPECT_LIMIT])
