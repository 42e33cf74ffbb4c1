"""Node drain rules (issue 36), pure: pods and budgets in, a plan and an outcome out.

The plan follows kubectl drain's filters (k8s.io/kubectl/pkg/drain/filters.go), read and
restated: a mirror pod is skipped (its kubelet would post it again), a DaemonSet's pod is
skipped (its controller tolerates the cordon and would put it back), a finished pod is simply
removed, a pod with emptyDir data is blocked unless the operator consents to lose that data,
a pod that declares no controller is blocked (nothing would re-create it). Beyond kubectl, the
preview names what the Eviction API will answer: a pod selected by a budget that allows no
disruption, or by several budgets (a 500), is blocked for now. Spec §Node and Addon status: a
drain changes schedulability and pods, never a Node's Online/Offline phase.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from console.kube.observations import BudgetObs, LabelRequirement, PodOnNode
from jobs.choices import DrainAction, DrainPodStatus, DrainReason, DrainState

# Blocked pods the drain keeps trying (a budget's allowance comes back as pods become ready).
RETRIED = frozenset({DrainReason.BUDGET, DrainReason.SEVERAL_BUDGETS})
# After a pod's grace period its kubelet kills it and the API server removes it: a few seconds.
GRACE_SLACK_SECONDS = 10
EVICTED_STATUSES = frozenset({200, 201})
GONE_STATUSES = frozenset({404, 409})  # no such pod, or the UID precondition: another pod


@dataclass(frozen=True)
class PodPlan:
    pod: PodOnNode
    action: DrainAction
    reason: DrainReason | None = None
    detail: str = ""  # the budget(s) named, for a reader


@dataclass(frozen=True)
class EvictionVerdict:
    status: DrainPodStatus
    reason: DrainReason | None
    detail: str


def _requirement_holds(requirement: LabelRequirement, labels: Mapping[str, str]) -> bool:
    present = requirement.key in labels
    match requirement.operator:
        case "In":
            return present and labels[requirement.key] in requirement.values
        case "NotIn":
            return not present or labels[requirement.key] not in requirement.values
        case "Exists":
            return present
        case "DoesNotExist":
            return not present
    return False  # an operator we do not know selects nothing, as an invalid selector


def selects(budget: BudgetObs, pod: PodOnNode) -> bool:
    """policy/v1: a missing selector selects no pod, an empty one every pod of its namespace."""
    if budget.namespace != pod.namespace or budget.selector is None:
        return False
    return all(_requirement_holds(r, pod.labels) for r in budget.selector)


def budgets_of(pod: PodOnNode, budgets: Iterable[BudgetObs]) -> list[BudgetObs]:
    return [budget for budget in budgets if selects(budget, pod)]


def budget_words(budget: BudgetObs) -> str:
    """As the Eviction API's cause says it: "api-pdb needs 2 healthy pods and has 2"."""
    return (
        f"{budget.namespace}/{budget.name} needs {budget.desired_healthy} healthy pods and "
        f"has {budget.current_healthy}"
    )


def plan_pod(pod: PodOnNode, budgets: Sequence[BudgetObs], delete_emptydir_data: bool) -> PodPlan:
    if pod.mirror:
        return PodPlan(pod, DrainAction.SKIP, DrainReason.MIRROR)
    if pod.phase in ("Succeeded", "Failed"):
        return PodPlan(pod, DrainAction.EVICT)
    if pod.controller_kind == "DaemonSet":
        return PodPlan(pod, DrainAction.SKIP, DrainReason.DAEMONSET)
    if pod.empty_dirs and not delete_emptydir_data:
        return PodPlan(pod, DrainAction.BLOCKED, DrainReason.EMPTY_DIR, ", ".join(pod.empty_dirs))
    if not pod.controller_kind:
        return PodPlan(pod, DrainAction.BLOCKED, DrainReason.NO_CONTROLLER)
    return _budget_plan(pod, budgets_of(pod, budgets))


