"""GPU-hours reports: what each project, person, cluster or Job held and wasted over a period.

Read from the daily roll-ups for the whole days of the period (per project, person and cluster
when grouped so, per Job else), the hourly ones for the whole hours before and after them, the
closed intervals that cross the part-hours at its edges, and the open intervals up to now (they
are not in the roll-ups until they close). So a report reads rows as many as its days, its
edge hours and its groups, whatever the length of the history (issue 33: pre-aggregated,
never scanned per request).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.postgres.fields import DateTimeRangeField
from django.core.exceptions import EmptyResultSet
from django.db import connection, models
from django.db.models import F, Prefetch, Q
from django.utils.translation import gettext_lazy as _

from jobs.choices import UsageClass
from jobs.models import Job
from jobs.status.usage import mean_percent, share, whole_days, whole_hours
from usage.models import GpuInterval, PodUtilisation, UsageDay, UsageGroupDay, UsageHour

HOUR_SECONDS = 3600.0
DECIMALS = 6  # hours: a one-second run on one GPU is 0.000278, never 0


class GroupBy(models.TextChoices):
    PROJECT = "project", _("project")
    USER = "user", _("person")
    CLUSTER = "cluster", _("cluster")
    JOB = "job", _("Job")


# The columns naming a row, in the roll-ups and in the intervals (through their Job).
_HOUR_KEYS = {
    GroupBy.PROJECT: ("project_name", "project_name"),
    GroupBy.USER: ("username", "username"),
    GroupBy.CLUSTER: ("cluster_name", "cluster_name"),
    GroupBy.JOB: ("job_id", "job_name"),
}
_INTERVAL_KEYS = {
    GroupBy.PROJECT: ("job__project__name", "job__project__name"),
    GroupBy.USER: ("job__owner__username", "job__owner__username"),
    GroupBy.CLUSTER: ("cluster__name", "cluster__name"),
    GroupBy.JOB: ("job_id", "job__name"),
}


@dataclass(frozen=True)
class Scope:
    """Which rows a reader may see and asked for: `projects` None for every project (an
    operator), else the names of the reader's projects; `project`/`cluster` filter by name."""

    projects: Sequence[str] | None = None
    project: str = ""
    cluster: str = ""
    job_id: int | None = None

    def hours(self) -> Q:
        return self._q("project_name", "cluster_name", "job_id")

    def intervals(self) -> Q:
        return self._q("job__project__name", "cluster__name", "job_id")

    def jobs(self) -> Q:
        """The Jobs of the projects and the Job asked for (Job rows; the cluster aside)."""
        return self._q("project__name", "", "pk")

    def narrows_jobs(self) -> bool:
        """Whether `jobs()` leaves some Jobs out."""
        return self.projects is not None or bool(self.project) or self.job_id is not None

    def _q(self, project: str, cluster: str, job: str) -> Q:
        q = Q()
        if self.projects is not None:
            q &= Q(**{f"{project}__in": list(self.projects)})
        if self.project:
            q &= Q(**{project: self.project})
        if self.cluster and cluster:
            q &= Q(**{cluster: self.cluster})
        if self.job_id is not None:
            q &= Q(**{job: self.job_id})
        return q


@dataclass
class Row:
    key: Any
    label: str
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    wasted_seconds: float = 0.0

    @property
    def gpu_hours(self) -> float:
        return round(sum(self.seconds.values()) / HOUR_SECONDS, DECIMALS)

    @property
    def wasted_gpu_hours(self) -> float:
        return round(self.wasted_seconds / HOUR_SECONDS, DECIMALS)

    @property
    def by_class(self) -> dict[str, float]:
        """Hours per class, every class named (0 when none), in the vocabulary's order."""
        return {
            str(klass): round(self.seconds.get(klass, 0.0) / HOUR_SECONDS, DECIMALS)
            for klass in UsageClass
        }


class Rows:
    """The rows of a report as they are summed, by key."""

    def __init__(self) -> None:
        self.rows: dict[Any, Row] = {}

    def add(self, key: Any, label: str, klass: str, seconds: float, wasted: float) -> None:
        row = self.rows.setdefault(key, Row(key, label or str(key)))
        row.seconds[klass] += seconds
        row.wasted_seconds += wasted

    def sorted(self) -> list[Row]:
        return sorted(
            self.rows.values(), key=lambda row: (-sum(row.seconds.values()), str(row.key))
        )


