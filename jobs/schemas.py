"""The JSON API's response documents (OpenAPI schemas), field names as the API promises them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Field, Schema

from console.models import Addon, Node
from jobs.choices import Action, JobPhase, PodPhase, TaskKind, TaskPhase, WorkflowPhase
from jobs.lifecycle import allowed_actions
from jobs.messages import api_code, api_params, render_text
from jobs.models import Job, Operation, Workflow


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
        description="Worded in the request's language (Accept-Language; English by default)."
    )
    message_code: str | None = Field(
        None, description="Stable code of a message the console wrote; null for plain text."
    )
    message_params: dict[str, Any] = Field(
        default_factory=dict,
        description="Parameters of the code: values, nested {code, params}, {kubernetes: text}.",
    )

    @staticmethod
    def resolve_message(obj: Any) -> str:
        return render_text(obj.message)

    @staticmethod
    def resolve_message_code(obj: Any) -> str | None:
        return api_code(obj.message)

    @staticmethod
    def resolve_message_params(obj: Any) -> dict[str, Any]:
        return api_params(obj.message)


class ClusterOut(Worded):
    name: str
    reachable: bool
    last_synced_at: datetime | None


class WorkerOut(Schema):
    pod_name: str
    node: str = Field(alias="node_name")
    ip: str
    phase: PodPhase
    ready: bool
    restart_count: int
    reason: str
    last_reported_at: datetime


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
    tasks: list[TaskOut]

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


class WorkflowOut(Worded):
    id: int
    name: str
    project: str = Field(alias="project.name")
    phase: WorkflowPhase
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


READ = {401: ErrorOut, 404: ErrorOut, 422: InvalidOut}
WRITE = {**READ, 403: ErrorOut, 409: ErrorOut, 413: ErrorOut}
