"""Jobs: list, submit, read, stop, resume, clone, delete, their operations and a pod's log."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Prefetch, QuerySet
from django.http import Http404, HttpRequest
from ninja import P, QueryEx, Status
from ninja.errors import HttpError
from pydantic import ValidationError as ModelInvalid

from jobs import pod_logs, rlinf
from jobs.access import get_job_for_user, jobs_for
from jobs.api.core import (
    MAX_ID,
    CloneIn,
    ObjectId,
    api,
    body_doc,
    forbid_viewer,
    json_body,
    page_url,
    user_of,
)
from jobs.choices import JobPhase
from jobs.models import Job, Operation, Task
from jobs.operations import clone_job, create_job, delete_job, resume_job, stop_job
from jobs.schemas import LOGS, READ, WRITE, AcceptedOut, JobOut, JobPage, LogOut, OperationOut
from jobs.spec import JobSpec, SpecInvalid, errors_from_validation, parse_job_spec, parse_rlinf_spec
from usage.report import prefetch as usage_prefetch
from workers.models import Worker


def _tasks_prefetch() -> Prefetch[Any]:
    workers = Prefetch("workers", queryset=Worker.objects.order_by("pod_name"))
    return Prefetch("tasks", queryset=Task.objects.select_related("job").prefetch_related(workers))


def _jobs(user: AbstractBaseUser) -> QuerySet[Job]:
    return (
        jobs_for(user)
        .select_related("project", "cluster", "workload")
        .prefetch_related(_tasks_prefetch(), "findings")
        .prefetch_related(*usage_prefetch())  # the Job object's `usage` (usage.report)
    )


def _job(user: AbstractBaseUser, job_id: int) -> Job:
    """404 also when a delete lands between the operation and its answer (not a 500)."""
    job = _jobs(user).filter(pk=job_id).first()
    if job is None:
        raise Http404("No such job.")
    return job


@api.get("/jobs", response={200: JobPage, **READ}, tags=["jobs"])
def list_jobs(
    request: HttpRequest,
    phase: JobPhase | None = None,
    cluster: str | None = None,
    project: str | None = None,
    limit: QueryEx[int, P(ge=1, le=200)] = 50,
    offset: QueryEx[int, P(ge=0, le=MAX_ID)] = 0,
) -> dict[str, Any]:
    """The Jobs of your projects, newest first; `next`/`previous` are page URLs or null."""
    jobs = _jobs(user_of(request)).order_by("-created_at", "-pk")
    if phase:
        jobs = jobs.filter(phase=phase)
    if cluster:
        jobs = jobs.filter(cluster__name=cluster)
    if project:
        jobs = jobs.filter(project__name=project)
    count = jobs.count()
    more = offset + limit < count
    return {
        "count": count,
        "next": page_url(request, offset + limit, limit) if more else None,
        "previous": page_url(request, max(offset - limit, 0), limit) if offset else None,
        "results": list(jobs[offset : offset + limit]),
    }


@api.post("/jobs", response={201: JobOut, **WRITE}, openapi_extra=body_doc(JobSpec), tags=["jobs"])
def submit_job(request: HttpRequest) -> Status[Job]:
    """Creates a Job (Pending) from a JobSpec; the console then creates its workloads."""
    user, data = user_of(request), json_body(request)
    forbid_viewer(user, data.get("project"))
    if data.get("template") == rlinf.TEMPLATE and "rlinf" in data:
        spec = parse_rlinf_spec(data, user)
    else:
        spec = parse_job_spec(data, user)
    job = create_job(user, spec)
    return Status(201, _job(user, job.pk))


@api.get("/jobs/{job_id}", response={200: JobOut, **READ}, tags=["jobs"])
def job_detail(request: HttpRequest, job_id: ObjectId) -> Job:
    return _job(user_of(request), job_id)


@api.post("/jobs/{job_id}/stop", response={200: JobOut, **WRITE}, tags=["jobs"])
def stop(request: HttpRequest, job_id: ObjectId) -> Job:
    """Pending/Running -> Stopped (workloads scaled to 0); on a Failed Job it only releases
    resources. 409 on a Succeeded or already Stopped Job."""
    user = user_of(request)
    stop_job(user, get_job_for_user(user, job_id, write=True))
    return _job(user, job_id)


@api.post("/jobs/{job_id}/resume", response={200: JobOut, **WRITE}, tags=["jobs"])
def resume(request: HttpRequest, job_id: ObjectId) -> Job:
    """Stopped -> Pending, Tasks re-created from the original template. 409 otherwise."""
    user = user_of(request)
    resume_job(user, get_job_for_user(user, job_id, write=True))
    return _job(user, job_id)


@api.post(
    "/jobs/{job_id}/clone",
    response={201: JobOut, **WRITE},
    openapi_extra=body_doc(CloneIn),
    tags=["jobs"],
)
def clone(request: HttpRequest, job_id: ObjectId) -> Status[Job]:
    """A new Job from this one's original spec, with `overrides` merged in; any phase."""
    user = user_of(request)
    source = get_job_for_user(user, job_id, write=True)
    try:
        body = CloneIn.model_validate(json_body(request))
    except ModelInvalid as exc:
        raise SpecInvalid(errors_from_validation(exc)) from None
    job = clone_job(user, source, body.name, body.overrides)
    return Status(201, _job(user, job.pk))


