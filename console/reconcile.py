"""Reconcile: make a cluster hold what the Jobs ask for. Level-triggered and idempotent.

`plan` is pure: from a Job's rows and the objects the cluster reported for it, the writes that
are missing. Running it on what it produced gives nothing more to do, so a second reconcile makes
no API write. `apply_job` performs a plan; `record` stores the applied layer (Task.applied_at,
Task.apply_error) and the Operation results (contract: accepted -> applied once every write the
cluster needed went through; the last error in the message while it retries; failed on a
permanent 422), and deletes a Job row whose deletion finished.

Rules (spec §Job status): a stopped Job has every workload scaled to 0, also a Failed one (its
resources are released, it stays Failed) — nothing is ever created for it; a terminal Job is
otherwise left alone (no reconcile after Succeeded/Failed); a resumed Job (new `run`) has the
workloads of older runs deleted and re-created from the original template; drift (a workload
deleted or rescaled behind the console's back) is repaired; a Workflow child whose upstreams have
not Succeeded gets nothing. Only objects labelled managed-by trainyard are ever touched: the
LISTs select by that label, and `create` refuses to adopt anything else.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from console.kube import JOB_LABEL, MANAGED_SELECTOR, kubeconfig
from console.kube import apply as kube_apply
from console.kube.gateway import (
    BATCH_JOBS,
    SERVICES,
    STATEFULSETS,
    ApplyError,
    ClusterUnreachable,
    Gateway,
    PodCache,
    Resource,
    parsed,
)
from console.kube.manifests import Target, headless_service, workload
from console.kube.observations import (
    BatchJobObs,
    ServiceObs,
    StatefulSetObs,
    WorkloadObs,
    parse_batch_job,
    parse_service,
    parse_statefulset,
)
from console.models import Cluster
from jobs.choices import JOB_TERMINAL, TASK_TERMINAL, JobPhase, TaskKind, TaskPhase
from jobs.lifecycle import blocked_by
from jobs.messages import Kube, Message, Param, encode, waiting_for_upstream
from jobs.models import Job, Operation, Task, WorkflowEdge

logger = logging.getLogger(__name__)


# --- the rows reconcile and sync work from -------------------------------------------------


@dataclass
class TaskRow:
    pk: int
    job_id: int
    role: str
    kind: TaskKind
    template: dict[str, Any]
    desired_replicas: int
    ready_replicas: int
    phase: TaskPhase
    message: str
    observed_at: datetime | None
    applied_at: datetime | None
    apply_error: str
    workload_replicas: int | None = None


@dataclass
class JobRow:
    pk: int
    name: str
    namespace: str
    run: int
    stopped: bool
    phase: JobPhase
    message: str
    started_at: datetime | None
    finished_at: datetime | None
    observed_at: datetime | None
    delete_requested_at: datetime | None
    workflow_id: int | None
    created_at: datetime
    tasks: list[TaskRow] = field(default_factory=list)


JOB_FIELDS = (
    "pk", "name", "namespace", "run", "stopped", "phase", "message", "started_at",
    "finished_at", "observed_at", "delete_requested_at", "workflow_id", "created_at",
)  # fmt: skip
TASK_FIELDS = (
    "pk", "job_id", "role", "kind", "template", "desired_replicas", "ready_replicas", "phase",
    "message", "observed_at", "applied_at", "apply_error", "workload_replicas",
)  # fmt: skip


def load_jobs(jobs: Iterable[Any], tasks: Iterable[Any]) -> list[JobRow]:
    """JobRows from two value-lists (one query each, whatever the number of Jobs)."""
    rows = {values[0]: JobRow(*values) for values in jobs}
    for values in tasks:
        task = TaskRow(*values)
        if task.job_id in rows:
            rows[task.job_id].tasks.append(task)
    return list(rows.values())


def jobs_of_cluster(cluster_id: int) -> list[JobRow]:
    jobs = Job.objects.filter(cluster_id=cluster_id).order_by("pk").values_list(*JOB_FIELDS)
    tasks = Task.objects.filter(job__cluster_id=cluster_id).order_by("pk").values_list(*TASK_FIELDS)
    return load_jobs(jobs, tasks)


def target_of(job: JobRow, task: TaskRow) -> Target:
    return Target(
        job_id=job.pk,
        job_name=job.name,
        namespace=job.namespace,
        run=job.run,
        task_id=task.pk,
        role=task.role,
        kind=TaskKind(task.kind),
        replicas=task.desired_replicas,
        template=task.template,
    )


# --- blocked Workflow children ---------------------------------------------------------------


def blocked_upstreams(
    jobs: Sequence[JobRow], edges: Iterable[tuple[int, int]], names: Mapping[int, str],
    phases: Mapping[int, JobPhase],
) -> dict[int, list[str]]:  # fmt: skip
    """Job pk -> names of its upstream Jobs that have not Succeeded (lifecycle.blocked_by)."""
    pairs = [(str(up), str(down)) for up, down in edges]
    by_key = {str(pk): phase for pk, phase in phases.items()}
    blocked: dict[int, list[str]] = {}
    for job in jobs:
        if job.workflow_id is not None:
            waiting = blocked_by(str(job.pk), by_key, pairs)
            if waiting:
                blocked[job.pk] = [names.get(int(pk), pk) for pk in waiting]
    return blocked


def load_blocked(jobs: Sequence[JobRow]) -> dict[int, list[str]]:
    """Two queries: the edges of the Workflows involved and the phases of all their children
    (children may live on other clusters)."""
    workflows = {job.workflow_id for job in jobs if job.workflow_id is not None}
    if not workflows:
        return {}
    edges = WorkflowEdge.objects.filter(workflow_id__in=workflows).values_list(
        "upstream_id", "downstream_id"
    )
    children = Job.objects.filter(workflow_id__in=workflows).values_list("pk", "name", "phase")
    names = {pk: name for pk, name, _ in children}
    phases = {pk: JobPhase(phase) for pk, _, phase in children}
    return blocked_upstreams(jobs, list(edges), names, phases)


# --- plan (pure) -----------------------------------------------------------------------------


class Verb(StrEnum):
    CREATE = "create"
    SCALE = "scale"
    DELETE = "delete"


@dataclass(frozen=True)
class Write:
    verb: Verb
    resource: Resource
    namespace: str
    name: str
    task_id: int | None
    manifest: dict[str, Any] | None = None
    replicas: int = 0
    uid: str = ""


@dataclass(frozen=True)
class JobObjects:
    """The console's objects labelled with one Job's id, as the cluster last reported them."""

    workloads: tuple[WorkloadObs, ...] = ()
    services: tuple[ServiceObs, ...] = ()


def group_by_job(
    workloads: Iterable[WorkloadObs], services: Iterable[ServiceObs]
) -> dict[int, JobObjects]:
    by_job: dict[int, tuple[list[WorkloadObs], list[ServiceObs]]] = defaultdict(lambda: ([], []))
    for item in workloads:
        if item.owner.job_id is not None:
            by_job[item.owner.job_id][0].append(item)
    for service in services:
        if service.owner.job_id is not None:
            by_job[service.owner.job_id][1].append(service)
    return {pk: JobObjects(tuple(w), tuple(s)) for pk, (w, s) in by_job.items()}


def _resource(item: WorkloadObs) -> Resource:
    return STATEFULSETS if isinstance(item, StatefulSetObs) else BATCH_JOBS


def _replicas(item: WorkloadObs) -> int:
    return item.replicas if isinstance(item, StatefulSetObs) else item.parallelism


def _finished(item: WorkloadObs) -> bool:
    return isinstance(item, BatchJobObs) and (item.complete or item.failed_condition)


def _delete(item: WorkloadObs | ServiceObs, resource: Resource) -> Write:
    return Write(Verb.DELETE, resource, item.namespace, item.name, item.owner.task_id, uid=item.uid)


def _scale(item: WorkloadObs, replicas: int) -> Write:
    return Write(
        Verb.SCALE, _resource(item), item.namespace, item.name, item.owner.task_id,
        replicas=replicas,
    )  # fmt: skip


def _create(resource: Resource, manifest: dict[str, Any], task_id: int) -> Write:
    meta = manifest["metadata"]
    return Write(Verb.CREATE, resource, meta["namespace"], meta["name"], task_id, manifest)


def _current(job: JobRow, task: TaskRow, item: WorkloadObs | ServiceObs) -> bool:
    return (
        item.owner.task_id == task.pk
        and item.owner.run == job.run
        and item.name == f"{job.name}-{task.role}"
        and item.namespace == job.namespace
    )


def _plan_task(job: JobRow, task: TaskRow, objects: JobObjects) -> list[Write]:
    """One Task of a Job that should run: replace older runs, create, repair replicas."""
    if task.phase in TASK_TERMINAL:
        return []  # a finished batch Job is never run again (its object may have been removed)
    mine = [w for w in objects.workloads if w.owner.task_id == task.pk]
    current = [w for w in mine if _current(job, task, w) and w.kind == task.kind]
    writes = [_delete(w, _resource(w)) for w in mine if w not in current]
    if not current:
        resource = STATEFULSETS if task.kind == TaskKind.STATEFULSET else BATCH_JOBS
        writes.append(_create(resource, workload(target_of(job, task)), task.pk))
    elif _replicas(current[0]) != task.desired_replicas and not _finished(current[0]):
        writes.append(_scale(current[0], task.desired_replicas))
    services = [s for s in objects.services if s.owner.task_id == task.pk]
    wanted = task.kind == TaskKind.STATEFULSET
    kept = [s for s in services if wanted and _current(job, task, s)]
    writes += [_delete(s, SERVICES) for s in services if s not in kept]
    if wanted and not kept:
        writes.append(_create(SERVICES, headless_service(target_of(job, task)), task.pk))
    return writes


def plan(job: JobRow, objects: JobObjects, blocked: Sequence[str] = ()) -> list[Write]:
    """The writes that make the cluster match `job`; [] when it already does."""
    if job.delete_requested_at is not None:
        return [_delete(w, _resource(w)) for w in objects.workloads] + [
            _delete(s, SERVICES) for s in objects.services
        ]
    if job.stopped:
        return [_scale(w, 0) for w in objects.workloads if _replicas(w) != 0 and not _finished(w)]
    if job.phase in JOB_TERMINAL or blocked:
        return []
    known = {task.pk for task in job.tasks}
    writes = [_delete(w, _resource(w)) for w in objects.workloads if w.owner.task_id not in known]
    writes += [_delete(s, SERVICES) for s in objects.services if s.owner.task_id not in known]
    for task in job.tasks:
        writes += _plan_task(job, task, objects)
    return writes


# --- apply -----------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What happened to one Job's writes. Errors are keyed by task pk (None: the Job's own)."""

    writes: int = 0
    done: set[int | None] = field(default_factory=set)
    errors: dict[int | None, ApplyError] = field(default_factory=dict)
    unreachable: str = ""
    why_unreachable: Message | None = None
    # The workloads as the API server answered the creates and scales: what the cluster holds
    # now, newer than the LIST the plan was made from.
    answered: list[WorkloadObs] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and not self.unreachable

    @property
    def error_message(self) -> str:
        if self.unreachable:
            return self.unreachable
        return next(iter(self.errors.values())).message if self.errors else ""

    def error_record(self, cluster: str) -> Message | None:
        """The error for an Operation's message: the API server's answer is Kubernetes' text;
        an unreachable cluster is named in the console's words."""
        if self.unreachable:
            why = self.why_unreachable or self.unreachable
            return Message("operation.cluster_unreachable", {"cluster": cluster, "detail": why})
        if self.errors:
            detail_text = next(iter(self.errors.values())).message
            return Message("operation.apply_error", {"detail": Kube(detail_text)})
        return None

    @property
    def permanent(self) -> bool:
        return any(error.permanent for error in self.errors.values())


