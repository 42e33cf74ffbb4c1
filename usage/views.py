"""The Usage page (GPU-hours by project, person, cluster or Job, stacked by class, with a time
chart of GPUs held and a CSV export), and the figures the dashboard and the job page show
(docs/usage.md). Charts are server-rendered SVG: no script, nothing from other hosts."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from jobs.access import is_operator, jobs_for, operates_in
from jobs.choices import WASTED_CLASSES, UsageClass
from jobs.models import Job
from jobs.status.usage import HOUR, by_hour, hour_of, stop_at
from jobs.status.workload import idle_since
from usage.api import as_csv, scope_for
from usage.models import GpuInterval, UsageHour
from usage.period import Period, ReportInvalid, asked
from usage.report import GroupBy, JobUsage, Row, Scope, class_timeline, job_usage, report
from usage.runs import runs

CHART_WIDTH = 100.0  # the SVG's own units: percent of its width
MAX_BARS = 31 * 24  # a longer period is charted per day
# What a reader of the dashboard panel can act on: GPUs held, not advancing, not being freed.
NOT_PROGRESSING = frozenset(UsageClass) - {UsageClass.PROGRESSING, UsageClass.STOPPING}


@dataclass(frozen=True)
class Segment:
    klass: str
    x: float
    width: float
    hours: float


def segments(by_class: dict[str, float], scale: float) -> list[Segment]:
    """A stacked bar: each class's share of `scale` (the longest bar), left to right."""
    found, x = [], 0.0
    for klass, hours in by_class.items():
        if hours > 0 and scale > 0:
            width = CHART_WIDTH * hours / scale
            found.append(Segment(klass, round(x, 3), round(width, 3), hours))
            x += width
    return found


@dataclass(frozen=True)
class Bar:
    """One column of the time chart: GPUs held on average in a bucket, stacked by class."""

    start: datetime
    x: float
    width: float
    parts: list[tuple[str, float, float]]  # (class, y, height) in percent of the chart
    gpus: float


