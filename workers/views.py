"""The Worker rows of one Task (spec §Pod and Worker status), a page of them at a time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Q, QuerySet
from django.db.models.functions import Length
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from console.models import Cluster, Node
from console.statements import Statement
from console.web import HtmxHttpRequest, not_modified, poll_version
from jobs.access import get_job_for_user
from jobs.choices import JOB_TERMINAL, TASK_TERMINAL
from jobs.diagnostics import shows_diagnostics
from jobs.models import Job, Task
from jobs.status import freshness as status
from workers.models import PodInstance, Worker

WORKERS_PAGE = 50
# An operator's history rows for the pods of one page: the most recent instances first seen.
INSTANCE_LIMIT = 500


@dataclass(frozen=True)
class ShownWorker:
    worker: Worker
    last_reported_at: datetime
    missing: bool
    node_offline: bool


@dataclass(frozen=True)
class Summary:
    """Pods are counted from the last report only: a row missing from it is a pod that may be
    gone, shown with its last known state, never counted as a pod or as ready."""

    total: int
    present: int
    ready: int
    missing: int
    problems: int


@login_required
def task_workers(request: HtmxHttpRequest, pk: int, task_pk: int) -> HttpResponse:
    """The latest report per pod with "last reported at"; rows missing from the last sync are
    marked, never dropped. Readers who see diagnostics (jobs.diagnostics) also get restart counts
    and the instance history (UID, node, IP, first/last seen, exit code) the spec says operators
    otherwise rebuild by hand. 204 when unchanged."""
    job = get_job_for_user(request.user, pk)
    try:
        task = job.tasks.get(pk=task_pk)
    except Task.DoesNotExist:
        raise Http404("No such task.") from None
    context = _workers_context(request, job, task)
    template = "workers/list.html#workers" if request.htmx else "workers/list.html"
    return not_modified(request, context["version"]) or render(request, template, context)


def _workers_context(request: HtmxHttpRequest, job: Job, task: Task) -> dict[str, Any]:
    now = timezone.now()
    diagnostics = shows_diagnostics(request.user, job)
    only = "problems" if request.GET.get("only") == "problems" else ""
    summary = _summary(task)
    paginator = Paginator(_workers(task, only), WORKERS_PAGE)
    paginator.count = summary.problems if only else summary.total  # counted: no COUNT query
    page = paginator.get_page(request.GET.get("page"))
    rows = _worker_rows(job, task, list(page.object_list))
    instances = (
        _instances(task, job.cluster, [row.worker.pod_name for row in rows]) if diagnostics else []
    )
    terminal = job.phase in JOB_TERMINAL or task.phase in TASK_TERMINAL
    # "Last reported at" moves with every sync: in the version through the age step only, as on
    # the job page (jobs.views.jobs.detail.status_facts) and the Jobs list.
    version = poll_version(
        request, task.observed_at, task.phase, summary, page.number, only, diagnostics,
        [_row_key(row) for row in rows],
        [(row.instance.pk, row.instance.phase, row.instance.restart_count, row.gone)
         for row in instances],
        now=now,
    )  # fmt: skip
    return {
        "job": job, "task": task, "rows": rows, "page": page, "only": only, "now": now,
        "summary": summary, "diagnostics": diagnostics, "instances": instances,
        "instance_limit": INSTANCE_LIMIT, "poll": not terminal,
        "version": version, "poll_url": _url(job, task, only, page.number, version),
        "page_urls": _page_urls(job, task, only, page.number, page.paginator.num_pages),
        "all_url": _url(job, task, "", 1), "problems_url": _url(job, task, "problems", 1),
    }  # fmt: skip


def _missing(task: Task) -> Q:
    """workers.models.Worker: a row older than its Task's last observation was missing from it."""
    if task.observed_at is None:
        return Q(pk__in=[])
    return Q(last_reported_at__lt=task.observed_at)


def _problems(task: Task) -> Q:
    return Q(ready=False) | ~Q(reason="") | _missing(task)


def _workers(task: Task, only: str) -> QuerySet[Worker]:
    """In pod-name order as people count (worker-2 before worker-10)."""
    workers = task.workers.order_by(Length("pod_name"), "pod_name")
    return workers.filter(_problems(task)) if only else workers


