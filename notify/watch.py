"""A sync cycle's notifications, in its transaction (console.engine.cycle): the events of the
Jobs somebody follows, of the add-ons whose rows changed and of the cluster, noticed in the cycle
that observes them (issue 32 §Build 1: within one sync cycle, not by a slower sweep). The cycle
opens and resolves occurrences; their messages are written by the notify worker that its commit
starts (notify.fanout.fan_out).

The step costs what changed, not what is followed or what Kubernetes reported: it judges the
Jobs whose phase the cycle wrote (a Job's events follow from its phase, run, stop and workload
report alone: notify.events.job_events), those a cycle touched that were never judged (a new
Job: its pending clock), and those whose watch is due (notify.models.Watch: the moment time
alone may turn their workload state, jobs.status.workload.next_turn_at, or at once when a
message or a new subscription may have turned it, notify.record.mark_due). A pod that restarts
while its Job's phase stays costs nothing here. A quiet cycle costs one indexed read and writes
nothing."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from django.db.models import F, Q, QuerySet

from console.bulk import upsert
from console.models import Addon, Cluster
from console.statements import Statement
from jobs.choices import JobPhase
from jobs.models import Job
from jobs.status.workload import judge, next_turn_at
from jobs.workload.report import report_rows, reports_in
from notify.choices import Event, ScopeKind
from notify.events import JOB_EVENTS, addon_events, job_events
from notify.fanout import LIVE
from notify.models import Condition, Subscription, Watch
from notify.record import (
    AT_ONCE,
    Judged,
    Subject,
    cluster_reachability,
    mark_due,
    settle,
)


def after_cycle(
    cluster: Cluster, turned: Collection[int], addons: Mapping[str, str], now: datetime,
    touched: Collection[int] = (),
) -> int:  # fmt: skip
    """Rows written for the cycle's events: a cluster read again after it was not, the followed
    Jobs whose phase the cycle wrote (`turned`), those it `touched` that were never judged,
    those whose watch is due, and the changed add-ons."""
    written = 0 if cluster.reachable else cluster_reachability(cluster, True, "", now)
    watches = due(cluster.pk, now)
    written += judge_jobs(cluster.pk, set(turned) | watches, set(touched), watches, now)
    if addons:
        written += judge_addons(cluster.pk, addons, now)
    return written


_DUE = Statement(
    lambda cluster_id, now: Watch.objects.filter(cluster_id=cluster_id, due_at__lte=now)
    .values_list("job_id"),
    int, datetime,
)  # fmt: skip


def due(cluster_id: int, now: datetime) -> set[int]:
    """The Jobs whose watch is due, in one query on its index (`watch_due`)."""
    return {job_id for (job_id,) in _DUE.rows(cluster_id, now)}


def _followed() -> Q:
    """A Job somebody follows: theirs, their project's, or the one Job they chose."""
    subscriptions = Subscription.objects.all()
    by_job = subscriptions.filter(scope=ScopeKind.JOB).values("job_id")
    by_project = subscriptions.filter(scope=ScopeKind.PROJECT).values("project_id")
    by_owner = subscriptions.filter(scope=ScopeKind.MINE).values("user_id")
    return Q(pk__in=by_job) | Q(project_id__in=by_project) | Q(owner_id__in=by_owner)


def follow(subscription: Subscription) -> None:
    """A new subscription: the live Jobs it covers are judged in the next cycle (one already
    Stalled is told at once, not at its next turn), and what they are in already is said to
    it by the next drain (notify.fanout.fan_out)."""
    scope = {
        ScopeKind.JOB: Q(pk=subscription.job_id),
        ScopeKind.PROJECT: Q(project_id=subscription.project_id),
    }.get(ScopeKind(subscription.scope), Q(owner_id=subscription.user_id))
    covered = list(
        Job.objects.filter(scope, phase__in=LIVE, delete_requested_at=None).values_list(
            "pk", flat=True
        )
    )
    mark_due(covered)
    ongoing = Condition.objects.filter(job_id__in=covered, resolved_at__isnull=True)
    ongoing.update(next_check_at=AT_ONCE)  # the new subscriber hears what lasts now


def _judged(cluster_id: Any, candidates: Any, touched: Any) -> QuerySet[Job, tuple[Any, ...]]:
    """The followed Jobs among the candidates and the touched ones never judged, with their
    watch and what judging reads (jobs.workload.report.report_rows)."""
    chosen = Q(pk__any_of=candidates) | Q(pk__any_of=touched, notify_watch=None)
    jobs = (
        Job.objects.filter(chosen, _followed(), cluster_id=cluster_id, delete_requested_at=None)
        .order_by()
        .annotate(watch_due=F("notify_watch__due_at"), watch_marks=F("notify_watch__marks"))
    )
    return report_rows(jobs, "pk", "phase", "run", "stopped", "watch_due", "watch_marks")


_JUDGED = Statement(_judged, int, list[int], list[int])


def judge_jobs(
    cluster_id: int, candidates: set[int], touched: set[int], watched: set[int], now: datetime
) -> int:
    """The candidates, and the touched Jobs never judged, that are followed, read with their
    watch in one query, judged, and their next moment remembered; a due watch of a Job nobody
    follows (or deleted, or moved) is dropped."""
    if not candidates and not touched:
        return 0
    rows = _JUDGED.rows(cluster_id, list(candidates), list(touched - candidates))
    judged: list[Judged] = []
    moments: list[tuple[int, datetime | None, int]] = []
    for (pk, phase, run, stopped, was_due, marks), report, policies in reports_in(rows, 6):
        job_phase = JobPhase(phase)
        state, _kind, _reason = judge(report, job_phase, run, policies, now)
        active = job_events(job_phase, stopped, state)
        judged.append(Judged(Subject.of_job(pk, run, cluster_id), active, JOB_EVENTS))
        moment = next_turn_at(report, job_phase, run, policies, now)
        if marks is None or moment != was_due:
            moments.append((pk, moment, marks or 0))
    remember(cluster_id, moments)
    dropped = watched - {item.subject.job_id for item in judged}
    if dropped:
        Watch.objects.filter(job_id__in=dropped, due_at__lte=now).delete()
    return settle(judged, now)


def remember(cluster_id: int, moments: list[tuple[int, datetime | None, int]]) -> None:
    """Each judged Job's next moment, in one statement, unless its watch was marked again since
    it was read (a message folded meanwhile): that mark stays, and the next cycle judges it."""
    rows = [[pk, cluster_id, moment, marks] for pk, moment, marks in moments]
    upsert(Watch, ["job"], ["cluster", "due_at", "marks"], rows, unchanged=["marks"])


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
