"""The JSON API under /api/v1/: bearer tokens, the same operations as the web console.

Request bodies are read here as plain JSON and checked by `jobs.spec`, so the API reports the same
per-field messages as the web form, every error at once, as {"message", "errors": {path: text}}.
Every error is JSON with a `message`; ninja's own validation dump never reaches a client.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db.models import Prefetch, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import URLPattern, URLResolver
from django.utils import timezone
from ninja import NinjaAPI, P, PathEx, QueryEx, Status
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.openapi.schema import REF_TEMPLATE, OpenAPISchema
from ninja.security import HttpBearer
from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as ModelInvalid

from console import audit, errors, metrics, ratelimit
from console.models import Addon, ApiToken, Cluster, Node
from console.statements import Statement
from jobs import pod_logs, rlinf, signals, workload
from jobs.access import (
    cannot_create,
    cannot_operate,
    clusters_for,
    get_job_for_user,
    get_workflow_for_user,
    jobs_for,
    projects_for,
    workflows_for,
)
from jobs.choices import JobPhase
from jobs.models import Job, Operation, Task, Workflow
from jobs.operations import (
    ConfirmationMismatch,
    OperationRefused,
    clone_job,
    create_job,
    create_workflow,
    delete_job,
    resume_job,
    schedule_reconcile,
    stop_job,
)
from jobs.schemas import (
    LOGS,
    READ,
    SIGNALS,
    WRITE,
    AcceptedOut,
    AddonOut,
    ClusterOut,
    JobOut,
    JobPage,
    LogOut,
    NodeOut,
    OperationOut,
    SignalsAccepted,
    WorkflowDetailOut,
    WorkflowOut,
)
from jobs.signals import SignalBatch
from jobs.spec import (
    SPEC_MAX_BYTES,
    SPEC_MAX_NODES,
    WORKFLOW_MAX_BYTES,
    WORKFLOW_MAX_NODES,
    JobSpec,
    SpecInvalid,
    WorkflowSpec,
    check_plain_data,
    errors_from_validation,
    parse_job_spec,
    parse_rlinf_spec,
    parse_workflow_spec,
)
from usage.report import prefetch as usage_prefetch
from workers.models import Worker

logger = logging.getLogger(__name__)

MAX_ID = 2**63 - 1
TOKEN_TOUCH_INTERVAL = timedelta(minutes=1)


# --- authentication ------------------------------------------------------------------------


class BearerToken(HttpBearer):
    """`Authorization: Bearer <token>`, checked against the SHA-256 stored in ApiToken."""

    def authenticate(self, request: HttpRequest, token: str) -> AbstractBaseUser | None:
        """An expired token is as unknown as a wrong one. Failures are counted per client
        address (console/ratelimit.py): past the limit, every token is refused for a while."""
        limits = ratelimit.api_limits(audit.client_ip(request))
        minutes = ratelimit.minutes_to_wait(limits)
        if minutes:
            raise HttpError(
                429, f"Too many invalid tokens from this address; try again in {minutes} minutes."
            )
        live = ApiToken.objects.filter(expires_at__gt=timezone.now())
        record = live.select_related("user").filter(token_hash=ApiToken.hash(token)).first()
        if record is None or not record.user.is_active:
            ratelimit.note_failure(limits)
            return None
        _touch(record)
        request.user = record.user
        return record.user


def _touch(record: ApiToken) -> None:
    """`last_used_at`, written at most once a minute so that reads stay read-only."""
    now = timezone.now()
    if record.last_used_at is not None and now - record.last_used_at < TOKEN_TOUCH_INTERVAL:
        return
    stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - TOKEN_TOUCH_INTERVAL)
    ApiToken.objects.filter(stale, pk=record.pk).update(last_used_at=now)


# --- documents the raw JSON request bodies in the OpenAPI schema ---------------------------


class CloneIn(BaseModel):
    """A new name, and changes deep-merged into the source Job's spec (tasks merge by role)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    overrides: dict[str, Any] | None = None


SIGNAL_TOKEN = {
    "type": "http",
    "scheme": "bearer",
    "description": "A Job's TRAINYARD_SIGNAL_TOKEN, given to its pods (docs/api.md, Signals).",
}


