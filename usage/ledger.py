"""Keeping the GPU-hours ledger: intervals closed and opened as a run's class changes, written
by the sync cycle (the pods it saw change, the Jobs it touched, the runs due to be judged again)
and by signal intake (a new word from the workload), never recomputed from scratch.

A class change closes the open interval of each pod at the moment it happened and opens the
next: the moments are Kubernetes' own (bound, running since, deleted, terminated) and the
workload's turning points (jobs.status.workload.turning_points), so the figures do not depend on
how often the console looks. Closing is a conditional UPDATE (the interval still open and of its
class): a sync and a signal that judge the same run at once close it once. Every closed interval
is added to its hours (`UsageHour`) in the same transaction.

An unreachable cluster's open intervals are closed at its last successful sync and continue as
`unknown` (ARCHITECTURE §Principles: not guessed) until a sync reads it again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.db import connection, models, transaction
from django.db.models import Case, DateTimeField, Q, Value, When

from jobs.choices import JobPhase, UsageClass
from jobs.models import Job
from jobs.status.usage import (
    PodSpan,
    Timeline,
    by_hour,
    day_of,
    pod_state_at,
    timeline,
    usage_class,
)  # fmt: skip
from jobs.status.workload import Report, judge, turning_points
from usage.models import GpuInterval, UsageDay, UsageGroupDay, UsageHour, UsageTotal
from usage.policy import due_stop, stop_if_idle
from usage.runs import Run, runs

# The columns of an open interval the ledger reads.
_OPEN = (
    "pk", "job_id", "run", "task_id", "cluster_id", "pod_uid", "pod_name", "node_name", "gpus",
    "usage_class", "started_at", "bound_at", "running_at", "stopping_at", "waiting_since",
    "due_at",
)  # fmt: skip
STICKY = frozenset({UsageClass.STOPPING, UsageClass.FAILED})


@dataclass(frozen=True)
class Open:
    """An open interval as stored."""

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
    rows = GpuInterval.objects.filter(selection, ended_at__isnull=True).values_list(*_OPEN)
    return [Open(*row) for row in rows]


# --- judging ---------------------------------------------------------------------------------


ReportAt = Callable[[datetime], Report | None]


def _class_at(span: PodSpan, run: Run, stored: UsageClass, end: datetime, report_at: ReportAt
              ) -> Callable[[datetime], UsageClass]:  # fmt: skip
    """A second's class. The Job's own facts (stopped, Failed) are known as of now only: before
    `end` they count only when the stored class already came from them (they are sticky)."""
    sticky = stored in STICKY

    def class_at(moment: datetime) -> UsageClass:
        now_or_sticky = moment >= end or sticky
        phase = run.phase if now_or_sticky or run.phase != JobPhase.FAILED else JobPhase.RUNNING
        stopped = run.stopped and now_or_sticky
        report = report_at(moment)
        state = judge(report, phase, run.run, run.policies, moment)[0]
        return usage_class(pod_state_at(span, moment), phase, stopped, state)

    return class_at


def _points(span: PodSpan, run: Run, report: Report | None) -> list[datetime]:
    pod = [span.running_at, span.stopping_at, span.waiting_since]
    return [*(p for p in pod if p is not None), *turning_points(report, run.run, run.policies)]


def judged(
    stored: Open, span: PodSpan, run: Run, end: datetime, report_at: ReportAt | None = None
) -> list[tuple[datetime, UsageClass]]:
    """The classes of the pod from its open interval's start until `end`: (since, class)
    changes, the first the stored one."""
    at = report_at or (lambda _moment: run.report)
    class_at = _class_at(span, run, stored.usage_class, end, at)
    unknown = stored.usage_class == UsageClass.UNKNOWN  # a gap is not guessed: judged at its end
    points = [] if unknown else _points(span, run, at(stored.started_at))
    return timeline(stored.started_at, stored.usage_class, end, points, class_at)


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
    rows: list[GpuInterval]


@dataclass
class Ledger:
    """The rows one pass writes, in one go."""

    steps: list[Step] = field(default_factory=list)
    facts: list[tuple[Open, PodSpan, str]] = field(default_factory=list)
    due: dict[int, datetime | None] = field(default_factory=dict)


def _interval(base: Open, span: PodSpan, klass: UsageClass, start: datetime, node: str
              ) -> GpuInterval:  # fmt: skip
    return GpuInterval(
        job_id=base.job_id, run=base.run, task_id=base.task_id, cluster_id=base.cluster_id,
        pod_uid=base.pod_uid, pod_name=base.pod_name, node_name=node, gpus=span.gpus,
        usage_class=klass, started_at=start, bound_at=span.bound_at, running_at=span.running_at,
        stopping_at=span.stopping_at, waiting_since=span.waiting_since,
    )  # fmt: skip


def _rows(base: Open, span: PodSpan, changes: Timeline, end: datetime, node: str
          ) -> list[GpuInterval]:  # fmt: skip
    """An interval per change; each closed at the next, the last open unless the pod ended."""
    rows = []
    for index, (since, klass) in enumerate(changes):
        row = _interval(base, span, klass, since, node)
        following = changes[index + 1][0] if index + 1 < len(changes) else None
        row.ended_at = following or (end if span.ended_at is not None else None)
        rows.append(row)
    return rows


def advance(
    ledger: Ledger, stored: Open, span: PodSpan, run: Run, now: datetime,
    report_at: ReportAt | None = None, node: str | None = None,
) -> None:  # fmt: skip
    """Adds to `ledger` what the pod's new facts and its run's state change: the open interval
    closed at the first change, the classes after it, the last left open unless the pod ended."""
    end = max(stored.started_at, min(span.ended_at or now, now))
    changes = judged(stored, span, run, end, report_at)
    if span.ended_at is not None and len(changes) > 1 and changes[-1][0] >= end:
        changes.pop()  # a class judged at the very end of a pod that ended holds no second
    node = stored.node_name if node is None else node
    if len(changes) == 1 and span.ended_at is None:
        if span != stored.span or node != stored.node_name:
            ledger.facts.append((stored, span, node))
        return
    closes_at = changes[1][0] if len(changes) > 1 else end
    ledger.steps.append(Step(stored, closes_at, _rows(stored, span, changes[1:], end, node)))


def opened(ledger: Ledger, pod: Pod, run: Run, now: datetime) -> None:
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
    first = _class_at(span, run, UsageClass.STARTING, end, lambda _m: run.report)(span.bound_at)
    seed = replace(seed, usage_class=first)
    changes = judged(seed, span, run, end)
    ledger.steps.append(Step(None, None, _rows(seed, span, changes, end, observed.node_name)))


def write(ledger: Ledger) -> int:
    """Closes, opens and rolls up (in the caller's transaction, or one of its own). A step
    whose interval another writer closed first is left out whole."""
    written = 0
    fresh: list[GpuInterval] = []
    closed: list[Closed | GpuInterval] = []
    with transaction.atomic(savepoint=False):
        closing = _close(ledger.steps)
        for step in ledger.steps:
            if step.stored is not None and step.closes_at is not None:
                if step.stored.pk not in closing:
                    continue
                written += 1
                closed.append(_closed(step.stored, step.closes_at))
            fresh += step.rows
        for row in fresh:
            row.due_at = ledger.due.get(row.job_id) if row.ended_at is None else None
        GpuInterval.objects.bulk_create(fresh)
        written += len(fresh) + _write_facts(ledger)
        written += roll_up([*closed, *(row for row in fresh if row.ended_at is not None)])
    return written


def _close(steps: Sequence[Step]) -> set[int]:
    """Closes the steps' intervals that are still open and of the class they were judged from,
    in one UPDATE; returns their pks. The rows are locked first, in pk order, so that a sync and
    a signal closing the same intervals at once wait for each other (never a deadlock) and the
    second finds them closed."""
    wanted = {
        step.stored.pk: step
        for step in steps
        if step.stored is not None and step.closes_at is not None
    }  # fmt: skip
    if not wanted:
        return set()
    still_open = (
        GpuInterval.objects.select_for_update()
        .filter(pk__in=wanted, ended_at__isnull=True)
        .order_by("pk")
        .values_list("pk", "usage_class")
    )
    closing = {pk for pk, klass in still_open if klass == _stored(wanted[pk]).usage_class}
    if closing:
        moments = [When(pk=pk, then=Value(wanted[pk].closes_at)) for pk in sorted(closing)]
        GpuInterval.objects.filter(pk__in=closing).update(
            ended_at=Case(*moments, output_field=DateTimeField()), due_at=None
        )
    return closing


def _stored(step: Step) -> Open:
    assert step.stored is not None
    return step.stored


@dataclass(frozen=True)
class Closed:
    """What the roll-ups read of a closed interval (a GpuInterval has the same attributes)."""

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


def _write_facts(ledger: Ledger) -> int:
    written = 0
    for stored, span, node in ledger.facts:
        written += GpuInterval.objects.filter(pk=stored.pk, ended_at__isnull=True).update(
            node_name=node, gpus=span.gpus, bound_at=span.bound_at, running_at=span.running_at,
            stopping_at=span.stopping_at, waiting_since=span.waiting_since,
        )  # fmt: skip
    return written


def set_due(due: dict[int, datetime | None], stored: Sequence[Open], now: datetime) -> int:
    """Stores each judged run's next due moment on its open intervals where it must move:
    earlier than stored, or the stored one has come. A later moment is not written (a heartbeat
    moves it on every message): the run is then judged once too early, which changes nothing
    and stores the moment as it is by then."""
    moved: dict[datetime | None, set[int]] = defaultdict(set)
    for row in stored:
        if row.job_id not in due:
            continue
        new, old = due[row.job_id], row.due_at
        sooner = old is None or old <= now or (new is not None and new < old)
        if sooner and new != old:
            moved[new].add(row.job_id)
    written = 0
    for moment, job_ids in moved.items():
        rows = GpuInterval.objects.filter(job_id__in=job_ids, ended_at__isnull=True)
        written += rows.update(due_at=moment)
    return written


# --- the roll-ups ----------------------------------------------------------------------------


def roll_up(closed: Sequence[Closed | GpuInterval]) -> int:
    """Adds the closed intervals' GPU-seconds to their hours and days (one row per hour or day,
    run and class), to their groups' days (project, person, cluster and class) and to their runs'
    totals: each row inserted or increased in one statement per table (concurrent writers add,
    never overwrite)."""
    if not closed:
        return 0
    names = _names({row.job_id for row in closed})
    hours: Sums = defaultdict(lambda: [0.0, 0.0])
    for row in closed:
        assert row.ended_at is not None
        for hour, part in by_hour(row.usage_class, row.gpus, row.started_at, row.ended_at):
            total = hours[(hour, row.job_id, row.run, row.usage_class)]
            total[0] += part.gpu_seconds
            total[1] += part.wasted_gpu_seconds
    days: Sums = defaultdict(lambda: [0.0, 0.0])
    groups: Sums = defaultdict(lambda: [0.0, 0.0])
    totals: Sums = defaultdict(lambda: [0.0, 0.0])
    for (hour, job_id, run, klass), sums in hours.items():
        named = names.get(job_id, _GONE)
        group = (named["project_name"], named["username"], named["cluster_name"])
        for key in ((day_of(hour), job_id, run, klass), (day_of(hour), *group, klass)):
            into = days if len(key) == 4 else groups
            into[key][0] += sums[0]
            into[key][1] += sums[1]
        if job_id in names:
            totals[(job_id, run, klass)][0] += sums[0]
            totals[(job_id, run, klass)][1] += sums[1]
    by_job = ("job_id", "run", "usage_class")
    return (
        _add(UsageHour, ("hour", *by_job), hours, names)
        + _add(UsageDay, ("day", *by_job), days, names)
        + _add(UsageGroupDay, ("day", *_GROUP, "usage_class"), groups)
        + _add(UsageTotal, by_job, totals)
    )


Sums = dict[tuple[Any, ...], list[float]]
_GROUP = ("project_name", "username", "cluster_name")
_NAMES = ("job_name", *_GROUP)
_GONE = {"job_name": "", "project_name": "", "username": "", "cluster_name": ""}
_BATCH = 500


def _add(model: type[models.Model], keys: tuple[str, ...], sums: Sums,
         names: dict[int, dict[str, Any]] | None = None) -> int:  # fmt: skip
    """INSERT ... ON CONFLICT (keys) DO UPDATE adding the seconds (PostgreSQL and SQLite): the
    rows created with the Job's names when `names` is given."""
    if not sums:
        return 0
    meta = model._meta
    columns = [*keys, *(_NAMES if names is not None else ()), "gpu_seconds", "wasted_gpu_seconds"]
    fields = [_field(model, column) for column in columns]
    table = connection.ops.quote_name(meta.db_table)
    quoted = [connection.ops.quote_name(field.column or field.name) for field in fields]
    conflict = ", ".join(quoted[: len(keys)])
    added = ", ".join(f"{column} = {table}.{column} + EXCLUDED.{column}" for column in quoted[-2:])
    items = list(sums.items())
    for offset in range(0, len(items), _BATCH):
        batch = items[offset : offset + _BATCH]
        values, params = [], []
        for key, (seconds, wasted) in batch:
            named = [] if names is None else _named(names, key[keys.index("job_id")])
            row = [*key, *named, seconds, wasted]
            params += [
                field.get_db_prep_save(value, connection)
                for field, value in zip(fields, row, strict=True)
            ]
            values.append("(" + ", ".join(["%s"] * len(columns)) + ")")
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} ({', '.join(quoted)}) VALUES {', '.join(values)} "
                f"ON CONFLICT ({conflict}) DO UPDATE SET {added}",
                params,
            )
    return len(items)


