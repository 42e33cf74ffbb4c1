"""A Job's training curves as a chart reads them (issue 35): every series its workload reported
(the step, the step rate, each metric), per run, downsampled to a few hundred points for the
range asked (jobs.downsample), with the checkpoints, the Stalled / Unresponsive / Degraded spells,
the runs and the restarts on the same time axis.

Everything is read from what is stored: the run's progress and checkpoint messages (Signal,
compacted by jobs.workload.intake so that a finished run keeps thousands of points), the spells the
fold recorded (WorkloadSpell) and, for a spell still going on, the state derived now. Times are
seconds since the epoch (what a chart's time axis counts in). The API
(`GET /api/v1/jobs/{id}/series`) and the Metrics tab read through `read`, and a live chart
asks again with the cursor it was given: `read` answers None when nothing is new (a 204).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import orjson
from django.db.models import Max, Min, Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from jobs.choices import SPELL_STATES
from jobs.downsample import Axis, Overview, Point, downsample, extremes
from jobs.models import Job, Signal, WorkloadReport, WorkloadSpell
from jobs.status.spells import ongoing
from jobs.status.workload import Policies
from jobs.workload import overview
from jobs.workload.report import report_of, workload_of
from workers.models import PodInstance

MAX_POINTS = 500  # per series per request (issue 35: "at most ~500")
MAX_NAMES = 64
STEP, STEP_RATE = "step", "step_rate"
LAST_TIME = 253_402_300_799  # 9999-12-31 23:59:59 UTC: the last time a datetime can hold


class BadQuery(ValueError):
    """A query parameter the endpoint cannot answer; its text says which and why."""


@dataclass(frozen=True)
class Query:
    names: frozenset[str] | None = None  # None: every series
    run: int | None = None  # None: the Job's current run; 0: every run
    start: float | None = None  # on the x axis: seconds since the epoch, or a step
    end: float | None = None
    axis: Axis = Axis.TIME
    points: int = MAX_POINTS
    after: str = ""  # a cursor from an earlier answer: only what is newer, or None


def parse_query(params: Mapping[str, str]) -> Query:
    """The query string of `GET /api/v1/jobs/{id}/series` (and of the Metrics tab's reads)."""
    names = [name for name in params.get("names", "").split(",") if name]
    if len(names) > MAX_NAMES:
        raise BadQuery(f"names: at most {MAX_NAMES} series.")
    run_text = params.get("run", "")
    try:
        axis = Axis(params.get("x") or Axis.TIME)
    except ValueError:
        raise BadQuery("x: time or step.") from None
    start = _number(params.get("from", ""), "from", float)
    end = _number(params.get("to", ""), "to", float)
    for name, bound in (("from", start), ("to", end)):
        if axis == Axis.TIME and bound is not None and not 0 <= bound <= LAST_TIME:
            raise BadQuery(f"{name}: out of range.")
    return Query(
        names=frozenset(names) or None,
        run=0 if run_text == "all" else _number(run_text, "run", int),
        start=start,
        end=end,
        axis=axis,
        points=min(MAX_POINTS, _number(params.get("points", ""), "points", int) or MAX_POINTS),
        after=params.get("after", ""),
    )


def _number[N: (int, float)](text: str, name: str, kind: type[N]) -> N | None:
    if not text:
        return None
    try:
        value = kind(text)
    except ValueError:
        raise BadQuery(f"{name}: a number.") from None
    if value != value or abs(value) > 2**53 or (kind is int and value < 1):  # NaN, huge, < 1
        raise BadQuery(f"{name}: out of range.")
    return value


# --- reading -----------------------------------------------------------------------------------


def read(
    job: Job, query: Query, now: datetime | None = None, diagnostics: bool = False
) -> dict[str, Any] | None:
    """The answer of the series endpoint, or None when `query.after` is still the newest cursor
    (nothing new: the caller answers 204). With a cursor, the series carry only the points
    stored since it; the checkpoints, spells, runs and restarts are whole (they are short).
    `diagnostics`: the reader sees the pod instance history (jobs.diagnostics), so the pods
    Kubernetes re-created are marked too."""
    now = now or timezone.now()
    runs = _runs(job)
    cursor = _cursor(job, now)
    if query.after and query.after == cursor:
        return None
    wanted = [run for run, _ in runs] if query.run == 0 else [query.run or job.run]
    after_pk = _signal_part(query.after)
    overviews = _overviews(job, wanted, query)
    rows = _progress_rows(job, [run for run in wanted if run not in overviews], query, after_pk)
    return {
        "series": sorted(_series(rows, query) + _overview_series(overviews, query), key=_run),
        "checkpoints": _checkpoints(job, wanted),
        "spells": _spells(job, wanted, now),
        "runs": [{"run": run, "started_at": started} for run, started in runs],
        "restarts": _restarts(job, wanted, runs if diagnostics else None),
        "cursor": cursor,
        "x": query.axis.value,
    }


def _runs(job: Job) -> list[tuple[int, float]]:
    """Each run that reported anything, with its first message's time."""
    rows = Signal.objects.filter(job=job).values("run").annotate(first=Min("at")).order_by("run")
    return [(row["run"], row["first"].timestamp()) for row in rows]


def _cursor(job: Job, now: datetime) -> str:
    """What a chart has seen: the newest stored progress or checkpoint message, the newest
    recorded spell and the spell going on now (its state)."""
    signal = Signal.objects.filter(job=job, kind__in=("progress", "checkpoint")).aggregate(
        newest=Max("pk")
    )["newest"]
    spell = WorkloadSpell.objects.filter(job=job).aggregate(newest=Max("pk"))["newest"]
    state = workload_of(job, now).state
    going_on = state if state in SPELL_STATES else "-"
    return f"{job.run}.{signal or 0}.{spell or 0}.{going_on}"


def _signal_part(cursor: str) -> int:
    """The newest message a cursor had seen (0: none or not a cursor)."""
    parts = cursor.split(".")
    return int(parts[1]) if len(parts) == 4 and parts[1].isdigit() else 0


def _overviews(job: Job, runs: Sequence[int], query: Query) -> dict[int, Overview]:
    """The runs' overviews (jobs.workload.overview) when the whole run is asked, on either
    axis: bounded however long the run, where its stored messages are thousands. A zoom, or
    a live chart's "what is new", reads the stored messages of its range as before."""
    if query.start is not None or query.end is not None or query.after:
        return {}
    found = {run: overview.read(job.pk, run) for run in runs}
    return {run: kept[0] for run, kept in found.items() if kept is not None}


def _overview_series(overviews: Mapping[int, Overview], query: Query) -> list[dict[str, Any]]:
    """Each wanted series of each run with an overview, in the order of `_series`: its kept
    points (each bucket's lowest and highest) downsampled to query.points on the query's axis."""
    answer = []
    for run, found in sorted(overviews.items()):
        names = [STEP, STEP_RATE, *overview.metric_names(found)]
        for name in names if query.names is None else [n for n in names if n in query.names]:
            key = name if name in (STEP, STEP_RATE) else f"metrics/{name}"
            kept = found.points(key)  # in time order, two a bucket at most
            if query.axis != Axis.TIME or len(kept) > query.points:
                kept = downsample(kept, query.axis, limit=query.points)
            if kept:
                points = [[point.t, point.step, point.value] for point in kept]
                answer.append({"name": name, "run": run, "points": points})
    return answer


def _run(series: Mapping[str, Any]) -> int:
    return int(series["run"])


Row = tuple[int, float, dict[str, Any]]  # (run, seconds since the epoch, progress data)


def _progress_rows(job: Job, runs: Sequence[int], query: Query, after_pk: int) -> list[Row]:
    """The runs' progress messages in time order. Their data comes as text, decoded by orjson
    (a run keeps thousands of messages of up to 32 metrics: the JSONField's json.loads took most
    of the time)."""
    found = Signal.objects.filter(job=job, run__in=runs, kind="progress", pk__gt=after_pk)
    if query.axis == Axis.TIME:
        if query.start is not None:
            found = found.filter(at__gte=datetime.fromtimestamp(query.start, UTC))
        if query.end is not None:
            found = found.filter(at__lte=datetime.fromtimestamp(query.end, UTC))
    elif query.start is not None or query.end is not None:
        found = found.filter(_step_window(job, runs, query))
    ordered = found.order_by("at", "pk").values_list("run", "at", Cast("data", TextField()))
    return [(run, at.timestamp(), orjson.loads(data)) for run, at, data in ordered]


def _step_window(job: Job, runs: Sequence[int], query: Query) -> Q:
    """The stored messages that may hold a step in [query.start, query.end]: in each run with
    an overview, those of the time span whose buckets reached into that step range
    (jobs.downsample.Overview.span), so a zoom on the step axis reads the rows of its range,
    not the whole run; a run without one has few messages, read whole."""
    window = Q(pk__in=[])
    for run in runs:
        found = overview.read(job.pk, run)
        if found is None:
            window |= Q(run=run)
            continue
        span = found[0].span(STEP, query.start, query.end)
        if span is not None:
            began, ended = (datetime.fromtimestamp(t, UTC) for t in span)
            window |= Q(run=run, at__gte=began, at__lt=ended)
    return window


@dataclass(frozen=True)
class Column:
    """One series of one run, its points in time order."""

    times: list[float]
    steps: list[int | None]
    values: list[float]


def _series(rows: Sequence[Row], query: Query) -> list[dict[str, Any]]:
    """Each wanted series of each run, downsampled: the step, the step rate, then the metrics
    by name."""
    by_run: dict[int, list[Row]] = defaultdict(list)
    for row in rows:
        by_run[row[0]].append(row)
    answer = []
    for run, run_rows in sorted(by_run.items()):
        placings: dict[int, tuple[list[int], list[float]]] = {}  # columns sharing their steps
        for name, column in _columns(run_rows, query.names).items():
            points = _downsampled(column, query, placings)
            if points:
                answer.append({"name": name, "run": run, "points": points})
    return answer


def _columns(rows: Sequence[Row], names: frozenset[str] | None) -> dict[str, Column]:
    """The run's series as columns: the step, the step rate, each metric (sorted by name)."""
    times = [at for _run, at, _data in rows]
    steps = [data.get("step") if isinstance(data.get("step"), int) else None for *_, data in rows]
    metrics = [data.get("metrics") or {} for *_, data in rows]
    found: set[str] = set()
    for values in metrics:
        found.update(values)
    columns = {STEP: _column(times, steps, [float(s) if s is not None else None for s in steps])}
    if names is None or STEP_RATE in names:
        columns[STEP_RATE] = _rates(columns[STEP])
    for name in sorted(found):
        if names is None or name in names:
            columns[name] = _column(times, steps, [values.get(name) for values in metrics])
    return {
        name: column
        for name, column in columns.items()
        if column.values and (names is None or name in names)
    }


def _column(times: list[float], steps: list[int | None], values: list[Any]) -> Column:
    """The points that carry a number (a metric a message did not report is no point)."""
    if None not in values:  # every message carried it (validated as numbers at intake)
        return Column(times, steps, values)
    kept = [i for i, value in enumerate(values) if value is not None]
    return Column([times[i] for i in kept], [steps[i] for i in kept], [values[i] for i in kept])


def _rates(steps: Column) -> Column:
    rates = step_rates([Point(t, s, v) for t, s, v in zip(*_fields(steps), strict=True)])
    return Column([p.t for p in rates], [p.step for p in rates], [p.value for p in rates])


def _fields(column: Column) -> tuple[list[float], list[int | None], list[float]]:
    return column.times, column.steps, column.values


def _downsampled(
    column: Column, query: Query, placings: dict[int, tuple[list[int], list[float]]]
) -> list[list[Any]]:
    """At most query.points [t, step, value] of the column in the query's range
    (jobs.downsample.extremes: each bucket's lowest and highest). The columns of one run share
    their steps' list when every message carried them: their x order is found once."""
    if id(column.steps) not in placings:
        placings[id(column.steps)] = _placed(column, query.axis)
    order, xs = placings[id(column.steps)]
    values = column.values if query.axis == Axis.TIME else [column.values[i] for i in order]
    kept = extremes(xs, values, query.start, query.end, query.points)
    return [
        [column.times[order[k]], column.steps[order[k]], float(column.values[order[k]])]
        for k in kept
    ]


def _placed(column: Column, axis: Axis) -> tuple[list[int], list[float]]:
    """The positions of the column's points in x order, and their x: on the step axis a point
    without a step has no place, and a run that went back to a checkpoint is sorted by step."""
    if axis == Axis.TIME:
        return list(range(len(column.times))), column.times
    stepped = sorted((step, i) for i, step in enumerate(column.steps) if step is not None)
    return [i for _, i in stepped], [float(step) for step, _ in stepped]


def step_rates(steps: Sequence[Point]) -> list[Point]:
    """Steps per minute between consecutive points that moved forward in time (a step that went
    back, a restart from a checkpoint, gives no rate)."""
    rates = []
    for before, after in pairwise(steps):
        if after.t <= before.t or after.step is None or before.step is None:
            continue
        if after.step >= before.step:
            rate = (after.step - before.step) / (after.t - before.t) * 60
            rates.append(Point(after.t, after.step, rate))
    return rates


def _checkpoints(job: Job, runs: Sequence[int]) -> list[dict[str, Any]]:
    rows = Signal.objects.filter(job=job, run__in=runs, kind="checkpoint").order_by("at", "pk")
    return [
        {"t": at.timestamp(), "step": data.get("step"), "path": data.get("path", ""), "run": run}
        for run, at, data in rows.values_list("run", "at", "data")
    ]


def _spells(job: Job, runs: Sequence[int], now: datetime) -> list[dict[str, Any]]:
    """The recorded spells of the runs, and the one going on now in the current run."""
    rows = WorkloadSpell.objects.filter(job=job, run__in=runs).order_by("started_at", "pk")
    spells = [
        {"state": state, "from": began.timestamp(), "to": ended.timestamp(), "run": run}
        for run, state, began, ended in rows.values_list("run", "state", "started_at", "ended_at")
    ]
    if job.run in runs:
        current = _ongoing(job, now)
        if current is not None:
            spells.append(current)
    return spells


def _ongoing(job: Job, now: datetime) -> dict[str, Any] | None:
    try:
        report = report_of(job.workload)
    except WorkloadReport.DoesNotExist:
        return None
    if report is None or report.run != job.run:
        return None
    spell = ongoing(workload_of(job, now).state, report, Policies.of(job.spec))
    if spell is None:
        return None
    return {"state": spell.state, "from": spell.started_at.timestamp(), "to": None, "run": job.run}


def _restarts(
    job: Job, runs: Sequence[int], started: Sequence[tuple[int, float]] | None = None
) -> list[dict[str, Any]]:
    """When a run's process came back: a pod re-created (a new UID under a pod name that had
    reported before) or a process that said it is starting after it had reported steps (its
    container restarted). The workload's own word, so every reader of the Job sees it. With
    `started` (the runs' start times; for readers who see diagnostics, spec §Pod and Worker
    status: the instance history is the operators'), also every pod Kubernetes created again
    under a name it had held (`pod_created`); the signal's word for the same pod then goes."""
    found = Signal.objects.filter(job=job, run__in=runs)
    lives = found.values("run", "pod", "uid").annotate(first=Min("at")).order_by("first")
    restarts: list[dict[str, Any]] = []
    seen_pods: set[tuple[int, str]] = set()
    for life in lives:
        key = (life["run"], life["pod"])
        if key in seen_pods:
            restarts.append(_restart(life["run"], life["pod"], life["first"], "recreated"))
        seen_pods.add(key)
    restarts += _process_restarts(found)
    if started is not None:
        created = _pods_created(job, runs, started)
        again = {(restart["pod"], restart["run"]) for restart in created}
        restarts = [
            r for r in restarts if r["how"] != "recreated" or (r["pod"], r["run"]) not in again
        ]
        restarts += created
    return sorted(restarts, key=lambda restart: restart["t"])


def _pods_created(
    job: Job, runs: Sequence[int], started: Sequence[tuple[int, float]]
) -> list[dict[str, Any]]:
    """Each pod instance after the first of its name, at its creation, in the run it fell in."""
    instances = PodInstance.objects.filter(task__job=job).order_by("pod_name", "first_seen_at")
    seen: set[str] = set()
    created = []
    for pod, created_at, first_seen_at in instances.values_list(
        "pod_name", "created_at", "first_seen_at"
    ):
        at = (created_at or first_seen_at).timestamp()
        run = max((run for run, began in started if began <= at), default=None)
        if pod in seen and run in runs:
            created.append({"t": at, "pod": pod, "run": run, "how": "pod_created"})
        seen.add(pod)
    return created


def _process_restarts(found: QuerySet[Signal]) -> list[dict[str, Any]]:
    first_step = dict(
        found.filter(kind="progress")
        .values("uid")
        .annotate(first=Min("at"))
        .values_list("uid", "first")
    )
    starting = found.filter(kind="phase", data__phase="starting").values_list(
        "run", "pod", "uid", "at"
    )
    return [
        _restart(run, pod, at, "restarted")
        for run, pod, uid, at in starting
        if uid in first_step and at > first_step[uid]
    ]


def _restart(run: int, pod: str, at: datetime, how: str) -> dict[str, Any]:
    return {"t": at.timestamp(), "pod": pod, "run": run, "how": how}
