"""The logs of a Job's pods (issue 10, item 1): choose a pod and container, a tail, follow it
while the tab is visible, search the shown lines, download them. And every container run the
console kept (issue 34, item 2: `?kept=<id>`), or says it did not keep, for the readers who see
diagnostics. The rules are jobs.pod_logs'."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from console.web import HtmxHttpRequest, not_modified, poll_version
from failures import store
from failures.attempts import attempts
from failures.models import KeptLog
from jobs import pod_logs
from jobs.access import get_job_for_user
from jobs.choices import JOB_TERMINAL
from jobs.diagnostics import readers, shows_diagnostics
from jobs.models import Job


@login_required
def job_logs(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The page, or its log fragment for htmx (`part=log`, 204 when the tail has not changed).
    A bad tail or a refused `previous` is said on the page, not as an error page."""
    job = get_job_for_user(request.user, pk)
    pod_logs.check_reader(request.user, job)
    context = _context(request, job)
    if request.htmx and request.GET.get("part") == "log":
        fragment = "jobs/logs.html#log"
        return not_modified(request, context["version"]) or render(request, fragment, context)
    if context["wanted"] and shows_diagnostics(request.user, job):
        context["events"], context["events_error"] = _events(job, context["wanted"].pod)
    return render(request, "jobs/logs.html", context)


@login_required
def job_logs_download(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The tail as a text/plain attachment, as the API server answered it."""
    job = get_job_for_user(request.user, pk)
    pod_logs.check_reader(request.user, job)
    if "kept" in request.GET:
        return _kept_download(request, job)
    try:
        wanted = _wanted(request, job, request.GET.get("pod", ""))
    except pod_logs.BadLogRequest as error:
        return _plain(f"{error}\n", status=400)
    try:
        text = pod_logs.read_tail(job, wanted).text
    except pod_logs.LogUnavailable as error:
        return _plain(pod_logs.unavailable_words(error, wanted.pod) + "\n", status=502)
    response = _plain(text)
    name = f"{wanted.pod}-{wanted.container}{'-previous' if wanted.previous else ''}.log"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def _kept_download(request: HtmxHttpRequest, job: Job) -> HttpResponse:
    kept = _kept_log(request, job)
    response = _plain(store.read(kept))
    name = f"{kept.pod_name}-{kept.container}-run{kept.run}-restart{kept.attempt}.log"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def _kept_log(request: HtmxHttpRequest, job: Job) -> KeptLog:
    """The kept log asked for (`kept`), of this Job: PermissionDenied without diagnostics,
    Http404 for another Job's or none."""
    pod_logs.check_kept_reader(request.user, job)
    value = request.GET.get("kept", "")
    kept = KeptLog.objects.filter(job=job, pk=value).first() if value.isdigit() else None
    if kept is None:
        raise Http404("No such kept log of this job.")
    return kept


def _plain(text: str, status: int = 200) -> HttpResponse:
    return HttpResponse(text, content_type="text/plain; charset=utf-8", status=status)


def _wanted(request: HtmxHttpRequest, job: Job, pod: str) -> pod_logs.LogRequest:
    """Http404 for a pod that is not one of this Job's, PermissionDenied for a refused
    `previous`, BadLogRequest for a bad tail or container."""
    if pod_logs.job_worker(job, pod) is None:
        raise Http404("No such pod in this job.")
    return pod_logs.log_request(
        request.user, job, pod, request.GET.get("container", ""), request.GET.get("tail"),
        request.GET.get("previous") == "1",
    )  # fmt: skip


def _context(request: HtmxHttpRequest, job: Job) -> dict[str, Any]:
    pods = pod_logs.job_pods(job)
    pod = request.GET.get("pod") or (pods[0] if pods else "")
    previous = request.GET.get("previous") == "1"  # the previous container writes no more
    follow = request.GET.get("follow", "1") == "1" and job.phase not in JOB_TERMINAL
    query = request.GET.get("q", "")
    context: dict[str, Any] = {
        "job": job, "pods": pods, "pod": pod, "containers": pod_logs.CONTAINERS, "query": query,
        "follow": follow and not previous, "previous": previous,
        "tail_default": pod_logs.TAIL_DEFAULT, "tail_max": pod_logs.TAIL_MAX,
        "diagnostics": shows_diagnostics(request.user, job), "diagnostics_readers": readers(),
        "wanted": None, "error": "",
        "lines": [], "rows": [], "shown": [], "cut": False, "now": timezone.now(),
        "tail": request.GET.get("tail", ""), "container": request.GET.get("container", ""),
    }  # fmt: skip
    if context["diagnostics"]:
        context["attempts"], context["attempts_capped"] = attempts(job)
    if "kept" in request.GET:
        context |= _read_kept(request, job)
    elif pod:
        context |= _read(request, job, pod)
    context["version"] = poll_version(
        request, context["error"], context["lines"], context["cut"], query
    )
    context["poll_url"] = _poll_url(job, context)
    return context


def _read(request: HtmxHttpRequest, job: Job, pod: str) -> dict[str, Any]:
    """The tail of `pod` with the lines matching `q`, or why there is none."""
    try:
        wanted = _wanted(request, job, pod)
    except (pod_logs.BadLogRequest, PermissionDenied) as error:
        return {"error": str(error)}
    try:
        tail = pod_logs.read_tail(job, wanted)
    except pod_logs.LogUnavailable as error:
        return {"wanted": wanted, "error": pod_logs.unavailable_words(error, pod)}
    rows = pod_logs.marked(tail.lines, request.GET.get("q", ""))
    shown = [line for line, match in rows if match]
    return {"wanted": wanted, "lines": tail.lines, "rows": rows, "shown": shown, "cut": tail.cut}


def _read_kept(request: HtmxHttpRequest, job: Job) -> dict[str, Any]:
    """A kept log instead of the live tail: not followed (it writes no more)."""
    kept = _kept_log(request, job)
    lines = store.read(kept).splitlines()
    rows = pod_logs.marked(lines, request.GET.get("q", ""))
    shown = [line for line, match in rows if match]
    return {"kept": kept, "lines": lines, "rows": rows, "shown": shown, "cut": kept.cut,
            "follow": False, "pod": kept.pod_name}  # fmt: skip


def _events(job: Job, pod: str) -> tuple[list[Any], str]:
    try:
        return pod_logs.read_events(job, pod), ""
    except pod_logs.LogUnavailable as error:
        return [], pod_logs.unavailable_words(error, pod)


def _poll_url(job: Job, context: dict[str, Any]) -> str:
    """The fragment's own address, with what it shows; the search box is sent beside it."""
    wanted = context["wanted"]
    query: dict[str, str] = {"part": "log", "v": context["version"], "pod": context["pod"]}
    if wanted is not None:
        query |= {"container": wanted.container, "tail": str(wanted.tail)}
        query |= {"previous": "1"} if wanted.previous else {}
    return f"{reverse('job_logs', args=[job.pk])}?{urlencode(query)}"
