"""The Metrics tab of the job page (issue 35): the workload's curves drawn in the browser by
static/metrics.js (uPlot, vendored) from `GET /api/v1/jobs/{id}/series` (jobs.series), with the
checkpoints, spells, runs and restarts on the same axis; runs and Jobs compared.

The page itself carries no data: what to draw (this Job, its runs, the Jobs compared) and the
words of the charts, as JSON the script reads (no inline script: the console's CSP). A
comparison is the page's query string (`?runs=all&compare=12,15&x=step`), so its link can be
shared; a Job the reader may not see is left out, as if it did not exist.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _

from console.web import POLL_SECONDS
from jobs.access import get_job_for_user, jobs_for
from jobs.choices import JOB_TERMINAL, JobPhase, WorkloadState
from jobs.models import Job
from jobs.pod_logs import reads_logs
from jobs.series import MAX_POINTS

MAX_COMPARED = 5  # Jobs picked to compare with this one
AXES = ("time", "since", "step")  # the x axis: time, time since each run started, step


@login_required
def job_metrics(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_job_for_user(request.user, pk)
    compared = _compared(request, job)
    axis = request.GET.get("x") if request.GET.get("x") in AXES else "time"
    every_run = request.GET.get("runs") == "all"
    sources = [_source(job, every_run)] + [_source(other, every_run) for other in compared]
    context = {
        "job": job,
        "reads_logs": reads_logs(request.user, job),
        "axis": axis,
        "every_run": every_run,
        "compared": compared,
        "related": _related(request, job, compared),
        "chart_setup": {
            "sources": sources,
            "axis": axis,
            "poll_seconds": POLL_SECONDS,
            "points": MAX_POINTS,
            "words": _words(),
        },
    }
    return render(request, "jobs/metrics.html", context)


def _source(job: Job, every_run: bool) -> dict[str, Any]:
    """One Job drawn; `live`: its run may still report (the tab asks it for what is new)."""
    return {
        "job": job.pk,
        "name": job.name,
        "url": reverse("api-job-series", args=[job.pk]),
        "run": "all" if every_run else "",
        "live": job.phase not in JOB_TERMINAL and job.phase != JobPhase.STOPPED,
    }


def _compared(request: HttpRequest, job: Job) -> list[Job]:
    """The Jobs named in `compare` that the reader may see, at most MAX_COMPARED, in the order
    named; this Job itself is not compared with itself. The form sends `compare` once per
    ticked Job and once for the typed ids (comma-separated, maybe empty): every value counts."""
    wanted = []
    for value in request.GET.getlist("compare"):
        for text in value.split(","):
            if text.strip().isdigit() and int(text) != job.pk and int(text) not in wanted:
                wanted.append(int(text))
    found = {other.pk: other for other in jobs_for(request.user).filter(pk__in=wanted[:50])}
    return [found[pk] for pk in wanted if pk in found][:MAX_COMPARED]


def _related(request: HttpRequest, job: Job, compared: list[Job]) -> list[dict[str, Any]]:
    """The Jobs offered to compare: what this Job was cloned from, its clones, and those
    already compared, each once, as the reader may see them."""
    visible = jobs_for(request.user)
    related = list(visible.filter(clones=job)) + list(visible.filter(cloned_from=job)[:20])
    offered: dict[int, dict[str, Any]] = {}
    for other in [*related, *compared]:
        how = _("cloned from") if other.pk == job.cloned_from_id else _("clone")
        if other in compared and other not in related:
            how = _("picked")
        offered.setdefault(other.pk, {"job": other, "how": how, "on": other in compared})
    return list(offered.values())


def _words() -> dict[str, str]:
    """What the charts say, in the reader's language ({run}, {pod}, {path} are filled in)."""
    return {
        "step": _("Step"),
        "step_rate": _("Step rate (steps/min)"),
        "progress": _("Progress"),
        "other": _("Other metrics"),
        "time": _("Time"),
        "since": _("Time since the run started"),
        "run": _("run {run}"),
        "run_started": _("Run {run} started"),
        "checkpoint": _("Checkpoint at step {step}: {path}"),
        "recreated": _("{pod} re-created"),
        "restarted": _("{pod} restarted"),
        "pod_created": _("{pod}: a new pod (Kubernetes)"),
        "going_on": _("going on"),
        "table": _("Table"),
        "chart": _("Chart"),
        "events": _("Marked on the charts"),
        "no_data": _("The workload has reported no progress in this run yet."),
        "not_found": _("Not shown: the Job is gone or you may not read it."),
        "zoom_hint": _("Drag across a chart to zoom, double-click to reset."),
        "points": _("{count} points, last {last}, lowest {low}, highest {high}"),
        WorkloadState.STALLED: _("Stalled"),
        WorkloadState.UNRESPONSIVE: _("Unresponsive"),
        WorkloadState.DEGRADED: _("Degraded"),
    }
