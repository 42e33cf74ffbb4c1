"""An operator's actions on a node (issue 36): cordon and uncordon with a reason, a drain's
preview, starting and stopping a drain. The pages and the API call these; they are their one
way to the engine for node actions (`console.engine.nodes`, as `jobs.pod_logs` is for logs).

Every action is the operators' alone (PermissionDenied for anyone else, before anything is
read) and audited, refused or failed ones too. Cordoning changes `spec.unschedulable` and
never a Node's Online/Offline phase (spec §Node and Addon status).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext as _

from console import audit
from console.engine import nodes as engine
from console.models import AuditEvent, Cluster, DrainPod, DrainRun, Node, NodeCordon
from jobs.access import User, is_operator
from jobs.choices import DrainAction, DrainState
from jobs.models import Job
from jobs.status import drain as rules

REASON_MAX = 500
DEFAULT_TIMEOUT_SECONDS = 15 * 60
MAX_TIMEOUT_SECONDS = 24 * 3600
Action = AuditEvent.Action


class ActionRefused(Exception):
    """An action that cannot be done as asked: `status` is the HTTP answer (404, 409, 422,
    502), `message` a sentence for the reader."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.message, self.extra = status, message, extra


@dataclass(frozen=True)
class JobAtRisk:
    """A Trainyard Job with a Worker on the node: an RL run dies if one Ray worker goes."""

    job_id: int
    name: str
    owner: str
    project: str
    pods: tuple[str, ...]
    gpus_on_node: int
    gpus: int


@dataclass(frozen=True)
class DrainPreview:
    node: str
    plans: list[rules.PodPlan]
    jobs: list[JobAtRisk]

    @property
    def refused(self) -> list[rules.PodPlan]:
        return rules.refused_by_filters(self.plans)


def check_operator(user: User) -> None:
    if not is_operator(user):
        raise PermissionDenied(_("Only operators may act on clusters, nodes and add-ons."))


def node_of(cluster: Cluster, name: str) -> Node:
    node = Node.objects.filter(cluster=cluster, name=name).first()
    if node is None:
        raise ActionRefused(404, _("No node %(node)s has been observed in cluster %(cluster)s.")
                            % {"node": name, "cluster": cluster.name})  # fmt: skip
    return node


def _audit(
    request: HttpRequest | None, user: User, action: AuditEvent.Action, target: str,
    result: AuditEvent.Result = AuditEvent.Result.SUCCEEDED, detail: str = "",
) -> None:  # fmt: skip
    audit.record(action, user=user, request=request, target=target, result=result, detail=detail)


def _set_flag(node: Node, unschedulable: bool) -> None:
    """The PATCH's answer is the cluster's own report of the flag: stored as an observation,
    the phase left as it was."""
    reported = engine.set_unschedulable(node.cluster, node.name, unschedulable)
    Node.objects.filter(pk=node.pk).update(unschedulable=reported, observed_at=timezone.now())


def cordon(
    user: User, cluster: Cluster, name: str, reason: str, request: HttpRequest | None = None
) -> NodeCordon:
    check_operator(user)
    node, target = node_of(cluster, name), f"{cluster.name}/{name}"
    reason = " ".join(reason.split())
    if not reason or len(reason) > REASON_MAX:
        _audit(request, user, Action.NODE_CORDON, target, AuditEvent.Result.REFUSED, "no reason")
        raise ActionRefused(422, _("Say why the node is cordoned (at most 500 characters)."),
                            errors={"reason": _("A reason is required.")})  # fmt: skip
    try:
        _set_flag(node, True)
    except engine.NodeActionFailed as error:
        _audit(request, user, Action.NODE_CORDON, target, AuditEvent.Result.FAILED, str(error))
        raise ActionRefused(502, _("The cluster refused the cordon: %s") % error) from None
    record, _created = NodeCordon.objects.update_or_create(
        cluster=cluster, node_name=name,
        defaults={"reason": reason, "by_id": user.pk, "by_name": user.get_username(),
                  "at": timezone.now()},
    )  # fmt: skip
    _audit(request, user, Action.NODE_CORDON, target, detail=reason)
    return record


