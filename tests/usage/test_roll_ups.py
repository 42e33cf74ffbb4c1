"""The report's roll-up path (days per group or per Job, hours around them, intervals at the
part-hour edges, open intervals up to now) answers what summing every interval inside the period
answers (issue 33, Show: the report pre-aggregated, never scanned per request)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.contrib.auth.models import User

from console.models import Cluster, Project
from jobs.choices import JobPhase, UsageClass
from jobs.models import Job, Task
from jobs.status.usage import share
from usage.ledger import roll_up
from usage.models import GpuInterval, UsageDay, UsageGroupDay, UsageHour
from usage.report import GroupBy, Row, Rows, Scope, report, rows_as_dicts

NOW = datetime(2026, 5, 10, 15, 7, 13, tzinfo=UTC)
T0 = datetime(2026, 5, 1, 22, 17, tzinfo=UTC)

# How the reference reads a group from an interval: through its Job, as stored now.
KEYS = {
    GroupBy.PROJECT: ("job__project__name", "job__project__name"),
    GroupBy.USER: ("job__owner__username", "job__owner__username"),
    GroupBy.CLUSTER: ("cluster__name", "cluster__name"),
    GroupBy.JOB: ("job_id", "job__name"),
}


def from_intervals(
    start: datetime, end: datetime, group_by: GroupBy, scope: Scope, now: datetime
) -> list[Row]:
    """The report computed from every interval of the ledger, no roll-up read."""
    rows, end = Rows(), min(end, now)
    key, label = KEYS[group_by]
    fields = ("usage_class", "gpus", "started_at", "ended_at")
    for value, name, klass, gpus, since, until in GpuInterval.objects.filter(
        scope.intervals()
    ).values_list(key, label, *fields):
        part = share(klass, gpus, since, until or now, (start, end))
        if part.gpu_seconds:
            rows.add(value, name, klass, part.gpu_seconds, part.wasted_gpu_seconds)
    return rows.sorted()


@pytest.fixture(autouse=True)
def frozen() -> Iterator[None]:
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def ledger(
    alice: User, bob: User, charlie: User, project: Project, other_project: Project,
    cluster: Cluster,
) -> list[Job]:  # fmt: skip
    """Six Jobs of three people in two projects on two clusters, each a pod whose classes
    change at odd moments over nine days (some intervals a few seconds, some days long), the
    last interval of every other Job still open; rolled up in batches, as cycles do."""
    second = Cluster.objects.create(name="second", namespace="default")
    owners = [(alice, project), (bob, project), (charlie, other_project)]
    classes = list(UsageClass)
    jobs, batch = [], []
    for n in range(6):
        owner, where = owners[n % 3]
        job = Job.objects.create(
            project=where, cluster=(cluster, second)[n % 2], name=f"run-{n}", namespace="default",
            owner=owner, spec={"tasks": []}, phase=JobPhase.RUNNING,
        )  # fmt: skip
        task = Task.objects.create(job=job, role="worker", template={})
        jobs.append(job)
        moment = T0 + timedelta(minutes=37 * n, seconds=n)
        lengths = [7, 4000, 3 * 86400 + 111, 1900, 86400 * 2 - 5, 59, 20000, 5000 + n]
        for index, seconds in enumerate(lengths):
            until = moment + timedelta(seconds=seconds)
            last = index == len(lengths) - 1
            row = GpuInterval.objects.create(
                job=job, run=1, task=task, cluster=job.cluster, pod_uid=f"{n}-{index}",
                pod_name=f"run-{n}-worker-0", gpus=1 + n % 4,
                usage_class=classes[(n + index) % len(classes)], started_at=moment,
                ended_at=None if last and n % 2 else until,
            )  # fmt: skip
            if row.ended_at is not None:
                batch.append(row)
            if len(batch) >= 5:
                roll_up(batch)
                batch = []
            moment = until
    roll_up(batch)
    return jobs


PERIODS = [
    (T0, NOW),  # everything
    (datetime(2026, 5, 2, 3, 41, 9, tzinfo=UTC), datetime(2026, 5, 9, 20, 2, tzinfo=UTC)),
    (datetime(2026, 5, 3, tzinfo=UTC), datetime(2026, 5, 6, tzinfo=UTC)),  # whole days
    (datetime(2026, 5, 4, 5, tzinfo=UTC), datetime(2026, 5, 5, 2, tzinfo=UTC)),  # hours only
    (datetime(2026, 5, 4, 5, 12, tzinfo=UTC), datetime(2026, 5, 4, 5, 49, tzinfo=UTC)),
    (datetime(2026, 5, 8, 23, 59, tzinfo=UTC), NOW + timedelta(days=3)),  # to in the future
]


def answers(rows: list[Row]) -> list[dict[str, object]]:
    return [
        {**row, "by_class": pytest.approx(row["by_class"], abs=1e-5)}
        | {
            field: pytest.approx(row[field], abs=1e-5)
            for field in ("gpu_hours", "wasted_gpu_hours")
        }
        for row in rows_as_dicts(rows)
    ]


def test_it_reads_the_roll_ups_and_answers_as_the_intervals_do(ledger: list[Job]) -> None:
    assert UsageDay.objects.exists() and UsageGroupDay.objects.exists()
    for start, end in PERIODS:
        for group_by in GroupBy:
            expected = from_intervals(start, end, group_by, Scope(), NOW)
            assert expected, (start, group_by)
            assert rows_as_dicts(report(start, end, group_by, Scope(), NOW)) == answers(expected)


def test_it_filters_the_roll_ups_as_the_intervals(ledger: list[Job], project: Project) -> None:
    scopes = [
        Scope(projects=[project.name]),
        Scope(project=project.name),
        Scope(cluster="second"),
        Scope(job_id=ledger[3].pk),
        Scope(projects=[]),
    ]
    start, end = PERIODS[1]
    for scope in scopes:
        for group_by in GroupBy:
            expected = from_intervals(start, end, group_by, scope, NOW)
            assert rows_as_dicts(report(start, end, group_by, scope, NOW)) == answers(expected)


def test_it_adds_each_batch_to_the_same_rows(ledger: list[Job]) -> None:
    """The upserts add: one row per hour (and day) of a run and class, whatever the batches."""
    for model, period in ((UsageHour, "hour"), (UsageDay, "day")):
        keys = list(model.objects.values_list(period, "job_id", "run", "usage_class"))
        assert len(keys) == len(set(keys))
    total = sum(UsageHour.objects.values_list("gpu_seconds", flat=True))
    assert sum(UsageDay.objects.values_list("gpu_seconds", flat=True)) == pytest.approx(total)
    assert sum(UsageGroupDay.objects.values_list("gpu_seconds", flat=True)) == pytest.approx(total)
