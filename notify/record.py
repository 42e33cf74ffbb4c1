"""Occurrences opened and resolved, and their messages written to the outbox, in the caller's
transaction: the one that writes the state change causing them (issue 32 §Build 3). Called by
the sync cycle (notify.watch), by signal intake and by the policy that stops a Job
(jobs.workload.report); the rules of what is which event and what is due live in notify.events.

Exactly once: an occurrence is unique by (subject, event, run, occurrence) and a message by
(subscription, subject, run, event, occurrence, part, repeat); both are inserted ignoring a
conflict, so a re-run, two workers or a restarted sync insert nothing more.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Q, QuerySet

from console.models import Cluster, Membership
from jobs.choices import JobPhase
from jobs.models import Job
from jobs.status.workload import Policies, judge
from notify.choices import Event, Part, ScopeKind
from notify.events import (
    LASTING,
    Occurrence,
    due,
    job_events,
    next_due,
    resolved_name,
    turns,
    wanted,
)
from notify.facts import facts_of, report_of
from notify.models import Condition, Outbox, Subscription, Watch

LIVE = (JobPhase.PENDING, JobPhase.RUNNING)


@dataclass(frozen=True)
class Subject:
    """What an occurrence is about: a Job's run, a cluster, or one of its add-ons."""

    key: str
    cluster_id: int
    job_id: int | None = None
    run: int = 0
    detail: str = ""

    @classmethod
    def of_job(cls, job_id: int, run: int, cluster_id: int) -> Subject:
        return cls(f"job:{job_id}", cluster_id, job_id, run)

    @classmethod
    def of_cluster(cls, cluster_id: int, detail: str = "") -> Subject:
        return cls(f"cluster:{cluster_id}", cluster_id, detail=detail)

    @classmethod
    def of_addon(cls, cluster_id: int, name: str) -> Subject:
        return cls(f"addon:{cluster_id}:{name}", cluster_id, detail=name)


@dataclass
class Judged:
    """A subject with the events it is in now and the events its caller decides."""

    subject: Subject
    active: set[Event]
    events: frozenset[Event]


def stored_occurrences(subjects: Iterable[Subject]) -> dict[tuple[str, int], list[Condition]]:
    """The stored occurrences of these subjects' runs, in one query."""
    keys = {subject.key for subject in subjects}
    found: dict[tuple[str, int], list[Condition]] = defaultdict(list)
    if keys:
        for condition in Condition.objects.filter(subject__in=keys):
            found[(condition.subject, condition.run)].append(condition)
    return found


def settle(judged: Sequence[Judged], now: datetime) -> int:
    """Opens and resolves the occurrences the subjects' states give and writes their messages;
    returns the rows written (none when nothing turned)."""
    stored = stored_occurrences(item.subject for item in judged)
    opened: list[tuple[Subject, Event, int]] = []
    touched: list[Condition] = []
    for item in judged:
        rows = stored.get((item.subject.key, item.subject.run), [])
        change = turns(item.active, [_occurrence(row) for row in rows], item.events)
        opened += [(item.subject, event, occurrence) for event, occurrence in change.opened]
        touched += _resolved(rows, change.resolved, now)
    touched += _opened(opened, now)
    if not touched:
        return 0
    return len(touched) + emit(touched, now)


def _occurrence(row: Condition) -> Occurrence:
    return Occurrence(Event(row.event), row.occurrence, row.resolved_at is not None)


def _opened(opened: list[tuple[Subject, Event, int]], now: datetime) -> list[Condition]:
    """New occurrences, inserted in one statement ignoring a concurrent insert of the same
    one, then read back: the row that won is the one whose messages are written."""
    if not opened:
        return []
    rows = [
        Condition(
            subject=subject.key, event=event, run=subject.run, occurrence=occurrence,
            job_id=subject.job_id, cluster_id=subject.cluster_id, detail=subject.detail,
            opened_at=now, resolved_at=None if event in LASTING else now,
        )
        for subject, event, occurrence in opened
    ]  # fmt: skip
    Condition.objects.bulk_create(rows, ignore_conflicts=True)
    keys = {(s.key, str(event), s.run, occurrence) for s, event, occurrence in opened}
    found = Condition.objects.filter(subject__in={s.key for s, _e, _o in opened})
    return [c for c in found if (c.subject, c.event, c.run, c.occurrence) in keys]


def _resolved(
    rows: list[Condition], resolved: list[tuple[Event, int]], now: datetime
) -> list[Condition]:
    ended = []
    for event, occurrence in resolved:
        row = next(r for r in rows if (r.event, r.occurrence) == (event, occurrence))
        if Condition.objects.filter(pk=row.pk, resolved_at__isnull=True).update(
            resolved_at=now, next_check_at=None
        ):
            row.resolved_at, row.next_check_at = now, None
            ended.append(row)
    return ended


def process_due(cluster_id: int, now: datetime) -> int:
    """The open occurrences of the cluster's subjects whose next message is due (a pending
    threshold reached, a repeat): one query, which finds nothing in most cycles."""
    due_rows = list(Condition.objects.filter(cluster_id=cluster_id, next_check_at__lte=now))
    return emit(due_rows, now) if due_rows else 0


def conditions_due(cluster_id: int, now: datetime) -> QuerySet[Condition]:
    return Condition.objects.filter(cluster_id=cluster_id, next_check_at__lte=now)


# The moment of a watch marked due at once: before any cycle's, whatever the clocks say.
AT_ONCE = datetime(1970, 1, 1, tzinfo=UTC)


