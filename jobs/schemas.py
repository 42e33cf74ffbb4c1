"""The JSON API's response documents (OpenAPI schemas), field names as the API promises them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone
from ninja import Field, Schema
from pydantic import create_model

from console.models import Addon, Node
from failures import judge
from jobs.choices import (
    Action,
    FailureClass,
    JobPhase,
    PodPhase,
    SignalSource,
    TaskKind,
    TaskPhase,
    WorkflowPhase,
    WorkloadState,
)
from jobs.diagnostics import for_request, worker_reason
from jobs.messages import Message, api_code, api_params, encode, render_text
from jobs.models import Job, Operation, Task, Workflow
from jobs.status.lifecycle import allowed_actions
from jobs.workload.report import describe, workload_of
from usage.report import job_usage

DIAGNOSTICS = (
    "Restart counts, exit codes and termination reasons are diagnostics (spec §Pod and Worker "
    "status: for authorised operators): shown to operators, and to the members of the job's "
    "project when the console runs with TRAINYARD_DIAGNOSTICS=members. Anyone else gets "
)


def _project_of(obj: Any) -> int | None:
    """The project of the Job a message or Worker belongs to; None for objects whose messages
    never carry diagnostics (clusters, add-ons, operations, workflows)."""
    if isinstance(obj, Job):
        return obj.project_id
    if isinstance(obj, Task):
        return obj.job.project_id
    return None


def shows_diagnostics(obj: Any, context: Any) -> bool:
    """Whether the request's reader sees the diagnostics of `obj`'s Job (jobs.diagnostics)."""
    project_id = _project_of(obj)
    if project_id is None or not context or "request" not in context:
        return False
    return for_request(context["request"]).shown(project_id)


class ErrorOut(Schema):
    message: str


class InvalidOut(Schema):
    message: str
    errors: dict[str, str]


class Worded(Schema):
    """A status message as the API gives it (docs/decisions.md): `message` worded in the
    request's language (Accept-Language; English by default), with the stable `message_code`
    and `message_params` it was worded from. Both are null/{} for text stored before codes
    existed. In the parameters a nested message is {code, params} and text written by
    Kubernetes is {kubernetes: text}, never translated."""

    message: str = Field(
        description="Worded in the request's language (Accept-Language; English by default). "
        + DIAGNOSTICS
        + "a message that carries them as its meaning, with the meaning's code and only the "
        "pod's name as parameter (pod.crash_loop_meaning, pod.failed_meaning, "
        "pod.restarted_meaning, worker.exit_meaning, worker.completed_meaning)."
    )
    message_code: str | None = Field(
        None, description="Stable code of a message the console wrote; null for plain text."
    )
    message_params: dict[str, Any] = Field(
        default_factory=dict,
        description="Parameters of the code: values, nested {code, params}, {kubernetes: text}.",
    )

    @staticmethod
    def resolve_message(obj: Any, context: Any) -> str:
        return render_text(obj.message, shows_diagnostics(obj, context))

    @staticmethod
    def resolve_message_code(obj: Any, context: Any) -> str | None:
        return api_code(obj.message, shows_diagnostics(obj, context))

    @staticmethod
    def resolve_message_params(obj: Any, context: Any) -> dict[str, Any]:
        return api_params(obj.message, shows_diagnostics(obj, context))


class ClusterOut(Worded):
    name: str
    reachable: bool
    insecure: bool = Field(
        description="An operator allowed this cluster's credentials to travel without verified "
        "TLS (insecure-skip-tls-verify, or a plain http:// server); true for as long as its "
        "credentials do."
    )
    insecure_since: datetime | None = Field(
        description="When its credentials first travelled without verified TLS; kept after a "
        "rotation to verified credentials (null: never)."
    )
    last_synced_at: datetime | None


class WorkerOut(Schema):
    pod_name: str
    node: str = Field(alias="node_name")
    ip: str
    phase: PodPhase
    ready: bool
    restart_count: int | None = Field(
        description="The container's restarts. " + DIAGNOSTICS + "null."
    )
    reason: str = Field(
        description="Kubernetes' reason word (CrashLoopBackOff, Unschedulable, ...). When it is "
        "a container's termination reason (OOMKilled, Error, ...): " + DIAGNOSTICS + "Terminated."
    )
    last_reported_at: datetime

    @staticmethod
    def resolve_restart_count(worker: Any, context: Any) -> int | None:
        return worker.restart_count if shows_diagnostics(worker.task, context) else None

    @staticmethod
    def resolve_reason(worker: Any, context: Any) -> str:
        shown = shows_diagnostics(worker.task, context)
        return worker_reason(worker.reason, worker.message, shown)


class TaskOut(Worded):
    name: str
    role: str
    kind: TaskKind
    phase: TaskPhase
    desired_replicas: int = Field(description="The template's desired replicas.")
    workload_replicas: int | None = Field(
        description="The workload's desired replicas as the cluster last reported them "
        "(0 once stopped, spec §Task status); null while no workload was observed."
    )
    ready_replicas: int
    observed_at: datetime | None
    workers: list[WorkerOut]


class PoliciesOut(Schema):
    stop_on_completion: bool = False
    heartbeat_seconds: int = 30
    stall_after_seconds: int | None = None
    progress_from_logs: bool = False
    stop_when_idle_minutes: int | None = Field(
        default=None,
        description="The idle policy: stop the Job once its workload was Stalled, Unresponsive "
        "or finished-but-held this many minutes (1 to 10080); 0 sets it off for this Job, null "
        "takes the project's default (docs/usage.md).",
    )


class WorkerUtilisationOut(Schema):
    pod: str
    percent: float
    measured_at: datetime


class JobUtilisationOut(Schema):
    """The current run's GPU utilisation from the cluster's DCGM exporter (docs/usage.md
    "Prometheus"): informs only, it never changes a class."""

    percent: float | None = Field(description="The GPU-weighted mean of its Workers' latest.")
    busy_gpu_hours: float = Field(description="Progressing GPU-hours at or above the threshold.")
    low_utilisation_gpu_hours: float = Field(description="Progressing GPU-hours below it.")
    workers: list[WorkerUtilisationOut]


class JobUsageOut(Schema):
    """The Job's GPU-hours so far (docs/usage.md): all its runs and its current run."""

    gpu_hours: float
    wasted_gpu_hours: float
    by_class: dict[str, float]
    run_gpu_hours: float
    utilisation: JobUtilisationOut | None = Field(
        default=None, description="Null when the Job's cluster has no Prometheus."
    )


