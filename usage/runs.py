"""What the ledger and the idle policy judge a run by: the Job's facts and its workload report."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from jobs.choices import JobPhase
from jobs.models import Job, WorkloadReport
from jobs.status.workload import Policies, Report


@dataclass(frozen=True)
class Run:
    """What a Job says now, for judging its pods' seconds."""

    job_id: int
    run: int
    phase: JobPhase
    stopped: bool
    policies: Policies
    report: Report | None
    idle_minutes: int | None  # the idle policy in force (the Job's, else its project's)


def runs(job_ids: Iterable[int]) -> dict[int, Run]:
    """The Jobs' facts and workload reports (two queries, whatever their number)."""
    ids = list(set(job_ids))
    if not ids:
        return {}
    reports = {
        row[0]: Report(*row[1:])
        for row in WorkloadReport.objects.filter(job_id__in=ids).values_list(
            "job_id", "run", "first_received_at", "last_received_at", "latest", "steps"
        )
    }
    found = {}
    jobs = Job.objects.filter(pk__in=ids).values_list(
        "pk", "run", "phase", "stopped", "spec__policies", "project__stop_when_idle_minutes"
    )
    for pk, run, phase, stopped, policies, default in jobs:
        given = Policies.of({"policies": policies or {}})
        minutes = given.stop_when_idle_minutes
        minutes = default if minutes is None else minutes
        found[pk] = Run(pk, run, JobPhase(phase), stopped, given, reports.get(pk), minutes or None)
    return found
