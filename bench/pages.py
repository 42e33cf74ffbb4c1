"""Server time and SQL queries of the Jobs pages at two sizes (issue 5: the jobs list with 10,000
jobs and a job page with 1,000 workers each render in at most 50 ms, with a query count that does
not grow with the rows shown; issue 10: every Job has a workload report, and the list and the
dashboard derive the workload state of every Job they judge).

Rows are bulk-created in the benchmark database; every page is rendered through Django's test
client by a logged-in member (middleware, session, templates: the whole server side), best of N.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from console.models import Cluster, Membership, Node, Project
from jobs.access import operators_group
from jobs.choices import JobPhase, PodPhase, TaskPhase
from jobs.models import Job, Operation, Task, WorkloadReport
from jobs.spec import TaskSpec
from workers.models import PodInstance, Worker

TARGET_MS = 50.0
REPEAT = 30
JOBS = (1_000, 10_000)
WORKERS = (10, 1_000)
PHASES = [JobPhase.RUNNING, JobPhase.PENDING, JobPhase.STOPPED, JobPhase.FAILED]
HTMX = {"HX-Request": "true"}
TEMPLATE = TaskSpec(role="worker", replicas=1, image="rlinf/trainer:0.4").model_dump(mode="json")


@dataclass(frozen=True)
class Measure:
    page: str
    size: str
    best_ms: float
    median_ms: float
    cpu_ms: float  # best CPU time of this process (SQLite runs in it; PostgreSQL does not)
    queries: int
    status: int


def run() -> str:
    client, project, cluster = _setup()
    load = os.getloadavg()[0]
    floor = _measure(
        Client(HTTP_HOST="localhost"), "Login page (anonymous)", "-", "/accounts/login/"
    )
    measures: list[Measure] = []
    for count in JOBS:
        _fill_jobs(project, cluster, count)
        _analyze()
        measures += _list_measures(client, count)
    for count in WORKERS:
        job, task = _job_with_workers(project, cluster, count)
        _analyze()
        measures += _job_measures(client, job, task, count)
    return _report(measures, floor, load)


def _analyze() -> None:
    """Fresh planner statistics after a bulk load, as PostgreSQL's autovacuum gathers them in
    production (without them both databases sort all jobs instead of reading an index)."""
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")


def _setup() -> tuple[Client, Project, Cluster]:
    project = Project.objects.create(name="bench")
    user = User.objects.create_user("bench")
    user.groups.add(operators_group())  # an operator: the workers page with its history
    Membership.objects.create(user=user, project=project)
    owners = User.objects.bulk_create(User(username=f"owner{n}") for n in range(20))
    for owner in owners:
        Membership.objects.create(user=owner, project=project)
    now = timezone.now()
    cluster = Cluster.objects.create(
        name="bench", kubeconfig="-", reachable=True, last_synced_at=now, last_attempt_at=now
    )
    project.clusters.add(cluster)
    Node.objects.bulk_create(
        Node(cluster=cluster, name=f"node-{n}", phase=Node.Phase.ONLINE, observed_at=now)
        for n in range(100)
    )
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    return client, project, cluster


def _fill_jobs(project: Project, cluster: Cluster, total: int) -> None:
    """Tops the project up to `total` jobs, spread over phases, owners and creation times."""
    have = Job.objects.count()
    owners = list(User.objects.filter(username__startswith="owner"))
    now = timezone.now()
    Job.objects.bulk_create(
        (
            Job(
                project=project, cluster=cluster, name=f"job-{n:05d}", namespace="rl",
                owner=owners[n % len(owners)], spec={"tasks": [TEMPLATE]},
                phase=PHASES[n % len(PHASES)], message=f"worker: {PHASES[n % len(PHASES)]}",
                created_at=now - timedelta(seconds=n), observed_at=now - timedelta(seconds=n % 30),
            )
            for n in range(have, total)
        ),
        batch_size=1_000,
    )  # fmt: skip
    reported = Job.objects.filter(workload__isnull=True).values_list("pk", flat=True)
    WorkloadReport.objects.bulk_create(
        (_workload_report(pk, now) for pk in reported.iterator()), batch_size=1_000
    )


def _workload_report(job_id: int, now: datetime) -> WorkloadReport:
    """A report as jobs.workload.report folds it, for a mix of states: most Jobs progress,
    some stall, some are quiet (Unresponsive), some lost a Ray node (Degraded), some completed."""
    quiet = 200 if job_id % 5 == 0 else job_id % 20  # seconds since the last message
    advanced = 400 if job_id % 3 == 0 else quiet  # a third stopped advancing: Stalled

    def stamp(ago: float) -> dict[str, object]:
        at = (now - timedelta(seconds=ago)).isoformat()
        return {"pod": "p-0", "at": at, "received_at": at, "source": "signal"}

    step = 500 + job_id % 100
    advanced_at = (now - timedelta(seconds=advanced)).isoformat()
    latest: dict[str, dict[str, object]] = {
        "heartbeat": stamp(quiet),
        "progress": {"step": step, "max_steps": 1_000, "metrics": {"loss": 0.4, "reward": 1.5},
                     "advanced_at": advanced_at, **stamp(quiet)},
        "ray": {"expected_nodes": 4, "alive_nodes": 3 if job_id % 7 == 0 else 4, **stamp(quiet)},
    }  # fmt: skip
    if job_id % 11 == 0:
        latest["completion"] = {"outcome": "succeeded", "exit_code": 0, **stamp(quiet)}
    start = now.timestamp() - advanced - 120
    return WorkloadReport(
        job_id=job_id, run=1, first_received_at=now - timedelta(hours=1),
        last_received_at=now - timedelta(seconds=quiet), latest=latest,
        steps=[[start + 10 * n, step - 11 + n] for n in range(12)],
    )  # fmt: skip


def _job_with_workers(project: Project, cluster: Cluster, count: int) -> tuple[Job, Task]:
    """A Running job whose one Task has `count` pods: most fine, some crash-looping, some
    missing from the last report, each with a PodInstance history row."""
    now = timezone.now()
    job = Job.objects.create(
        project=project, cluster=cluster, name=f"big-{count}", namespace="rl",
        spec={"tasks": [TEMPLATE]}, phase=JobPhase.RUNNING, observed_at=now,
    )  # fmt: skip
    task = Task.objects.create(
        job=job, role="worker", template=TEMPLATE, desired_replicas=count,
        ready_replicas=count - count // 10, phase=TaskPhase.PENDING, observed_at=now,
    )  # fmt: skip
    Worker.objects.bulk_create((_worker(task, n, now) for n in range(count)), batch_size=1_000)
    PodInstance.objects.bulk_create(
        (
            PodInstance(task=task, uid=f"{job.pk}-{n}", pod_name=f"{job.name}-worker-{n}",
                        node_name=f"node-{n % 100}", phase=PodPhase.RUNNING, restart_count=n % 3,
                        last_exit_code=1 if n % 10 == 0 else None, first_seen_at=now,
                        last_seen_at=now)
            for n in range(count)
        ),
        batch_size=1_000,
    )  # fmt: skip
    for n in range(30):
        Operation.objects.create(
            job=job, job_name=job.name, project=project, action="stop", result="refused",
            message=f"refused {n}",
        )  # fmt: skip
    return job, task


def _worker(task: Task, n: int, now: datetime) -> Worker:
    crashing = n % 10 == 0
    return Worker(
        task=task, pod_name=f"{task.job.name}-worker-{n}", pod_uid=f"{task.job_id}-{n}",
        node_name=f"node-{n % 100}", ip=f"10.{n // 250}.{n % 250}.7", phase=PodPhase.RUNNING,
        ready=not crashing, reason="CrashLoopBackOff" if crashing else "",
        restart_count=3 if crashing else 0,
        last_reported_at=now - timedelta(minutes=1) if n % 50 == 1 else now,
    )  # fmt: skip


def _measure(
    client: Client, page: str, size: str, url: str | Callable[[], str], **headers: str
) -> Measure:
    """`url` may be a function, called before each render (unmeasured)."""
    times, cpu = [], []
    status = 0
    for _ in range(REPEAT):
        target = url() if callable(url) else url
        started, started_cpu = time.perf_counter(), time.process_time()
        response = client.get(target, headers=headers)
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
        status = response.status_code
    target = url() if callable(url) else url
    with CaptureQueriesContext(connection) as captured:
        client.get(target, headers=headers)
    times.sort()
    return Measure(page, size, times[0], times[len(times) // 2], min(cpu), len(captured), status)


def _list_measures(client: Client, count: int) -> list[Measure]:
    size = f"{count:,} jobs"

    def unchanged() -> str:
        """The poll URL the rows fragment carries now (its version: what the client shows)."""
        rows = client.get("/jobs/?sort=name", headers=HTMX).content.decode()
        return "/jobs/?" + rows.split('hx-get="/jobs/?', 1)[1].split('"', 1)[0].replace(
            "&amp;", "&"
        )

    return [
        _measure(client, "Jobs list (newest first)", size, "/jobs/"),
        _measure(client, "Jobs list, by name, page 20", size, "/jobs/?sort=name&page=20"),
        _measure(client, "Jobs list, phase + name filter", size, "/jobs/?phase=Running&q=job-0"),
        _measure(client, "Jobs rows poll, unchanged (204)", size, unchanged, **HTMX),
        _measure(client, "Dashboard (attention list)", size, "/"),
    ]


def _job_measures(client: Client, job: Job, task: Task, count: int) -> list[Measure]:
    size = f"{count:,} workers"
    status = f"/jobs/{job.pk}/?part=status"
    workers = f"/jobs/{job.pk}/tasks/{task.pk}/workers/"

    def unchanged() -> str:
        part = client.get(status, headers=HTMX).content.decode()
        return part.split('hx-get="', 1)[1].split('"', 1)[0].replace("&amp;", "&")

    def rows_unchanged() -> str:
        rows = client.get(workers, headers=HTMX).content.decode()
        return rows.split('class="workers" hx-get="', 1)[1].split('"', 1)[0].replace("&amp;", "&")

    return [
        _measure(client, "Job page", size, f"/jobs/{job.pk}/"),
        _measure(client, "Job status part (htmx)", size, status, **HTMX),
        _measure(client, "Job status poll, unchanged (204)", size, unchanged, **HTMX),
        _measure(client, "Worker rows, first 50 (operator)", size, workers, **HTMX),
        _measure(client, "Worker rows poll, unchanged (204)", size, rows_unchanged, **HTMX),
    ]


def _report(measures: list[Measure], floor: Measure, load: float) -> str:
    lines = [
        "## Jobs pages: server time and SQL queries",
        "",
        f"Each page rendered {REPEAT} times through Django's test client by a logged-in operator "
        "(middleware, session, ORM, templates); best and median wall time in ms, and the SQL "
        f"queries of one render. Target: every page at most {TARGET_MS:.0f} ms at the larger "
        "size, with the same query count at both sizes. Planner statistics are refreshed after "
        "each bulk load (`ANALYZE`), as autovacuum does on PostgreSQL. Worker rows show 50 pods "
        "a page (with the operator's instance history of those pods). Every Job has a workload "
        "report (progressing, stalled, quiet, degraded or completed), whose state the list "
        "derives for each row shown and the dashboard for up to 500 live Jobs.",
        "",
        f"- Floor in the same run: the anonymous login page, best {floor.best_ms:.1f} ms "
        f"(median {floor.median_ms:.1f} ms); 1-minute load average at the start: {load:.2f} "
        f"on {os.cpu_count()} cores. Wall time includes waiting for a CPU when the machine is "
        "busy; CPU time is this process's own work.",
        "",
        "| Page | Size | Best ms | Median ms | Best CPU ms | Queries | Status |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {m.page} | {m.size} | {m.best_ms:.1f} | {m.median_ms:.1f} | {m.cpu_ms:.1f} "
        f"| {m.queries} | {m.status} |"
        for m in measures
    ]
    lines += ["", *_verdicts(measures)]
    return "\n".join(lines)


def _verdicts(measures: list[Measure]) -> list[str]:
    verdicts = []
    by_page: dict[str, list[Measure]] = {}
    for measure in measures:
        by_page.setdefault(measure.page, []).append(measure)
    for page, (small, large) in by_page.items():
        fast = large.best_ms <= TARGET_MS
        flat = small.queries == large.queries
        verdicts.append(
            f"- {'PASS' if fast else 'FAIL'}: {page} at {large.size}: {large.best_ms:.1f} ms "
            f"(target ≤ {TARGET_MS:.0f} ms; CPU {large.cpu_ms:.1f} ms)"
        )
        verdicts.append(
            f"- {'PASS' if flat else 'FAIL'}: {page}: {small.queries} queries at {small.size}, "
            f"{large.queries} at {large.size} (must not grow)"
        )
    return verdicts