def report(
    start: datetime, end: datetime, group_by: GroupBy, scope: Scope, now: datetime
) -> list[Row]:
    """The GPU-hours of [start, end) (end counted up to now), one row per group."""
    end = min(end, now)
    rows = Rows()
    if end <= start:
        return []
    first, last = whole_hours(start, end)
    if first < last:
        days = whole_days(first, last)
        parts = []
        if days[0] < days[1]:
            parts.append(_days(days, group_by, scope))
            hours = [(first, days[0]), (days[1], last)]
        else:
            hours = [(first, last)]
        parts += [
            _rolled(UsageHour, "hour", window, group_by, scope)
            for window in hours
            if window[0] < window[1]
        ]
        _add_rolled(rows, parts)
        edges = [(start, first), (last, end)]
    else:
        edges = [(start, end)]
    for window in edges:
        if window[0] < window[1]:
            _add_intervals(rows, _closed(window, scope), window, group_by, now)
    _add_intervals(rows, _open(start, end, scope), (start, end), group_by, now)
    return rows.sorted()


def _days(days: tuple[datetime, datetime], group_by: GroupBy, scope: Scope
          ) -> models.QuerySet[Any]:  # fmt: skip
    """The whole days: a report by project, person or cluster reads its groups' days, one of
    Jobs (or of one Job) the Jobs' days."""
    by_group = group_by != GroupBy.JOB and scope.job_id is None
    return _rolled(UsageGroupDay if by_group else UsageDay, "day", days, group_by, scope)


def _rolled(
    model: type[UsageHour | UsageDay | UsageGroupDay],
    period: str,
    window: tuple[datetime, datetime],
    group_by: GroupBy,
    scope: Scope,
) -> models.QuerySet[Any]:
    """The roll-ups of `model` whose `period` (hour or day) lies in the window: group, label,
    class and seconds, as `_add_rolled` sums them."""
    key, label = _HOUR_KEYS[group_by]
    within = {f"{period}__gte": window[0], f"{period}__lt": window[1]}
    return (
        model.objects.filter(scope.hours(), **within)  # type: ignore[attr-defined]
        .values(row_key=F(key), row_label=F(label), klass=F("usage_class"),
                seconds=F("gpu_seconds"), wasted=F("wasted_gpu_seconds"))
        .order_by()
    )  # fmt: skip


def _add_rolled(rows: Rows, parts: Sequence[models.QuerySet[Any]]) -> None:
    """The roll-up rows of every part summed by group and class in one statement, so that a
    group's days and hours come back as one row."""
    compiled = []
    for part in parts:
        with suppress(EmptyResultSet):  # a filter no row can match (no project to see)
            compiled.append(part.query.sql_with_params())
    if not compiled:
        return
    union = " UNION ALL ".join(sql for sql, _params in compiled)
    params = [param for _sql, part_params in compiled for param in part_params]
    summed = (
        f"SELECT rolled.row_key, rolled.row_label, rolled.klass, SUM(rolled.seconds), "
        f"SUM(rolled.wasted) FROM ({union}) rolled GROUP BY rolled.row_key, rolled.row_label, "
        "rolled.klass"
    )
    with connection.cursor() as cursor:
        cursor.execute(summed, params)
        for value, name, klass, seconds, wasted in cursor.fetchall():
            rows.add(value, name, klass, seconds or 0.0, wasted or 0.0)


_INTERVAL_FIELDS = ("usage_class", "gpus", "started_at", "ended_at")


def _closed(window: tuple[datetime, datetime], scope: Scope) -> models.QuerySet[GpuInterval]:
    """The closed intervals crossing a part-hour at an edge of the period. On PostgreSQL the
    range index finds them (migration 0003), the scope's Jobs looked up first: joined, the
    planner may walk each Job's whole history instead."""
    crossing = GpuInterval.objects.filter(started_at__lt=window[1], ended_at__gt=window[0])
    if connection.vendor != "postgresql":
        return crossing.filter(scope.intervals()).order_by()
    crossing = crossing.alias(span=TsTzRange("started_at", "ended_at")).filter(
        ended_at__isnull=False, span__overlap=window
    )
    if scope.narrows_jobs():
        jobs = Job.objects.filter(scope.jobs()).values_list("pk", flat=True)
        crossing = crossing.filter(job_id__in=list(jobs))
    if scope.cluster:
        crossing = crossing.filter(cluster__name=scope.cluster)
    return crossing.order_by()


class TsTzRange(models.Func):
    """PostgreSQL's `tstzrange(started_at, ended_at)`, as the range index is built on it."""

    function = "TSTZRANGE"
    output_field = DateTimeRangeField()


def _open(start: datetime, end: datetime, scope: Scope) -> models.QuerySet[GpuInterval]:
    open_ = GpuInterval.objects.filter(scope.intervals(), ended_at__isnull=True, started_at__lt=end)
    return open_.order_by()