def unreachable_reason(error: ClusterUnreachable | kubeconfig.KubeconfigRejected) -> Message:
    """Why a cluster could not be read or written, as a coded message; the API server's own
    Status message stays its text."""
    if isinstance(error, kubeconfig.KubeconfigRejected):
        return Message("cluster.kubeconfig_rejected", {"detail": str(error)})
    params: dict[str, Param] = dict(error.params)
    if error.code == "status" and error.api_message:
        return Message("cluster.status_detail", {**params, "detail": Kube(error.api_message)})
    return Message(f"cluster.{error.code}", params)


def _perform(gateway: Gateway, write: Write) -> dict[str, Any] | None:
    """The object the API server answered (None for a delete)."""
    if write.verb == Verb.CREATE:
        assert write.manifest is not None
        return kube_apply.create(gateway, write.resource, write.manifest)
    if write.verb == Verb.SCALE:
        return kube_apply.scale(
            gateway, write.resource, write.namespace, write.name, write.replicas
        )
    kube_apply.delete(gateway, write.resource, write.namespace, write.name, write.uid)
    return None


def answered_workload(resource: Resource, body: dict[str, Any] | None) -> WorkloadObs | None:
    """A workload from the API server's answer to a write; None for other resources or an
    answer of an unexpected shape (the write itself went through: the next LIST tells)."""
    if resource not in (STATEFULSETS, BATCH_JOBS) or not body:
        return None
    try:
        if resource == STATEFULSETS:
            return parse_statefulset(body)
        return parse_batch_job(body)
    except (AttributeError, TypeError, ValueError, IndexError, KeyError):
        return None


