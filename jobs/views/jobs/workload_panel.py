"""The job page's Workload panel: the API's `workload` object (jobs.workload.report.describe), never
derived again here, with small sparklines of the step rate and of up to three metrics drawn on
the server from the run's stored progress points (one bounded query)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils.timesince import timeuntil
from django.utils.translation import gettext as _

from jobs import series
from jobs.messages import encode
from jobs.models import Job, Signal
from jobs.workload.report import describe, workload_of

# The newest progress points read (compaction keeps about TRAINYARD_SIGNAL_PROGRESS_POINTS per
# run, plus the last minutes'), thinned to SPARK_POINTS for a line 160 px wide.
PROGRESS_ROWS = 2000
SPARK_POINTS = 60
SPARK_METRICS = 3
SPARK_WIDTH, SPARK_HEIGHT = 160, 32


@dataclass(frozen=True)
class Sparkline:
    """One series as an SVG polyline, with its last, smallest and largest values (4 significant
    digits: a loss of 0.1762 and a step rate of 30 read as such)."""

    label: str
    points: str
    last: str
    low: str
    high: str


Point = tuple[float, Mapping[str, Any]]  # (seconds since the epoch, a progress signal's data)


def progress_points(job: Job) -> list[Point]:
    """The run's progress points, oldest first, thinned to SPARK_POINTS (one query)."""
    rows = (
        Signal.objects.filter(job=job, run=job.run, kind="progress")
        .order_by("-at", "-pk")
        .values_list("at", "data")[:PROGRESS_ROWS]
    )
    points = [(at.timestamp(), data) for at, data in reversed(rows)]
    if len(points) <= SPARK_POINTS:
        return points
    stride = (len(points) - 1) / (SPARK_POINTS - 1)
    return [points[round(index * stride)] for index in range(SPARK_POINTS)]


def polyline(series: Sequence[tuple[float, float]]) -> str:
    """`x,y x,y ...` in a SPARK_WIDTH x SPARK_HEIGHT box, y growing upwards; a flat series sits
    in the middle."""
    times = [t for t, _ in series]
    values = [v for _, v in series]
    t0, span = times[0], (times[-1] - times[0]) or 1.0
    low, high = min(values), max(values)
    spread = high - low

    def y(value: float) -> float:
        if not spread:
            return SPARK_HEIGHT / 2
        return SPARK_HEIGHT - 1 - (value - low) / spread * (SPARK_HEIGHT - 2)

    return " ".join(f"{(t - t0) / span * SPARK_WIDTH:.1f},{y(v):.1f}" for t, v in series)


def _sparkline(label: str, series: list[tuple[float, float]]) -> Sparkline | None:
    if len(series) < 2:
        return None
    values = [value for _, value in series]
    last, low, high = (f"{value:.4g}" for value in (values[-1], min(values), max(values)))
    return Sparkline(label, polyline(series), last, low, high)


def step_rates(points: Sequence[Point]) -> list[tuple[float, float]]:
    """Steps per minute between consecutive points (jobs.series.step_rates)."""
    steps = [
        series.Point(t, data["step"], float(data["step"]))
        for t, data in points
        if isinstance(data.get("step"), int)
    ]
    return [(rate.t, rate.value) for rate in series.step_rates(steps)]


def sparklines(points: Sequence[Point], metrics: Mapping[str, float]) -> list[Sparkline]:
    """The step rate, then the first SPARK_METRICS metrics the workload reports, by name."""
    lines = [_sparkline(_("Step rate (steps/min)"), step_rates(points))]
    for name in sorted(metrics)[:SPARK_METRICS]:
        series = [
            (t, float(data["metrics"][name]))
            for t, data in points
            if isinstance((data.get("metrics") or {}).get(name), int | float)
        ]
        lines.append(_sparkline(name, series))
    return [line for line in lines if line is not None]


def workload_panel(job: Job, now: datetime) -> dict[str, Any]:
    """The panel's context but its sparklines (`with_sparklines`: they need a query, and the
    page's poll decides 204 without them): `workload` is exactly what the API gives as the
    Job's `workload`."""
    workload = workload_of(job, now)
    shown = describe(workload, now)
    return {
        "workload": shown,
        "reason": encode(workload.reason) if workload.reason else "",
        "percent": workload.progress_percent,
        "eta_words": timeuntil(shown["eta"], now, depth=2) if shown["eta"] else "",
        "needs_attention": workload.needs_attention,
    }


def with_sparklines(job: Job, panel: Mapping[str, Any]) -> dict[str, Any]:
    """The panel with its sparklines, from the run's stored progress (one query)."""
    shown = panel["workload"]
    points = progress_points(job) if shown["step"] is not None else []
    return {**panel, "sparklines": sparklines(points, shown["metrics"])}


def panel_key(panel: Mapping[str, Any]) -> tuple[object, ...]:
    """What the panel shows, for the page's poll version. The state is derived at `now`, so a
    Progressing run that stops advancing changes the version when it turns Stalled; the
    seconds its reason counts are refreshed with the ages (the age step in the version). The
    sparklines follow the step and the time it was reported, which are in the key."""
    shown = panel["workload"]
    return (
        shown["state"], shown["source"], shown["reported_at"], shown["step"], shown["max_steps"],
        shown["last_message_at"], shown["last_heartbeat_at"], shown["last_checkpoint"],
        shown["ray"], shown["completion"], shown["phase"], sorted(shown["metrics"].items()),
        shown["stall_after_seconds"], shown["reason"].code if shown["reason"] else None,
    )  # fmt: skip