def _named(names: dict[int, dict[str, Any]], job_id: int) -> list[str]:
    found = names.get(job_id, _GONE)
    return [found[name] for name in _NAMES]


def _field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field)
    return field


def _names(job_ids: set[int]) -> dict[int, dict[str, Any]]:
    rows = Job.objects.filter(pk__in=job_ids).values_list(
        "pk", "name", "project__name", "owner__username", "cluster__name"
    )
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
        return replace(base, ended_at=pod.gone_at or now)
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
    """The sync's one call, in its transaction: the changed pods, the touched Jobs and the runs
    due to be judged again; then the idle policy of the runs it judged. Returns rows written."""
    uids = [pod.uid for pod in pods]
    jobs = set(judged_jobs)
    selection = Q(cluster_id=cluster_id, due_at__lte=now)
    if uids:
        selection |= Q(pod_uid__in=uids)
    if jobs:
        selection |= Q(job_id__in=jobs)
    stored = open_intervals(selection)
    by_uid = {row.pod_uid: row for row in stored}
    new_pods = _first_seen([pod for pod in pods if pod.uid not in by_uid])
    if not stored and not new_pods:
        return 0
    found = runs({row.job_id for row in stored} | {pod.job_id for pod in new_pods})
    ledger = Ledger(due=next_due(found.values(), now))
    changed = {pod.uid: pod for pod in pods}
    for row in stored:
        if row.job_id in found:
            pod = changed.get(row.pod_uid)
            span = span_of(pod, row, now) if pod else row.span
            node = pod.observation.node_name if pod and pod.observation else None
            advance(ledger, row, span, found[row.job_id], now, node=node)
    for pod in new_pods:
        if pod.job_id in found:
            opened(ledger, pod, found[pod.job_id], now)
    written = write(ledger) + set_due(ledger.due, stored, now)
    return written + stop_if_idle(found.values(), now)


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

    for row in stored:
        advance(ledger, row, row.span, run, now, report_at)
    write(ledger)
    set_due(ledger.due, stored, now)
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
        unknown.due_at = since
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