def apply_job(gateway: Gateway, writes: Sequence[Write]) -> Outcome:
    """Performs the writes in order. A Task's later writes are skipped after one of its writes
    failed (a create after a failed delete would collide); a connection failure stops all."""
    outcome = Outcome()
    for write in writes:
        if write.task_id in outcome.errors:
            continue
        try:
            body = _perform(gateway, write)
        except ApplyError as error:
            outcome.errors[write.task_id] = error
            continue
        except ClusterUnreachable as error:
            outcome.unreachable, outcome.why_unreachable = str(error), unreachable_reason(error)
            break
        outcome.writes += 1
        outcome.done.add(write.task_id)
        if (workload := answered_workload(write.resource, body)) is not None:
            outcome.answered.append(workload)
    return outcome


# --- record ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PendingOperation:
    pk: int
    job_id: int
    message: str


def _task_applied(task: TaskRow, outcome: Outcome, now: datetime) -> tuple[Any, str] | None:
    """The Task's new (applied_at, apply_error), or None when it does not change."""
    error = outcome.errors.get(task.pk) or outcome.errors.get(None)
    if error is not None or outcome.unreachable:
        message = error.message if error is not None else outcome.unreachable
        return None if message == task.apply_error else (task.applied_at, message)
    if task.pk in outcome.done:
        return now, ""
    return (task.applied_at, "") if task.apply_error else None


