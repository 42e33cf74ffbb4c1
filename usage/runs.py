"""What the ledger and the idle policy judge a run by: the Job's facts and its workload report."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
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
    """The Jobs' facts and workload reports (one raw SELECT whatever their number: a sync
    reads a hundred Jobs a cycle, and the ORM's building of the queries cost more than them)."""
    ids = set(job_ids)
    if not ids:
        return {}
    found = {}
    for pk, run, phase, stopped, policies, default, *report in _rows(ids):
        given = Policies.of({"policies": json.loads(policies or "null") or {}})
        minutes = given.stop_when_idle_minutes
        minutes = default if minutes is None else minutes
        found[pk] = Run(
            pk, run, JobPhase(phase), bool(stopped), given, _report(*report), minutes or None
        )
    return found


def _rows(ids: set[int]) -> list[tuple[Any, ...]]:
    """The Jobs in their own order, each with its report's columns (None without one)."""
    job, project, report = (statements.table(model) for model in (Job, Project, WorkloadReport))
    listed, param = statements.one_of(statements.fields_of(Job, ["pk"])[0], ids)
    return statements.fetch(
        "SELECT j.id, j.run, j.phase, j.stopped, CAST(j.spec -> 'policies' AS text), "
        "p.stop_when_idle_minutes, r.run, r.first_received_at, r.last_received_at, "
        f"CAST(r.latest AS text), CAST(r.steps AS text) FROM {job} AS j "
        f"JOIN {project} AS p ON p.id = j.project_id LEFT JOIN {report} AS r ON r.job_id = j.id "
        f"WHERE j.id IN {listed} ORDER BY j.created_at DESC",
        [param], (7, 8),
    )  # fmt: skip


def _report(run: int | None, first: datetime, last: datetime, latest: str, steps: str
            ) -> Report | None:  # fmt: skip
    """As Django's JSONField reads it (json.loads of the stored text)."""
    if run is None:
        return None
    return Report(run, first, last, json.loads(latest), json.loads(steps))