def mark_due(job_ids: Collection[int]) -> None:
    """These Jobs' workload states may have turned otherwise than by time (a message that ends
    a spell or says something new, a new run, a new subscription): the next sync cycle judges
    them (notify.watch). One statement; a Job not yet watched gets its row."""
    if not job_ids:
        return
    watch, job = Watch._meta.db_table, Job._meta.db_table
    marks = ", ".join(["%s"] * len(job_ids))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {watch} (job_id, cluster_id, due_at, marks) "
            f"SELECT id, cluster_id, %s, 1 FROM {job} WHERE id IN ({marks}) "
            f"ON CONFLICT (job_id) DO UPDATE SET due_at = excluded.due_at, "
            f"marks = {watch}.marks + 1",
            [connection.ops.adapt_datetimefield_value(AT_ONCE), *job_ids],
        )


# --- the messages of occurrences ---------------------------------------------------------------


def emit(conditions: Sequence[Condition], now: datetime) -> int:
    """Writes the messages due to every subscriber of these occurrences and when each
    occurrence must be looked at again; returns the rows written. What a message says is read
    only when one is due (notify.facts)."""
    subscribers = subscribers_of(conditions)
    heard_of = [c for c in conditions if subscribers.get(c.pk)]
    facts = facts_of(heard_of, now) if heard_of else {}
    heard = _heard_open([c for c in conditions if c.resolved_at is not None])
    rows: list[Outbox] = []
    schedule: dict[datetime | None, list[int]] = defaultdict(list)
    for condition in conditions:
        event = Event(condition.event)
        checks: list[datetime] = []
        for sub in subscribers.get(condition.pk, []):
            rows += _due_messages(condition, sub, heard, facts.get(condition.pk, {}), now)
            if condition.resolved_at is None:
                moment = next_due(event, condition.opened_at, sub.pending_minutes,
                                  sub.repeat_hours, now)  # fmt: skip
                checks += [moment] if moment else []
        moment = min(checks) if checks else None
        if condition.resolved_at is None and condition.next_check_at != moment:
            schedule[moment].append(condition.pk)
            condition.next_check_at = moment
    for moment, pks in schedule.items():  # one UPDATE per moment: most share theirs
        Condition.objects.filter(pk__in=pks).update(next_check_at=moment)
    Outbox.objects.bulk_create(rows, ignore_conflicts=True, batch_size=500)
    if rows:  # sent once the transaction that wrote them commits (the beat catches up otherwise)
        transaction.on_commit(_drain_soon)
    return len(rows)


def _drain_soon() -> None:
    from notify.tasks import drain_outbox

    drain_outbox.delay()


def _due_messages(
    condition: Condition, sub: Subscription, heard: set[tuple[int, int]],
    facts: dict[str, Any], now: datetime,
) -> list[Outbox]:  # fmt: skip
    event = Event(condition.event)
    recovered_only = event == Event.CLUSTER_UNREACHABLE and Event.CLUSTER_UNREACHABLE not in (
        sub.events
    )
    resolved = condition.resolved_at is not None
    rows = []
    for item in due(event, condition.opened_at, resolved, sub.pending_minutes,
                    sub.repeat_hours, now):  # fmt: skip
        if item.part == Part.RESOLVED and not (recovered_only or (condition.pk, sub.pk) in heard):
            continue
        if item.part != Part.RESOLVED and recovered_only:
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


def _heard_open(conditions: Sequence[Condition]) -> set[tuple[int, int]]:
    """(condition, subscription) pairs whose opening message was written: only they hear the
    end (a subscriber whose pending threshold was never reached hears nothing)."""
    if not conditions:
        return set()
    keys = Q()
    for c in conditions:
        keys |= Q(subject=c.subject, event=c.event, run=c.run, occurrence=c.occurrence)
    opened = Outbox.objects.filter(keys, part=Part.OPENED).values_list(
        "subject", "event", "run", "occurrence", "subscription_id"
    )
    by_key = {(c.subject, c.event, c.run, c.occurrence): c.pk for c in conditions}
    return {(by_key[(s, e, r, o)], sub) for s, e, r, o, sub in opened if sub is not None}


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


def cluster_reachability(cluster: Cluster, reachable: bool, error: str, now: datetime) -> int:
    """cluster.unreachable opened when a cycle finds it so, resolved (cluster.recovered) when
    one reads it again; called in the transaction that records the cycle's result."""
    subject = Subject.of_cluster(cluster.pk, error)
    active = set() if reachable else {Event.CLUSTER_UNREACHABLE}
    return settle([Judged(subject, active, frozenset({Event.CLUSTER_UNREACHABLE}))], now)


def job_event(job_id: int, run: int, cluster_id: int, event: Event, now: datetime) -> int:
    """An event a request causes (a policy stopped the Job): once per run."""
    subject = Subject.of_job(job_id, run, cluster_id)
    return settle([Judged(subject, {event}, frozenset({event}))], now)


COMPLETION_EVENTS = frozenset({Event.WORKLOAD_SUCCEEDED, Event.WORKLOAD_FAILED})


def workload_completed(job_id: int, now: datetime) -> int:
    """A completion a signal request just folded (jobs.workload.report.record): the workload's
    state judged as every page judges it, in the request's transaction."""
    job = Job.objects.select_related("workload").filter(pk=job_id).first()
    if job is None:
        return 0
    report = report_of(getattr(job, "workload", None))
    state, _kind, _reason = judge(report, JobPhase(job.phase), job.run, Policies.of(job.spec), now)
    active = job_events(JobPhase(job.phase), job.stopped, state)
    subject = Subject.of_job(job.pk, job.run, job.cluster_id)
    return settle([Judged(subject, active, COMPLETION_EVENTS)], now)