class CheckpointOut(Schema):
    step: int | None
    path: str | None
    reported_at: datetime | None
    source: SignalSource | None


class RayOut(Schema):
    expected: int
    alive: int
    gpus: int | None = None
    reported_at: datetime | None
    source: SignalSource | None


class CompletionOut(Schema):
    reported_at: datetime | None
    source: SignalSource | None
    outcome: str
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None


class WorkloadOut(Schema):
    """What the workload says about itself, beside the Kubernetes phase (never in place of it):
    derived when read from its signals and the Job's phase (docs/workload-signals.md)."""

    state: WorkloadState
    source: SignalSource | None = Field(
        description="Where the word that decided the state came from."
    )
    reported_at: datetime | None
    reason: str = Field(description="Why the state is what it is, in the request's language.")
    reason_code: str | None
    reason_params: dict[str, Any]
    phase: str = Field(description="The workload's last reported phase (training, ...).")
    step: int | None
    max_steps: int | None
    step_seconds: float | None = Field(description="Typical seconds per step (recent median).")
    eta: datetime | None
    metrics: dict[str, float]
    last_heartbeat_at: datetime | None
    last_message_at: datetime | None
    stall_after_seconds: float | None
    last_checkpoint: CheckpointOut | None
    ray: RayOut | None
    completion: CompletionOut | None

    @staticmethod
    def resolve_reason(obj: dict[str, Any]) -> str:
        return render_text(encode(obj["reason"])) if obj["reason"] else ""

    @staticmethod
    def resolve_reason_code(obj: dict[str, Any]) -> str | None:
        reason: Message | None = obj["reason"]
        return reason.code if reason else None

    @staticmethod
    def resolve_reason_params(obj: dict[str, Any]) -> dict[str, Any]:
        return api_params(encode(obj["reason"]), True) if obj["reason"] else {}


# Why the run failed (issue 34, docs/failures.md). Its key `class` is a Python keyword, so the
# schema is made from a mapping of names rather than written as a class.
_FAILURE_FIELDS: dict[str, Any] = {
    "label": (str, Field(description="The signature's label, or the exception a traceback names.")),
    "class": (FailureClass, ...),
    "first_error": (str | None, Field(description="The first error's line in the kept log.")),
    "pod": (str | None, ...),
    "container": (str | None, ...),
    "attempt": (int | None, Field(description="The container run (its restart count).")),
    "at": (datetime | None, Field(description="When the line was printed.")),
    "advice": (str, Field(description="What to do about it, in the request's language.")),
    "raised_at": (str | None, Field(description="file:line where the exception was raised.")),
    "consequence": (
        bool,
        Field(description="Only a consequence (ray.kill, an actor died) was found, no cause."),
    ),
}
FailureOut = create_model(
    "FailureOut",
    __base__=Schema,
    __doc__="Why the Job's current run failed or is failing: its first error, named by a failure "
    "signature (docs/failures.md). `first_error` and `raised_at` are log content: "
    + DIAGNOSTICS
    + "null.",
    **_FAILURE_FIELDS,
)


