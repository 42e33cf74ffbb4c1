"""The pure rules of GPU-hours (jobs.status.usage, issue 33 Build 1): a second's class, what is
wasted, the split by hours; the idle clock (jobs.status.workload.idle_since)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobs.choices import JobPhase, UsageClass, WorkloadState
from jobs.status.usage import (
    PodSpan,
    PodState,
    Share,
    by_hour,
    pod_state_at,
    share,
    timeline,
    usage_class,
    wasted_seconds,
    whole_hours,
)
from jobs.status.workload import Policies, Report, idle_since, turning_points

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_it_classes_a_stopped_or_failed_run_before_what_its_workload_says() -> None:
    running = PodState.RUNNING
    progressing = WorkloadState.PROGRESSING
    assert usage_class(running, JobPhase.RUNNING, True, progressing) == UsageClass.STOPPING
    assert usage_class(running, JobPhase.FAILED, False, progressing) == UsageClass.FAILED
    assert usage_class(running, JobPhase.RUNNING, False, WorkloadState.SUCCEEDED) == "finished"
    assert usage_class(PodState.STARTING, JobPhase.RUNNING, False, progressing) == "starting"
    assert usage_class(running, JobPhase.RUNNING, False, WorkloadState.SILENT) == "silent"


def test_it_takes_the_pods_state_from_kubernetes_times() -> None:
    span = PodSpan(gpus=2, bound_at=at(0), running_at=at(30), stopping_at=at(90))
    assert [pod_state_at(span, at(s)) for s in (0, 29, 30, 89, 90)] == [
        "starting", "starting", "running", "running", "stopping",
    ]  # fmt: skip
    crashed = PodSpan(gpus=2, bound_at=at(0), waiting_since=at(50))
    assert (pod_state_at(crashed, at(49)), pod_state_at(crashed, at(50))) == (
        "running", "starting",
    )  # fmt: skip


def test_it_counts_starting_as_wasted_only_past_fifteen_minutes() -> None:
    assert wasted_seconds("starting", at(0), at(0), at(900)) == 0
    assert wasted_seconds("starting", at(0), at(600), at(1000)) == 100
    assert wasted_seconds("stalled", at(0), at(10), at(70)) == 60
    assert wasted_seconds("progressing", at(0), at(10), at(70)) == 0
    assert wasted_seconds("silent", at(0), at(10), at(70)) == 0


def test_it_splits_an_interval_by_hours_and_keeps_short_runs() -> None:
    parts = by_hour("stalled", 4, at(-30), at(3600 + 0.5))
    assert parts == [
        (T0 - timedelta(hours=1), Share(120.0, 120.0)),
        (T0, Share(14400.0, 14400.0)),
        (T0 + timedelta(hours=1), Share(2.0, 2.0)),
    ]
    assert share("progressing", 1, at(0), at(1), (at(-10), at(10))) == Share(1.0, 0.0)


def test_it_reads_only_whole_hours_from_the_roll_ups() -> None:
    assert whole_hours(at(1), at(7300)) == (at(3600), at(7200))
    assert whole_hours(at(0), at(3600)) == (at(0), at(3600))
    first, last = whole_hours(at(60), at(120))
    assert first >= last  # inside one hour: no roll-up at all


def test_it_records_a_class_change_at_the_turning_point_that_made_it() -> None:
    def class_at(moment: datetime) -> UsageClass:
        return UsageClass.PROGRESSING if moment <= at(60) else UsageClass.STALLED

    changes = timeline(at(0), UsageClass.PROGRESSING, at(100), [at(60), at(500)], class_at)
    assert changes == [(at(0), "progressing"), (at(60), "stalled")]


def report(**latest: dict[str, object]) -> Report:
    stamped = {
        kind: {"at": at(0).isoformat(), "received_at": at(0).isoformat(), **fields}
        for kind, fields in latest.items()
    }
    return Report(1, at(0), at(0), stamped, [[at(0).timestamp(), 1]])


def test_it_never_judges_a_silent_run_idle() -> None:
    policies = Policies(stall_after_seconds=60)
    assert idle_since(None, JobPhase.RUNNING, 1, policies, at(10_000)) is None
    assert turning_points(None, 1, policies) == []


def test_it_starts_the_idle_clock_when_the_stall_began() -> None:
    policies = Policies(stall_after_seconds=60, heartbeat_seconds=30)
    stalled = report(progress={"step": 1, "advanced_at": at(0).isoformat()})
    assert turning_points(stalled, 1, policies) == [at(60), at(90)]
    assert idle_since(stalled, JobPhase.RUNNING, 1, policies, at(30)) is None
    assert idle_since(stalled, JobPhase.RUNNING, 1, policies, at(200)) == at(60)
