"""What users do to Jobs: create, stop, resume, clone, delete, and create Workflows.

Requests never talk to Kubernetes: each operation checks the phase rules of `jobs.status.lifecycle`,
records the intent with a conditional UPDATE (`... WHERE phase = <seen> AND stopped = <seen>`) so
concurrent requests, or a request and the poller, cannot race into an illegal state, writes an
Operation row (refused attempts too), and on commit asks Celery to reconcile the Job.

Callers look the Job up with `jobs.access.get_job_for_user(user, pk, write=True)` first.
A refused Operation is written outside the operation's own transaction so that it survives the
OperationRefused raised after it; a caller that wraps the call in its own transaction and rolls
it back discards it too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import IntegrityError, transaction
from django.db.models import F, QuerySet
from django.utils import timezone
from django.utils.translation import gettext

from console import audit, tasks
from console.models import Cluster, Project
from jobs.access import operates_in
from jobs.choices import Action, JobPhase, TaskPhase
from jobs.messages import Message, encode, render_text
from jobs.models import Job, Operation, Task, Workflow, WorkflowEdge
from jobs.records import owner, record_operation, recount_workflow
from jobs.spec import (
    JobSpec,
    SpecInvalid,
    WorkflowSpec,
    merge_overrides,
    parse_job_spec,
    parse_workflow_spec,
    spec_of,
)
from jobs.spec_checks import retired_cluster
from jobs.status.lifecycle import TransitionRefused, phase_after_resume, phase_after_stop
from workers.models import Worker

User = AbstractBaseUser | AnonymousUser
Result = Operation.Result

# A conditional update that matched no row means the Job moved under us: read it again and
# decide again, a few times, before giving up.
_ATTEMPTS = 5


class OperationRefused(Exception):
    """The phase rules (or a missing confirmation) forbid the operation; `message` says why in
    the language of the request, `reason` is what the Operation record stores."""

    def __init__(self, reason: Message) -> None:
        self.reason = reason
        self.message = render_text(encode(reason))
        super().__init__(self.message)


class ConfirmationMismatch(OperationRefused):
    """Delete was asked without typing the Job's name."""


def _refuse(
    user: User,
    job: Job,
    action: Action,
    reason: Message,
    *,
    exists: bool = True,
    error: type[OperationRefused] = OperationRefused,
) -> NoReturn:
    """Records the refusal (no change made) and raises it. Never called inside `atomic()`."""
    record_operation(user, job, action, Result.REFUSED, reason, attached=exists)
    raise error(reason)


def schedule_reconcile(job_id: int) -> None:
    """After commit, so the worker reads what this transaction wrote. Robust: a broker outage
    must not turn an accepted (committed) operation into an error; the next sync reconciles."""
    transaction.on_commit(lambda: tasks.reconcile_job.delay(job_id), robust=True)


def schedule_keep_logs(job_id: int, why: str) -> None:
    """The Job's current containers kept (console.engine.keep_logs), after commit, robustly:
    what the workload reported is recorded whether or not the broker answers."""
    transaction.on_commit(lambda: tasks.keep_logs.delay(job_id, why, []), robust=True)


# --- create and clone ----------------------------------------------------------------------


def _task_rows(job: Job, spec_tasks: list[dict[str, Any]]) -> list[Task]:
    return [
        Task(
            job=job,
            role=template["role"],
            kind=template["kind"],
            template=template,
            node_selector=template["node_selector"],
            desired_replicas=template["replicas"],
        )
        for template in spec_tasks
    ]


def _insert_job(
    user: User, spec: JobSpec, *, cloned_from: Job | None, workflow: Workflow | None
) -> Job:
    """The Job row (Pending) and one Task row per TaskSpec; `spec` is already resolved."""
    assert spec.project is not None and spec.namespace is not None, "resolve the spec first"
    template: dict[str, Any] = {
        "tasks": [task.model_dump(mode="json") for task in spec.tasks],
        "policies": spec.policies.model_dump(mode="json"),
        "template": spec.template,
    }
    cluster = Cluster.objects.get(name=spec.cluster)
    if lock_live_cluster(cluster.pk) is None:
        raise SpecInvalid({"cluster": retired_cluster(cluster.name)})
    job = Job.objects.create(
        project=Project.objects.get(name=spec.project),
        name=spec.name,
        owner=owner(user),
        cluster=cluster,
        namespace=spec.namespace,
        spec=template,
        phase=JobPhase.PENDING,
        cloned_from=cloned_from,
        workflow=workflow,
    )
    Task.objects.bulk_create(_task_rows(job, template["tasks"]))
    return job


def _name_taken(spec: JobSpec, path: str = "name") -> SpecInvalid:
    where = f"{spec.cluster}/{spec.namespace}"
    # The other request may be another project's: say the name is taken, not whose it is.
    message = gettext("The name %(name)s was just taken in %(where)s: choose another.")
    return SpecInvalid({path: message % {"name": repr(spec.name), "where": where}})