class JobOut(Worded):
    id: int
    name: str
    project: str = Field(alias="project.name")
    cluster: str = Field(alias="cluster.name")
    namespace: str
    phase: JobPhase
    stopped: bool
    run: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    observed_at: datetime | None
    allowed_actions: list[Action]
    policies: PoliciesOut
    template: str | None = Field(
        description='The template that made the spec ("rlinf": the RLinf on Ray template), or '
        "null for a spec written out in full."
    )
    workload: WorkloadOut
    failure: FailureOut | None = Field(  # type: ignore[valid-type]
        description="Why the current run failed or is failing (null when nothing names it)."
    )
    usage: JobUsageOut
    tasks: list[TaskOut]

    @staticmethod
    def resolve_failure(job: Job, context: Any) -> dict[str, Any] | None:
        return judge.describe(judge.current(job), shows_diagnostics(job, context))

    @staticmethod
    def resolve_usage(job: Job) -> dict[str, Any]:
        return job_usage(job, timezone.now()).as_dict()

    @staticmethod
    def resolve_template(job: Job) -> str | None:
        return job.spec.get("template")

    @staticmethod
    def resolve_policies(job: Job) -> dict[str, Any]:
        return dict(job.spec.get("policies") or {})

    @staticmethod
    def resolve_workload(job: Job) -> dict[str, Any]:
        now = timezone.now()
        return describe(workload_of(job, now), now)

    @staticmethod
    def resolve_allowed_actions(job: Job) -> list[Action]:
        allowed = allowed_actions(JobPhase(job.phase), job.stopped)
        return [action for action in Action if action in allowed]


class JobPage(Schema):
    count: int
    next: str | None
    previous: str | None
    results: list[JobOut]


class OperationOut(Worded):
    id: int
    action: Action
    result: Operation.Result
    job_name: str
    user: str | None = Field(alias="user.username", default=None)
    requested_at: datetime
    finished_at: datetime | None


class NodeOut(Schema):
    cluster: str = Field(alias="cluster.name")
    name: str
    phase: Node.Phase
    unschedulable: bool
    gpu_capacity: int
    gpu_allocated: int
    observed_at: datetime


class AddonOut(Worded):
    cluster: str = Field(alias="cluster.name")
    name: str
    phase: Addon.Phase
    desired_version: str
    current_version: str
    observed_at: datetime | None


class WorkflowPoliciesOut(Schema):
    advance_on_workload_success: bool = False


class WorkflowOut(Worded):
    id: int
    name: str
    project: str = Field(alias="project.name")
    phase: WorkflowPhase
    policies: WorkflowPoliciesOut
    created_at: datetime
    finished_at: datetime | None


class WorkflowJobOut(Schema):
    id: int
    name: str
    phase: JobPhase
    depends_on: list[str]


class WorkflowDetailOut(WorkflowOut):
    jobs: list[WorkflowJobOut]

    @staticmethod
    def resolve_jobs(workflow: Workflow) -> list[dict[str, Any]]:
        jobs = list(workflow.jobs.order_by("pk"))
        names = {job.pk: job.name for job in jobs}
        upstreams: dict[int, list[str]] = {job.pk: [] for job in jobs}
        for edge in workflow.edges.all():
            upstreams[edge.downstream_id].append(names[edge.upstream_id])
        return [
            {
                "id": job.pk,
                "name": job.name,
                "phase": job.phase,
                "depends_on": sorted(upstreams[job.pk]),
            }
            for job in jobs
        ]


class AcceptedOut(Schema):
    message: str


class SignalsAccepted(Schema):
    """New messages stored, and resent ones recognised (counted once, never twice)."""

    accepted: int
    duplicates: int


READ = {401: ErrorOut, 404: ErrorOut, 422: InvalidOut}
WRITE = {**READ, 403: ErrorOut, 409: ErrorOut, 413: ErrorOut}


class LogOut(Schema):
    """The tail of one container of one of the Job's pods, as the API server answered it: read
    when asked, never stored (docs/api.md, "Logs")."""

    pod: str
    container: str
    previous: bool = Field(description="The previous (terminated) container's log: operators only.")
    tail: int = Field(description="The lines asked for (tailLines).")
    lines: int = Field(description="The lines answered.")
    cut: bool = Field(description="The answer reached the byte cap; its first line may be partial.")
    text: str


LOGS = {**READ, 400: ErrorOut, 403: ErrorOut, 409: ErrorOut, 503: ErrorOut}
SIGNALS = {**READ, 403: ErrorOut, 413: ErrorOut, 429: ErrorOut}
