"""GPU-hours: which class a second of a pod's GPUs belongs to, and whether it was wasted (pure).

A pod holds its GPUs from the moment it is bound to a node (its PodScheduled condition's time)
until it ended (its containers' termination time) or disappeared; Kubernetes' own times are used
wherever they exist, so the figures do not depend on how often the console syncs (docs/usage.md).
Each second of that span is classed by what the pod and its run were doing then, strongest first:

    stopping      the Job is stopped, or the pod is being deleted (spec §Job status: Stopped)
    failed        the Job is Failed, or the workload reported a failed completion
    finished      the workload reported its completion, its GPUs still held
    starting      bound, its main container not running: image pull, init, crash loop
    (the workload's state, jobs.status.workload: progressing, silent, stalled, unresponsive,
     degraded, starting)
    unknown       the cluster could not be read: the time is not guessed

Wasted = stalled + unresponsive + finished + failed, and starting beyond STARTING_GRACE.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import NamedTuple, Protocol

from jobs.choices import WASTED_CLASSES, JobPhase, UsageClass, WorkloadState
from jobs.status.workload import JUST_AFTER

STARTING_GRACE = timedelta(minutes=15)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)

_BY_WORKLOAD = {
    WorkloadState.SILENT: UsageClass.SILENT,
    WorkloadState.STARTING: UsageClass.STARTING,
    WorkloadState.PROGRESSING: UsageClass.PROGRESSING,
    WorkloadState.STALLED: UsageClass.STALLED,
    WorkloadState.UNRESPONSIVE: UsageClass.UNRESPONSIVE,
    WorkloadState.DEGRADED: UsageClass.DEGRADED,
    WorkloadState.SUCCEEDED: UsageClass.FINISHED,
    WorkloadState.FAILED: UsageClass.FAILED,
    WorkloadState.LOST: UsageClass.FINISHED,  # Lost with pods still held: a Succeeded Job's
}


class PodSpan(NamedTuple):
    """What the ledger keeps of a pod instance, as Kubernetes reported it. `waiting_since`:
    when its main container last stopped running (a crash seen by the sync), else None. A
    tuple: the ledger builds one for every open interval a sync judges (a thousand a cycle)."""

    gpus: int
    bound_at: datetime | None
    running_at: datetime | None = None
    stopping_at: datetime | None = None
    ended_at: datetime | None = None
    waiting_since: datetime | None = None

    @property
    def held(self) -> bool:
        """A pod holds GPUs once it requested some and was bound to a node."""
        return self.gpus > 0 and self.bound_at is not None


class PodState(StrEnum):
    """The pod's own part of a second's class."""

    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"


class PodMoments(Protocol):
    """The moments of a pod its own state is read from: a PodSpan's, or the ledger's stored
    open interval's (which keeps them, so that a pod that did not change needs no PodSpan)."""

    @property
    def running_at(self) -> datetime | None: ...
    @property
    def stopping_at(self) -> datetime | None: ...
    @property
    def waiting_since(self) -> datetime | None: ...


def pod_state_at(span: PodMoments, moment: datetime) -> PodState:
    """The pod's own part of the class at `moment` (PodState)."""
    if span.stopping_at is not None and moment >= span.stopping_at:
        return PodState.STOPPING
    if span.running_at is not None and moment >= span.running_at:
        return PodState.RUNNING
    if span.running_at is None and span.waiting_since is not None and moment < span.waiting_since:
        return PodState.RUNNING  # it ran until the crash was seen
    return PodState.STARTING


def usage_class(
    pod_state: PodState, job_phase: JobPhase, stopped: bool, workload: WorkloadState
) -> UsageClass:
    """The class of a second (the module's order)."""
    if stopped or pod_state == PodState.STOPPING:
        return UsageClass.STOPPING
    if job_phase == JobPhase.FAILED or workload == WorkloadState.FAILED:
        return UsageClass.FAILED
    if workload in (WorkloadState.SUCCEEDED, WorkloadState.LOST):
        return UsageClass.FINISHED
    if pod_state == PodState.STARTING:
        return UsageClass.STARTING
    return _BY_WORKLOAD[workload]


Timeline = list[tuple[datetime, UsageClass]]


def timeline(
    start: datetime,
    stored: UsageClass,
    end: datetime,
    points: Iterable[datetime],
    class_at: Callable[[datetime], UsageClass],
) -> Timeline:
    """The classes over [start, end] as (since, class) changes, the first `stored` at `start`:
    judged just after each turning point inside, and at `end` (the moment of judging, which
    may bring a change no turning point explains: a stop, a new message)."""
    changes: Timeline = [(start, stored)]
    for point in sorted({point for point in points if start < point < end}):
        klass = class_at(point + JUST_AFTER)
        if changes[-1][1] != klass:
            changes.append((point, klass))
    klass = class_at(end)
    if changes[-1][1] != klass:
        changes.append((end, klass))
    return changes