def _record_tasks(job: JobRow, outcome: Outcome, now: datetime) -> int:
    changed = []
    for task in job.tasks:
        new = _task_applied(task, outcome, now)
        if new is not None:
            task.applied_at, task.apply_error = new
            changed.append(Task(pk=task.pk, applied_at=new[0], apply_error=new[1]))
    if changed:
        Task.objects.bulk_update(changed, ["applied_at", "apply_error"])
    return len(changed)


def _record_operations(
    operations: Sequence[PendingOperation], outcome: Outcome, blocked: Sequence[str],
    now: datetime, cluster: str,
) -> int:  # fmt: skip
    """Accepted -> applied once the cluster took every write; failed on a permanent error;
    otherwise the last error (or what a Workflow child waits for) goes into the message."""
    if not operations:
        return 0
    pks = [operation.pk for operation in operations]
    accepted = Operation.objects.filter(pk__in=pks, result=Operation.Result.ACCEPTED)
    if outcome.ok and not blocked:
        return accepted.update(result=Operation.Result.APPLIED, finished_at=now)
    message = encode(outcome.error_record(cluster) or waiting_for_upstream(blocked))
    if outcome.permanent:
        return accepted.update(result=Operation.Result.FAILED, finished_at=now, message=message)
    stale = [operation.pk for operation in operations if operation.message != message]
    return accepted.filter(pk__in=stale).update(message=message) if stale else 0


