"""What is wrong with a pod, from its observation: the Worker's reason and message, and the
first problem a Task message names (spec §Troubleshooting: Task messages come first).

Reasons are Kubernetes' own field values (`CrashLoopBackOff`, `Unschedulable`, `Evicted`, ...);
messages are the API's, quoted, never parsed. Two reasons are the console's: `NodeLost/Unknown`
(the API said phase Unknown) and `NodeNotReady` (the pod's node is Offline).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from console.kube.observations import NodeObs, PodObs
from jobs.choices import PodPhase

NODE_LOST = "NodeLost/Unknown"
NODE_NOT_READY = "NodeNotReady"
IMAGE_PULL = frozenset(
    {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull"}
)
CRASH_LOOP = "CrashLoopBackOff"
OOM_KILLED = "OOMKilled"
# Waiting reasons of a healthy start: not problems.
STARTING = frozenset({"ContainerCreating", "PodInitializing"})


def _node_down(pod: PodObs, nodes: Mapping[str, NodeObs]) -> bool:
    node = nodes.get(pod.node_name)
    return node is not None and not node.online and pod.phase == PodPhase.RUNNING


def _exit(pod: PodObs) -> str:
    code = "?" if pod.exit_code is None else str(pod.exit_code)
    return f"exit code {code}" + (f" ({pod.termination_reason})" if pod.termination_reason else "")


def pod_reason(pod: PodObs, nodes: Mapping[str, NodeObs]) -> tuple[str, str]:
    """(reason, message) of a Worker row; both empty for a pod with nothing to say."""
    if pod.phase is None:
        return NODE_LOST, "The API reports the pod's phase as Unknown: its node stopped reporting."
    if _node_down(pod, nodes):
        return NODE_NOT_READY, f"Node {pod.node_name} is not ready: {nodes[pod.node_name].message}"
    if pod.status_reason:
        return pod.status_reason, pod.status_message
    if pod.unschedulable:
        return "Unschedulable", pod.scheduling_message
    if pod.waiting_reason and pod.waiting_reason not in STARTING:
        return pod.waiting_reason, pod.waiting_message
    if pod.terminated_now:
        return pod.termination_reason or "Terminated", "E" + _exit(pod)[1:]
    if pod.deleted_at is not None:
        return "Terminating", "The pod is being deleted."
    if pod.waiting_reason:
        return pod.waiting_reason, pod.waiting_message
    return "", ""


def pod_problem(pod: PodObs, nodes: Mapping[str, NodeObs]) -> str:
    """The one-line problem of a pod for its Task's message, or "" when it has none."""
    restarts = f"{pod.restart_count} restarts"
    if pod.phase is None:
        return f"{pod.name}: node {pod.node_name or '?'} lost (pod phase Unknown)"
    if _node_down(pod, nodes):
        return f"{pod.name}: node {pod.node_name} not ready"
    if pod.status_reason:
        return f"{pod.name}: {pod.status_reason}: {pod.status_message}".rstrip(": ")
    if pod.unschedulable:
        return f"{pod.name}: Unschedulable: {pod.scheduling_message}".rstrip(": ")
    if pod.waiting_reason in IMAGE_PULL:
        return f"{pod.name}: {pod.waiting_reason}: {pod.waiting_message}".rstrip(": ")
    if pod.waiting_reason == CRASH_LOOP:
        return f"{pod.name}: CrashLoopBackOff, {restarts}, last {_exit(pod)}"
    if pod.phase == PodPhase.FAILED:
        return f"{pod.name}: Failed, {_exit(pod)}"
    if pod.termination_reason == OOM_KILLED and pod.restart_count:
        return f"{pod.name}: OOMKilled (exit code {pod.exit_code}), {restarts}"
    if pod.waiting_reason and pod.waiting_reason not in STARTING:
        return f"{pod.name}: {pod.waiting_reason}: {pod.waiting_message}".rstrip(": ")
    return ""


def first_problem(pods: Iterable[PodObs], nodes: Mapping[str, NodeObs]) -> str:
    """The first problem in pod-name order (so the message is stable between cycles)."""
    for pod in sorted(pods, key=lambda pod: pod.name):
        if problem := pod_problem(pod, nodes):
            return problem
    return ""