def _held_by_bucket(start: datetime, end: datetime, scope: Scope, now: datetime,
                    bucket: timedelta) -> dict[datetime, dict[str, float]]:  # fmt: skip
    """GPU-seconds per bucket and class: the roll-ups of the hours, the open intervals' hours."""
    seconds: dict[datetime, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    first = hour_of(start)
    hours = (
        UsageHour.objects.filter(scope.hours(), hour__gte=first, hour__lt=end)
        .values_list("hour", "usage_class")
        .annotate(Sum("gpu_seconds"))
        .order_by()
    )
    for hour, klass, total in hours:
        seconds[_bucket(hour, first, bucket)][klass] += total or 0.0
    open_ = GpuInterval.objects.filter(scope.intervals(), ended_at__isnull=True, started_at__lt=end)
    for klass, gpus, since in open_.values_list("usage_class", "gpus", "started_at"):
        for hour, part in by_hour(klass, gpus, max(since, first), min(end, now)):
            seconds[_bucket(hour, first, bucket)][klass] += part.gpu_seconds
    return seconds


def _bucket(moment: datetime, first: datetime, bucket: timedelta) -> datetime:
    return first + bucket * int((moment - first) / bucket)


def time_chart(start: datetime, end: datetime, scope: Scope, now: datetime) -> list[Bar]:
    end = min(end, now)
    if end <= start:
        return []
    bucket = HOUR if (end - start) <= MAX_BARS * HOUR else timedelta(days=1)
    held = _held_by_bucket(start, end, scope, now, bucket)
    first = hour_of(start)
    count = max(1, int((end - first) / bucket) + 1)
    width = CHART_WIDTH / count
    span = bucket.total_seconds()
    gpus = {moment: sum(by.values()) / span for moment, by in held.items()}
    top = max(gpus.values(), default=0.0) or 1.0
    bars = []
    for index in range(count):
        moment = first + bucket * index
        y, parts = 100.0, []
        for klass in UsageClass:
            height = 100.0 * held.get(moment, {}).get(klass, 0.0) / span / top
            if height > 0:
                y -= height
                parts.append((str(klass), round(y, 3), round(height, 3)))
        bars.append(
            Bar(moment, round(index * width, 3), round(width, 3), parts, gpus.get(moment, 0.0))
        )
    return bars


def _chart_rows(rows: list[Row]) -> list[tuple[Row, list[Segment]]]:
    scale = max((row.gpu_hours for row in rows), default=0.0)
    return [(row, segments(row.by_class, scale)) for row in rows]


@login_required
def usage_page(request: HttpRequest) -> HttpResponse:
    """Operators see every project; members and viewers their own projects' rows."""
    now = timezone.now()
    context: dict[str, Any] = {
        "periods": Period.choices, "group_bys": GroupBy.choices, "classes": list(UsageClass),
        "wasted_classes": [str(klass) for klass in WASTED_CLASSES], "params": request.GET,
    }  # fmt: skip
    try:
        wanted = asked(request.GET, now, default=Period.WEEK)
    except ReportInvalid as invalid:
        return render(request, "usage/usage.html", {**context, "errors": invalid.errors})
    scope = scope_for(request.user, wanted.project, wanted.cluster)
    rows = report(wanted.start, wanted.end, wanted.group_by, scope, now)
    if request.GET.get("format") == "csv":
        response = HttpResponse(as_csv(rows), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="usage.csv"'
        return response
    total = Row("", "")
    for row in rows:
        for klass, seconds in row.seconds.items():
            total.seconds[klass] += seconds
        total.wasted_seconds += row.wasted_seconds
    context |= {
        "wanted": wanted, "rows": _chart_rows(rows), "total": total,
        "bars": time_chart(wanted.start, wanted.end, scope, now),
        "csv_query": request.GET.urlencode(), "operator": is_operator(request.user),
    }  # fmt: skip
    return render(request, "usage/usage.html", context)


# --- the dashboard's panel ---------------------------------------------------------------------


@dataclass(frozen=True)
class Held:
    """A Job whose pods hold GPUs now while it does not progress."""

    job: Job
    gpus: int
    klass: str
    since: datetime
    wasted_gpu_hours: float
    may_stop: bool

    @property
    def class_label(self) -> str:
        return str(UsageClass(self.klass).label)

    def key(self) -> tuple[object, ...]:
        """What the polled panel shows (its wasted hours to 2 decimals)."""
        wasted = round(self.wasted_gpu_hours, 2)
        return (self.job.pk, self.gpus, self.klass, self.since, wasted, self.may_stop)


def held_not_progressing(user: Any, now: datetime, limit: int = 20) -> list[Held]:
    """The Jobs of the reader's projects holding GPUs in a class other than progressing (or
    stopping), the most GPUs first; each with its wasted GPU-hours in this run so far."""
    visible = jobs_for(user).values("pk")
    open_ = GpuInterval.objects.filter(
        ended_at__isnull=True, usage_class__in=list(NOT_PROGRESSING), job__in=visible
    ).values_list("job_id", "usage_class", "gpus", "started_at")
    by_job: dict[int, dict[str, Any]] = {}
    for job_id, klass, gpus, since in open_:
        entry = by_job.setdefault(job_id, {"gpus": 0, "classes": defaultdict(int), "since": since})
        entry["gpus"] += gpus
        entry["classes"][klass] += gpus
        entry["since"] = min(entry["since"], since)
    jobs = Job.objects.filter(pk__in=list(by_job)).select_related("project", "cluster")
    jobs = jobs.prefetch_related("usage_totals")
    found = []
    for job in jobs:
        entry = by_job[job.pk]
        klass = max(entry["classes"], key=lambda name: entry["classes"][name])
        usage = job_usage(job, now)
        found.append(Held(job, entry["gpus"], klass, entry["since"], usage.wasted_gpu_hours,
                          operates_in(user, job.project_id) and not job.stopped))  # fmt: skip
    found.sort(key=lambda held: (-held.gpus, held.since))
    return found[:limit]


# --- the job page's figures --------------------------------------------------------------------


@dataclass(frozen=True)
class Lane:
    """One pod's intervals on the class timeline: (class, x, width, interval) in percent."""

    pod_name: str
    parts: list[tuple[str, float, float, GpuInterval]]


@dataclass(frozen=True)
class JobFigures:
    usage: JobUsage
    useful_gpu_hours: float
    timeline: list[GpuInterval]
    lanes: list[Lane]
    stop_at: datetime | None  # when the idle policy will stop it unless the workload advances
    idle_minutes: int | None


def lanes(intervals: list[GpuInterval], now: datetime) -> list[Lane]:
    """The intervals laid out from the first one's start to the last end (or now)."""
    if not intervals:
        return []
    first = min(row.started_at for row in intervals)
    last = max(row.ended_at or now for row in intervals)
    span = max((last - first).total_seconds(), 1.0)
    by_pod: dict[str, list[tuple[str, float, float, GpuInterval]]] = defaultdict(list)
    for row in intervals:
        x = CHART_WIDTH * (row.started_at - first).total_seconds() / span
        width = CHART_WIDTH * ((row.ended_at or now) - row.started_at).total_seconds() / span
        by_pod[row.pod_name].append((row.usage_class, round(x, 3), round(max(width, 0.2), 3), row))
    return [Lane(pod, parts) for pod, parts in sorted(by_pod.items())]


def job_figures(job: Job, now: datetime) -> JobFigures:
    usage = job_usage(job, now)
    run = runs([job.pk]).get(job.pk)
    moment, minutes = None, None
    if run is not None and run.idle_minutes and not run.stopped:
        minutes = run.idle_minutes
        since = idle_since(run.report, run.phase, run.run, run.policies, now)
        moment = stop_at(since, minutes)
    useful = round(usage.run_gpu_hours - usage.run_wasted_gpu_hours, 6)
    intervals = class_timeline(job.pk, job.run)
    return JobFigures(usage, useful, intervals, lanes(intervals, now), moment, minutes)