def record(
    job: JobRow, outcome: Outcome, operations: Sequence[PendingOperation],
    blocked: Sequence[str], now: datetime, cluster: str,
) -> int:  # fmt: skip
    """Stores the applied layer; deletes the Job row once its deletion went through.
    Returns the number of rows written."""
    with transaction.atomic():
        written = _record_operations(operations, outcome, blocked, now, cluster)
        if job.delete_requested_at is not None and outcome.ok:
            Job.objects.filter(pk=job.pk, delete_requested_at__isnull=False).delete()
            return written + 1
        return written + _record_tasks(job, outcome, now)


def pending_operations(jobs: Q) -> dict[int, list[PendingOperation]]:
    """The accepted Operations of the Jobs matching `jobs` (a Q on the Job), by Job; one query."""
    by_job: dict[int, list[PendingOperation]] = defaultdict(list)
    rows = Operation.objects.filter(result=Operation.Result.ACCEPTED, job__isnull=False).filter(
        jobs
    )
    for pk, job_id, message in rows.values_list("pk", "job_id", "message"):
        by_job[job_id].append(PendingOperation(pk, job_id, message))
    return by_job


# --- one Job, on demand ----------------------------------------------------------------------


_pod_caches: dict[tuple[int, str], PodCache] = {}


def gateway_for(cluster: Cluster) -> Gateway:
    """Raises KubeconfigRejected when the stored kubeconfig is unusable. Gateways of one cluster
    share a PodCache across cycles (the lease keeps two cycles of a cluster apart) while its
    kubeconfig stays the same: another kubeconfig may name another API server."""
    client = kubeconfig.api_client(cluster.pk, cluster.kubeconfig, cluster.context)
    key = (cluster.pk, kubeconfig.fingerprint(cluster.kubeconfig, cluster.context))
    if key not in _pod_caches:
        for stale in [k for k in _pod_caches if k[0] == cluster.pk]:
            del _pod_caches[stale]
    cache = _pod_caches.setdefault(key, PodCache())
    return Gateway(client, kubeconfig.timeouts(), cache)


def observe_job(gateway: Gateway, job: JobRow) -> JobObjects:
    """The Job's objects only: three LISTs in its namespace, selected by its label."""
    selector = f"{MANAGED_SELECTOR},{JOB_LABEL}={job.pk}"
    items = [gateway.list(kind, selector, job.namespace) for kind in (STATEFULSETS, BATCH_JOBS)]
    workloads: list[WorkloadObs] = [
        *parsed(items[0], parse_statefulset),
        *parsed(items[1], parse_batch_job),
    ]
    services = parsed(gateway.list(SERVICES, selector, job.namespace), parse_service)
    return JobObjects(tuple(workloads), tuple(services))


def reconcile_job(job_id: int) -> None:
    """What an operation triggers (console.tasks.reconcile_job): apply one Job now rather than
    at the next sync. It takes no cluster lease: every write is idempotent, deletes carry the
    observed UID, and a create that meets the same object counts as done."""
    job_and_cluster = Job.objects.filter(pk=job_id).values_list("cluster_id", flat=True).first()
    if job_and_cluster is None:
        return
    cluster = Cluster.objects.get(pk=job_and_cluster)
    jobs = load_jobs(
        Job.objects.filter(pk=job_id).values_list(*JOB_FIELDS),
        Task.objects.filter(job_id=job_id).order_by("pk").values_list(*TASK_FIELDS),
    )
    if not jobs:
        return
    job, now = jobs[0], timezone.now()
    blocked = load_blocked(jobs).get(job.pk, [])
    try:
        gateway = gateway_for(cluster)
        outcome = apply_job(gateway, plan(job, observe_job(gateway, job), blocked))
    except (ClusterUnreachable, kubeconfig.KubeconfigRejected) as error:
        outcome = Outcome(unreachable=str(error), why_unreachable=unreachable_reason(error))
    operations = pending_operations(Q(job_id=job.pk)).get(job.pk, [])
    record(job, outcome, operations, blocked, now, cluster.name)
    logger.info("reconciled job %s: %s writes, %s", job.pk, outcome.writes, outcome.error_message)
