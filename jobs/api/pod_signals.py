"""Signals from a Job's pods (jobs.workload.intake), authenticated by the Job's signal token."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from ninja import Status
from pydantic import ValidationError as ModelInvalid

from console import metrics
from console.statements import Statement
from jobs.api.core import ObjectId, api, body_doc, error
from jobs.models import Job
from jobs.operations import schedule_keep_logs, schedule_reconcile
from jobs.schemas import SIGNALS, SignalsAccepted
from jobs.workload import intake, report
from jobs.workload.intake import SignalBatch


class SignalRefused(Exception):
    """A signal request refused, with a stable code beside the message."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.extra = status, code, message, extra


@api.exception_handler(SignalRefused)
def _signal_refused(request: HttpRequest, exc: SignalRefused) -> HttpResponse:
    response = error(request, exc.status, exc.message, message_code=exc.code, **exc.extra)
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
    owner = intake.token_owner(token.strip()) if scheme.lower() == "bearer" else None
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
    if not 1 <= len(items) <= intake.MAX_BATCH:
        raise SignalRefused(
            422, "signals.batch", f"Send one signal or a list of 1 to {intake.MAX_BATCH}."
        )
    try:
        return intake.BATCH.validate_python(items)
    except ModelInvalid as exc:
        errors = {".".join(str(p) for p in e["loc"]): e["msg"] for e in exc.errors()}
        raise SignalRefused(422, "signals.invalid", "Invalid signal.", errors=errors) from None


@api.post(
    "/jobs/{job_id}/signals",
    response={202: SignalsAccepted, **SIGNALS},
    auth=None,
    openapi_extra={**body_doc(SignalBatch), "security": [{"SignalToken": []}]},
    tags=["signals"],
)
def post_signals(request: HttpRequest, job_id: ObjectId) -> Status[dict[str, int]]:
    """A Job's pods report heartbeats, phase, progress, checkpoints, Ray membership and
    completion, authenticated by the Job's TRAINYARD_SIGNAL_TOKEN (not a user's token). A
    resent (pod, uid, seq) counts as a duplicate, never twice."""
    run, cluster = _signal_run(request, job_id)
    items = _signal_items(request)
    if any(intake.too_fast(job_id, pod) for pod in {item.pod for item in items}):
        raise SignalRefused(
            429, "signals.too_fast",
            f"At most {settings.TRAINYARD_SIGNAL_RATE} requests per second per pod; batch them.",
        )  # fmt: skip
    recorded = report.record(job_id, run, items)
    if recorded.stopped:
        schedule_reconcile(job_id)
    if recorded.ended:
        schedule_keep_logs(job_id, "completion")
    metrics.count_signals(cluster, items, recorded.accepted)
    return Status(202, {"accepted": recorded.accepted, "duplicates": recorded.duplicates})
