"""An operator's actions on a node, against the cluster (issue 36): cordon and uncordon, the
live look a drain preview takes, and one pass of a drain.

A drain pass (`advance_drain`) takes the drain's lease by a conditional UPDATE, reads the pods
on the node and the budgets afresh, evicts what is due through the Eviction API (never a
DELETE), records each pod's row, and decides the outcome from the rules of
`jobs.status.drain`. Passes come every `RETRY_SECONDS` (a 429 is retried then) from the task
that re-queues itself; a pass that finds the lease held does nothing, so a duplicate message
never evicts twice, and a worker killed mid-pass leaves a lease that simply runs out.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from console.engine.gateways import gateway_for
from console.kube.gateway import (
    BUDGETS,
    NODES,
    PODS,
    ApplyError,
    ClusterUnreachable,
    Gateway,
    parsed,
)
from console.kube.observations import BudgetObs, PodOnNode, parse_budget, parse_pod_on_node
from console.kubeconfig import KubeconfigRejected
from console.models import Cluster, DrainPod, DrainRun
from jobs.choices import DRAIN_TERMINAL, DrainAction, DrainPodStatus, DrainReason, DrainState
from jobs.status import drain as rules

logger = logging.getLogger(__name__)
RETRY_SECONDS = 5.0  # between passes: a 429 is retried every 5 s (issue 36)
LEASE_SECONDS = 60


class NodeActionFailed(Exception):
    """The cluster refused or could not be reached; the message is safe to show."""


@dataclass(frozen=True)
class NodeLook:
    """The pods on a node and the budgets of the cluster, read now."""

    pods: list[PodOnNode]
    budgets: list[BudgetObs]


def _gateway(cluster: Cluster) -> Gateway:
    try:
        return gateway_for(cluster)
    except KubeconfigRejected as error:
        raise NodeActionFailed(str(error)) from None


def set_unschedulable(cluster: Cluster, node: str, unschedulable: bool) -> bool:
    """A merge patch of `spec.unschedulable` alone (kubectl cordon's patch): nothing else of
    the node changes; uncordon removes the field, as NodeSpec omits a false one. Returns the
    flag as the API server's answer reports it."""
    patch = {"spec": {"unschedulable": True if unschedulable else None}}
    try:
        answer = _gateway(cluster).patch(NODES, "", node, patch)
    except (ApplyError, ClusterUnreachable) as error:
        raise NodeActionFailed(_failure(error)) from None
    return bool((answer.get("spec") or {}).get("unschedulable", False))


def look(cluster: Cluster, node: str) -> NodeLook:
    """Every pod on the node, any namespace (fieldSelector spec.nodeName), and every budget."""
    gateway = _gateway(cluster)
    try:
        pods = gateway.list(PODS, fields=f"spec.nodeName={node}")
        budgets = gateway.list(BUDGETS)
    except ClusterUnreachable as error:
        raise NodeActionFailed(str(error)) from None
    return NodeLook(parsed(pods, parse_pod_on_node), parsed(budgets, parse_budget))


def _failure(error: Exception) -> str:
    text = getattr(error, "message", None) or str(error)
    return text[:300]


# --- a drain, pass by pass ---------------------------------------------------------------------


def _take_lease(drain_id: int, now: datetime) -> bool:
    free = Q(lease_until__isnull=True) | Q(lease_until__lt=now)
    until = now + timedelta(seconds=LEASE_SECONDS)
    running = DrainRun.objects.filter(free, pk=drain_id, state=DrainState.RUNNING)
    return running.update(lease_until=until) == 1


def advance_drain(drain_id: int) -> float | None:
    """One pass; the seconds until the next, or None when the drain is over (or another pass
    holds its lease: that pass schedules its own successor)."""
    now = timezone.now()
    if not _take_lease(drain_id, now):
        return None
    run = DrainRun.objects.select_related("cluster").get(pk=drain_id)
    try:
        state = _pass(run, now)
    finally:
        DrainRun.objects.filter(pk=drain_id).update(lease_until=None, last_pass_at=now)
    return None if state in DRAIN_TERMINAL else RETRY_SECONDS


def _pass(run: DrainRun, now: datetime) -> DrainState:
    timed_out = now >= run.started_at + timedelta(seconds=run.timeout_seconds)
    try:
        seen = look(run.cluster, run.node_name)
    except NodeActionFailed as error:
        if timed_out:
            return _finish(run, DrainState.FAILED, str(error))
        DrainRun.objects.filter(pk=run.pk).update(message=str(error)[:500])
        return DrainState.RUNNING
    plans = rules.plan_node(seen.pods, seen.budgets, run.delete_emptydir_data)
    rows = {row.uid: row for row in run.pods.all()}
    _add_new_pods(run, plans, rows)
    _evict_due(_gateway(run.cluster), {p.pod.uid: p for p in plans}, rows.values())
    remaining = len(rules.must_go(plans))
    pods = [(DrainPodStatus(r.status), _reason(r.reason)) for r in rows.values()]
    state = rules.drain_outcome(pods, remaining, timed_out)
    if state is None:
        return DrainState.RUNNING
    return _finish(run, state, "", rows.values())


def _reason(value: str) -> DrainReason | None:
    return DrainReason(value) if value else None


def _add_new_pods(run: DrainRun, plans: list[rules.PodPlan], rows: dict[str, DrainPod]) -> None:
    """A pod that reached the node after the preview (bound before the cordon landed) must go
    too; a skipped one (a DaemonSet's, put back by its controller) is only recorded."""
    for plan in plans:
        if plan.pod.uid not in rows:
            rows[plan.pod.uid] = DrainPod.objects.create(drain=run, **row_fields(plan))


def row_fields(plan: rules.PodPlan) -> dict[str, object]:
    status = {
        DrainAction.EVICT: DrainPodStatus.PENDING,
        DrainAction.SKIP: DrainPodStatus.SKIPPED,
        DrainAction.BLOCKED: DrainPodStatus.BLOCKED,
    }[DrainAction(plan.action)]
    if plan.reason in rules.RETRIED:
        status = DrainPodStatus.PENDING  # the Eviction API decides, retried every 5 s
    pod = plan.pod
    return {
        "namespace": pod.namespace, "name": pod.name, "uid": pod.uid, "status": status,
        "reason": plan.reason or "", "detail": plan.detail[:500], "job_id": pod.job_id,
        "gpus": pod.gpus,
    }  # fmt: skip


def _evict_due(
    gateway: Gateway, present: dict[str, rules.PodPlan], rows: Iterable[DrainPod]
) -> None:
    for row in rows:
        status, reason = DrainPodStatus(row.status), _reason(row.reason)
        if not rules.waits_for(status, reason):
            continue
        if row.uid not in present:
            _save(row, DrainPodStatus.EVICTED, None, "")
        elif status != DrainPodStatus.EVICTING:
            _evict(gateway, row)
        else:
            _give_up_if_past_grace(row, present[row.uid].pod.grace_seconds)


def _give_up_if_past_grace(row: DrainPod, grace_seconds: int) -> None:
    """An evicted pod still there past its grace period (jobs.status.drain.past_grace) is
    failed, with its grace period named; the drain then ends Failed, never Drained."""
    evicting = (timezone.now() - row.updated_at).total_seconds()
    if rules.past_grace(evicting, grace_seconds):
        detail = (
            f"still present {int(evicting)} s after its eviction (grace period {grace_seconds} s)"
        )
        _save(row, DrainPodStatus.FAILED, DrainReason.GRACE_PERIOD, detail)


def _evict(gateway: Gateway, row: DrainPod) -> None:
    try:
        answer = gateway.evict(row.namespace, row.name, row.uid)
    except ClusterUnreachable as error:
        row.detail = str(error)[:500]
        row.save(update_fields=["detail"])
        return
    verdict = rules.eviction_verdict(answer.status, answer.message, answer.causes)
    row.attempts += 1
    _save(row, verdict.status, verdict.reason, verdict.detail)


def _save(row: DrainPod, status: DrainPodStatus, reason: DrainReason | None, detail: str) -> None:
    row.status, row.reason, row.detail = status, reason or "", detail[:500]
    row.updated_at = timezone.now()
    row.save(update_fields=["status", "reason", "detail", "attempts", "updated_at"])


def _finish(
    run: DrainRun, state: DrainState, message: str, rows: Iterable[DrainPod] = ()
) -> DrainState:
    """Ends the drain, unless it was stopped meanwhile (the stop wins: a conditional UPDATE).
    Pods the drain was still waiting for are marked with why it gave up on them."""
    with transaction.atomic():
        ended = DrainRun.objects.filter(pk=run.pk, state=DrainState.RUNNING).update(
            state=state, finished_at=timezone.now(), message=message[:500]
        )
        if not ended:
            return DrainState(DrainRun.objects.values_list("state", flat=True).get(pk=run.pk))
        for row in rows:
            if row.status in (DrainPodStatus.PENDING, DrainPodStatus.EVICTING):
                _save(row, DrainPodStatus.FAILED, DrainReason.TIMEOUT, row.detail)
    logger.info("drain %s of %s ended %s", run.pk, run.node_name, state)
    return state


def stalled_drains(now: datetime) -> list[int]:
    """Running drains whose chain of passes broke (a worker died between two): no lease held
    and no pass for three intervals. The beat starts their chain again."""
    quiet = now - timedelta(seconds=3 * RETRY_SECONDS)
    free = Q(lease_until__isnull=True) | Q(lease_until__lt=now)
    stalled = DrainRun.objects.filter(free, state=DrainState.RUNNING).filter(
        Q(last_pass_at__lt=quiet) | Q(last_pass_at__isnull=True, started_at__lt=quiet)
    )
    return list(stalled.values_list("pk", flat=True))
