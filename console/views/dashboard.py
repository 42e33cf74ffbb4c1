"""The dashboard: the user's Jobs by phase, the clusters' reachability and sync age, and the Jobs
that need a look, each with the reason in words.

A constant number of queries whatever the number of Jobs: counts are aggregated in the database,
and the attention list is one filtered query plus a fixed few over the Tasks, Workers and Nodes
of the Jobs shown (jobs.problem_facts), which the troubleshooting panel's own rule then judges.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import Case, Count, Exists, F, Max, OuterRef, Q, QuerySet, When, Window
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext as _

from console.models import Cluster
from console.web import HtmxHttpRequest, age_words_in_steps, not_modified, poll_version
from failures import judge
from jobs.access import User, clusters_for, jobs_for
from jobs.choices import Action, JobPhase
from jobs.diagnostics import Diagnostics, diagnostics_for
from jobs.models import Job, Operation
from jobs.problem_facts import known_problems, may_have_a_problem
from jobs.status.attention import (
    LIVE_PHASES,
    STUCK_PENDING_AFTER,
    JobFacts,
    Reason,
    attention_reasons,
    workload_reason,
)
from jobs.status.freshness import is_stale, job_freshness
from jobs.workload.report import workload_states
from usage.views import held_not_progressing

ATTENTION_LIMIT = 50
# The live Jobs whose workload spoke in their current run, judged per request (newest first):
# Stalled and Unresponsive are derived from the time, so the database cannot select them.
WORKLOAD_CANDIDATE_LIMIT = 500
# The Jobs judged per request (newest first). Nearly every Job the database selects has a
# problem (jobs.problem_facts.may_have_a_problem is a close superset), so a margin is enough.
CANDIDATE_LIMIT = ATTENTION_LIMIT * 3 // 2
# What the attention list reads of a Job (not its spec, which can be large).
ATTENTION_FIELDS = (
    "name",
    "phase",
    "run",
    "stopped",
    "created_at",
    "observed_at",
    "project__name",
    "cluster__name",
    "cluster__reachable",
    "cluster__last_synced_at",
)


@dataclass(frozen=True)
class Attention:
    pk: int
    name: str
    project: str
    phase: str
    reasons: tuple[Reason, ...]
    failure: str = ""  # why its run failed, short (failures.judge.short)


def _resumes() -> QuerySet[Operation]:
    """Resumes return a Job to Pending: Pending counts from the last one, else from creation."""
    return Operation.objects.filter(
        action=Action.RESUME, result__in=(Operation.Result.ACCEPTED, Operation.Result.APPLIED)
    )


def _stuck_pending(cutoff: datetime) -> Q:
    """Pending since before `cutoff`: created before it, and not resumed since (an EXISTS per
    old Pending Job only, rather than the last resume of every Job)."""
    resumed_since = _resumes().filter(job=OuterRef("pk"), requested_at__gte=cutoff)
    return Q(~Exists(resumed_since), phase=JobPhase.PENDING, created_at__lt=cutoff)


def last_resumes(job_ids: Iterable[int]) -> dict[int, datetime]:
    rows = _resumes().filter(job_id__in=list(job_ids)).values("job_id")
    return dict(rows.annotate(last=Max("requested_at")).values_list("job_id", "last"))


def _failed_unseen() -> Q:
    """Spec §Job status: after a failure, save logs and outputs, fix, clone. A Failed Job needs
    a look until a member has opened its page (Job.failure_seen_at) or someone cloned it."""
    clones = Job.objects.filter(cloned_from=OuterRef("pk"))
    return Q(~Exists(clones), phase=JobPhase.FAILED, failure_seen_at__isnull=True)


def _fresh(cutoff: datetime) -> Q:
    """The database form of `jobs.status.freshness.job_freshness(...).stale` being False: the Job
    row changed since the cutoff, or its cluster synced since then, or the Job is younger than that.
    (A sync before the Job's creation does not count there, but then the Job is younger.)"""
    return (
        Q(observed_at__gte=cutoff)
        | Q(cluster__last_synced_at__gte=cutoff)
        | Q(created_at__gte=cutoff)
    )


def _needing_attention(user: User, now: datetime, diagnostics: Diagnostics) -> QuerySet[Job]:
    live = Q(phase__in=LIVE_PHASES)
    return jobs_for(user).filter(
        _failed_unseen()
        | may_have_a_problem(now, diagnostics)
        | _stuck_pending(now - STUCK_PENDING_AFTER)
        | (live & Q(cluster__reachable=False))
        | (live & ~_fresh(now - timedelta(seconds=settings.TRAINYARD_STALE_AFTER))),
    )


def attention_jobs(
    user: User, now: datetime, diagnostics: Diagnostics
) -> tuple[list[Attention], int]:
    """The user's Jobs that need a look (at most ATTENTION_LIMIT) and how many there are: those
    whose workload is Stalled, Unresponsive, Degraded or Failed first (issue 10), then the rest.

    The database selects the candidates; the panel's rule judges the newest CANDIDATE_LIMIT of
    them. Past that many, the candidates not judged are counted as needing a look."""
    workloads = workload_reasons(user, now)
    flagged = Q(pk__in=list(workloads))
    needing = _needing_attention(user, now, diagnostics) | jobs_for(user).filter(flagged)
    candidates = list(
        needing.select_related("cluster", "project")
        .only(*ATTENTION_FIELDS)
        .alias(workload_first=Case(When(flagged, then=0), default=1))
        .annotate(needing_total=Window(Count("pk")))  # counted in the same scan
        .order_by("workload_first", "-created_at", "-pk")[:CANDIDATE_LIMIT]
    )
    problems = known_problems(candidates, now, diagnostics)
    resumed = last_resumes(job.pk for job in candidates if job.phase == JobPhase.PENDING)
    failures = judge.current_of(candidates)
    own = judge.own_signatures(failures.values())
    rows = [
        _attention_row(job, problems[job.pk], resumed.get(job.pk), workloads.get(job.pk), now)
        for job in candidates
    ]
    rows = [
        replace(row, failure=judge.short(failures[row.pk], own)) if row.pk in failures else row
        for row in rows
    ]
    rows = [row for row in rows if row.reasons]
    unjudged = candidates[-1].needing_total - len(candidates) if candidates else 0
    return rows[:ATTENTION_LIMIT], len(rows) + unjudged


def workload_reasons(user: User, now: datetime) -> dict[int, Reason]:
    """Why each live Job's workload needs a look, by Job id (one query of values: each report
    with its Job's phase, run and policies, the states derived as the jobs list does)."""
    spoke = jobs_for(user).filter(
        phase__in=(JobPhase.PENDING, JobPhase.RUNNING), workload__run=F("run")
    )
    newest = spoke.exclude(workload__outcome="succeeded").order_by("-created_at", "-pk")
    reasons = {}
    for pk, state, why in workload_states(newest[:WORKLOAD_CANDIDATE_LIMIT], now):
        reason = workload_reason(state, why)
        if reason is not None:
            reasons[pk] = reason
    return reasons


def _attention_row(
    job: Job,
    problems: Iterable[Reason],
    resumed_at: datetime | None,
    workload: Reason | None,
    now: datetime,
) -> Attention:
    facts = JobFacts(
        phase=job.phase,
        pending_since=max(job.created_at, resumed_at or job.created_at),
        freshness=job_freshness(job, now),
        cluster=job.cluster.name,
        cluster_reachable=job.cluster.reachable,
    )
    reasons = tuple(_worded(r, now) for r in attention_reasons(facts, problems, now, workload))
    return Attention(job.pk, job.name, job.project.name, job.phase, reasons)


def _worded(reason: Reason, now: datetime) -> Reason:
    """A stale status in words: its age in steps, as the dashboard words every age."""
    if reason.stale_since is None:
        return reason
    age = age_words_in_steps(reason.stale_since, now)
    return Reason(_("Stale status: last observed %(age)s.") % {"age": age})


@dataclass(frozen=True)
class ClusterLine:
    pk: int
    name: str
    reachable: bool
    message: str
    synced: bool
    synced_ago: str
    stale: bool


def cluster_lines(now: datetime, visible: QuerySet[Cluster]) -> list[ClusterLine]:
    clusters = visible.values("pk", "name", "reachable", "message", "last_synced_at")
    return [
        ClusterLine(
            pk=cluster["pk"],
            name=cluster["name"],
            reachable=cluster["reachable"],
            message=cluster["message"],
            synced=cluster["last_synced_at"] is not None,
            synced_ago=age_words_in_steps(cluster["last_synced_at"], now),
            stale=is_stale(cluster["last_synced_at"], now),
        )
        for cluster in clusters
    ]


def phase_counts(user: User) -> list[tuple[str, int]]:
    """Every Job phase with the number of the user's Jobs in it (zeros included)."""
    counted = dict(jobs_for(user).order_by().values_list("phase").annotate(count=Count("pk")))
    return [(phase.value, counted.get(phase.value, 0)) for phase in JobPhase]


@login_required
def dashboard(request: HtmxHttpRequest) -> HttpResponse:
    now = timezone.now()
    attention, attention_total = attention_jobs(request.user, now, diagnostics_for(request.user))
    held = held_not_progressing(request.user, now)  # GPU usage (usage.views)
    context = {
        "phase_counts": phase_counts(request.user),
        "clusters": cluster_lines(now, clusters_for(request.user)),
        "attention": attention,
        "attention_total": attention_total,
        "stuck_minutes": int(STUCK_PENDING_AFTER.total_seconds() // 60),
        "held": held,
    }
    # The ages shown are worded into the facts (age_words_in_steps): no age step.
    version = context["version"] = poll_version(
        request, context["phase_counts"], context["clusters"], attention, attention_total,
        [entry.key() for entry in held],
    )  # fmt: skip
    template = "console/dashboard.html#board" if request.htmx else "console/dashboard.html"
    return not_modified(request, version) or render(request, template, context)
