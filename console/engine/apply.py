"""Apply a plan and record it: perform the writes, then store the applied layer
(Task.applied_at, Task.apply_error) and the Operation results (contract: accepted -> applied
once every write the cluster needed went through; the last error in the message while it
retries; failed on a permanent 422), and delete a Job row whose deletion finished.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction

from console import kubeconfig
from console.engine.plan import Verb, Write
from console.engine.rows import JobRow, PendingOperation, TaskRow
from console.kube import apply as kube_apply
from console.kube.gateway import (
    BATCH_JOBS,
    STATEFULSETS,
    ApplyError,
    ClusterUnreachable,
    Gateway,
    Resource,
)
from console.kube.observations import WorkloadObs, parse_batch_job, parse_statefulset
from failures import store
from jobs.messages import Kube, Message, Param, encode, waiting_for_upstream
from jobs.models import Job, Operation, Task

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
            # Its kept logs go with it (issue 34), unless TRAINYARD_LOG_KEEP_AFTER_DELETE_DAYS.
            store.forget_job(job.pk, now)
            Job.objects.filter(pk=job.pk, delete_requested_at__isnull=False).delete()
            return written + 1
        return written + _record_tasks(job, outcome, now)
