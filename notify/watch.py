"""A sync cycle's notifications, in its transaction (console.engine.cycle): the events of the
Jobs somebody follows, of the add-ons whose rows changed and of the cluster, noticed in the cycle
that observes them (issue 32 §Build 1: within one sync cycle, not by a slower sweep).

A quiet cycle of a cluster whose Jobs nobody follows costs two reads and writes nothing: the
followed live Jobs (none), the occurrences due (none)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime

from django.db.models import Q

from console.models import Addon, Cluster
from jobs.choices import JobPhase
from jobs.models import Job
from jobs.workload.report import workload_states
from notify.choices import Event, ScopeKind
from notify.events import JOB_EVENTS, addon_events, job_events
from notify.models import Subscription
from notify.record import LIVE, Judged, Subject, cluster_reachability, process_due, settle


def after_cycle(
    cluster: Cluster, touched: Collection[int], addons: Mapping[str, str], now: datetime
) -> int:
    """Rows written for the cycle's events: a cluster read again after it was not, the followed
    Jobs' states (the live ones, and those the cycle changed), the changed add-ons, and the
    repeats and pending thresholds due now."""
    written = 0 if cluster.reachable else cluster_reachability(cluster, True, "", now)
    written += judge_jobs(cluster.pk, touched, now)
    if addons:
        written += judge_addons(cluster.pk, addons, now)
    return written + process_due(cluster.pk, now)


def _followed() -> Q:
    """A Job somebody follows: theirs, their project's, or the one Job they chose."""
    subscriptions = Subscription.objects.all()
    by_job = subscriptions.filter(scope=ScopeKind.JOB).values("job_id")
    by_project = subscriptions.filter(scope=ScopeKind.PROJECT).values("project_id")
    by_owner = subscriptions.filter(scope=ScopeKind.MINE).values("user_id")
    return Q(pk__in=by_job) | Q(project_id__in=by_project) | Q(owner_id__in=by_owner)


def judge_jobs(cluster_id: int, touched: Collection[int], now: datetime) -> int:
    scope = Q(phase__in=LIVE) | Q(pk__in=list(touched)) if touched else Q(phase__in=LIVE)
    jobs = Job.objects.filter(scope, _followed(), cluster_id=cluster_id, delete_requested_at=None)
    rows = {pk: (phase, run, stopped) for pk, phase, run, stopped in
            jobs.values_list("pk", "phase", "run", "stopped")}  # fmt: skip
    if not rows:
        return 0
    judged = []
    for pk, state, _reason in workload_states(Job.objects.filter(pk__in=list(rows)), now):
        phase, run, stopped = rows[pk]
        active = job_events(JobPhase(phase), stopped, state)
        judged.append(Judged(Subject.of_job(pk, run, cluster_id), active, JOB_EVENTS))
    return settle(judged, now)


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
