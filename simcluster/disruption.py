"""Voluntary disruption: the `pods/eviction` subresource and the PodDisruptionBudgets it honours.

As `pkg/registry/core/pod/storage/eviction.go` does it: a pod that is Pending, finished or
already being deleted is deleted without looking at budgets; otherwise the one budget whose
selector matches it must allow a disruption (429 TooManyRequests if not, while its status is
not yet observed too), two or more budgets are a 500, and an evicted pod gets a
`DisruptionTarget` condition and an ordinary graceful delete (its grace period, unless the
Eviction's deleteOptions name another).
"""

from __future__ import annotations

from typing import Any

from simcluster import errors
from simcluster.context import Context
from simcluster.deletion import DeleteOptions, check_preconditions, delete_object
from simcluster.objects import condition
from simcluster.selectors import matches, selector_from_label_selector
from simcluster.store import Key

Obj = dict[str, Any]
BUDGET_VIOLATED = "Cannot evict pod as it would violate the pod's disruption budget."
SEVERAL_BUDGETS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)
EVICTION_VERSIONS = ("policy/v1", "policy/v1beta1")


def budget_selects(budget: Obj, labels: dict[str, str]) -> bool:
    """policy/v1: an empty selector selects every pod of the namespace, a missing one none."""
    selector = (budget.get("spec") or {}).get("selector")
    if selector is None:
        return False
    return matches(selector_from_label_selector(selector), labels)


def budgets_of(ctx: Context, pod: Obj) -> list[Obj]:
    meta = pod["metadata"]
    labels = meta.get("labels") or {}
    return [
        budget
        for budget in ctx.store.objects("poddisruptionbudgets", meta["namespace"])
        if budget_selects(budget, labels)
    ]


def pod_ready(pod: Obj) -> bool:
    ready = condition((pod.get("status") or {}).get("conditions") or [], "Ready")
    return ready is not None and ready.get("status") == "True"


def _ignores_budgets(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or "deletionTimestamp" in pod["metadata"]


def _too_many_requests(cause: str, retry_after: int = 0) -> errors.ApiError:
    details: Obj = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    headers = {}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return errors.ApiError(429, "TooManyRequests", BUDGET_VIOLATED, details, headers=headers)


def _check_eviction(key: Key, eviction: Obj) -> DeleteOptions:
    if eviction.get("apiVersion") not in (None, *EVICTION_VERSIONS) or eviction.get("kind") not in (
        None,
        "Eviction",
    ):
        raise errors.bad_request(f"not a Eviction object: {eviction.get('kind')}")
    if (eviction.get("metadata") or {}).get("name") != key[1]:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    options = eviction.get("deleteOptions") or {}
    preconditions = options.get("preconditions") or {}
    return DeleteOptions(
        grace_seconds=options.get("gracePeriodSeconds"),
        uid=preconditions.get("uid"),
        resource_version=preconditions.get("resourceVersion"),
    )


def evict(ctx: Context, key: Key, eviction: Obj, dry_run: bool = False) -> tuple[int, Obj]:
    """The answer to `POST .../pods/NAME/eviction`: 201 and a Success Status when the pod is
    being deleted; a raised ApiError (404, 409, 429) otherwise; 500 for several budgets."""
    options = _check_eviction(key, eviction)
    pod = ctx.store.get("pods", key)
    if pod is None:
        raise errors.not_found("pods", "", key[1])
    if not _ignores_budgets(pod):
        budgets = budgets_of(ctx, pod)
        if len(budgets) > 1:
            return 500, _status("Failure", 500, SEVERAL_BUDGETS)
        if budgets and _guarded(pod, budgets[0]):
            _take_disruption(ctx, budgets[0], key[1], dry_run)
    if not dry_run:
        _delete(ctx, pod, options)
    return 201, _status("Success", 201)


def _guarded(pod: Obj, budget: Obj) -> bool:
    """An unready pod is let go without spending the budget when the policy says AlwaysAllow,
    or (the default IfHealthyBudget) while the application has the health it needs."""
    if pod_ready(pod):
        return True
    spec, status = budget.get("spec") or {}, budget.get("status") or {}
    if spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
        return False
    desired = status.get("desiredHealthy", 0)
    return not (status.get("currentHealthy", 0) >= desired > 0)


def _take_disruption(ctx: Context, budget: Obj, pod_name: str, dry_run: bool) -> None:
    meta, status = budget["metadata"], dict(budget.get("status") or {})
    name = meta["name"]
    if status.get("observedGeneration", 0) < meta.get("generation", 1):
        raise _too_many_requests(
            f"The disruption budget {name} is still being processed by the server.", 10
        )
    allowed = status.get("disruptionsAllowed", 0)
    if allowed <= 0:
        raise _too_many_requests(
            f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy "
            f"pods and has {status.get('currentHealthy', 0)} currently"
        )
    if dry_run:
        return
    status["disruptionsAllowed"] = allowed - 1
    status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod_name: ctx.stamp()}
    budget["status"] = status
    ctx.store.update("poddisruptionbudgets", budget)


def _delete(ctx: Context, pod: Obj, options: DeleteOptions) -> None:
    """The DisruptionTarget condition first (its own write, as the registry does), then the
    graceful delete with the Eviction's options."""
    meta = pod["metadata"]
    key = (meta["namespace"], meta["name"])
    check_preconditions("pods", pod, options)
    status = pod.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
    conditions.append(
        {
            "type": "DisruptionTarget",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": ctx.stamp(),
            "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting",
        }
    )
    status["conditions"] = conditions
    ctx.store.update("pods", pod)
    delete_object(ctx, "pods", key, DeleteOptions(grace_seconds=options.grace_seconds))


def _status(outcome: str, code: int, message: str = "") -> Obj:
    body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": outcome}
    if message:
        body["message"] = message
    body["code"] = code
    return body