def uncordon(user: User, cluster: Cluster, name: str, request: HttpRequest | None = None) -> None:
    check_operator(user)
    node, target = node_of(cluster, name), f"{cluster.name}/{name}"
    if DrainRun.objects.filter(cluster=cluster, node_name=name, state=DrainState.RUNNING).exists():
        _audit(request, user, Action.NODE_UNCORDON, target, AuditEvent.Result.REFUSED, "draining")
        raise ActionRefused(409, _("A drain of this node is running: stop it first."))
    try:
        _set_flag(node, False)
    except engine.NodeActionFailed as error:
        _audit(request, user, Action.NODE_UNCORDON, target, AuditEvent.Result.FAILED, str(error))
        raise ActionRefused(502, _("The cluster refused the uncordon: %s") % error) from None
    NodeCordon.objects.filter(cluster=cluster, node_name=name).delete()
    _audit(request, user, Action.NODE_UNCORDON, target)


# --- drains ----------------------------------------------------------------------------------


def _look(node: Node) -> engine.NodeLook:
    try:
        return engine.look(node.cluster, node.name)
    except engine.NodeActionFailed as error:
        raise ActionRefused(502, _("The cluster could not be read: %s") % error) from None


def preview(
    user: User, cluster: Cluster, name: str, delete_emptydir_data: bool = False
) -> DrainPreview:
    """What a drain would do now: read live, never stored."""
    check_operator(user)
    node = node_of(cluster, name)
    seen = _look(node)
    plans = rules.plan_node(seen.pods, seen.budgets, delete_emptydir_data)
    return DrainPreview(name, plans, jobs_at_risk(cluster, plans))


def jobs_at_risk(cluster: Cluster, plans: list[rules.PodPlan]) -> list[JobAtRisk]:
    """The Jobs (by the console's label) whose pods the drain would take, with their owner and
    GPUs: those on this node, and all the Job asks for."""
    by_job: dict[int, list[Any]] = defaultdict(list)
    for plan in rules.must_go(plans):
        if plan.pod.job_id is not None:
            by_job[plan.pod.job_id].append(plan.pod)
    jobs = Job.objects.filter(cluster=cluster, pk__in=by_job).select_related("owner", "project")
    return [
        JobAtRisk(
            job_id=job.pk,
            name=job.name,
            owner=job.owner.get_username() if job.owner else "",
            project=job.project.name,
            pods=tuple(sorted(p.name for p in by_job[job.pk])),
            gpus_on_node=sum(p.gpus for p in by_job[job.pk]),
            gpus=job_gpus(job),
        )
        for job in jobs.prefetch_related("tasks").order_by("name")
    ]


def job_gpus(job: Job) -> int:
    """Every GPU the Job's Tasks ask for: per replica, times the replicas."""
    total = 0
    for task in job.tasks.all():
        resources = (task.template or {}).get("resources") or {}
        gpu = resources.get("gpu", 0)
        total += (gpu if isinstance(gpu, int) else 0) * task.desired_replicas
    return total


def start_drain(
    user: User, cluster: Cluster, name: str, *, timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS,
    delete_emptydir_data: bool = False, skip_blocked: bool = False,
    request: HttpRequest | None = None,
) -> DrainRun:  # fmt: skip
    """Cordons, records a row per pod, and hands the evictions to the drain's task. Refused
    (409) while another drain of the node runs, or while a pod is blocked by a rule no retry
    changes (emptyDir without consent, no controller) unless the operator skips those."""
    check_operator(user)
    node, target = node_of(cluster, name), f"{cluster.name}/{name}"
    if not 1 <= timeout_seconds <= MAX_TIMEOUT_SECONDS:
        raise ActionRefused(422, _("The timeout must be between 1 second and 24 hours."),
                            errors={"timeout_seconds": _("Out of range.")})  # fmt: skip
    if DrainRun.objects.filter(cluster=cluster, node_name=name, state=DrainState.RUNNING).exists():
        _audit(request, user, Action.NODE_DRAIN, target, AuditEvent.Result.REFUSED, "running")
        raise ActionRefused(409, _("A drain of this node is already running."))
    seen = _look(node)
    plans = rules.plan_node(seen.pods, seen.budgets, delete_emptydir_data)
    refused = rules.refused_by_filters(plans)
    if refused and not skip_blocked:
        names = ", ".join(f"{p.pod.namespace}/{p.pod.name}" for p in refused)
        _audit(request, user, Action.NODE_DRAIN, target, AuditEvent.Result.REFUSED, names)
        raise ActionRefused(409, _("Pods block the drain: %s. Consent to lose emptyDir data, "
                                   "or skip the blocked pods.") % names,
                            pods=[_plan_json(p) for p in refused])  # fmt: skip
    try:
        _set_flag(node, True)
    except engine.NodeActionFailed as error:
        _audit(request, user, Action.NODE_DRAIN, target, AuditEvent.Result.FAILED, str(error))
        raise ActionRefused(502, _("The cluster refused the cordon: %s") % error) from None
    run = _record_drain(user, node, plans, timeout_seconds, delete_emptydir_data, skip_blocked)
    _audit(request, user, Action.NODE_DRAIN, target, AuditEvent.Result.ACCEPTED, f"drain {run.pk}")
    return run


