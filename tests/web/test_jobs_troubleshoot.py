"""The troubleshooting panel's diagnosis (spec §Troubleshooting a status that does not change):
walk the four layers in order and point at the first one that looks wrong, from what the engine
observed. Pure: plain values in, no database, no clock."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jobs.status.troubleshoot import (
    ClusterFacts,
    Layer,
    NodeFacts,
    PodFacts,
    Problem,
    TaskFacts,
    diagnose,
)

CLUSTER = ClusterFacts("gpu-a", reachable=True, stale=False)
NODES = (NodeFacts("node-1", online=True, schedulable=True),)
RUNNING_POD = PodFacts("train-worker-0", "node-1", "Running", ready=True)
HEALTHY = TaskFacts(
    "worker", "Running", desired_replicas=1, ready_replicas=1, observed=True,
    pods=(RUNNING_POD,), pod_count=1,
)  # fmt: skip
WAITING = replace(HEALTHY, phase="Pending", ready_replicas=0)


def pod(**fields: object) -> PodFacts:
    return replace(RUNNING_POD, **fields)  # type: ignore[arg-type]


def waiting_with(*pods: PodFacts, **fields: object) -> TaskFacts:
    return replace(WAITING, pods=pods, pod_count=len(pods), **fields)  # type: ignore[arg-type]


# (situation, cluster, nodes, task, first layer that looks wrong, the problem found there)
SITUATIONS = [
    ("healthy", CLUSTER, NODES, HEALTHY, None, None),
    ("cluster unreachable", replace(CLUSTER, reachable=False, stale=True), NODES, HEALTHY,
     Layer.CLUSTER, Problem.CLUSTER_UNREACHABLE),
    ("cluster not synced lately", replace(CLUSTER, stale=True), NODES, HEALTHY,
     Layer.CLUSTER, Problem.CLUSTER_STALE),
    ("apply error", CLUSTER, NODES, waiting_with(apply_error="422 Invalid: spec.replicas"),
     Layer.TASKS, Problem.APPLY_ERROR),
    ("task failed", CLUSTER, NODES, replace(HEALTHY, phase="Failed", message="BackoffLimit"),
     Layer.TASKS, Problem.TASK_FAILED),
    ("observed without pods", CLUSTER, NODES, replace(WAITING, pods=(), pod_count=0),
     Layer.CLUSTER, Problem.NO_PODS),
    ("unschedulable pod", CLUSTER, NODES,
     waiting_with(pod(phase="Pending", ready=False, reason="Unschedulable",
                      message="0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")),
     Layer.CLUSTER, Problem.UNSCHEDULABLE),
    ("selector matches no node", CLUSTER, NODES,
     waiting_with(node_selector={"kubernetes.io/hostname": "node-9"}),
     Layer.CLUSTER, Problem.NO_MATCHING_NODE),
    ("only cordoned nodes", CLUSTER, (NodeFacts("node-1", online=True, schedulable=False),),
     waiting_with(), Layer.CLUSTER, Problem.NO_MATCHING_NODE),
    ("only offline nodes", CLUSTER, (NodeFacts("node-1", online=False, schedulable=True),),
     waiting_with(), Layer.CLUSTER, Problem.NO_MATCHING_NODE),
    ("pod on an offline node", CLUSTER,
     (*NODES, NodeFacts("node-2", online=False, schedulable=True)),
     replace(HEALTHY, pods=(pod(node_name="node-2"),)), Layer.WORKERS, Problem.NODE_OFFLINE),
    ("node stopped reporting", CLUSTER, NODES,
     replace(HEALTHY, pods=(pod(reason="NodeNotReady", message="Node node-1 is not ready"),)),
     Layer.WORKERS, Problem.NODE_OFFLINE),
    ("crash loop", CLUSTER, NODES,
     replace(HEALTHY, pods=(pod(ready=False, reason="CrashLoopBackOff"),)),
     Layer.WORKERS, Problem.CRASH_LOOP),
    ("pod failed", CLUSTER, NODES,
     waiting_with(pod(phase="Failed", ready=False, reason="Error")),
     Layer.WORKERS, Problem.POD_FAILED),
    ("exited with an error, seen by an operator", CLUSTER, NODES,
     waiting_with(pod(phase="Pending", ready=False, last_exit_code=2, restart_count=1)),
     Layer.WORKERS, Problem.CONTAINER_EXITED),
    ("restarted after an error, Running and ready again, seen by an operator", CLUSTER, NODES,
     replace(HEALTHY, pods=(pod(last_exit_code=1, restart_count=2),)),
     Layer.WORKERS, Problem.RESTARTED),
    ("running, not ready", CLUSTER, NODES, waiting_with(pod(ready=False)),
     Layer.WORKERS, Problem.NOT_READY),
    ("missing from the last report", CLUSTER, NODES,
     replace(HEALTHY, pods=(pod(in_last_report=False),)),
     Layer.WORKERS, Problem.NOT_IN_LAST_REPORT),
    ("image pull back-off", CLUSTER, NODES,
     waiting_with(pod(phase="Pending", ready=False, reason="ImagePullBackOff",
                      message='Back-off pulling image "rlinf:nope"')),
     Layer.DEPENDENCIES, Problem.IMAGE_PULL),
    ("image pull error", CLUSTER, NODES,
     waiting_with(pod(phase="Pending", ready=False, reason="ErrImagePull")),
     Layer.DEPENDENCIES, Problem.IMAGE_PULL),
    ("OOMKilled, seen by an operator", CLUSTER, NODES,
     waiting_with(pod(ready=False, reason="CrashLoopBackOff", termination_reason="OOMKilled",
                      last_exit_code=137, restart_count=4)),
     Layer.DEPENDENCIES, Problem.OUT_OF_MEMORY),
    ("exit code 137", CLUSTER, NODES, waiting_with(pod(ready=False, last_exit_code=137)),
     Layer.DEPENDENCIES, Problem.OUT_OF_MEMORY),
    ("evicted", CLUSTER, NODES,
     waiting_with(pod(phase="Failed", ready=False, reason="Evicted",
                      message="The node was low on resource: memory.")),
     Layer.DEPENDENCIES, Problem.EVICTED),
    ("missing secret", CLUSTER, NODES,
     waiting_with(pod(phase="Pending", ready=False, reason="CreateContainerConfigError")),
     Layer.DEPENDENCIES, Problem.CONFIG_ERROR),
]  # fmt: skip


@pytest.mark.parametrize(
    ("cluster", "nodes", "task", "layer", "problem"),
    [situation[1:] for situation in SITUATIONS],
    ids=[situation[0] for situation in SITUATIONS],
)
def test_it_points_at_the_first_layer_that_looks_wrong(
    cluster: ClusterFacts,
    nodes: tuple[NodeFacts, ...],
    task: TaskFacts,
    layer: Layer | None,
    problem: Problem | None,
) -> None:
    diagnosis = diagnose(stopped=False, cluster=cluster, nodes=nodes, tasks=[task])
    assert diagnosis.first_wrong == layer
    if problem is not None:
        assert diagnosis.first_wrong is not None
        check = diagnosis.layers[diagnosis.first_wrong - 1]
        assert problem in [finding.problem for finding in check.findings]


def test_it_walks_the_four_layers_in_the_spec_order() -> None:
    diagnosis = diagnose(stopped=False, cluster=CLUSTER, nodes=NODES, tasks=[HEALTHY])
    assert [check.layer for check in diagnosis.layers] == [1, 2, 3, 4]
    assert [check.title for check in diagnosis.layers] == [
        "Task statuses and messages",
        "Target cluster, node selection and workload status",
        "Worker (Pod) phase, node, IP and logs",
        "Image, resources, storage and network",
    ]
    assert not diagnosis.findings


def test_it_reports_the_earlier_layer_first_and_keeps_the_later_ones() -> None:
    """An apply error (layer 1) comes before an image pull error (layer 4); both are listed."""
    task = waiting_with(
        pod(phase="Pending", ready=False, reason="ImagePullBackOff"), apply_error="timed out"
    )
    diagnosis = diagnose(stopped=False, cluster=CLUSTER, nodes=NODES, tasks=[task])
    assert diagnosis.first_wrong == Layer.TASKS
    assert diagnosis.layers[3].looks_wrong
    assert [f.problem for f in diagnosis.findings] == [Problem.APPLY_ERROR, Problem.IMAGE_PULL]


def test_it_judges_only_the_apply_and_cluster_layers_of_a_stopped_job() -> None:
    """Spec §Pod and Worker status: after a stop the pods are scaled down and may disappear."""
    task = replace(WAITING, phase="Stopped", desired_replicas=0, pods=(pod(in_last_report=False),))
    assert diagnose(stopped=True, cluster=CLUSTER, nodes=NODES, tasks=[task]).first_wrong is None
    unreachable = replace(CLUSTER, reachable=False, stale=True)
    stopped = diagnose(stopped=True, cluster=unreachable, nodes=NODES, tasks=[task])
    assert stopped.first_wrong == Layer.CLUSTER


def test_it_says_to_wait_when_nothing_is_wrong_but_a_task_is_not_ready() -> None:
    """Spec §Troubleshooting: "wait for one normal reconciliation first"."""
    starting = waiting_with(pod(phase="Pending", ready=False, reason="ContainerCreating"))
    not_observed = replace(WAITING, observed=False, pods=(), pod_count=0)
    for task in (starting, not_observed):
        diagnosis = diagnose(stopped=False, cluster=CLUSTER, nodes=NODES, tasks=[task])
        assert diagnosis.first_wrong is None
        assert diagnosis.waiting
    assert not diagnose(stopped=False, cluster=CLUSTER, nodes=NODES, tasks=[HEALTHY]).waiting


def test_it_is_patient_with_a_task_that_is_merely_starting() -> None:
    """Spec §Troubleshooting: wait for one normal reconciliation before calling it wrong."""
    no_pods = replace(WAITING, pods=(), pod_count=0, waited_seconds=5)
    not_ready = waiting_with(pod(ready=False), waited_seconds=5)
    for task in (no_pods, not_ready):
        early = diagnose(stopped=False, cluster=CLUSTER, nodes=NODES, tasks=[task], patience=30)
        assert early.first_wrong is None and early.waiting
        late = replace(task, waited_seconds=31)
        found = diagnose(stopped=False, cluster=CLUSTER, nodes=NODES, tasks=[late], patience=30)
        assert found.first_wrong in (Layer.CLUSTER, Layer.WORKERS)
    crashing = waiting_with(pod(ready=False, reason="CrashLoopBackOff"), waited_seconds=5)
    found = diagnose(stopped=False, cluster=CLUSTER, nodes=NODES, tasks=[crashing], patience=30)
    assert found.first_wrong == Layer.WORKERS, "a real problem needs no patience"


def test_it_concludes_nothing_about_placement_without_any_node_known() -> None:
    task = waiting_with(pod(phase="Pending", ready=False, reason="ContainerCreating"))
    assert diagnose(stopped=False, cluster=CLUSTER, nodes=(), tasks=[task]).first_wrong is None


def test_it_does_not_rule_a_node_out_on_labels_it_does_not_know() -> None:
    """Node rows carry no labels: a selector on any other key may match, so it is no finding."""
    starting = pod(phase="Pending", ready=False, reason="ContainerCreating")
    task = waiting_with(starting, node_selector={"gpu": "a100"})
    assert diagnose(stopped=False, cluster=CLUSTER, nodes=NODES, tasks=[task]).first_wrong is None
    labelled = (NodeFacts("node-1", online=True, schedulable=True, labels={"gpu": "h100"}),)
    found = diagnose(stopped=False, cluster=CLUSTER, nodes=labelled, tasks=[task])
    assert found.first_wrong == Layer.CLUSTER
    assert found.findings[0].detail == "gpu=a100"


def test_it_hides_what_it_was_not_given() -> None:
    """Owners get no restart count or exit code (spec: operators check those); the detail then
    carries only the reason and message the owner may see."""
    owner_view = waiting_with(pod(ready=False, reason="CrashLoopBackOff", message="back-off 5m0s"))
    finding = diagnose(stopped=False, cluster=CLUSTER, nodes=NODES, tasks=[owner_view]).findings[0]
    assert finding.detail == "CrashLoopBackOff · back-off 5m0s"
    operator_view = waiting_with(
        pod(ready=False, reason="CrashLoopBackOff", last_exit_code=1, restart_count=7)
    )
    detail = diagnose(stopped=False, cluster=CLUSTER, nodes=NODES, tasks=[operator_view])
    assert detail.findings[0].detail == "CrashLoopBackOff · exit code 1 · 7 restarts"


def test_it_groups_many_pods_with_the_same_problem() -> None:
    pods = tuple(
        pod(pod_name=f"train-worker-{n}", phase="Pending", ready=False, reason="ImagePullBackOff",
            message='Back-off pulling image "rlinf:nope"')
        for n in range(8)
    )  # fmt: skip
    diagnosis = diagnose(stopped=False, cluster=CLUSTER, nodes=NODES, tasks=[waiting_with(*pods)])
    (group,) = diagnosis.layers[3].groups
    assert group.problem == Problem.IMAGE_PULL
    assert group.shown == tuple(f"train-worker-{n}" for n in range(5))
    assert group.more == 3
    assert group.details == ('ImagePullBackOff · Back-off pulling image "rlinf:nope"',)
    assert "image name and tag" in group.advice


def test_it_ignores_healthy_starts_and_finished_pods() -> None:
    for quiet in (
        pod(phase="Pending", ready=False, reason="ContainerCreating"),
        pod(phase="Succeeded", ready=False, reason="Completed", last_exit_code=0),
        pod(reason="Terminating"),
    ):
        task = replace(HEALTHY, pods=(quiet,))
        assert not diagnose(stopped=False, cluster=CLUSTER, nodes=NODES, tasks=[task]).findings
