"""What is wrong with a pod, from its observation: the Worker's reason and message, and the
first problem a Task message names (spec §Troubleshooting: Task messages come first).

Reasons are Kubernetes' own field values (`CrashLoopBackOff`, `Unschedulable`, `Evicted`, ...);
messages are the API's, quoted as Kubernetes text (`jobs.messages.Kube`), never parsed; the
console's own words are coded messages, worded in the reader's language when shown. Two reasons
are the console's: `NodeLost/Unknown` (the API said phase Unknown) and `NodeNotReady` (the
pod's node is Offline).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from console.kube.observations import NodeObs, PodObs
from jobs.choices import PodPhase
from jobs.messages import Kube, Message, Param, encode, kubernetes

NODE_LOST = "NodeLost/Unknown"
NODE_NOT_READY = "NodeNotReady"
IMAGE_PULL = frozenset(
    {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull"}
)
CRASH_LOOP = "CrashLoopBackOff"
OOM_KILLED = "OOMKilled"
OOM_EXIT_CODE = 137
EVICTED = "Evicted"
UNSCHEDULABLE = "Unschedulable"
TERMINATING = "Terminating"
# A container that could not be created from its configuration (a Secret, a volume missing).
CONFIG_ERRORS = frozenset(
    {"CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
)
# The console's own reasons for a pod whose node stopped reporting.
NODE_REASONS = frozenset({NODE_LOST, NODE_NOT_READY})
# Waiting reasons of a healthy start: not problems.
STARTING = frozenset({"ContainerCreating", "PodInitializing"})


def _node_down(pod: PodObs, nodes: Mapping[str, NodeObs]) -> bool:
    node = nodes.get(pod.node_name)
    return node is not None and not node.online and pod.phase == PodPhase.RUNNING


def _exit(pod: PodObs, prefix: str = "") -> Message:
    """`exit code N (reason)`; a Worker row's message starts with it (prefix "worker.")."""
    code = "?" if pod.exit_code is None else pod.exit_code
    if pod.termination_reason:
        details = {"code": code, "reason": pod.termination_reason}
        return Message(f"{prefix}exit.code_reason", details)
    return Message(f"{prefix}exit.code", {"code": code})


def node_message(node: NodeObs) -> Message | str:
    """A node's condition in Kubernetes' words, or the console's when it reported none."""
    if not node.ready_reported:
        return Message("node.no_ready_condition")
    return kubernetes(node.message)


def pod_reason(pod: PodObs, nodes: Mapping[str, NodeObs]) -> tuple[str, str]:
    """(reason, stored message) of a Worker row; both empty for a pod with nothing to say.
    Messages Kubernetes wrote are kept as its text (jobs.messages.Kube)."""
    reason, message = _reason(pod, nodes)
    return reason, encode(message)


def _reason(pod: PodObs, nodes: Mapping[str, NodeObs]) -> tuple[str, Message | str]:
    if pod.phase is None:
        return NODE_LOST, Message("worker.node_lost")
    if _node_down(pod, nodes):
        detail = node_message(nodes[pod.node_name])
        return NODE_NOT_READY, Message(
            "worker.node_not_ready", {"node": pod.node_name, "detail": detail or ""}
        )
    if pod.status_reason:
        return pod.status_reason, kubernetes(pod.status_message)
    if pod.unschedulable:
        return UNSCHEDULABLE, kubernetes(pod.scheduling_message)
    if pod.waiting_reason and pod.waiting_reason not in STARTING:
        return pod.waiting_reason, kubernetes(pod.waiting_message)
    if pod.terminated_now:
        return pod.termination_reason or "Terminated", _exit(pod, "worker.")
    if pod.deleted_at is not None:
        return TERMINATING, Message("worker.terminating")
    if pod.waiting_reason:
        return pod.waiting_reason, kubernetes(pod.waiting_message)
    return "", ""


def _said(pod: PodObs, reason: str, text: str) -> Message:
    """`<pod>: <reason>: <Kubernetes' message>` (without the message when it gave none)."""
    if text:
        return Message(
            "pod.reason_detail", {"pod": pod.name, "reason": reason, "detail": Kube(text)}
        )
    return Message("pod.reason", {"pod": pod.name, "reason": reason})


def pod_problem(pod: PodObs, nodes: Mapping[str, NodeObs]) -> Message | None:
    """The one-line problem of a pod for its Task's message, or None when it has none.

    A pod with a problem has a Worker with a reason, phase Failed or a restart: the engine reads
    only those besides the changed pods (console.engine.rows.pods_of_note); a new rule here
    keeps that true."""
    if pod.phase is None:
        return Message("pod.node_lost", {"pod": pod.name, "node": pod.node_name or "?"})
    if _node_down(pod, nodes):
        return Message("pod.node_not_ready", {"pod": pod.name, "node": pod.node_name})
    if pod.status_reason:
        return _said(pod, pod.status_reason, pod.status_message)
    if pod.unschedulable:
        return _said(pod, UNSCHEDULABLE, pod.scheduling_message)
    if pod.waiting_reason in IMAGE_PULL:
        return _said(pod, pod.waiting_reason, pod.waiting_message)
    restarts: dict[str, Param] = {"pod": pod.name, "count": pod.restart_count}
    if pod.waiting_reason == CRASH_LOOP:
        return Message("pod.crash_loop", {**restarts, "exit": _exit(pod)})
    if pod.phase == PodPhase.FAILED:
        return Message("pod.failed", {"pod": pod.name, "exit": _exit(pod)})
    if pod.termination_reason == OOM_KILLED and pod.restart_count:
        code = "?" if pod.exit_code is None else pod.exit_code
        return Message("pod.oom_killed", {**restarts, "code": code})
    if pod.waiting_reason and pod.waiting_reason not in STARTING:
        return _said(pod, pod.waiting_reason, pod.waiting_message)
    return None


def first_problem(pods: Iterable[PodObs], nodes: Mapping[str, NodeObs]) -> Message | None:
    """The first problem in pod-name order (so the message is stable between cycles)."""
    for pod in sorted(pods, key=lambda pod: pod.name):
        if problem := pod_problem(pod, nodes):
            return problem
    return None