def _add_intervals(
    rows: Rows, intervals: models.QuerySet[GpuInterval], window: tuple[datetime, datetime],
    group_by: GroupBy, now: datetime,
) -> None:  # fmt: skip
    key, label = _INTERVAL_KEYS[group_by]
    for value, name, klass, gpus, since, until in intervals.values_list(
        key, label, *_INTERVAL_FIELDS
    ):
        part = share(klass, gpus, since, until or now, window)
        if part.gpu_seconds:
            rows.add(value, name, klass, part.gpu_seconds, part.wasted_gpu_seconds)


# --- one Job --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Utilisation:
    """The current run's GPU utilisation from the DCGM exporter (usage/utilisation.py): its
    Workers' latest values, their GPU-weighted mean, and its progressing GPU-hours split into
    busy and low-utilisation (what no sample covered is in neither)."""

    percent: float | None
    busy_gpu_hours: float
    low_utilisation_gpu_hours: float
    workers: list[PodUtilisation]

    def as_dict(self) -> dict[str, Any]:
        return {
            "percent": None if self.percent is None else round(self.percent, 1),
            "busy_gpu_hours": self.busy_gpu_hours,
            "low_utilisation_gpu_hours": self.low_utilisation_gpu_hours,
            "workers": [
                {"pod": row.pod_name, "percent": round(row.percent, 1),
                 "measured_at": row.measured_at}
                for row in self.workers
            ],
        }  # fmt: skip


def utilisation_of(rows: Iterable[PodUtilisation]) -> Utilisation | None:
    """None when the run was never measured (its cluster has no Prometheus)."""
    workers = sorted(rows, key=lambda row: row.pod_name)
    if not workers:
        return None
    return Utilisation(
        mean_percent((row.percent, row.gpus) for row in workers),
        round(sum(row.busy_gpu_seconds for row in workers) / 3600, 6),
        round(sum(row.low_gpu_seconds for row in workers) / 3600, 6),
        workers,
    )


@dataclass(frozen=True)
class JobUsage:
    """A Job's GPU-hours so far: all its runs, and its current run."""

    gpu_hours: float
    wasted_gpu_hours: float
    by_class: dict[str, float]
    run_gpu_hours: float
    run_wasted_gpu_hours: float
    utilisation: Utilisation | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "gpu_hours": self.gpu_hours,
            "wasted_gpu_hours": self.wasted_gpu_hours,
            "by_class": self.by_class,
            "run_gpu_hours": self.run_gpu_hours,
            "utilisation": self.utilisation.as_dict() if self.utilisation else None,
        }


OPEN_INTERVALS = "open_gpu_intervals"


def prefetch() -> tuple[str, Prefetch[Any], str]:
    """What `job_usage` reads, for a list of Jobs at once (`prefetch_related(*prefetch())`)."""
    open_ = GpuInterval.objects.filter(ended_at__isnull=True)
    return (
        "usage_totals",
        Prefetch("gpu_intervals", queryset=open_, to_attr=OPEN_INTERVALS),
        "pod_utilisations",
    )


def job_usage(job: Job, now: datetime) -> JobUsage:
    """The run totals rolled up for the Job plus its open intervals up to now (prefetched with
    `prefetch()`, else three queries)."""
    every, current = Rows(), Rows()
    for kept in job.usage_totals.all():
        for rows in (every, current) if kept.run == job.run else (every,):
            rows.add(job.pk, "", kept.usage_class, kept.gpu_seconds, kept.wasted_gpu_seconds)
    open_ = getattr(job, OPEN_INTERVALS, None)
    if open_ is None:
        open_ = list(GpuInterval.objects.filter(job_id=job.pk, ended_at__isnull=True))
    for interval in open_:
        since = interval.started_at
        part = share(interval.usage_class, interval.gpus, since, now, (since, now))
        for rows in (every, current) if interval.run == job.run else (every,):
            rows.add(job.pk, "", interval.usage_class, part.gpu_seconds, part.wasted_gpu_seconds)
    empty = Row(job.pk, "")
    total, this = every.rows.get(job.pk, empty), current.rows.get(job.pk, empty)
    measured = [row for row in job.pod_utilisations.all() if row.run == job.run]
    return JobUsage(
        total.gpu_hours, total.wasted_gpu_hours, total.by_class, this.gpu_hours,
        this.wasted_gpu_hours, utilisation_of(measured),
    )  # fmt: skip


def class_timeline(job_id: int, run: int) -> list[GpuInterval]:
    """The run's intervals in order (the Job page's class timeline)."""
    return list(
        GpuInterval.objects.filter(job_id=job_id, run=run).order_by("pod_name", "started_at", "pk")
    )


def rows_as_dicts(rows: Iterable[Row]) -> list[dict[str, Any]]:
    return [
        {
            "key": row.key,
            "label": row.label,
            "gpu_hours": row.gpu_hours,
            "wasted_gpu_hours": row.wasted_gpu_hours,
            "by_class": row.by_class,
        }
        for row in rows
    ]
