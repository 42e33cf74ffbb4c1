"""Occurrences opened and resolved in the caller's transaction: the one that writes the state
change causing them (issue 32 §Build 1: noticed in the sync cycle or the request that causes
it). Called by the sync cycle (notify.watch), by signal intake and by the policy that stops a
Job (jobs.workload.report); the rules of what is which event and what is due live in
notify.events.

An occurrence opened or resolved is due at once (`next_check_at`): its messages are written
by the notify worker (notify.fanout, the first step of every drain), which the commit of that
transaction starts, off the sync cycle and the signal request.

Exactly once: an occurrence is unique by (subject, event, run, occurrence), inserted ignoring a
conflict, so a re-run, two workers or a restarted sync insert nothing more.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import connection, transaction

from console.bulk import insert_new
from console.models import Cluster
from console.statements import Statement
from jobs.choices import JobPhase
from jobs.models import Job
from jobs.status.workload import Policies, judge
from notify.choices import Event
from notify.events import (
    LASTING,
    Occurrence,
    job_events,
    turns,
)
from notify.facts import report_of
from notify.models import Condition, Watch


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


class Stored(NamedTuple):
    """An occurrence as judging needs it."""

    pk: int
    event: str
    occurrence: int
    resolved: bool


_STORED = Statement(
    lambda keys: Condition.objects.filter(subject__any_of=keys).values_list(
        "subject", "run", "pk", "event", "occurrence", "resolved_at"
    ),
    list[str],
)


def stored_occurrences(subjects: Iterable[Subject]) -> dict[tuple[str, int], list[Stored]]:
    """The stored occurrences of these subjects' runs, in one query."""
    keys = list({subject.key for subject in subjects})
    found: dict[tuple[str, int], list[Stored]] = defaultdict(list)
    for subject, run, pk, event, occurrence, resolved_at in _STORED.rows(keys) if keys else []:
        found[(subject, run)].append(Stored(pk, event, occurrence, resolved_at is not None))
    return found


def settle(judged: Sequence[Judged], now: datetime) -> int:
    """Opens and resolves the occurrences the subjects' states give, each due at once to have
    its messages written (notify.fanout, once this transaction commits); returns the rows written
    (none when nothing turned)."""
    stored = stored_occurrences(item.subject for item in judged)
    opened: list[tuple[Subject, Event, int]] = []
    ended: list[int] = []
    for item in judged:
        rows = stored.get((item.subject.key, item.subject.run), [])
        occurrences = [Occurrence(Event(row.event), row.occurrence, row.resolved) for row in rows]
        change = turns(item.active, occurrences, item.events)
        opened += [(item.subject, event, occurrence) for event, occurrence in change.opened]
        ended += [
            row.pk for row in rows for event, occurrence in change.resolved
            if (row.event, row.occurrence) == (event, occurrence)
        ]  # fmt: skip
    written = _opened(opened, now) + _resolved(ended, now)
    if written:  # their messages, once the transaction that wrote them commits
        transaction.on_commit(_drain_soon)
    return written


def _opened(opened: list[tuple[Subject, Event, int]], now: datetime) -> int:
    """New occurrences, in one statement ignoring a concurrent insert of the same one; returns
    those inserted."""
    if not opened:
        return 0
    fields = (
        "subject", "event", "run", "occurrence", "job", "cluster", "detail", "opened_at",
        "resolved_at", "next_check_at",
    )  # fmt: skip
    rows = [
        [subject.key, str(event), subject.run, occurrence, subject.job_id, subject.cluster_id,
         subject.detail, now, None if event in LASTING else now, now]
        for subject, event, occurrence in opened
    ]  # fmt: skip
    return insert_new(Condition, fields, rows)


def _resolved(pks: list[int], now: datetime) -> int:
    """Ends these occurrences unless another worker did: one statement."""
    if not pks:
        return 0
    ending = Condition.objects.filter(pk__in=pks, resolved_at__isnull=True)
    return ending.update(resolved_at=now, next_check_at=now)


def hold_for_judgement(job_ids: Collection[int], now: datetime) -> int:
    """The job.failed occurrences these Jobs just opened wait for their run's failure to be
    judged (`failure_judged`, once the logs kept when they turned Failed are read:
    console.engine.keep_logs), or TRAINYARD_NOTIFY_FAILURE_WAIT_SECONDS at most, so that their
    message names it. Called in the transaction that opened them, so the notify worker never
    sees one before it is held; one written already (`next_check_at` cleared) stays so."""
    if not job_ids:
        return 0
    wait = timedelta(seconds=settings.TRAINYARD_NOTIFY_FAILURE_WAIT_SECONDS)
    opened = Condition.objects.filter(
        job_id__in=job_ids, event=Event.JOB_FAILED, next_check_at__lte=now
    )
    return opened.update(next_check_at=now + wait)


def failure_judged(job_id: int, run: int, now: datetime) -> int:
    """The run's failure was judged: its held job.failed occurrence is due now, and its
    message (notify.facts) names what was found, or nothing if nothing was."""
    held = Condition.objects.filter(
        job_id=job_id, run=run, event=Event.JOB_FAILED, next_check_at__gt=now
    )
    released = held.update(next_check_at=now)
    if released:
        transaction.on_commit(_drain_soon)
    return released


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


def _drain_soon() -> None:
    from notify.tasks import drain_outbox

    drain_outbox.delay()


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
