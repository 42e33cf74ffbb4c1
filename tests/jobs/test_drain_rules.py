"""The drain rules of jobs/status/drain.py, pure: kubectl drain's filters, the Eviction API's
answers as pod statuses, and the outcome that never says drained while a pod remains
(issue 36, Build 2)."""

from __future__ import annotations

from typing import Any

import pytest

from console.kube.observations import BudgetObs, LabelRequirement, PodOnNode, parse_pod_on_node
from jobs.choices import DrainAction, DrainPodStatus, DrainReason, DrainState
from jobs.status.drain import (
    GRACE_SLACK_SECONDS,
    drain_outcome,
    eviction_verdict,
    past_grace,
    plan_pod,
    refused_by_filters,
)


def pod(**fields: Any) -> PodOnNode:
    values: dict[str, Any] = {
        "namespace": "default", "name": "api-1", "uid": "u1", "labels": {"app": "api"},
        "controller_kind": "ReplicaSet", "controller_name": "api-7d9", "mirror": False,
        "phase": "Running", "ready": True, "deleting": False, "empty_dirs": (),
        "grace_seconds": 30, "gpus": 0, "job_id": None,
    }  # fmt: skip
    return PodOnNode(**(values | fields))


def budget(allowed: int, name: str = "api-pdb", **fields: Any) -> BudgetObs:
    values: dict[str, Any] = {
        "namespace": "default", "name": name,
        "selector": (LabelRequirement("app", "In", ("api",)),),
        "disruptions_allowed": allowed, "current_healthy": 2, "desired_healthy": 2,
        "expected_pods": 2,
    }  # fmt: skip
    return BudgetObs(**(values | fields))


@pytest.mark.parametrize(
    ("subject", "action", "reason"),
    [
        (pod(mirror=True, controller_kind="Node"), DrainAction.SKIP, DrainReason.MIRROR),
        (pod(controller_kind="DaemonSet"), DrainAction.SKIP, DrainReason.DAEMONSET),
        (pod(empty_dirs=("scratch",)), DrainAction.BLOCKED, DrainReason.EMPTY_DIR),
        (pod(controller_kind=""), DrainAction.BLOCKED, DrainReason.NO_CONTROLLER),
        (pod(controller_kind="", phase="Succeeded"), DrainAction.EVICT, None),
        (pod(), DrainAction.EVICT, None),
    ],
)
def test_it_follows_kubectl_drain_filters(
    subject: PodOnNode, action: DrainAction, reason: DrainReason | None
) -> None:
    plan = plan_pod(subject, [], delete_emptydir_data=False)
    assert (plan.action, plan.reason) == (action, reason)


def test_it_evicts_emptydir_pods_once_the_operator_consents() -> None:
    assert plan_pod(pod(empty_dirs=("x",)), [], delete_emptydir_data=True).action == "evict"


def test_it_names_the_budget_that_allows_no_disruption() -> None:
    plan = plan_pod(pod(), [budget(0)], False)
    assert (plan.action, plan.reason) == (DrainAction.BLOCKED, DrainReason.BUDGET)
    assert plan.detail == "default/api-pdb needs 2 healthy pods and has 2"
    assert plan_pod(pod(), [budget(1)], False).action == DrainAction.EVICT
    assert plan_pod(pod(ready=False), [budget(0)], False).action == DrainAction.EVICT
    assert plan_pod(pod(), [budget(0, namespace="other")], False).action == DrainAction.EVICT
    assert plan_pod(pod(), [budget(0, selector=None)], False).action == DrainAction.EVICT
    several = plan_pod(pod(), [budget(1), budget(1, "all", selector=())], False)
    assert (several.reason, several.detail) == (
        DrainReason.SEVERAL_BUDGETS, "default/api-pdb, default/all",
    )  # fmt: skip