def _budget_plan(pod: PodOnNode, budgets: Sequence[BudgetObs]) -> PodPlan:
    """What the Eviction API would answer now (eviction.go): a Pending or deleting pod passes,
    several budgets never pass, one passes while it allows a disruption."""
    if pod.phase == "Pending" or pod.deleting or not budgets:
        return PodPlan(pod, DrainAction.EVICT)
    if len(budgets) > 1:
        names = ", ".join(f"{b.namespace}/{b.name}" for b in budgets)
        return PodPlan(pod, DrainAction.BLOCKED, DrainReason.SEVERAL_BUDGETS, names)
    budget = budgets[0]
    if budget.disruptions_allowed > 0 or not pod.ready:
        return PodPlan(pod, DrainAction.EVICT)
    return PodPlan(pod, DrainAction.BLOCKED, DrainReason.BUDGET, budget_words(budget))


def plan_node(
    pods: Iterable[PodOnNode], budgets: Sequence[BudgetObs], delete_emptydir_data: bool
) -> list[PodPlan]:
    ordered = sorted(pods, key=lambda pod: (pod.namespace, pod.name))
    return [plan_pod(pod, budgets, delete_emptydir_data) for pod in ordered]


def refused_by_filters(plans: Iterable[PodPlan]) -> list[PodPlan]:
    """The blocked pods no retry can help (emptyDir, no controller): kubectl refuses the whole
    drain for them; so does the console unless the operator chose to skip them."""
    return [p for p in plans if p.action == DrainAction.BLOCKED and p.reason not in RETRIED]


def must_go(plans: Iterable[PodPlan]) -> list[PodPlan]:
    """The pods a drained node may not hold any more: every pod not skipped."""
    return [plan for plan in plans if plan.action != DrainAction.SKIP]


def eviction_verdict(status: int, message: str, causes: Sequence[str]) -> EvictionVerdict:
    """The Eviction API's answer as a pod's status: 201 it is going; 429 a budget forbids it
    for now (the cause names the budget); 500 several budgets; 404/409 it is gone already."""
    detail = causes[0] if causes else message
    if status in EVICTED_STATUSES:
        return EvictionVerdict(DrainPodStatus.EVICTING, None, "")
    if status in GONE_STATUSES:
        return EvictionVerdict(DrainPodStatus.EVICTED, None, "")
    if status == 429:
        return EvictionVerdict(DrainPodStatus.BLOCKED, DrainReason.BUDGET, detail)
    if status == 500:
        return EvictionVerdict(DrainPodStatus.BLOCKED, DrainReason.SEVERAL_BUDGETS, detail)
    return EvictionVerdict(
        DrainPodStatus.FAILED, DrainReason.EVICTION_ERROR, f"HTTP {status}: {detail}"
    )


def past_grace(evicting_seconds: float, grace_seconds: int) -> bool:
    """An evicted pod is waited for within its grace period (and the slack of its removal);
    one still there after that will not go by itself (a finalizer, or a node that stopped
    answering, holds it): the drain gives up on it, and the pod's status is failed."""
    return evicting_seconds > grace_seconds + GRACE_SLACK_SECONDS


def waits_for(status: DrainPodStatus, reason: DrainReason | None) -> bool:
    """A pod the drain is still working on: not yet evicted, gone, or given up."""
    if status in (DrainPodStatus.PENDING, DrainPodStatus.EVICTING):
        return True
    return status == DrainPodStatus.BLOCKED and reason in RETRIED


def drain_outcome(
    pods: Sequence[tuple[DrainPodStatus, DrainReason | None]], remaining: int, timed_out: bool
) -> DrainState | None:
    """None while the drain goes on. `remaining` is how many pods that must go the node held
    at the last look: Drained only when it is 0 and every pod's eviction is done.

        running --all evicted and none left--> drained
        running --only blocked pods left (budget at the deadline, or filters)--> partly drained
        running --deadline with a pod still terminating, an eviction refused, or a pod not
                gone within its grace period--> failed
    """
    working = any(waits_for(status, reason) for status, reason in pods)
    if working and not timed_out:
        return None
    statuses = {status for status, _ in pods}
    if DrainPodStatus.FAILED in statuses or DrainPodStatus.EVICTING in statuses:
        return DrainState.FAILED
    if DrainPodStatus.PENDING in statuses:
        return DrainState.FAILED
    if DrainPodStatus.BLOCKED in statuses:
        return DrainState.PARTLY_DRAINED
    if remaining:
        return None if not timed_out else DrainState.FAILED
    return DrainState.DRAINED
