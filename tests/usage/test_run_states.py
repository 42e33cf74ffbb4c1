"""A run's part of its pods' classes judged once a moment for all of them (usage.ledger.RunStates,
issue 33: the ledger's share of a sync cycle): the same classes as judged afresh at each moment,
with the workload's clocks running (turning points) or stopped (no report, a completion)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobs.choices import JobPhase, UsageClass
from jobs.status.usage import PodState
from jobs.status.workload import Policies, Report
from tests.usage.test_rules import at, report
from usage.ledger import RunStates
from usage.runs import Run

POLICIES = Policies(stall_after_seconds=60, heartbeat_seconds=30)
MOMENTS = [at(0), at(30), at(60), at(60) + timedelta(microseconds=1), at(90), at(91), at(500)]


def run_of(phase: JobPhase, found: Report | None) -> Run:
    return Run(1, 1, phase, False, POLICIES, found, None)


@pytest.mark.parametrize(
    "found",
    [
        None,
        report(progress={"step": 1, "advanced_at": at(0).isoformat()}),
        report(completion={"outcome": "succeeded"}),
    ],
    ids=["silent", "clocks running", "completed"],
)
@pytest.mark.parametrize("phase", [JobPhase.RUNNING, JobPhase.FAILED])
def test_it_classes_every_moment_as_judged_afresh(found: Report | None, phase: JobPhase) -> None:
    run = run_of(phase, found)
    shared = RunStates(run)
    for moment in MOMENTS:
        for pod in PodState:
            for now_or_sticky in (False, True):
                fresh = RunStates(run).class_at(moment, pod, now_or_sticky)
                assert shared.class_at(moment, pod, now_or_sticky) == fresh


def test_it_follows_the_workloads_clocks_between_its_turning_points() -> None:
    states = RunStates(run_of(JobPhase.RUNNING, report(progress={"step": 1})))
    classes = [states.class_at(moment, PodState.RUNNING, True) for moment in MOMENTS]
    assert classes[0] == classes[2] == UsageClass.PROGRESSING
    assert classes[-1] == UsageClass.UNRESPONSIVE
