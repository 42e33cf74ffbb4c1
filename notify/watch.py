"""A sync cycle's notifications, in its transaction (console.engine.cycle): the events of the
Jobs somebody follows, of the add-ons whose rows changed and of the cluster, noticed in the cycle
that observes them (issue 32 §Build 1: within one sync cycle, not by a slower sweep).

A quiet cycle costs two reads and writes nothing: the facts of the followed live Jobs (none
when nobody follows any), the occurrences due (none); a Job's workload state is judged again
only when it may have turned."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q

from console.models import Addon, Cluster
from jobs.choices import JobPhase
from jobs.models import Job
from jobs.status.workload import Policies, judge, next_turn_at
from jobs.workload.report import POLICIES, report_of, with_workload
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


@dataclass(frozen=True)
class Seen:
    """What a Job was judged from, and when time alone may change the judgement."""

    facts: tuple[Any, ...]  # phase, run, stopped, its report's run and last message time
    recheck_at: datetime | None


# Per process and cluster, the Jobs judged by the last committed cycle: a cache, never a source
# of truth. A Job is judged again when a fact of it changed, when its moment came
# (jobs.status.workload.next_turn_at), when the cycle touched it, or when this process has not
# judged it (another worker ran the last cycle: everything is judged, the constraints dedupe).
_SEEN: dict[int, dict[int, Seen]] = {}


def forget() -> None:
    _SEEN.clear()


def _due_again(known: Seen | None, facts: tuple[Any, ...], now: datetime) -> bool:
    if known is None or known.facts != facts:
        return True
    return known.recheck_at is not None and now >= known.recheck_at


def judge_jobs(cluster_id: int, touched: Collection[int], now: datetime) -> int:
    """The followed live Jobs (and those the cycle changed): one read of their facts, and the
    workload state judged only for those that may have turned."""
    scope = Q(phase__in=LIVE) | Q(pk__in=list(touched)) if touched else Q(phase__in=LIVE)
    jobs = Job.objects.filter(scope, _followed(), cluster_id=cluster_id, delete_requested_at=None)
    facts = {row[0]: row[1:] for row in jobs.values_list(*FACT_FIELDS)}
    if not facts:
        return 0
    known = _SEEN.get(cluster_id, {})
    due = [
        pk for pk, fact in facts.items() if pk in touched or _due_again(known.get(pk), fact, now)
    ]
    judged: list[Judged] = []
    fresh = {pk: known[pk] for pk in facts if pk in known}
    for job in with_workload(Job.objects.filter(pk__in=due)) if due else []:
        report = report_of(getattr(job, "workload", None))
        policies = Policies.of({"policies": getattr(job, POLICIES)})
        phase = JobPhase(job.phase)
        state, _kind, _reason = judge(report, phase, job.run, policies, now)
        active = job_events(phase, job.stopped, state)
        judged.append(Judged(Subject.of_job(job.pk, job.run, cluster_id), active, JOB_EVENTS))
        fresh[job.pk] = Seen(facts[job.pk], next_turn_at(report, phase, job.run, policies, now))
    written = settle(judged, now)
    transaction.on_commit(lambda: _SEEN.__setitem__(cluster_id, fresh))  # only if it holds
    return written


FACT_FIELDS = (
    "pk", "phase", "run", "stopped", "workload__run", "workload__last_received_at",
)  # fmt: skip


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
