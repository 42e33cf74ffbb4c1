"""The pure rules of notify.events (issue 32 §Build 1): which state is which event, when an
occurrence opens and resolves, and which message of it is due."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobs.choices import JobPhase, WorkloadState
from notify.choices import Event, Part
from notify.events import (
    JOB_EVENTS,
    Due,
    Occurrence,
    due,
    job_events,
    next_due,
    resolved_name,
    turns,
    wanted,
)

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


def test_it_names_the_events_of_a_jobs_phase_and_its_workload() -> None:
    """Spec §Job status: Failed is Kubernetes' phase; the workload's word is beside it."""
    assert job_events(JobPhase.FAILED, False, WorkloadState.LOST) == {
        Event.JOB_FAILED, Event.WORKLOAD_LOST,
    }  # fmt: skip
    assert job_events(JobPhase.RUNNING, False, WorkloadState.STALLED) == {Event.WORKLOAD_STALLED}
    assert job_events(JobPhase.PENDING, False, WorkloadState.SILENT) == {Event.JOB_PENDING_TOO_LONG}
    assert job_events(JobPhase.PENDING, True, WorkloadState.SILENT) == set()
    assert job_events(JobPhase.RUNNING, False, WorkloadState.PROGRESSING) == set()


def test_it_opens_a_lasting_condition_once_and_resolves_it_when_it_ends() -> None:
    stalled = Event.WORKLOAD_STALLED
    first = turns({stalled}, [], JOB_EVENTS)
    assert (first.opened, first.resolved) == ([(stalled, 1)], [])
    still = turns({stalled}, [Occurrence(stalled, 1, False)], JOB_EVENTS)
    assert (still.opened, still.resolved) == ([], [])
    ended = turns(set(), [Occurrence(stalled, 1, False)], JOB_EVENTS)
    assert (ended.opened, ended.resolved) == ([], [(stalled, 1)])
    again = turns({stalled}, [Occurrence(stalled, 1, True)], JOB_EVENTS)
    assert again.opened == [(stalled, 2)]


def test_it_says_an_event_that_does_not_last_once_per_run() -> None:
    failed = Event.JOB_FAILED
    assert turns({failed}, [], JOB_EVENTS).opened == [(failed, 1)]
    assert turns({failed}, [Occurrence(failed, 1, True)], JOB_EVENTS).opened == []
    assert turns(set(), [Occurrence(failed, 1, True)], JOB_EVENTS).resolved == []


def test_it_judges_only_the_events_its_caller_decides() -> None:
    """A cycle does not resolve the stop a policy made; a completion does not open a stall."""
    stopped = Event.JOB_STOPPED_BY_CONSOLE
    assert turns(set(), [Occurrence(stopped, 1, True)], JOB_EVENTS).resolved == []
    only = frozenset({Event.WORKLOAD_SUCCEEDED})
    assert turns({Event.WORKLOAD_STALLED}, [], only).opened == []


def test_it_repeats_a_lasting_condition_every_repeat_hours_and_never_with_zero() -> None:
    stalled = Event.WORKLOAD_STALLED
    assert due(stalled, T0, None, 30, 4, T0) == [Due(Part.OPENED)]
    assert due(stalled, T0, None, 30, 4, T0 + timedelta(hours=9)) == [
        Due(Part.OPENED), Due(Part.REPEAT, 2),
    ]  # fmt: skip
    assert due(stalled, T0, None, 30, 0, T0 + timedelta(hours=9)) == [Due(Part.OPENED)]
    assert next_due(stalled, T0, 30, 4, T0 + timedelta(hours=5)) == T0 + timedelta(hours=8)
    assert next_due(stalled, T0, 30, 0, T0) is None
    assert due(Event.JOB_FAILED, T0, T0, 30, 4, T0 + timedelta(hours=9)) == [Due(Part.OPENED)]


def test_it_says_pending_too_long_only_after_the_subscriptions_threshold() -> None:
    pending = Event.JOB_PENDING_TOO_LONG
    assert due(pending, T0, None, 30, 4, T0 + timedelta(minutes=29)) == []
    assert due(pending, T0, None, 30, 4, T0 + timedelta(minutes=30)) == [Due(Part.OPENED)]
    assert next_due(pending, T0, 30, 4, T0) == T0 + timedelta(minutes=30)
    # Ended before the threshold: never said; after it: its opening and its end.
    assert due(pending, T0, T0 + timedelta(minutes=29), 30, 4, T0 + timedelta(hours=1)) == []
    assert due(pending, T0, T0 + timedelta(minutes=31), 30, 4, T0 + timedelta(hours=1)) == [
        Due(Part.OPENED), Due(Part.RESOLVED),
    ]  # fmt: skip


def test_it_names_a_clusters_return_recovered() -> None:
    assert resolved_name(Event.CLUSTER_UNREACHABLE) == Event.CLUSTER_RECOVERED
    assert resolved_name(Event.WORKLOAD_STALLED) == Event.WORKLOAD_STALLED
    assert wanted(Event.CLUSTER_UNREACHABLE, ["cluster.recovered"])
    assert not wanted(Event.WORKLOAD_STALLED, ["workload.lost"])


def test_it_says_when_time_alone_may_turn_a_workload() -> None:
    """jobs.status.workload.next_turn_at: the stall clock's end, then the silence limit."""
    from jobs.status.workload import Policies, Report, next_turn_at

    at = T0.isoformat()
    progress = {"step": 7, "at": at, "received_at": at, "advanced_at": at, "source": "signal"}
    report = Report(1, T0, T0, {"progress": progress}, [[T0.timestamp(), 7]])
    policies = Policies(stall_after_seconds=60, heartbeat_seconds=30)
    running = JobPhase.RUNNING
    assert next_turn_at(report, running, 1, policies, T0) == T0 + timedelta(seconds=60)
    later = T0 + timedelta(seconds=61)
    assert next_turn_at(report, running, 1, policies, later) == T0 + timedelta(seconds=90)
    assert next_turn_at(report, running, 1, policies, T0 + timedelta(seconds=91)) is None
    assert next_turn_at(report, JobPhase.PENDING, 1, policies, T0) is None
    assert next_turn_at(report, running, 2, policies, T0) is None  # an earlier run's report
    done = Report(1, T0, T0, {"completion": {"outcome": "succeeded", "at": at}}, [])
    assert next_turn_at(done, running, 1, policies, T0) is None
