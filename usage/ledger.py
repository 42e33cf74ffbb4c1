"""Keeping the GPU-hours ledger: intervals closed and opened as a run's class changes, written
by the sync cycle (the pods it saw change, the Jobs it touched, the runs due to be judged again)
and by signal intake (a new word from the workload), never recomputed from scratch.

A class change closes the open interval of each pod at the moment it happened and opens the
next: the moments are Kubernetes' own (bound, running since, deleted, terminated) and the
workload's turning points (jobs.status.workload.turning_points), so the figures do not depend on
how often the console looks. Closing is a conditional UPDATE (the interval still open and of its
class): a sync and a signal that judge the same run at once close it once. Every closed interval
is added to its hours (`UsageHour`) in the same transaction.

A sync judges every open interval of the Jobs it touched (a change of one pod or of its Job can
change the class of the Job's other pods), so the judging and writing here are per row as cheap
as they can be: rows read and written as tuples in a few statements whatever their number, and
a run's own state judged once per moment for all of its pods (docs/benchmarks.md, "GPU-hours
ledger in the sync cycle").

An unreachable cluster's open intervals are closed at its last successful sync and continue as
`unknown` (ARCHITECTURE §Principles: not guessed) until a sync reads it again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from django.contrib.auth.models import User
from django.db import connection, models, transaction
from django.db.models import Q

from console.models import Cluster, Project
from jobs.choices import JobPhase, UsageClass
from jobs.models import Job
from jobs.status.usage import (
    PodMoments,
    PodSpan,
    PodState,
    Timeline,
    by_hour,
    day_of,
    pod_state_at,
    timeline,
    usage_class,
)  # fmt: skip
from jobs.status.workload import Report, judge, turning_points
from usage import statements
from usage.models import GpuInterval, UsageDay, UsageGroupDay, UsageHour, UsageTotal
from usage.policy import due_stop, stop_if_idle
from usage.runs import Run, runs

STICKY = frozenset({UsageClass.STOPPING, UsageClass.FAILED})


class Open(NamedTuple):
    """An open interval as stored: the columns the ledger reads (a tuple, as the rows come)."""

    pk: int
    job_id: int
    run: int
    task_id: int
    cluster_id: int
    pod_uid: str
    pod_name: str
    node_name: str
    gpus: int
    usage_class: UsageClass
    started_at: datetime
    bound_at: datetime | None
    running_at: datetime | None
    stopping_at: datetime | None
    waiting_since: datetime | None
    due_at: datetime | None

    @property
    def span(self) -> PodSpan:
        return PodSpan(
            self.gpus, self.bound_at, self.running_at, self.stopping_at, None, self.waiting_since
        )


class Interval(NamedTuple):
    """An interval to insert, by its columns (`due_at` is set when it is written)."""

    job_id: int
    run: int
    task_id: int
    cluster_id: int
    pod_uid: str
    pod_name: str
    node_name: str
    gpus: int
    usage_class: str
    started_at: datetime
    ended_at: datetime | None
    bound_at: datetime | None
    running_at: datetime | None
    stopping_at: datetime | None
    waiting_since: datetime | None


@dataclass(frozen=True)
class Seen:
    """A pod as the cluster last reported it, the facts the ledger reads (from the engine's
    observation, console.kube.observations.PodObs)."""

    name: str
    node_name: str
    phase: str | None
    gpus: int
    scheduled_at: datetime | None
    running_at: datetime | None
    deleted_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class Pod:
    """A pod the sync saw change, with the Job, Task and cluster it belongs to. `observation`
    is its last state (None: deleted and its last state not reported, found gone by a relist);
    `gone_at` when the sync found it gone."""

    uid: str
    job_id: int
    run: int
    task_id: int
    cluster_id: int
    observation: Seen | None
    gone_at: datetime | None = None


# --- reading ---------------------------------------------------------------------------------


def open_intervals(selection: Q) -> list[Open]:
    rows = GpuInterval.objects.filter(selection, ended_at__isnull=True).values_list(*Open._fields)
    return list(map(Open._make, rows))


def open_of_sync(cluster_id: int, uids: Collection[str], job_ids: Collection[int], now: datetime
                 ) -> list[Open]:  # fmt: skip
    """The open intervals a sync judges: its cluster's due ones, the changed pods' and the
    touched Jobs', in the models' order. One raw SELECT of the same text every cycle (the
    ORM's building of it with a hundred Jobs and pods cost more than reading the rows), a
    UNION so that each part reads its own index."""
    uid, job = statements.fields_of(GpuInterval, ["pod_uid", "job_id"])
    uid_listed, uid_param = statements.one_of(uid, uids)
    job_listed, job_param = statements.one_of(job, job_ids)
    select = (
        f"SELECT id, {', '.join(Open._fields[1:])} FROM {statements.table(GpuInterval)} "
        "WHERE ended_at IS NULL AND"
    )
    rows = statements.fetch(
        f"{select} cluster_id = %s AND due_at <= %s UNION {select} pod_uid IN {uid_listed} "
        f"UNION {select} job_id IN {job_listed} ORDER BY job_id, started_at, id",
        [cluster_id, connection.ops.adapt_datetimefield_value(now), uid_param, job_param],
        _OPEN_DATETIMES,
    )  # fmt: skip
    return list(map(Open._make, rows))


_OPEN_DATETIMES = frozenset(range(Open._fields.index("started_at"), len(Open._fields)))


# --- judging ---------------------------------------------------------------------------------


ReportAt = Callable[[datetime], Report | None]


class RunStates:
    """A run's own part of its pods' classes, judged once a moment for all of its pods (they
    are judged at the same moments: the run's turning points and the moment of judging): what
    a pod adds is its own state then (jobs.status.usage.pod_state_at)."""

    def __init__(self, run: Run, report_at: ReportAt | None = None) -> None:
        self.run = run
        self.report_at: ReportAt = report_at or (lambda _moment: run.report)
        self._classes: dict[tuple[datetime | None, PodState, bool], UsageClass] = {}
        self._points: dict[int, list[datetime]] = {}
        self._fixed = None if report_at else turning_points(run.report, run.run, run.policies)
        # A report with no turning point (none, another run's, a completion): time alone
        # cannot change the run's state (jobs.status.workload.turning_points), so one judgement
        # serves every moment, also for pods judged at their own end or start rather than now.
        self._timeless = self._fixed == []

    def class_at(self, moment: datetime, pod: PodState, now_or_sticky: bool) -> UsageClass:
        """A second's class. The Job's own facts (stopped, Failed) are known as of now only:
        before then they count only when the stored class already came from them (sticky)."""
        key = (None if self._timeless else moment, pod, now_or_sticky)
        found = self._classes.get(key)
        if found is None:
            run = self.run
            failed = run.phase == JobPhase.FAILED and not now_or_sticky
            phase = JobPhase.RUNNING if failed else run.phase
            state = judge(self.report_at(moment), phase, run.run, run.policies, moment)[0]
            found = usage_class(pod, phase, run.stopped and now_or_sticky, state)
            self._classes[key] = found
        return found

    def points(self, moment: datetime) -> list[datetime]:
        """The turning points of the report as it was at `moment` (keyed by the report itself:
        a report is not hashable, and lives as long as this)."""
        if self._fixed is not None:  # one report whatever the moment
            return self._fixed
        report = self.report_at(moment)
        found = self._points.get(id(report))
        if found is None:
            found = turning_points(report, self.run.run, self.run.policies)
            self._points[id(report)] = found
        return found


def _class_at(span: PodMoments, states: RunStates, stored: UsageClass, end: datetime
              ) -> Callable[[datetime], UsageClass]:  # fmt: skip
    """A second's class of the pod: its own state then, and its run's (RunStates.class_at),
    judged as of now from `end` on, before it as of now only if the stored class is sticky."""
    sticky = stored in STICKY

    def class_at(moment: datetime) -> UsageClass:
        return states.class_at(moment, pod_state_at(span, moment), sticky or moment >= end)

    return class_at


def judged(stored: Open, span: PodMoments, states: RunStates, end: datetime) -> Timeline:
    """The classes of the pod from its open interval's start until `end`: (since, class)
    changes, the first the stored one. Its points: its own moments and its run's turning
    points; none for a gap, which is not guessed but judged at its end. Most pods have no point
    inside their interval: their class at `end` alone is judged, as `timeline` would."""
    start, klass = stored.started_at, stored.usage_class
    points = []
    if klass != UsageClass.UNKNOWN:
        own = (span.running_at, span.stopping_at, span.waiting_since, *states.points(start))
        points = [p for p in own if p is not None and start < p < end]
    if points:
        return timeline(start, klass, end, points, _class_at(span, states, klass, end))
    at_end = states.class_at(end, pod_state_at(span, end), True)
    return [(start, klass)] if at_end == klass else [(start, klass), (end, at_end)]


def next_due(runs_: Iterable[Run], now: datetime) -> dict[int, datetime | None]:
    """When each run must be judged again by time alone: its next turning point, or when the
    idle policy acts."""
    due = {}
    for run in runs_:
        points = [p for p in turning_points(run.report, run.run, run.policies) if p > now]
        stop = due_stop(run, now)
        due[run.job_id] = min([*points, *([stop] if stop else [])], default=None)
    return due


# --- writing ---------------------------------------------------------------------------------


@dataclass
class Step:
    """One pod's change: its open interval closed at `closes_at` (None: a pod seen for the first
    time), and the intervals after it (the last one open unless the pod ended)."""

    stored: Open | None
    closes_at: datetime | None
    rows: list[Interval]


@dataclass
class Ledger:
    """The rows one pass writes, in one go."""

    steps: list[Step] = field(default_factory=list)
    facts: list[tuple[Open, PodSpan, str]] = field(default_factory=list)
    due: dict[int, datetime | None] = field(default_factory=dict)
    # A pod's own moment still to come, by its UID (usage.ledger.own_due).
    own: dict[str, datetime] = field(default_factory=dict)

    def due_of(self, job_id: int, pod_uid: str) -> datetime | None:
        """When a pod's open interval is judged again: its run's next moment, or its own."""
        run, mine = self.due.get(job_id), self.own.get(pod_uid)
        return run if mine is None else mine if run is None else min(run, mine)


def _interval(base: Open, span: PodSpan, klass: UsageClass, start: datetime, node: str,
              ended_at: datetime | None = None) -> Interval:  # fmt: skip
    return Interval(
        base.job_id, base.run, base.task_id, base.cluster_id, base.pod_uid, base.pod_name, node,
        span.gpus, klass, start, ended_at, span.bound_at, span.running_at, span.stopping_at,
        span.waiting_since,
    )  # fmt: skip


def _rows(base: Open, span: PodSpan, changes: Timeline, end: datetime, node: str
          ) -> list[Interval]:  # fmt: skip
    """An interval per change; each closed at the next, the last open unless the pod ended."""
    rows = []
    for index, (since, klass) in enumerate(changes):
        following = changes[index + 1][0] if index + 1 < len(changes) else None
        ended_at = following or (end if span.ended_at is not None else None)
        rows.append(_interval(base, span, klass, since, node, ended_at))
    return rows


def advance(
    ledger: Ledger, stored: Open, states: RunStates, now: datetime,
    span: PodSpan | None = None, node: str | None = None,
) -> None:  # fmt: skip
    """Adds to `ledger` what the pod's facts and its run's state change: the open interval
    closed at the first change, the classes after it, the last left open unless the pod ended.
    `span` and `node`: the pod's new facts, when the sync saw it change (else as stored); new
    facts that change no class are stored on the open interval."""
    ended_at = None if span is None else span.ended_at
    end = max(stored.started_at, min(ended_at or now, now))
    changes = judged(stored, stored if span is None else span, states, end)
    if ended_at is not None and len(changes) > 1 and changes[-1][0] >= end:
        changes.pop()  # a class judged at the very end of a pod that ended holds no second
    node = stored.node_name if node is None else node
    if len(changes) == 1 and ended_at is None:
        if span is not None and (span != stored.span or node != stored.node_name):
            ledger.facts.append((stored, span, node))
        return
    closes_at = changes[1][0] if len(changes) > 1 else end
    facts = stored.span if span is None else span
    ledger.steps.append(Step(stored, closes_at, _rows(stored, facts, changes[1:], end, node)))


def opened(ledger: Ledger, pod: Pod, states: RunStates, now: datetime) -> None:
    """A pod seen holding GPUs for the first time: its classes since it was bound."""
    span = span_of(pod, None, now)
    observed = pod.observation
    assert span.bound_at is not None and observed is not None
    end = max(span.bound_at, min(span.ended_at or now, now))
    seed = Open(
        0, pod.job_id, pod.run, pod.task_id, pod.cluster_id, pod.uid, observed.name,
        observed.node_name, span.gpus, UsageClass.STARTING, span.bound_at, span.bound_at,
        span.running_at, span.stopping_at, span.waiting_since, None,
    )  # fmt: skip
    first = _class_at(span, states, UsageClass.STARTING, end)(span.bound_at)
    seed = seed._replace(usage_class=first)
    changes = judged(seed, span, states, end)
    ledger.steps.append(Step(None, None, _rows(seed, span, changes, end, observed.node_name)))


def write(ledger: Ledger) -> int:
    """Closes, opens and rolls up (in the caller's transaction, or one of its own), each in one
    statement whatever the number of rows. A step whose interval another writer closed first
    is left out whole."""
    fresh: list[Interval] = []
    closed: list[Closed] = []
    with transaction.atomic(savepoint=False):
        closing = _close(ledger)
        for step in ledger.steps:
            if step.stored is not None and step.closes_at is not None:
                if step.stored.pk not in closing:
                    continue
                closed.append(_closed(step.stored, step.closes_at))
            fresh += step.rows
        written = len(closed) + _insert(fresh, ledger) + _write_facts(ledger.facts)
        written += roll_up([*closed, *(row for row in fresh if row.ended_at is not None)])
    return written


def _close(ledger: Ledger) -> set[int]:
    """Closes the steps' intervals that are still open and of the class they were judged from,
    in one UPDATE; returns their pks. The rows it writes (those and the ones whose facts change)
    are locked first, in pk order, so that a sync and a signal writing the same intervals at
    once wait for each other (never a deadlock) and the second finds them closed."""
    wanted = {
        step.stored.pk: step
        for step in ledger.steps
        if step.stored is not None and step.closes_at is not None
    }  # fmt: skip
    locking = [*wanted, *(stored.pk for stored, _span, _node in ledger.facts)]
    if not locking:
        return set()
    listed, param = statements.one_of(statements.fields_of(GpuInterval, ["pk"])[0], locking)
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    still_open = statements.fetch(
        f"SELECT id, usage_class FROM {statements.table(GpuInterval)} "
        f"WHERE id IN {listed} AND ended_at IS NULL ORDER BY id{lock}",
        [param], (),
    )  # fmt: skip
    closing = {
        pk for pk, klass in still_open if pk in wanted and klass == _stored(wanted[pk]).usage_class
    }  # fmt: skip
    ends = [(pk, wanted[pk].closes_at, None) for pk in sorted(closing)]
    if ends:
        statements.update(GpuInterval, ["ended_at", "due_at"], ends, _STILL_OPEN)
    return closing


_STILL_OPEN = f"{GpuInterval._meta.db_table}.ended_at IS NULL"


def _stored(step: Step) -> Open:
    assert step.stored is not None
    return step.stored


def _write_facts(facts: Sequence[tuple[Open, PodSpan, str]]) -> int:
    """The new facts of pods whose class did not change, on their open intervals."""
    if not facts:
        return 0
    rows = [
        (stored.pk, node, span.gpus, span.bound_at, span.running_at, span.stopping_at,
         span.waiting_since)
        for stored, span, node in facts
    ]  # fmt: skip
    columns = ["node_name", "gpus", "bound_at", "running_at", "stopping_at", "waiting_since"]
    return statements.update(GpuInterval, columns, rows, _STILL_OPEN)


def _insert(rows: Sequence[Interval], ledger: Ledger) -> int:
    """The new intervals, the open ones due when their run or their pod is, in one INSERT."""
    if rows:
        values = [
            (*row, ledger.due_of(row.job_id, row.pod_uid) if row.ended_at is None else None)
            for row in rows
        ]
        statements.insert(GpuInterval, [*Interval._fields, "due_at"], values)
    return len(rows)


class Rolled(Protocol):
    """What the roll-ups read of a closed interval (a GpuInterval, an Interval, a Closed)."""

    @property
    def job_id(self) -> int: ...
    @property
    def run(self) -> int: ...
    @property
    def gpus(self) -> int: ...
    @property
    def usage_class(self) -> str: ...
    @property
    def started_at(self) -> datetime: ...
    @property
    def ended_at(self) -> datetime | None: ...


class Closed(NamedTuple):
    """A stored interval as it is closed, for the roll-ups."""

    job_id: int
    run: int
    gpus: int
    usage_class: str
    started_at: datetime
    ended_at: datetime | None


def _closed(stored: Open, ended_at: datetime) -> Closed:
    return Closed(
        stored.job_id, stored.run, stored.gpus, stored.usage_class, stored.started_at, ended_at
    )


def set_due(ledger: Ledger, stored: Sequence[Open], now: datetime) -> int:
    """Stores each judged interval's next due moment (its run's, or its pod's own) where it
    must move: earlier than stored, or the stored one has come. A later moment is not written
    (a heartbeat moves it on every message): the run is then judged once too early, which
    changes nothing and stores the moment as it is by then."""
    moved: dict[datetime | None, list[int]] = defaultdict(list)
    for row in stored:
        if row.job_id not in ledger.due:
            continue
        new, old = ledger.due_of(row.job_id, row.pod_uid), row.due_at
        sooner = old is None or old <= now or (new is not None and new < old)
        if sooner and new != old:
            moved[new].append(row.pk)
    written = 0
    for moment, pks in moved.items():
        rows = GpuInterval.objects.filter(pk__any_of=pks, ended_at__isnull=True)
        written += rows.update(due_at=moment)
    return written


# --- the roll-ups ----------------------------------------------------------------------------


def roll_up(closed: Sequence[Rolled]) -> int:
    """Adds the closed intervals' GPU-seconds to their hours and days (one row per hour or day,
    run and class), to their groups' days (project, person, cluster and class) and to their runs'
    totals: each row inserted or increased in one statement per table (concurrent writers add,
    never overwrite)."""
    if not closed:
        return 0
    names = _names({row.job_id for row in closed})
    hours = _hours(closed)
    days, groups, totals = _days(hours, names)
    by_job = ("job_id", "run", "usage_class")
    return (
        _add(UsageHour, ("hour", *by_job), hours, names)
        + _add(UsageDay, ("day", *by_job), days, names)
        + _add(UsageGroupDay, ("day", *_GROUP, "usage_class"), groups)
        + _add(UsageTotal, by_job, totals)
    )


def _hours(closed: Sequence[Rolled]) -> Sums:
    """The seconds by hour, run and class."""
    hours: Sums = defaultdict(lambda: [0.0, 0.0])
    for row in closed:
        assert row.ended_at is not None
        run = (row.job_id, row.run, row.usage_class)
        for hour, part in by_hour(row.usage_class, row.gpus, row.started_at, row.ended_at):
            total = hours[(hour, *run)]
            total[0] += part.gpu_seconds
            total[1] += part.wasted_gpu_seconds
    return hours


def _days(hours: Sums, names: dict[int, dict[str, Any]]) -> tuple[Sums, Sums, Sums]:
    """The hours' seconds by day, run and class; by day, group and class; by run and class
    (of the Jobs that still exist), each added in the hours' order."""
    days: Sums = defaultdict(lambda: [0.0, 0.0])
    groups: Sums = defaultdict(lambda: [0.0, 0.0])
    totals: Sums = defaultdict(lambda: [0.0, 0.0])
    day_of_hour: dict[datetime, datetime] = {}
    for (hour, job_id, run, klass), (seconds, wasted) in hours.items():
        day = day_of_hour.get(hour) or day_of_hour.setdefault(hour, day_of(hour))
        named = names.get(job_id, _GONE)
        group = (day, named["project_name"], named["username"], named["cluster_name"], klass)
        sums = [days[(day, job_id, run, klass)], groups[group]]
        if job_id in names:
            sums.append(totals[(job_id, run, klass)])
        for total in sums:
            total[0] += seconds
            total[1] += wasted
    return days, groups, totals


Sums = dict[tuple[Any, ...], list[float]]
_GROUP = ("project_name", "username", "cluster_name")
_NAMES = ("job_name", *_GROUP)
_GONE = {"job_name": "", "project_name": "", "username": "", "cluster_name": ""}


def _add(model: type[models.Model], keys: tuple[str, ...], sums: Sums,
         names: dict[int, dict[str, Any]] | None = None) -> int:  # fmt: skip
    """INSERT ... ON CONFLICT (keys) DO UPDATE adding the seconds (PostgreSQL and SQLite): the
    rows created with the Job's names when `names` is given."""
    if not sums:
        return 0
    columns = [*keys, *(_NAMES if names is not None else ()), "gpu_seconds", "wasted_gpu_seconds"]
    fields = statements.fields_of(model, columns)
    table = statements.table(model)
    quoted = [statements.column(field) for field in fields]
    conflict = ", ".join(quoted[: len(keys)])
    added = ", ".join(f"{column} = {table}.{column} + EXCLUDED.{column}" for column in quoted[-2:])
    job = keys.index("job_id") if names is not None else 0
    rows = [
        [*key, *([] if names is None else _named(names, key[job])), seconds, wasted]
        for key, (seconds, wasted) in sums.items()
    ]  # fmt: skip
    statements.insert(model, columns, rows, f"ON CONFLICT ({conflict}) DO UPDATE SET {added}")
    return len(rows)


def _named(names: dict[int, dict[str, Any]], job_id: int) -> list[str]:
    found = names.get(job_id, _GONE)
    return [found[name] for name in _NAMES]


def _names(job_ids: set[int]) -> dict[int, dict[str, Any]]:
    """The names the roll-ups copy, of the Jobs that still exist (one raw SELECT)."""
    listed, param = statements.one_of(statements.fields_of(Job, ["pk"])[0], job_ids)
    tables = [statements.table(model) for model in (Job, Project, User, Cluster)]
    rows = statements.fetch(
        "SELECT j.id, j.name, p.name, u.username, c.name FROM {} AS j "
        "JOIN {} AS p ON p.id = j.project_id LEFT JOIN {} AS u ON u.id = j.owner_id "
        "JOIN {} AS c ON c.id = j.cluster_id ".format(*tables) + f"WHERE j.id IN {listed}",
        [param], (),
    )  # fmt: skip
    return {
        pk: {"job_name": name, "project_name": project, "username": user or "",
             "cluster_name": cluster}
        for pk, name, project, user, cluster in rows
    }  # fmt: skip


# --- the sync cycle --------------------------------------------------------------------------


def span_of(pod: Pod, stored: Open | None, now: datetime) -> PodSpan:
    """The pod's facts as the ledger keeps them. A crash (no running container where one ran)
    is seen now; a pod gone without a termination time ended when the sync found it gone."""
    observed = pod.observation
    if observed is None:
        base = stored.span if stored else PodSpan(0, None)
        return base._replace(ended_at=pod.gone_at or now)
    waiting = stored.waiting_since if stored else None
    if observed.running_at is None and stored is not None and stored.running_at is not None:
        waiting = now
    elif observed.running_at is not None:
        waiting = None
    terminal = observed.phase in ("Succeeded", "Failed") or pod.gone_at is not None
    ended = observed.finished_at if terminal else None
    if pod.gone_at is not None and ended is None:
        ended = pod.gone_at
    return PodSpan(
        observed.gpus, observed.scheduled_at, observed.running_at, observed.deleted_at, ended,
        waiting,
    )  # fmt: skip


def after_sync(cluster_id: int, pods: Sequence[Pod], judged_jobs: Iterable[int], now: datetime
               ) -> int:  # fmt: skip
    """The sync's one call, in its transaction: the changed pods, the Jobs whose facts changed
    (`judged_jobs`: a phase written, an operation applied; a pod's class follows from its own
    state and its run's, so a pod that did not change in a run whose facts did not needs no
    judging) and the runs due to be judged again; then the idle policy of the runs it judged.
    Returns rows written."""
    stored = open_of_sync(cluster_id, [pod.uid for pod in pods], set(judged_jobs), now)
    by_uid = {row.pod_uid: row for row in stored}
    new_pods = _first_seen([pod for pod in pods if pod.uid not in by_uid])
    if not stored and not new_pods:
        return 0
    found = runs({row.job_id for row in stored} | {pod.job_id for pod in new_pods})
    ledger = Ledger(due=next_due(found.values(), now))
    states = {job_id: RunStates(run) for job_id, run in found.items()}
    changed = {pod.uid: pod for pod in pods}
    for row in stored:
        if row.job_id in states:
            pod = changed.get(row.pod_uid)
            span = span_of(pod, row, now) if pod else None
            node = pod.observation.node_name if pod and pod.observation else None
            advance(ledger, row, states[row.job_id], now, span, node)
            own_due(ledger, row.pod_uid, row.span if span is None else span, now)
    for pod in new_pods:
        if pod.job_id in states:
            opened(ledger, pod, states[pod.job_id], now)
            own_due(ledger, pod.uid, span_of(pod, None, now), now)
    written = write(ledger) + set_due(ledger, stored, now)
    return written + stop_if_idle(found.values(), now)


def own_due(ledger: Ledger, pod_uid: str, span: PodSpan, now: datetime) -> None:
    """A pod's own moment still to come (its clock ahead of the console's): its interval is
    judged again then, since the sync judges only the pods that changed and the runs whose
    facts did."""
    coming = [m for m in (span.running_at, span.stopping_at, span.ended_at) if m and m > now]
    if coming:
        ledger.own[pod_uid] = min(coming)


def after_signal(job_id: int, before: Report | None, now: datetime) -> bool:
    """Signal intake's one call, after the word was folded: the run's pods judged with the
    report as it was until now (`before`) and as it is now; True when the idle policy stopped
    the Job (its caller reconciles it)."""
    stored = open_intervals(Q(job_id=job_id))
    if not stored:
        return False
    run = runs([job_id]).get(job_id)
    if run is None:
        return False
    ledger = Ledger(due=next_due([run], now))

    def report_at(moment: datetime) -> Report | None:
        return before if moment < now else run.report

    states = RunStates(run, report_at)
    for row in stored:
        advance(ledger, row, states, now)
    write(ledger)
    set_due(ledger, stored, now)
    return bool(stop_if_idle([run], now))


def unreachable(cluster_id: int, last_synced_at: datetime | None, now: datetime) -> int:
    """The cluster could not be read: its open intervals end at its last successful sync and
    continue as `unknown`, due at once so that the next sync that reads it judges them again
    (usage.ledger.after_sync). Unknown intervals are left as they are."""
    stored = open_intervals(Q(cluster_id=cluster_id) & ~Q(usage_class=UsageClass.UNKNOWN))
    ledger = Ledger()
    for row in stored:
        since = max(row.started_at, min(last_synced_at or now, now))
        unknown = _interval(row, row.span, UsageClass.UNKNOWN, since, row.node_name)
        ledger.steps.append(Step(row, since, [unknown]))
        ledger.due[row.job_id] = since
    return write(ledger) if ledger.steps else 0


def _first_seen(pods: Sequence[Pod]) -> list[Pod]:
    """The pods the ledger has no open interval of that hold GPUs and were never recorded
    (a pod recorded and closed before, seen again by a relist, is not counted twice)."""
    holding = [
        pod for pod in pods
        if pod.observation is not None and pod.observation.gpus and pod.observation.scheduled_at
    ]  # fmt: skip
    if not holding:
        return []
    uids = [pod.uid for pod in holding]
    known = set(GpuInterval.objects.filter(pod_uid__in=uids).values_list("pod_uid", flat=True))
    return [pod for pod in holding if pod.uid not in known]
