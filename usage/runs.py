"""What the ledger and the idle policy judge a run by: the Job's facts and its workload report."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from console.models import Project
from jobs.choices import JobPhase
from jobs.models import Job, WorkloadReport
from jobs.status.workload import Policies, Report
from usage import statements


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
    """The Jobs' facts and workload reports (two raw SELECTs whatever their number: a sync
    reads a hundred Jobs a cycle, and the ORM's building of the queries cost more than them)."""
    ids = set(job_ids)
    if not ids:
        return {}
    reports = _reports(ids)
    found = {}
    for pk, run, phase, stopped, policies, default in _jobs(ids):
        given = Policies.of({"policies": json.loads(policies or "null") or {}})
        minutes = given.stop_when_idle_minutes
        minutes = default if minutes is None else minutes
        found[pk] = Run(
            pk, run, JobPhase(phase), bool(stopped), given, reports.get(pk), minutes or None
        )
    return found


def _jobs(ids: set[int]) -> list[tuple[Any, ...]]:
    job, project = statements.table(Job), statements.table(Project)
    listed, param = statements.one_of(statements.fields_of(Job, ["pk"])[0], ids)
    return statements.fetch(
        f"SELECT j.id, j.run, j.phase, j.stopped, CAST(j.spec -> 'policies' AS text), "
        f"p.stop_when_idle_minutes FROM {job} AS j JOIN {project} AS p ON p.id = j.project_id "
        f"WHERE j.id IN {listed} ORDER BY j.created_at DESC",  # the Jobs' own order
        [param], (),
    )  # fmt: skip


def _reports(ids: set[int]) -> dict[int, Report]:
    """The reports as Django's JSONField reads them (json.loads of the stored text)."""
    listed, param = statements.one_of(statements.fields_of(Job, ["pk"])[0], ids)
    rows = statements.fetch(
        "SELECT job_id, run, first_received_at, last_received_at, CAST(latest AS text), "
        f"CAST(steps AS text) FROM {statements.table(WorkloadReport)} WHERE job_id IN {listed}",
        [param], (2, 3),
    )  # fmt: skip
    return {
        job_id: Report(run, first, last, json.loads(latest), json.loads(steps))
        for job_id, run, first, last, latest, steps in rows
    }