class TrainyardAPI(NinjaAPI):
    REQUEST_MODELS: tuple[type[BaseModel], ...] = (JobSpec, CloneIn, WorkflowSpec, SignalBatch)

    def get_openapi_schema(
        self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None
    ) -> OpenAPISchema:
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        components = schema["components"]["schemas"]
        for model in self.REQUEST_MODELS:
            definition = model.model_json_schema(ref_template=REF_TEMPLATE)
            components.update(definition.pop("$defs", {}))
            components[model.__name__] = definition
        schema["components"].setdefault("securitySchemes", {})["SignalToken"] = SIGNAL_TOKEN
        return schema

    def _get_urls(self) -> list[URLResolver | URLPattern]:
        """ninja answers a wrong method with a plain-text 405; ours is JSON like every error.
        The interactive docs are a page of the console, for logged-in users; the OpenAPI
        document itself stays public (docs/api.md)."""
        urls = super()._get_urls()
        for pattern in urls:
            if isinstance(pattern, URLPattern):
                pattern.callback = _json_not_allowed(pattern.callback)
                if pattern.name == "openapi-view":
                    pattern.callback = login_required(pattern.callback)
        return urls


def _json_not_allowed(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        if response.status_code != 405 or response["Content-Type"].startswith("application/json"):
            return response
        allowed = response["Allow"]
        response = _error(request, 405, f"{request.method} is not allowed here; use {allowed}.")
        response["Allow"] = allowed
        return response

    return wrapped


def _body_doc(model: type[BaseModel]) -> dict[str, Any]:
    reference = {"$ref": REF_TEMPLATE.format(model=model.__name__)}
    return {
        "requestBody": {"required": True, "content": {"application/json": {"schema": reference}}}
    }


api = TrainyardAPI(
    title="Trainyard API",
    version="1",
    urls_namespace="api",
    auth=BearerToken(),
    description="Jobs, Workflows, clusters, nodes and add-ons. See docs/api.md.",
)


# --- errors: always JSON with a message ----------------------------------------------------


def _error(request: HttpRequest, status: int, message: str, **extra: Any) -> HttpResponse:
    return api.create_response(request, {"message": message, **extra}, status=status)


@api.exception_handler(SpecInvalid)
def _spec_invalid(request: HttpRequest, exc: SpecInvalid) -> HttpResponse:
    return _error(request, 422, exc.message, errors=exc.errors)


@api.exception_handler(ValidationError)
def _params_invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    """Query and path parameters. An id that cannot exist (not a number, out of range) is as
    unknown as one that does not: 404, like any other unknown id."""
    errors: dict[str, str] = {}
    for error in exc.errors:
        location, *path = error["loc"]
        if location == "path":
            return _error(request, 404, "Not found.")
        message = str(error.get("ctx", {}).get("error") or error["msg"])
        errors.setdefault(".".join(str(part) for part in path) or str(location), message)
    return _error(request, 422, "Invalid query parameters.", errors=errors)


@api.exception_handler(ConfirmationMismatch)
def _confirmation(request: HttpRequest, exc: ConfirmationMismatch) -> HttpResponse:
    return _error(request, 422, exc.message, errors={"confirm": exc.message})


@api.exception_handler(OperationRefused)
def _refused(request: HttpRequest, exc: OperationRefused) -> HttpResponse:
    return _error(request, 409, exc.message)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    response = _error(request, 401, "Send a valid API token: Authorization: Bearer <token>.")
    response["WWW-Authenticate"] = "Bearer"
    return response


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    return _error(request, exc.status_code, exc.message)


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return _error(request, 404, str(exc) or "Not found.")


@api.exception_handler(PermissionDenied)
def _forbidden(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
    return _error(request, 403, str(exc) or "You may not do this.")


@api.exception_handler(RequestDataTooBig)
def _too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    return _error(request, 413, "The request body is too large.")


@api.exception_handler(Exception)
def _unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    if errors.database_unavailable(exc):
        logger.warning("API %s %s: the database is unavailable (%s)", request.method,
                       request.path, type(exc).__name__)  # fmt: skip
        message = errors.unavailable_message()
        response = _error(request, 503, message, message_code=errors.MESSAGE_CODE)
        return errors.retry_later(response)
    logger.exception("API error on %s %s", request.method, request.path, exc_info=exc)
    return _error(request, 500, "Internal error; it has been logged.")


# --- helpers -------------------------------------------------------------------------------


def _user(request: HttpRequest) -> AbstractBaseUser:
    return request.auth  # type: ignore[attr-defined,no-any-return]


def _json_body(
    request: HttpRequest, max_bytes: int = SPEC_MAX_BYTES, max_nodes: int = SPEC_MAX_NODES
) -> dict[str, Any]:
    """The body as a JSON object whose every text is storable and whose size and nesting are
    bounded (`check_plain_data`): what any later rule, merge or query may safely read."""
    if len(request.body) > max_bytes:
        raise HttpError(413, f"The request body is larger than {max_bytes // 1024} KiB.")
    try:
        data = json.loads(request.body or b"null")
    except (ValueError, RecursionError):
        raise SpecInvalid({"body": "The request body is not valid JSON."}) from None
    if not isinstance(data, dict):
        raise SpecInvalid({"body": "The request body must be a JSON object."})
    check_plain_data(data, max_nodes=max_nodes)
    return data


def _forbid_viewer(user: AbstractBaseUser, project: Any) -> None:
    """A reader who may not operate in the project asked to create in it: 403, as for every
    other write (a project they cannot see is the spec's 422, with no hint that it exists)."""
    visible, writable = projects_for(user), projects_for(user, write=True)
    if isinstance(project, str):
        named = visible.filter(name=project).first()
        if named is not None and not writable.filter(pk=named.pk).exists():
            raise PermissionDenied(cannot_operate(user, named))
    elif project is None and visible.exists() and not writable.exists():
        raise PermissionDenied(cannot_create(user))


def _tasks_prefetch() -> Prefetch[Any]:
    workers = Prefetch("workers", queryset=Worker.objects.order_by("pod_name"))
    return Prefetch("tasks", queryset=Task.objects.select_related("job").prefetch_related(workers))


def _jobs(user: AbstractBaseUser) -> QuerySet[Job]:
    return (
        jobs_for(user)
        .select_related("project", "cluster", "workload")
        .prefetch_related(_tasks_prefetch())
        .prefetch_related(*usage_prefetch())  # the Job object's `usage` (usage.report)
    )


def _job(user: AbstractBaseUser, job_id: int) -> Job:
    """404 also when a delete lands between the operation and its answer (not a 500)."""
    job = _jobs(user).filter(pk=job_id).first()
    if job is None:
        raise Http404("No such job.")
    return job


def _page_url(request: HttpRequest, offset: int, limit: int) -> str:
    query = request.GET.copy()
    query["offset"], query["limit"] = str(offset), str(limit)
    return request.build_absolute_uri(f"{request.path}?{query.urlencode()}")


ObjectId = PathEx[int, P(ge=1, le=MAX_ID)]


# --- endpoints -----------------------------------------------------------------------------


@api.get("/clusters", response={200: list[ClusterOut], **READ}, tags=["clusters"])
def list_clusters(request: HttpRequest) -> QuerySet[Cluster]:
    """The clusters you may see (operators: every one; others: those their projects may use),
    their reachability and when each was last synced."""
    return clusters_for(_user(request))


@api.get("/nodes", response={200: list[NodeOut], **READ}, tags=["clusters"])
def list_nodes(request: HttpRequest, cluster: str | None = None) -> QuerySet[Node]:
    """The nodes of the clusters you may see."""
    nodes = Node.objects.filter(cluster__in=clusters_for(_user(request))).select_related("cluster")
    return nodes.filter(cluster__name=cluster) if cluster else nodes


@api.get("/addons", response={200: list[AddonOut], **READ}, tags=["clusters"])
def list_addons(request: HttpRequest, cluster: str | None = None) -> QuerySet[Addon]:
    """The add-ons of the clusters you may see."""
    addons = Addon.objects.filter(cluster__in=clusters_for(_user(request)))
    addons = addons.select_related("cluster")
    return addons.filter(cluster__name=cluster) if cluster else addons


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
    jobs = _jobs(_user(request)).order_by("-created_at", "-pk")
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
        "next": _page_url(request, offset + limit, limit) if more else None,
        "previous": _page_url(request, max(offset - limit, 0), limit) if offset else None,
        "results": list(jobs[offset : offset + limit]),
    }


@api.post("/jobs", response={201: JobOut, **WRITE}, openapi_extra=_body_doc(JobSpec), tags=["jobs"])
def submit_job(request: HttpRequest) -> Status[Job]:
    """Creates a Job (Pending) from a JobSpec; the console then creates its workloads."""
    user, data = _user(request), _json_body(request)
    _forbid_viewer(user, data.get("project"))
    if data.get("template") == rlinf.TEMPLATE and "rlinf" in data:
        spec = parse_rlinf_spec(data, user)
    else:
        spec = parse_job_spec(data, user)
    job = create_job(user, spec)
    return Status(201, _job(user, job.pk))


@api.get("/jobs/{job_id}", response={200: JobOut, **READ}, tags=["jobs"])
def job_detail(request: HttpRequest, job_id: ObjectId) -> Job:
    return _job(_user(request), job_id)


@api.post("/jobs/{job_id}/stop", response={200: JobOut, **WRITE}, tags=["jobs"])
def stop(request: HttpRequest, job_id: ObjectId) -> Job:
    """Pending/Running -> Stopped (workloads scaled to 0); on a Failed Job it only releases
    resources. 409 on a Succeeded or already Stopped Job."""
    user = _user(request)
    stop_job(user, get_job_for_user(user, job_id, write=True))
    return _job(user, job_id)


@api.post("/jobs/{job_id}/resume", response={200: JobOut, **WRITE}, tags=["jobs"])
def resume(request: HttpRequest, job_id: ObjectId) -> Job:
    """Stopped -> Pending, Tasks re-created from the original template. 409 otherwise."""
    user = _user(request)
    resume_job(user, get_job_for_user(user, job_id, write=True))
    return _job(user, job_id)


@api.post(
    "/jobs/{job_id}/clone",
    response={201: JobOut, **WRITE},
    openapi_extra=_body_doc(CloneIn),
    tags=["jobs"],
)
def clone(request: HttpRequest, job_id: ObjectId) -> Status[Job]:
    """A new Job from this one's original spec, with `overrides` merged in; any phase."""
    user = _user(request)
    source = get_job_for_user(user, job_id, write=True)
    try:
        body = CloneIn.model_validate(_json_body(request))
    except ModelInvalid as exc:
        raise SpecInvalid(errors_from_validation(exc)) from None
    job = clone_job(user, source, body.name, body.overrides)
    return Status(201, _job(user, job.pk))


@api.delete("/jobs/{job_id}", response={202: AcceptedOut, **WRITE}, tags=["jobs"])
def delete(request: HttpRequest, job_id: ObjectId, confirm: str = "") -> Status[dict[str, str]]:
    """Irreversible: `confirm` must be the job's name. The workloads go, then the job."""
    user = _user(request)
    delete_job(user, get_job_for_user(user, job_id, write=True), confirm)
    return Status(202, {"message": "Deletion requested."})


@api.get("/jobs/{job_id}/operations", response={200: list[OperationOut], **READ}, tags=["jobs"])
def job_operations(request: HttpRequest, job_id: ObjectId) -> QuerySet[Operation]:
    """Who asked for what on this job, when, and with what result (refusals included)."""
    job = get_job_for_user(_user(request), job_id)
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
    user = _user(request)
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


@api.get("/workflows", response={200: list[WorkflowOut], **READ}, tags=["workflows"])
def list_workflows(request: HttpRequest) -> QuerySet[Workflow]:
    return workflows_for(_user(request)).select_related("project")


@api.get("/workflows/{workflow_id}", response={200: WorkflowDetailOut, **READ}, tags=["workflows"])
def workflow_detail(request: HttpRequest, workflow_id: ObjectId) -> Workflow:
    return get_workflow_for_user(_user(request), workflow_id)


@api.post(
    "/workflows",
    response={201: WorkflowDetailOut, **WRITE},
    openapi_extra=_body_doc(WorkflowSpec),
    tags=["workflows"],
)
def submit_workflow(request: HttpRequest) -> Status[Workflow]:
    """A Workflow of child Jobs; a child starts once every Job in its `depends_on` Succeeded."""
    user, data = _user(request), _json_body(request, WORKFLOW_MAX_BYTES, WORKFLOW_MAX_NODES)
    _forbid_viewer(user, data.get("project"))
    workflow = create_workflow(user, parse_workflow_spec(data, user))
    return Status(201, workflow)


# --- signals from a Job's pods (jobs.signals) --------------------------------------------------


class SignalRefused(Exception):
    """A signal request refused, with a stable code beside the message."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.extra = status, code, message, extra


@api.exception_handler(SignalRefused)
def _signal_refused(request: HttpRequest, exc: SignalRefused) -> HttpResponse:
    response = _error(request, exc.status, exc.message, message_code=exc.code, **exc.extra)
    if exc.status == 401:
        response["WWW-Authenticate"] = "Bearer"
    return response


_RUN_AND_CLUSTER = Statement(
    lambda job_id: Job.objects.filter(pk=job_id).values_list("run", "cluster__name"), int
)


def _signal_run(request: HttpRequest, job_id: int) -> tuple[int, str]:
    """The run a genuine signal token names and the Job's cluster: 401 without a token, 403
    for another Job's or an earlier run's, 404 when the Job is gone."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    owner = signals.token_owner(token.strip()) if scheme.lower() == "bearer" else None
    if owner is None:
        raise SignalRefused(
            401, "signals.token", "Send the Job's TRAINYARD_SIGNAL_TOKEN as Bearer."
        )
    # Only what every request needs (record reads the Job when a completion acts on it).
    job = _RUN_AND_CLUSTER.first(job_id)
    if owner[0] != job_id:
        raise SignalRefused(403, "signals.other_job", "This token belongs to another Job.")
    if job is None:
        raise Http404("No such job.")
    if owner[1] != job[0]:
        raise SignalRefused(403, "signals.old_run", "This token belongs to an earlier run.")
    return job


def _signal_items(request: HttpRequest) -> list[Any]:
    """The body as a list of checked messages: 413 over the size cap, 422 saying what is wrong."""
    limit = settings.TRAINYARD_SIGNAL_MAX_BYTES
    if len(request.body) > limit:
        raise SignalRefused(
            413, "signals.too_large", f"The body is larger than {limit // 1024} KiB."
        )
    try:
        data = json.loads(request.body or b"null")
    except (ValueError, RecursionError):
        raise SignalRefused(422, "signals.not_json", "The body is not valid JSON.") from None
    items = data if isinstance(data, list) else [data]
    if not 1 <= len(items) <= signals.MAX_BATCH:
        raise SignalRefused(
            422, "signals.batch", f"Send one signal or a list of 1 to {signals.MAX_BATCH}."
        )
    try:
        return signals.BATCH.validate_python(items)
    except ModelInvalid as exc:
        errors = {".".join(str(p) for p in e["loc"]): e["msg"] for e in exc.errors()}
        raise SignalRefused(422, "signals.invalid", "Invalid signal.", errors=errors) from None


@api.post(
    "/jobs/{job_id}/signals",
    response={202: SignalsAccepted, **SIGNALS},
    auth=None,
    openapi_extra={**_body_doc(SignalBatch), "security": [{"SignalToken": []}]},
    tags=["signals"],
)
def post_signals(request: HttpRequest, job_id: ObjectId) -> Status[dict[str, int]]:
    """A Job's pods report heartbeats, phase, progress, checkpoints, Ray membership and
    completion, authenticated by the Job's TRAINYARD_SIGNAL_TOKEN (not a user's token). A
    resent (pod, uid, seq) counts as a duplicate, never twice."""
    run, cluster = _signal_run(request, job_id)
    items = _signal_items(request)
    if any(signals.too_fast(job_id, pod) for pod in {item.pod for item in items}):
        raise SignalRefused(
            429, "signals.too_fast",
            f"At most {settings.TRAINYARD_SIGNAL_RATE} requests per second per pod; batch them.",
        )  # fmt: skip
    recorded = workload.record(job_id, run, items)
    if recorded.stopped:
        schedule_reconcile(job_id)
    metrics.count_signals(cluster, items, recorded.accepted)
    return Status(202, {"accepted": recorded.accepted, "duplicates": recorded.duplicates})


@api.api_operation(
    ["GET", "POST", "PUT", "PATCH", "DELETE"], "/{path:rest}", auth=None, include_in_schema=False
)
def unknown_endpoint(request: HttpRequest, rest: str) -> None:
    """Registered last: any other path under /api/v1/ is a JSON 404 too."""
    raise Http404("No such API endpoint.")
