"""A sync cycle's notifications, in its transaction (console.engine.cycle): the events of the
Jobs somebody follows, of the add-ons whose rows changed and of the cluster, noticed in the cycle
that observes them (issue 32 §Build 1: within one sync cycle, not by a slower sweep).

The step costs what changed, not what is followed: it judges the Jobs the cycle touched and
those whose watch is due (notify.models.Watch: the moment time alone may turn their workload
state, jobs.status.workload.next_turn_at, or at once when a message or a new subscription may
have turned it, notify.record.mark_due). A quiet cycle costs one indexed read and writes
nothing: the watches and the occurrences due (none)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import F, Q, Value

from console.models import Addon, Cluster
from jobs.choices import JobPhase
from jobs.models import Job
from jobs.status.workload import Policies, judge, next_turn_at
from jobs.workload.report import POLICIES, report_of, with_workload
from notify.choices import Event, ScopeKind
from notify.events import JOB_EVENTS, addon_events, job_events
from notify.models import Subscription, Watch
from notify.record import (
    LIVE,
    Judged,
    Subject,
    cluster_reachability,
    conditions_due,
    emit,
    mark_due,
    settle,
)


def after_cycle(
    cluster: Cluster, touched: Collection[int], addons: Mapping[str, str], now: datetime
) -> int:
    """Rows written for the cycle's events: a cluster read again after it was not, the followed
    Jobs the cycle touched or whose watch is due, the changed add-ons, and the repeats and
    pending thresholds due now."""
    written = 0 if cluster.reachable else cluster_reachability(cluster, True, "", now)
    watches, conditions = due(cluster.pk, now)
    written += judge_jobs(cluster.pk, set(touched) | watches, watches, now)
    if addons:
        written += judge_addons(cluster.pk, addons, now)
    if conditions:
        written += emit(list(conditions_due(cluster.pk, now).filter(pk__in=conditions)), now)
    return written


def due(cluster_id: int, now: datetime) -> tuple[set[int], set[int]]:
    """The Jobs whose watch is due and the occurrences whose next message is due, in one
    query on two indexes (notify_watch's and the occurrences' `watch_due`, `condition_due`)."""
    jobs = Watch.objects.filter(cluster_id=cluster_id, due_at__lte=now)
    rows = (
        jobs.annotate(tag=Value("job"))
        .values_list("job_id", "tag")
        .union(
            conditions_due(cluster_id, now)
            .annotate(tag=Value("occurrence"))
            .values_list("pk", "tag"),
            all=True,
        )
    )
    found: dict[str, set[int]] = {"job": set(), "occurrence": set()}
    for pk, tag in rows:
        found[tag].add(pk)
    return found["job"], found["occurrence"]


def _followed() -> Q:
    """A Job somebody follows: theirs, their project's, or the one Job they chose."""
    subscriptions = Subscription.objects.all()
    by_job = subscriptions.filter(scope=ScopeKind.JOB).values("job_id")
    by_project = subscriptions.filter(scope=ScopeKind.PROJECT).values("project_id")
    by_owner = subscriptions.filter(scope=ScopeKind.MINE).values("user_id")
    return Q(pk__in=by_job) | Q(project_id__in=by_project) | Q(owner_id__in=by_owner)


def follow(subscription: Subscription) -> None:
    """A new subscription: the live Jobs it covers are judged in the next cycle (one already
    Stalled is told at once, not at its next turn)."""
    scope = {
        ScopeKind.JOB: Q(pk=subscription.job_id),
        ScopeKind.PROJECT: Q(project_id=subscription.project_id),
    }.get(ScopeKind(subscription.scope), Q(owner_id=subscription.user_id))
    covered = Job.objects.filter(scope, phase__in=LIVE, delete_requested_at=None)
    mark_due(list(covered.values_list("pk", flat=True)))


def judge_jobs(cluster_id: int, candidates: set[int], watched: set[int], now: datetime) -> int:
    """The candidates that are followed, read with their watch in one query, judged, and
    their next moment remembered; a due watch of a Job nobody follows (or deleted, or moved)
    is dropped."""
    if not candidates:
        return 0
    jobs = Job.objects.filter(
        _followed(), pk__in=candidates, cluster_id=cluster_id, delete_requested_at=None
    ).annotate(watch_due=F("notify_watch__due_at"), watch_marks=F("notify_watch__marks"))
    judged: list[Judged] = []
    moments: list[tuple[int, datetime | None, int]] = []
    for job in with_workload(jobs):
        report = report_of(getattr(job, "workload", None))
        policies = Policies.of({"policies": getattr(job, POLICIES)})
        phase = JobPhase(job.phase)
        state, _kind, _reason = judge(report, phase, job.run, policies, now)
        active = job_events(phase, job.stopped, state)
        judged.append(Judged(Subject.of_job(job.pk, job.run, cluster_id), active, JOB_EVENTS))
        moment = next_turn_at(report, phase, job.run, policies, now)
        marks, was_due = getattr(job, "watch_marks"), getattr(job, "watch_due")  # noqa: B009
        if marks is None or moment != was_due:
            moments.append((job.pk, moment, marks or 0))
    remember(cluster_id, moments)
    dropped = watched - {item.subject.job_id for item in judged}
    if dropped:
        Watch.objects.filter(job_id__in=dropped, due_at__lte=now).delete()
    return settle(judged, now)


def remember(cluster_id: int, moments: list[tuple[int, datetime | None, int]]) -> None:
    """Each judged Job's next moment, in one statement, unless its watch was marked again since
    it was read (a message folded meanwhile): that mark stays, and the next cycle judges it."""
    if not moments:
        return
    watch = Watch._meta.db_table
    adapt = connection.ops.adapt_datetimefield_value
    values = ", ".join(["(%s, %s, %s, %s)"] * len(moments))
    params: list[Any] = []
    for pk, moment, marks in moments:
        params += [pk, cluster_id, adapt(moment) if moment else None, marks]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {watch} (job_id, cluster_id, due_at, marks) VALUES {values} "
            f"ON CONFLICT (job_id) DO UPDATE SET due_at = CASE WHEN {watch}.marks = "
            f"excluded.marks THEN excluded.due_at ELSE {watch}.due_at END",
            params,
        )


def judge_addons(cluster_id: int, addons: Mapping[str, str], now: datetime) -> int:
    """The add-ons whose rows the cycle wrote: spec §Node and Addon status (Failed)."""
    judged = [
        Judged(
            Subject.of_addon(cluster_id, name),
            addon_events(phase == Addon.Phase.FAILED),
            frozenset({Event.ADDON_FAILED}),
        )
        for name, phase in addons.items()
    ]
    return settle(judged, now)