def test_only_filters_no_retry_can_change_refuse_a_drain() -> None:
    plans = [plan_pod(pod(controller_kind=""), [], False), plan_pod(pod(), [budget(0)], False)]
    assert [p.reason for p in refused_by_filters(plans)] == [DrainReason.NO_CONTROLLER]


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (201, (DrainPodStatus.EVICTING, None)),
        (429, (DrainPodStatus.BLOCKED, DrainReason.BUDGET)),
        (500, (DrainPodStatus.BLOCKED, DrainReason.SEVERAL_BUDGETS)),
        (404, (DrainPodStatus.EVICTED, None)),
        (409, (DrainPodStatus.EVICTED, None)),
        (403, (DrainPodStatus.FAILED, DrainReason.EVICTION_ERROR)),
    ],
)
def test_it_reads_the_eviction_apis_answer(
    status: int, expected: tuple[DrainPodStatus, DrainReason | None]
) -> None:
    verdict = eviction_verdict(status, "Cannot evict pod", ("The disruption budget x needs 1",))
    assert (verdict.status, verdict.reason) == expected


EVICTED = (DrainPodStatus.EVICTED, None)
EVICTING = (DrainPodStatus.EVICTING, None)
BUDGET = (DrainPodStatus.BLOCKED, DrainReason.BUDGET)
EMPTY_DIR = (DrainPodStatus.BLOCKED, DrainReason.EMPTY_DIR)
SKIPPED = (DrainPodStatus.SKIPPED, DrainReason.DAEMONSET)


@pytest.mark.parametrize(
    ("pods", "remaining", "timed_out", "state"),
    [
        ([EVICTED, SKIPPED], 0, False, DrainState.DRAINED),
        ([EVICTED, SKIPPED], 1, False, None),  # a pod that must go is still on the node
        ([EVICTED, SKIPPED], 1, True, DrainState.FAILED),
        ([EVICTING], 1, False, None),
        ([EVICTING], 1, True, DrainState.FAILED),
        ([EVICTED, BUDGET], 1, False, None),  # the 429 is retried until the deadline
        ([EVICTED, BUDGET], 1, True, DrainState.PARTLY_DRAINED),
        ([EVICTED, EMPTY_DIR], 1, False, DrainState.PARTLY_DRAINED),
        ([(DrainPodStatus.FAILED, DrainReason.EVICTION_ERROR)], 1, False, DrainState.FAILED),
    ],
)
def test_it_never_says_drained_while_a_pod_remains(
    pods: list[tuple[DrainPodStatus, DrainReason | None]], remaining: int, timed_out: bool,
    state: DrainState | None,
) -> None:  # fmt: skip
    assert drain_outcome(pods, remaining, timed_out) == state


def test_an_evicted_pod_is_waited_for_within_its_grace_period_and_its_removal_slack() -> None:
    """Issue 36: "waits for each pod to be gone within its grace period"; past it, the pod is
    failed and the outcome Failed, never Drained while it remains."""
    assert not past_grace(30 + GRACE_SLACK_SECONDS, 30)
    assert past_grace(30 + GRACE_SLACK_SECONDS + 0.5, 30)
    given_up = [(DrainPodStatus.FAILED, DrainReason.GRACE_PERIOD)]
    assert drain_outcome(given_up, remaining=1, timed_out=False) == DrainState.FAILED


def test_a_deleting_pods_grace_is_the_one_its_deletion_was_given() -> None:
    meta: dict[str, Any] = {"name": "api-1", "namespace": "default", "uid": "u1",
                            "deletionTimestamp": "2026-01-01T00:00:00Z",
                            "deletionGracePeriodSeconds": 5}  # fmt: skip
    item = {"metadata": meta, "spec": {"terminationGracePeriodSeconds": 600}}
    assert parse_pod_on_node(item).grace_seconds == 5
    del meta["deletionGracePeriodSeconds"]
    assert parse_pod_on_node(item).grace_seconds == 600
    assert parse_pod_on_node({"metadata": {"name": "p"}}).grace_seconds == 30