def create_job(user: User, spec: JobSpec, *, cloned_from: Job | None = None) -> Job:
    """Spec §Job status: create -> Pending. The spec is checked again against the database here
    (cluster, project, free name): the form may have been validated a while ago."""
    spec = parse_job_spec(spec.model_dump(mode="json"), user)
    action = Action.CLONE if cloned_from else Action.CREATE
    message = (
        Message("operation.cloned", {"name": cloned_from.name, "id": cloned_from.pk})
        if cloned_from
        else Message("operation.created")
    )
    try:
        with transaction.atomic():
            job = _insert_job(user, spec, cloned_from=cloned_from, workflow=None)
            record_operation(user, job, action, Result.ACCEPTED, message)
            schedule_reconcile(job.pk)
    except IntegrityError:
        # Two requests for the same name: the unique constraint lets one win.
        raise _name_taken(spec) from None
    return job


def clone_job(user: User, job: Job, name: str, overrides: Mapping[str, Any] | None = None) -> Job:
    """Spec §Job status: after a failure, fix the configuration and clone it into a new Job.
    Allowed from every phase. `overrides` is deep-merged into the original spec (tasks by role)."""
    data = merge_overrides(spec_of(job), overrides)
    data["name"] = name
    if overrides is None or "project" not in overrides:
        data["project"] = job.project.name
    return create_job(user, parse_job_spec(data, user), cloned_from=job)


# --- after a failure -----------------------------------------------------------------------


def note_failure_seen(user: User, job: Job) -> bool:
    """A member of the project opened a Failed Job's page: someone has looked, so the dashboard
    stops listing it. Only the first look is kept (a conditional UPDATE); a viewer's look does
    not count, as a viewer cannot act on what they saw. True when this call recorded it."""
    if job.phase != JobPhase.FAILED or job.failure_seen_at is not None:
        return False
    if not operates_in(user, job.project_id):
        return False
    unseen = Job.objects.filter(pk=job.pk, phase=JobPhase.FAILED, failure_seen_at__isnull=True)
    return bool(unseen.update(failure_seen_at=timezone.now(), failure_seen_by=owner(user)))


# --- stop and resume -----------------------------------------------------------------------

Rule = Callable[[JobPhase, bool], JobPhase]
Apply = Callable[[Job, JobPhase, bool, JobPhase], Message | None]


def _current(job: Job) -> tuple[JobPhase, bool] | None:
    """The Job's phase and flag as stored now; None once its deletion was requested."""
    row = (
        Job.objects.filter(pk=job.pk, delete_requested_at__isnull=True)
        .values_list("phase", "stopped")
        .first()
    )
    return None if row is None else (JobPhase(row[0]), row[1])


def _transition(user: User, job: Job, action: Action, rule: Rule, apply: Apply) -> Job:
    """Decide from the stored state, then update only if that state still holds (else retry)."""
    for _attempt in range(_ATTEMPTS):
        state = _current(job)
        if state is None:
            exists = Job.objects.filter(pk=job.pk).exists()
            _refuse(user, job, action, Message("refused.being_deleted"), exists=exists)
        try:
            target = rule(*state)
            with transaction.atomic():
                message = apply(job, *state, target)
                if message is not None:
                    recount_workflow(job.pk, timezone.now())
                    job.refresh_from_db()
                    record_operation(user, job, action, Result.ACCEPTED, message)
                    schedule_reconcile(job.pk)
                    return job
        except TransitionRefused as refusal:  # by the rule, or by `apply` (rolled back)
            _refuse(user, job, action, refusal.reason)
    _refuse(user, job, action, Message("refused.kept_changing"))


def _guarded(job: Job, phase: JobPhase, stopped: bool) -> QuerySet[Job]:
    return Job.objects.filter(
        pk=job.pk, phase=phase, stopped=stopped, delete_requested_at__isnull=True
    )


def _apply_stop(job: Job, phase: JobPhase, stopped: bool, target: JobPhase) -> Message | None:
    if not _guarded(job, phase, stopped).update(phase=target, stopped=True):
        return None
    if target == JobPhase.FAILED:
        return Message("operation.stopped_failed")
    return Message("operation.stopped")


def stop_job(user: User, job: Job) -> Job:
    """Spec §Job status: Pending/Running -> Stopped (`spec.stopped`, desired replicas 0); on a
    Failed Job stop releases resources and the Job stays Failed; refused on Succeeded/Stopped."""
    return _transition(user, job, Action.STOP, phase_after_stop, _apply_stop)


