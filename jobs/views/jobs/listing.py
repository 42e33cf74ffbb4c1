"""The Jobs list: filters, sort, pages of 50, and a rows fragment that polls cheaply."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from console.web import HtmxHttpRequest, duration_words, not_modified, poll_version
from failures import judge
from jobs.access import clusters_for, jobs_for, projects_for
from jobs.diagnostics import Diagnostics, diagnostics_for
from jobs.forms import JobFilterForm
from jobs.messages import encode
from jobs.models import Job
from jobs.status import freshness as status
from jobs.status.workload import Workload
from jobs.views.jobs.common import cluster_state
from jobs.workload.report import REPORT_ONLY, with_workload, workload_of

PAGE_SIZE = 50
# What a row shows (no `spec`: its JSON is the largest column; `with_workload` reads its
# policies alone), with the workload report joined.
ROW_FIELDS = (
    "name", "phase", "message", "stopped", "run", "created_at", "observed_at", *REPORT_ONLY,
    "cluster__name", "cluster__reachable", "cluster__last_synced_at", "cluster__last_attempt_at",
    "project__name", "owner__username",
)  # fmt: skip


@login_required
def job_list(request: HtmxHttpRequest) -> HttpResponse:
    """For htmx polls, 204 when the rows the client shows are still exactly what it would get."""
    context = _list_context(request)
    template = "jobs/list.html#rows" if request.htmx else "jobs/list.html"
    return not_modified(request, context["version"]) or render(request, template, context)


def _list_context(request: HtmxHttpRequest) -> dict[str, Any]:
    projects = list(projects_for(request.user).values_list("name", flat=True))
    clusters = list(clusters_for(request.user).values_list("name", flat=True))
    form = JobFilterForm(request.GET, projects=projects, clusters=clusters)
    filters = form.filters()
    page = Paginator(_filtered(request, filters).order_by(*form.ordering()), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    now = timezone.now()
    rows = _rows(page, now, diagnostics_for(request.user))
    version = poll_version(
        request,
        page.paginator.count,
        page.number,
        sorted(filters.items()),
        form.sort_key(),
        [_row_key(row) for row in rows],
        now=now,
    )
    return {
        "form": form,
        "page": page,
        "rows": rows,
        "now": now,
        "sort": form.sort_key(),
        "sort_links": _sort_links(filters, form.sort_key()),
        "page_query": urlencode({**filters, "sort": form.sort_key()}),
        "poll_url": _poll_url(filters, form.sort_key(), page.number, version),
        "version": version,
        "filtered": bool(filters),
        "can_create": projects_for(request.user, write=True).exists(),
    }


def _filtered(request: HtmxHttpRequest, filters: dict[str, str]) -> QuerySet[Job]:
    jobs = with_workload(jobs_for(request.user)).select_related("cluster", "project", "owner")
    jobs = jobs.only(*ROW_FIELDS)
    if "q" in filters:
        jobs = jobs.filter(name__icontains=filters["q"])
    if "phase" in filters:
        jobs = jobs.filter(phase=filters["phase"])
    if "cluster" in filters:
        jobs = jobs.filter(cluster__name=filters["cluster"])
    if "project" in filters:
        jobs = jobs.filter(project__name=filters["project"])
    return jobs


@dataclass(frozen=True)
class Row:
    """A Job with when the cluster last reported on it and whether that is stale, and whether
    the reader sees its diagnostics (its message is worded for them)."""

    job: Job
    observed_at: datetime | None
    stale: bool
    reachable: bool
    age: str
    created: str  # local time, for the hover (rendered here: 50 date filters cost ~5 ms)
    workload: Workload
    workload_reason: str  # its reason, stored form (jobs.messages)
    diagnostics: bool = False
    failure: str = ""  # why its run failed, short (failures.judge.short)


def _rows(page: Page[Job], now: datetime, diagnostics: Diagnostics) -> list[Row]:
    rows = []
    failures = judge.current_of(page.object_list)
    own = judge.own_signatures(failures.values())
    for job in page.object_list:
        freshness = status.job_freshness(job, now)
        cluster = cluster_state(job.cluster, now)
        reachable = cluster.reachable
        stale = freshness.stale or cluster.stale
        created = timezone.localtime(job.created_at).strftime("%Y-%m-%d %H:%M:%S")
        shown = diagnostics.shown(job.project_id)
        age = duration_words(job.created_at, now)
        workload = workload_of(job, now)
        reason = encode(workload.reason) if workload.reason else ""
        failure = failures.get(job.pk)
        row = Row(
            job, freshness.observed_at, stale, reachable, age, created, workload, reason, shown,
            judge.short(failure, own) if failure else "",
        )  # fmt: skip
        rows.append(row)
    return rows


def _row_key(row: Row) -> tuple[object, ...]:
    """What a row shows, from stored facts. Derived times move with every sync: the minute in
    the version, not every sync, refreshes their display."""
    job = row.job
    return (job.pk, job.name, job.phase, job.message, job.stopped, job.observed_at,
            job.cluster_id, job.project_id, job.owner_id, row.stale, row.reachable,
            row.diagnostics, row.workload.state, row.workload.step, row.workload.max_steps,
            row.workload.source, _lasting(row.workload), row.failure)  # fmt: skip


def _lasting(workload: Workload) -> object:
    """The workload's reason without the seconds it counts (those move with every poll while a
    run is Stalled or Unresponsive; the age step in the version refreshes them)."""
    reason = workload.reason
    if reason is None:
        return None
    return reason.code, sorted((k, v) for k, v in reason.params.items() if k != "seconds")


def _sort_links(filters: dict[str, str], current: str) -> dict[str, str]:
    """Per column, the URL that sorts by it (ascending first; again to reverse)."""
    links = {}
    for column in ("name", "created", "phase"):
        target = f"-{column}" if current == column else column
        links[column] = "?" + urlencode({**filters, "sort": target})
    return links


def _poll_url(filters: dict[str, str], sort: str, number: int, version: str) -> str:
    query = urlencode({**filters, "sort": sort, "page": number, "v": version})
    return f"{reverse('jobs')}?{query}"
