"""Stop, resume and delete: POST forms that work without JavaScript (spec §Job status)."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from console.web import HtmxHttpRequest
from jobs.access import User, get_job_for_user
from jobs.choices import JobPhase
from jobs.forms import DeleteForm
from jobs.models import Job
from jobs.operations import OperationRefused, delete_job, resume_job, stop_job


@login_required
@require_POST
def job_stop(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Stop scales every workload to 0; on a Failed Job it only releases resources."""
    job = get_job_for_user(request.user, pk, write=True)
    was_failed = job.phase == JobPhase.FAILED
    if was_failed:
        done = _("Stop requested: the job's resources are released; it stays Failed.")
    else:
        done = _("Stop requested: every workload of the job is scaled to 0.")
    return _operate(request, job, stop_job, done)


@login_required
@require_POST
def job_resume(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    job = get_job_for_user(request.user, pk, write=True)
    done = _("Resume requested: the job is Pending and its Tasks are re-created from its spec.")
    return _operate(request, job, resume_job, done)


def _operate(
    request: HtmxHttpRequest, job: Job, operation: Callable[[User, Job], Job], done: str
) -> HttpResponse:
    """A refused operation changes nothing and says why; either way the job page shows it."""
    try:
        operation(request.user, job)
    except OperationRefused as refused:
        messages.error(request, _("Refused: %(reason)s") % {"reason": refused.message})
    else:
        messages.success(request, done)
    return redirect(job)


@login_required
@require_POST
def job_delete(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Delete is irreversible, so it needs the job's name typed; a typo shows a confirm page."""
    job = get_job_for_user(request.user, pk, write=True)
    form = DeleteForm(request.POST, job_name=job.name)
    if not form.is_valid():
        return render(request, "jobs/delete.html", {"job": job, "delete_form": form})
    try:
        delete_job(request.user, job, form.cleaned_data["confirm"])
    except OperationRefused as refused:
        messages.error(request, _("Refused: %(reason)s") % {"reason": refused.message})
        return redirect(job)
    text = _("Deletion of %(name)s requested: its workloads, then the job, are removed.")
    messages.success(request, text % {"name": job.name})
    return redirect("jobs")