def _reset_tasks(job: Job) -> None:
    """Spec §Job status: resume re-creates the Tasks from the original template, `Job.spec`.
    Worker rows of the old run go (they described pods of workloads about to be replaced);
    PodInstance history stays."""
    Worker.objects.filter(task__job=job).delete()
    templates = {template["role"]: template for template in job.spec["tasks"]}
    Task.objects.filter(job=job).exclude(role__in=templates).delete()
    for row in _task_rows(job, list(templates.values())):
        Task.objects.update_or_create(
            job=job,
            role=row.role,
            defaults={
                "kind": row.kind,
                "template": row.template,
                "node_selector": row.node_selector,
                "desired_replicas": row.desired_replicas,
                "ready_replicas": 0,
                "workload_replicas": None,
                "phase": TaskPhase.PENDING,
                "message": "",
                "observed_at": None,
                "applied_at": None,
                "apply_error": "",
            },
        )


def lock_live_cluster(cluster_id: int) -> Cluster | None:
    """The Job's cluster, its row locked until the transaction ends; None when it is retired.
    Retiring locks the row too while it counts live Jobs (console.cluster_actions.retire), so a
    Job made live here is counted there, or refused here. FOR NO KEY UPDATE: a sync's write
    transaction, whose rows reference the cluster (FOR KEY SHARE), does not hold it up."""
    live = Cluster.objects.select_for_update(no_key=True).filter(retired_at__isnull=True)
    return live.filter(pk=cluster_id).first()


def _apply_resume(job: Job, phase: JobPhase, stopped: bool, target: JobPhase) -> Message | None:
    if lock_live_cluster(job.cluster_id) is None:
        cluster = Cluster.objects.values_list("name", flat=True).get(pk=job.cluster_id)
        raise TransitionRefused(Message("refused.cluster_retired", {"cluster": cluster}))
    changed = _guarded(job, phase, stopped).update(
        phase=target, stopped=False, run=F("run") + 1, message="", finished_at=None
    )
    if not changed:
        return None
    _reset_tasks(job)
    run = Job.objects.values_list("run", flat=True).get(pk=job.pk)
    return Message("operation.resumed", {"run": run})


def resume_job(user: User, job: Job) -> Job:
    """Spec §Job status: Stopped -> Pending, Tasks re-created from the original template."""
    return _transition(user, job, Action.RESUME, phase_after_resume, _apply_resume)


# --- delete --------------------------------------------------------------------------------


def delete_job(user: User, job: Job, confirm: str) -> None:
    """Spec §Stop, resume or delete: deletion is separate and irreversible, so it must be
    confirmed with the Job's name. Reconcile removes the cluster objects, then the row; the
    Operation rows stay (their FK is SET_NULL and they keep `job_name`)."""
    if confirm != job.name:
        reason = Message("refused.confirm_name", {"name": repr(job.name)})
        _refuse(user, job, Action.DELETE, reason, error=ConfirmationMismatch)
    with transaction.atomic():
        pending = Job.objects.filter(pk=job.pk, delete_requested_at__isnull=True)
        if pending.update(delete_requested_at=timezone.now()):
            recount_workflow(job.pk, timezone.now())  # its Workflow stops counting it
            message = Message("operation.delete_requested")
            record_operation(user, job, Action.DELETE, Result.ACCEPTED, message)
            schedule_reconcile(job.pk)
            return
    exists = Job.objects.filter(pk=job.pk).exists()
    _refuse(user, job, Action.DELETE, Message("refused.already_deleting"), exists=exists)


# --- workflows -----------------------------------------------------------------------------


def create_workflow(user: User, spec: WorkflowSpec) -> Workflow:
    """Spec §Workflow status: a DAG of child Jobs; a child starts once its upstreams Succeeded.
    The Workflow, its Jobs and its edges are written in one transaction."""
    spec = parse_workflow_spec(spec.model_dump(mode="json"), user)
    try:
        with transaction.atomic():
            workflow = Workflow.objects.create(
                project=Project.objects.get(name=spec.project),
                name=spec.name,
                owner=owner(user),
                policies=spec.policies.model_dump(mode="json"),
            )
            children = {
                child.name: _insert_job(user, child, cloned_from=None, workflow=workflow)
                for child in spec.jobs
            }
            WorkflowEdge.objects.bulk_create(_edges(workflow, spec, children))
            audit.record(
                audit.Action.WORKFLOW_CREATE,
                user=owner(user),
                target=f"workflow {workflow.name} (#{workflow.pk}) in {spec.project}",
                result=audit.Result.ACCEPTED,
                detail=f"{len(children)} jobs",
            )
            for job in children.values():
                created = Message("operation.created_in", {"workflow": workflow.name})
                record_operation(user, job, Action.CREATE, Result.ACCEPTED, created)
                schedule_reconcile(job.pk)
    except IntegrityError:
        message = gettext("A workflow or job with one of these names was just created.")
        raise SpecInvalid({"name": message}) from None
    return workflow


def _edges(workflow: Workflow, spec: WorkflowSpec, children: dict[str, Job]) -> list[WorkflowEdge]:
    pairs = {(upstream, child.name) for child in spec.jobs for upstream in child.depends_on}
    return [
        WorkflowEdge(workflow=workflow, upstream=children[up], downstream=children[down])
        for up, down in sorted(pairs)
    ]