def _record_drain(
    user: User, node: Node, plans: list[rules.PodPlan], timeout_seconds: int,
    delete_emptydir_data: bool, skip_blocked: bool,
) -> DrainRun:  # fmt: skip
    from console import tasks

    with transaction.atomic():
        run = DrainRun.objects.create(
            cluster=node.cluster, node_name=node.name, requested_by_id=user.pk,
            requested_by_name=user.get_username(), timeout_seconds=timeout_seconds,
            delete_emptydir_data=delete_emptydir_data, skip_blocked=skip_blocked,
        )  # fmt: skip
        DrainPod.objects.bulk_create(DrainPod(drain=run, **engine.row_fields(p)) for p in plans)
        NodeCordon.objects.get_or_create(
            cluster=node.cluster, node_name=node.name,
            defaults={"reason": _("Drain %(id)s") % {"id": run.pk}, "by_id": user.pk,
                      "by_name": user.get_username()},
        )  # fmt: skip
        transaction.on_commit(lambda: tasks.drain_node.delay(run.pk), robust=True)
    return run


def stop_drain(user: User, run: DrainRun, request: HttpRequest | None = None) -> DrainRun:
    """The drain stops evicting; the node stays cordoned (uncordon is a separate choice)."""
    check_operator(user)
    target = f"{run.cluster.name}/{run.node_name}"
    stopped = DrainRun.objects.filter(pk=run.pk, state=DrainState.RUNNING).update(
        state=DrainState.STOPPED, finished_at=timezone.now(),
        message=_("Stopped by %(user)s; the node stays cordoned.") % {"user": user.get_username()},
    )  # fmt: skip
    if not stopped:
        _audit(request, user, Action.NODE_DRAIN_STOP, target, AuditEvent.Result.REFUSED,
               f"drain {run.pk} is {run.state}")  # fmt: skip
        raise ActionRefused(409, _("This drain is not running any more."))
    _audit(request, user, Action.NODE_DRAIN_STOP, target, detail=f"drain {run.pk}")
    run.refresh_from_db()
    return run


def _plan_json(plan: rules.PodPlan) -> dict[str, Any]:
    return {
        "namespace": plan.pod.namespace, "name": plan.pod.name,
        "action": DrainAction(plan.action).value,
        "reason": plan.reason.value if plan.reason else "", "detail": plan.detail,
    }  # fmt: skip


def preview_json(found: DrainPreview) -> dict[str, Any]:
    return {
        "node": found.node,
        "pods": [_plan_json(plan) for plan in found.plans],
        "jobs": [job.__dict__ | {"pods": list(job.pods)} for job in found.jobs],
    }


def drain_json(run: DrainRun) -> dict[str, Any]:
    pods = [
        {"namespace": row.namespace, "name": row.name, "status": row.status,
         "reason": row.reason, "detail": row.detail, "attempts": row.attempts,
         "updated_at": row.updated_at.isoformat()}
        for row in run.pods.all()
    ]  # fmt: skip
    return {
        "id": run.pk, "cluster": run.cluster.name, "node": run.node_name, "state": run.state,
        "message": run.message, "requested_by": run.requested_by_name,
        "timeout_seconds": run.timeout_seconds, "started_at": run.started_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None, "pods": pods,
    }  # fmt: skip
