"""The messages of occurrences (issue 32 §Build 1 and 3), written by the notify worker: every
occurrence due (just opened or resolved in the transaction of the change that caused it,
notify.record; a subscriber's pending threshold or repeat reached) is read with its subscribers
and what its messages say (notify.facts), and one message per subscriber and part is written to
the outbox (notify.deliver sends them). An occurrence's subscribers are those who want its event
and may read what it is about.

Exactly once: a message is unique by (subscription, subject, run, event, occurrence, part,
repeat) and inserted ignoring a conflict, so two workers, or a worker that asks again, write
nothing more.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.db.models import Q

from console.models import Membership
from jobs.choices import JobPhase
from jobs.models import Job
from notify.choices import Event, Part, ScopeKind
from notify.events import due, next_due, resolved_name, wanted
from notify.facts import facts_of
from notify.models import Condition, Outbox, Subscription

LIVE = (JobPhase.PENDING, JobPhase.RUNNING)

FAN_OUT_BATCH = 500


def fan_out(now: datetime) -> int:
    """The notify worker's first step (notify.tasks.drain_outbox): the messages of every occurrence
    due (just opened or resolved, a pending threshold or a repeat reached), a batch at a time,
    each batch in its own transaction with its occurrences locked (another worker skips them);
    returns the messages written. Each batch leaves its occurrences due later or never, so
    this ends."""
    written = 0
    while True:
        with transaction.atomic():
            due_now = (
                Condition.objects.select_for_update(skip_locked=True)
                .filter(next_check_at__lte=now)
                .order_by("next_check_at", "pk")
            )
            batch = list(due_now[:FAN_OUT_BATCH])
            if not batch:
                return written
            written += emit(batch, now)


def emit(conditions: Sequence[Condition], now: datetime) -> int:
    """Writes the messages due to every subscriber of these occurrences and when each
    occurrence must be looked at again (never, once it ended); returns the messages written.
    What a message says is read only when one is due (notify.facts)."""
    subscribers = subscribers_of(conditions)
    heard_of = [c for c in conditions if subscribers.get(c.pk)]
    facts = facts_of(heard_of, now) if heard_of else {}
    rows: list[Outbox] = []
    schedule: dict[datetime | None, list[int]] = defaultdict(list)
    for condition in conditions:
        event = Event(condition.event)
        checks: list[datetime] = []
        for sub in subscribers.get(condition.pk, []):
            rows += _due_messages(condition, sub, facts.get(condition.pk, {}), now)
            if condition.resolved_at is None:
                moment = next_due(event, condition.opened_at, sub.pending_minutes,
                                  sub.repeat_hours, now)  # fmt: skip
                checks += [moment] if moment else []
        moment = min(checks) if checks else None
        if condition.next_check_at != moment:
            schedule[moment].append(condition.pk)
            condition.next_check_at = moment
    for moment, pks in schedule.items():  # one UPDATE per moment: most share theirs
        Condition.objects.filter(pk__in=pks).update(next_check_at=moment)
    Outbox.objects.bulk_create(rows, ignore_conflicts=True, batch_size=500)
    return len(rows)


def _due_messages(
    condition: Condition, sub: Subscription, facts: dict[str, Any], now: datetime
) -> list[Outbox]:
    event = Event(condition.event)
    recovered_only = event == Event.CLUSTER_UNREACHABLE and Event.CLUSTER_UNREACHABLE not in (
        sub.events
    )
    rows = []
    for item in due(event, condition.opened_at, condition.resolved_at, sub.pending_minutes,
                    sub.repeat_hours, now):  # fmt: skip
        if recovered_only and item.part != Part.RESOLVED:
            continue
        rows.append(_message(condition, sub, item.part, item.repeat, facts, now))
    return rows


def _message(
    condition: Condition, sub: Subscription, part: Part, repeat: int, facts: dict[str, Any],
    now: datetime,
) -> Outbox:  # fmt: skip
    resolved = part == Part.RESOLVED
    event = resolved_name(Event(condition.event)) if resolved else Event(condition.event)
    said = {
        "event": str(event), "resolved": resolved, "at": _iso(now),
        "opened_at": _iso(condition.opened_at), "repeat": repeat, "detail": condition.detail,
    }  # fmt: skip
    return Outbox(
        subscription=sub, channel_id=sub.channel_id, subject=condition.subject,
        event=condition.event, run=condition.run, occurrence=condition.occurrence, part=part,
        repeat=repeat, job_id=condition.job_id, facts={**facts, **said}, created_at=now,
        next_attempt_at=now,
    )  # fmt: skip


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


# --- who hears of what -------------------------------------------------------------------------


def subscribers_of(conditions: Sequence[Condition]) -> dict[int, list[Subscription]]:
    """Each occurrence's subscribers who want its event and may read what it is about (issue
    32 §Build 4: a member subscribes only to what they can read)."""
    found: dict[int, list[Subscription]] = defaultdict(list)
    jobs = {c.job_id for c in conditions if c.job_id is not None}
    clusters = {c.cluster_id for c in conditions if c.job_id is None}
    by_job = _job_subscribers(jobs) if jobs else {}
    by_cluster = {pk: _cluster_subscribers(pk) for pk in clusters}
    for condition in conditions:
        candidates = (
            by_job.get(condition.job_id, [])
            if condition.job_id is not None
            else by_cluster.get(condition.cluster_id, [])
        )
        found[condition.pk] = [s for s in candidates if wanted(Event(condition.event), s.events)]
    return found


def _job_subscribers(job_ids: set[int]) -> dict[int, list[Subscription]]:
    """In three queries: the Jobs, the subscriptions that may cover them, the memberships."""
    jobs = list(Job.objects.filter(pk__in=job_ids).values_list("pk", "project_id", "owner_id"))
    projects = {project for _, project, _ in jobs}
    owners = {owner for _, _, owner in jobs if owner is not None}
    covering = Q(scope=ScopeKind.JOB, job_id__in=job_ids)
    covering |= Q(scope=ScopeKind.PROJECT, project_id__in=projects)
    covering |= Q(scope=ScopeKind.MINE, user_id__in=owners)
    subscriptions = list(Subscription.objects.filter(covering))
    members = set(
        Membership.objects.filter(project_id__in=projects).values_list("project_id", "user_id")
    )
    by_scope: dict[tuple[str, int | None], list[Subscription]] = defaultdict(list)
    for sub in subscriptions:  # each Job meets only the subscriptions that name it
        by_scope[(sub.scope, _scope_key(sub))].append(sub)
    found: dict[int, list[Subscription]] = defaultdict(list)
    for pk, project, owner in jobs:
        covering_it = [
            *by_scope.get((ScopeKind.JOB, pk), []),
            *by_scope.get((ScopeKind.PROJECT, project), []),
            *by_scope.get((ScopeKind.MINE, owner), []),
        ]
        found[pk] = [sub for sub in covering_it if (project, sub.user_id) in members]
    return found


def _scope_key(sub: Subscription) -> int | None:
    """What a subscription names: its Job, its project, or its user (whose Jobs it follows)."""
    if sub.scope == ScopeKind.JOB:
        return sub.job_id
    if sub.scope == ScopeKind.PROJECT:
        return sub.project_id
    return sub.user_id


def _cluster_subscribers(cluster_id: int) -> list[Subscription]:
    """A cluster's (or its add-ons') events reach the subscribers of a project that may use
    it, and those of a live Job on it (one of theirs, or the one they follow)."""
    live = Job.objects.filter(cluster_id=cluster_id, phase__in=LIVE, delete_requested_at=None)
    covering = Q(scope=ScopeKind.PROJECT, project__clusters=cluster_id)
    covering |= Q(scope=ScopeKind.JOB, job__in=live)
    covering |= Q(scope=ScopeKind.MINE, user_id__in=live.values("owner_id"))
    return list(Subscription.objects.filter(covering).distinct())