def _summary(task: Task) -> Summary:
    """Counted in one query, compiled once per process (console.statements): every poll of the
    worker rows asks it."""
    if task.observed_at is None:
        counts = _SUMMARY_UNOBSERVED.first(task.pk)
    else:
        counts = _SUMMARY.first(task.pk, task.observed_at)
    return Summary(*(counts or (0, 0, 0, 0, 0)))


def _counts(task_id: int, observed_at: datetime | None) -> QuerySet[Worker, Any]:
    """Summary's counts of a Task's Workers (no row when it has none)."""
    task = Task(pk=task_id, observed_at=observed_at)
    counts = {
        "n_total": Count("pk"),
        "n_present": Count("pk", filter=~_missing(task)),
        "n_ready": Count("pk", filter=Q(ready=True) & ~_missing(task)),
        "n_missing": Count("pk", filter=_missing(task)),
        "n_problems": Count("pk", filter=_problems(task)),
    }
    grouped = Worker.objects.filter(task_id=task_id).order_by().values("task_id")
    return grouped.annotate(**counts).values_list(*counts)


_SUMMARY = Statement(_counts, int, datetime)
_SUMMARY_UNOBSERVED = Statement(lambda task_id: _counts(task_id, None), int)


def _worker_rows(job: Job, task: Task, workers: list[Worker]) -> list[ShownWorker]:
    names = {worker.node_name for worker in workers if worker.node_name}
    offline = set(
        Node.objects.filter(cluster=job.cluster_id, name__in=names, phase=Node.Phase.OFFLINE)
        .values_list("name", flat=True)
    )  # fmt: skip
    return [
        ShownWorker(
            worker,
            status.worker_last_reported_at(worker, task, job.cluster),
            status.worker_missing(worker, task),
            worker.node_name in offline,
        )
        for worker in workers
    ]


def _row_key(row: ShownWorker) -> tuple[object, ...]:
    worker = row.worker
    return (worker.pod_name, worker.node_name, worker.ip, worker.phase, worker.ready,
            worker.reason, worker.message, worker.restart_count, row.missing,
            row.node_offline)  # fmt: skip


@dataclass(frozen=True)
class Moment:
    """A time as the history table shows it: local text, ISO (UTC) for the `datetime`
    attribute. Formatted here: Django's `date` filter costs ~70 µs a call, 150 a page."""

    local: str
    iso: str

    @classmethod
    def of(cls, moment: datetime | None) -> Moment | None:
        if moment is None:
            return None
        local = timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S")
        return cls(local, moment.astimezone(UTC).isoformat())


@dataclass(frozen=True)
class ShownInstance:
    instance: PodInstance
    first_seen: Moment | None
    last_seen: Moment | None
    gone: Moment | None


def _instances(task: Task, cluster: Cluster, pod_names: list[str]) -> list[ShownInstance]:
    """The instance history of the pods on this page, oldest first per pod, at most
    INSTANCE_LIMIT (the most recent); each with when it was last seen."""
    recent = task.pod_instances.filter(pod_name__in=pod_names)
    recent = recent.order_by("-first_seen_at", "-pk")[:INSTANCE_LIMIT]
    ordered = sorted(recent, key=lambda i: (len(i.pod_name), i.pod_name, i.first_seen_at))
    return [
        ShownInstance(
            i,
            Moment.of(i.first_seen_at),
            Moment.of(status.instance_last_seen_at(i, cluster)),
            Moment.of(i.gone_at),
        )
        for i in ordered
    ]


def _url(job: Job, task: Task, only: str, page: int, version: str = "") -> str:
    query = {key: value for key, value in (("only", only), ("page", page), ("v", version)) if value}
    return f"{reverse('task_workers', args=[job.pk, task.pk])}?{urlencode(query)}"


def _page_urls(job: Job, task: Task, only: str, number: int, pages: int) -> dict[str, str]:
    """First, previous, next and last, where they exist."""
    targets = {"first": 1, "previous": number - 1, "next": number + 1, "last": pages}
    return {
        name: _url(job, task, only, target)
        for name, target in targets.items()
        if 1 <= target <= pages and target != number
    }