@api.delete("/jobs/{job_id}", response={202: AcceptedOut, **WRITE}, tags=["jobs"])
def delete(request: HttpRequest, job_id: ObjectId, confirm: str = "") -> Status[dict[str, str]]:
    """Irreversible: `confirm` must be the job's name. The workloads go, then the job."""
    user = user_of(request)
    delete_job(user, get_job_for_user(user, job_id, write=True), confirm)
    return Status(202, {"message": "Deletion requested."})


@api.get("/jobs/{job_id}/operations", response={200: list[OperationOut], **READ}, tags=["jobs"])
def job_operations(request: HttpRequest, job_id: ObjectId) -> QuerySet[Operation]:
    """Who asked for what on this job, when, and with what result (refusals included)."""
    job = get_job_for_user(user_of(request), job_id)
    return job.operations.select_related("user").order_by("-requested_at", "-pk")


@api.get("/jobs/{job_id}/workers/{pod}/logs", response={200: LogOut, **LOGS}, tags=["jobs"])
def worker_logs(
    request: HttpRequest, job_id: ObjectId, pod: str, container: str = "", tail: str = "",
    previous: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """The last `tail` lines (default 500, at most 5000; at most 1 MiB) of a container of one
    of the Job's pods, read from the cluster now. Members and operators; `previous` only for
    readers who see diagnostics (403 otherwise). 404: not one of this Job's pods, or the cluster
    has no such pod now; 409: the API server refused (no previous container, a container still
    waiting), its message quoted; 503: the cluster could not be read."""
    user = user_of(request)
    job = get_job_for_user(user, job_id)
    pod_logs.check_reader(user, job)
    if pod_logs.job_worker(job, pod) is None:
        raise Http404("No such pod in this job.")
    try:
        wanted = pod_logs.log_request(user, job, pod, container, tail or None, previous)
        read = pod_logs.read_tail(job, wanted)
    except pod_logs.BadLogRequest as error:
        raise HttpError(400, str(error)) from None
    except pod_logs.LogUnavailable as error:
        status = 404 if error.gone else 409 if error.refused else 503
        raise HttpError(status, pod_logs.unavailable_words(error, pod)) from None
    return {
        "pod": pod, "container": wanted.container, "previous": wanted.previous,
        "tail": wanted.tail, "lines": len(read.lines), "cut": read.cut, "text": read.text,
    }  # fmt: skip