def wasted_seconds(klass: str, since: datetime, start: datetime, end: datetime) -> float:
    """Of the seconds [start, end) of an interval of `klass` that began at `since`, those
    wasted: all of a wasted class, of `starting` those past its grace period."""
    if end <= start:
        return 0.0
    if klass in WASTED_CLASSES:
        return (end - start).total_seconds()
    if klass == UsageClass.STARTING:
        return max(0.0, (end - max(start, since + STARTING_GRACE)).total_seconds())
    return 0.0


class Share(NamedTuple):
    """An interval's GPU-seconds inside a window (a tuple: the roll-ups make one per hour of
    each interval a sync closes)."""

    gpu_seconds: float
    wasted_gpu_seconds: float


def share(
    klass: str, gpus: int, since: datetime, end: datetime, window: tuple[datetime, datetime]
) -> Share:
    """The GPU-seconds of the interval [since, end) of `klass` inside `window`."""
    start, stop = max(since, window[0]), min(end, window[1])
    if stop <= start:
        return Share(0.0, 0.0)
    seconds = (stop - start).total_seconds()
    return Share(gpus * seconds, gpus * wasted_seconds(klass, since, start, stop))


def hour_of(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def hours(start: datetime, end: datetime) -> list[datetime]:
    """The hours [start, end) touches, each by its first moment."""
    found, hour = [], hour_of(start)
    while hour < end:
        found.append(hour)
        hour += HOUR
    return found


def by_hour(klass: str, gpus: int, since: datetime, end: datetime) -> list[tuple[datetime, Share]]:
    """A closed interval's GPU-seconds split by the hours it touches (the hourly roll-ups)."""
    return [
        (hour, share(klass, gpus, since, end, (hour, hour + HOUR))) for hour in hours(since, end)
    ]


def whole_hours(start: datetime, end: datetime) -> tuple[datetime, datetime]:
    """The whole hours inside [start, end): read from the roll-ups; the edges from intervals.
    An empty range (first >= last) when the window lies inside one hour."""
    first = hour_of(start) if start == hour_of(start) else hour_of(start) + HOUR
    return first, max(first, hour_of(end))


def day_of(moment: datetime) -> datetime:
    """The UTC day of a moment, by its first moment (the daily roll-ups)."""
    return moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def whole_days(first: datetime, last: datetime) -> tuple[datetime, datetime]:
    """The whole days inside the whole hours [first, last): read from the daily roll-ups; the
    hours before and after them from the hourly ones. An empty range when there is none."""
    start = day_of(first) if first == day_of(first) else day_of(first) + DAY
    return start, max(start, day_of(last))


def stop_at(idle_since: datetime | None, minutes: int | None) -> datetime | None:
    """When the idle policy stops a Job idle since `idle_since` (None: it will not)."""
    if idle_since is None or minutes is None:
        return None
    return idle_since + timedelta(minutes=minutes)


# --- utilisation (informs; never a class: a hung NCCL collective can show 100 %) -------------


@dataclass(frozen=True)
class Sample:
    """A pod's GPU utilisation at a moment of a range query: the value stands for the step
    that ends there."""

    at: datetime
    percent: float


def utilisation_percent(gpu_util: float | None, engine_active: float | None) -> float | None:
    """A GPU's utilisation in percent: the graphics engine's active ratio when the DCGM exporter
    serves it (DCGM_FI_PROF_GR_ENGINE_ACTIVE, 0 to 1, the finer measure), else
    DCGM_FI_DEV_GPU_UTIL (percent of time any kernel ran)."""
    if engine_active is not None:
        return max(0.0, min(100.0, engine_active * 100))
    if gpu_util is not None:
        return max(0.0, min(100.0, gpu_util))
    return None


@dataclass(frozen=True)
class Split:
    """Progressing GPU-seconds by utilisation."""

    busy_gpu_seconds: float = 0.0
    low_gpu_seconds: float = 0.0


Stretch = tuple[datetime, datetime, int]  # a progressing interval: from, until, GPUs


def split_progressing(
    samples: Iterable[Sample], step: timedelta, after: datetime, progressing: Iterable[Stretch],
    busy_percent: float,
) -> Split:  # fmt: skip
    """The progressing GPU-seconds after `after` that the samples cover, busy when the sample
    is at least `busy_percent`, else low-utilisation. Seconds no sample covers are neither:
    utilisation that was not measured is not guessed."""
    stretches = list(progressing)
    busy = low = 0.0
    for sample in samples:
        start, end = max(sample.at - step, after), sample.at
        seconds = sum(
            gpus * max(0.0, (min(end, until) - max(start, since)).total_seconds())
            for since, until, gpus in stretches
        )
        if sample.percent >= busy_percent:
            busy += seconds
        else:
            low += seconds
    return Split(busy, low)


def mean_percent(values: Iterable[tuple[float, int]]) -> float | None:
    """The GPU-weighted mean of (percent, GPUs): a Job's utilisation from its Workers'."""
    pairs = [(percent, gpus) for percent, gpus in values if gpus > 0]
    total = sum(gpus for _percent, gpus in pairs)
    return sum(percent * gpus for percent, gpus in pairs) / total if total else None
