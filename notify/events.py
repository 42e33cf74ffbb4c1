"""Which state is which event, when an occurrence opens and ends, and which message of it is
due to a subscriber: pure rules over plain values (no database, no clock), issue 32 §Build 1.

    a subject's active events (from its state now)  +  its stored occurrences
        -> occurrences to open, occurrences to resolve
    an occurrence  +  a subscription's threshold and repeat  +  now
        -> the messages due (opened, repeat n, resolved), each once by its key

An event that does not last (a Job failed, a workload succeeded) is opened and resolved at
once: one message per run. A lasting one (stalled, unresponsive, unreachable...) is said when
it begins, every `repeat_hours` while it lasts, and once more, `resolved`, when it ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache

from jobs.choices import JobPhase, WorkloadState
from notify.choices import Event, Part

# Spec §Job status (the workload's word): the workload states that are events.
WORKLOAD_EVENTS: Mapping[WorkloadState, Event] = {
    WorkloadState.SUCCEEDED: Event.WORKLOAD_SUCCEEDED,
    WorkloadState.FAILED: Event.WORKLOAD_FAILED,
    WorkloadState.STALLED: Event.WORKLOAD_STALLED,
    WorkloadState.UNRESPONSIVE: Event.WORKLOAD_UNRESPONSIVE,
    WorkloadState.DEGRADED: Event.WORKLOAD_DEGRADED,
    WorkloadState.LOST: Event.WORKLOAD_LOST,
}
# Conditions that last: repeated while they do, and resolved when they end.
LASTING = frozenset(
    {
        Event.WORKLOAD_STALLED,
        Event.WORKLOAD_UNRESPONSIVE,
        Event.WORKLOAD_DEGRADED,
        Event.JOB_PENDING_TOO_LONG,
        Event.CLUSTER_UNREACHABLE,
        Event.ADDON_FAILED,
    }
)
# The events a Job's state gives (the rest come from a policy's stop, a cluster, an add-on).
JOB_EVENTS = frozenset({*WORKLOAD_EVENTS.values(), Event.JOB_FAILED, Event.JOB_PENDING_TOO_LONG})


def job_events(phase: JobPhase, stopped: bool, workload: WorkloadState) -> set[Event]:
    """The events a Job is in now: spec §Job status (Failed is Kubernetes' word; Pending while
    not stopped is the pending clock), and its workload's state beside it."""
    active: set[Event] = set()
    if phase == JobPhase.FAILED:
        active.add(Event.JOB_FAILED)
    if phase == JobPhase.PENDING and not stopped:
        active.add(Event.JOB_PENDING_TOO_LONG)
    event = WORKLOAD_EVENTS.get(workload)
    if event is not None:
        active.add(event)
    return active


def addon_events(failed: bool) -> set[Event]:
    return {Event.ADDON_FAILED} if failed else set()


def cluster_events(reachable: bool) -> set[Event]:
    return set() if reachable else {Event.CLUSTER_UNREACHABLE}


@dataclass(frozen=True)
class Occurrence:
    """A stored occurrence of an event of one subject in one run."""

    event: Event
    occurrence: int
    resolved: bool


@dataclass(frozen=True)
class Turns:
    opened: list[tuple[Event, int]]  # (event, its new occurrence number)
    resolved: list[tuple[Event, int]]


def turns(active: Iterable[Event], stored: Iterable[Occurrence], events: Iterable[Event]) -> Turns:
    """What changes for one subject in one run, judging only `events` (the ones this caller
    decides: a cycle judges a Job's state events, not the stop a policy made).

    An event that does not last happens once per run: never opened again once stored. A lasting
    one opens a new occurrence when none is open, and its open occurrence resolves once it is
    no longer active."""
    now_active = set(active)
    latest: dict[Event, Occurrence] = {}
    for item in stored:
        if item.event not in latest or item.occurrence > latest[item.event].occurrence:
            latest[item.event] = item
    opened, resolved = [], []
    for event in in_order(frozenset(events)):
        last = latest.get(event)
        if event in now_active:
            if last is None:
                opened.append((event, 1))
            elif event in LASTING and last.resolved:
                opened.append((event, last.occurrence + 1))
        elif last is not None and not last.resolved and event in LASTING:
            resolved.append((event, last.occurrence))
    return Turns(opened, resolved)


@cache
def in_order(events: frozenset[Event]) -> tuple[Event, ...]:
    """The events in a fixed order (a set's order changes from process to process): a caller
    judges the same few sets again and again."""
    return tuple(sorted(events))


@dataclass(frozen=True)
class Due:
    part: Part
    repeat: int = 0


def first_due(event: Event, opened_at: datetime, pending_minutes: int) -> datetime:
    """When a subscriber hears of an occurrence first: at once, or for the pending clock once
    the Job has been Pending for the subscription's threshold."""
    if event == Event.JOB_PENDING_TOO_LONG:
        return opened_at + timedelta(minutes=pending_minutes)
    return opened_at


def due(
    event: Event, opened_at: datetime, resolved_at: datetime | None, pending_minutes: int,
    repeat_hours: int, now: datetime,
) -> list[Due]:  # fmt: skip
    """The messages of one occurrence due to one subscriber by `now` (the caller inserts those
    not written yet: each is unique by its key, so asking again writes nothing more). An event
    that does not last has one message, its opening. A lasting one that ended was heard of
    only if the subscriber's first message came due while it lasted (a Job Pending for less
    than the threshold is never said): then its opening (written already, unless it ended
    before its messages were written) and its end are due."""
    start = first_due(event, opened_at, pending_minutes)
    if event not in LASTING:  # stored resolved at once: its one message is its opening
        return [Due(Part.OPENED)]
    if resolved_at is not None:
        return [Due(Part.OPENED), Due(Part.RESOLVED)] if start <= resolved_at else []
    if now < start:
        return []
    found = [Due(Part.OPENED)]
    if repeat_hours > 0:
        repeats = int((now - start) / timedelta(hours=repeat_hours))
        found += [Due(Part.REPEAT, n) for n in range(1, repeats + 1)][-1:]  # only the latest
    return found


def next_due(
    event: Event, opened_at: datetime, pending_minutes: int, repeat_hours: int, now: datetime
) -> datetime | None:
    """When the next message of an open occurrence is due to this subscriber; None: none
    before it resolves."""
    start = first_due(event, opened_at, pending_minutes)
    if now < start:
        return start
    if event not in LASTING or repeat_hours <= 0:
        return None
    period = timedelta(hours=repeat_hours)
    return start + period * (int((now - start) / period) + 1)


def resolved_name(event: Event) -> Event:
    """A condition's end is said under its own name with `resolved: true`; a cluster's return
    is also named as the event it is (issue 32: `cluster.recovered`)."""
    return Event.CLUSTER_RECOVERED if event == Event.CLUSTER_UNREACHABLE else event


def wanted(event: Event, subscribed: Iterable[str]) -> bool:
    """A subscriber of cluster.unreachable hears of the return, and one of cluster.recovered
    hears the return only."""
    chosen = set(subscribed)
    if event == Event.CLUSTER_UNREACHABLE:
        return bool(chosen & {Event.CLUSTER_UNREACHABLE, Event.CLUSTER_RECOVERED})
    return event in chosen
