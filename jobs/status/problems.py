"""What is wrong with a pod, from its observation: the Worker's reason and message, the one
problem of a pod (`classify`, the only place that decides it), and the first problem a Task
message names (spec §Troubleshooting: Task messages come first).

Reasons are Kubernetes' own field values (`CrashLoopBackOff`, `Unschedulable`, `Evicted`, ...);
messages are the API's, quoted as Kubernetes text (`jobs.messages.Kube`), never parsed; the
console's own words are coded messages, worded in the reader's language when shown. Two reasons
are the console's: `NodeLost/Unknown` (the API said phase Unknown) and `NodeNotReady` (the
pod's node is Offline).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from console.kube.observations import NodeObs, PodObs
from jobs.choices import PodPhase, Problem
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
TERMINATED = "Terminated"  # a container that ended without a reason (jobs.diagnostics too)
# A container that could not be created from its configuration (a Secret, a volume missing).
CONFIG_ERRORS = frozenset(
    {"CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
)
# The console's own reasons for a pod whose node stopped reporting.
NODE_REASONS = frozenset({NODE_LOST, NODE_NOT_READY})
# Waiting reasons of a healthy start: not problems.
STARTING = frozenset({"ContainerCreating", "PodInitializing"})
# A container's termination reasons (the kubelet's, and the console's "Terminated" when it
# gave none or the reader may not see it, jobs.diagnostics): judged by the exit, not the word.
TERMINATION_REASONS = frozenset(
    {
        "Completed",
        "Error",
        OOM_KILLED,
        "ContainerCannotRun",
        "DeadlineExceeded",
        "StartError",
        "ContainerStatusUnknown",
        TERMINATED,
    }
)
# Worker reasons that say nothing wrong by themselves.
QUIET_REASONS = STARTING | TERMINATION_REASONS | {TERMINATING}


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
    """Which of the pod's reasons its Worker row shows, in `classify`'s order (its node, the
    pod's own verdict, its placement, then its container): `classify` judges that reason."""
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
        return pod.termination_reason or TERMINATED, _exit(pod, "worker.")
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


@dataclass(frozen=True, slots=True)
class PodSigns:
    """What one pod shows, as its Worker row keeps it: `reason` is the row's (`pod_reason`);
    the restart count, exit code and termination reason are None / "" where the reader may not
    see them (jobs.diagnostics) or no container has ended."""

    phase: str | None
    ready: bool
    reason: str = ""
    restart_count: int | None = None
    exit_code: int | None = None
    termination_reason: str = ""


# What a pod that has a Worker reason is blocked on now, by that reason alone.
_BLOCKED_BY = {
    EVICTED: Problem.EVICTED,
    UNSCHEDULABLE: Problem.UNSCHEDULABLE,
    **dict.fromkeys(IMAGE_PULL, Problem.IMAGE_PULL),
}


def classify(signs: PodSigns) -> Problem | None:
    """The one problem of a pod, or None: the only place that decides it (the Task's message,
    the troubleshooting panel and the dashboard word its answer; the engine's and the
    dashboard's database filters admit every pod it flags, tests/jobs/test_pod_problems.py).

    First what the pod is blocked on now, in the spec's troubleshooting order (§Troubleshooting:
    its node, then its placement, then its image), the pod's own verdict (Evicted) before a
    container's; then why its container ended (OOMKilled: the cause, so before the crash loop
    or the failure it leads to; a configuration error after it, as both earlier readers had
    it); then how it ended; then what only a settled Task calls wrong (not ready). A reason the
    console does not know is reported as Kubernetes' (docs/decisions.md, one pod classifier)."""
    reason = signs.reason
    if reason in NODE_REASONS:
        return Problem.NODE_OFFLINE
    if reason in _BLOCKED_BY:
        return _BLOCKED_BY[reason]
    if _out_of_memory(signs):
        return Problem.OUT_OF_MEMORY
    if reason in CONFIG_ERRORS:
        return Problem.CONFIG_ERROR
    if reason == CRASH_LOOP:
        return Problem.CRASH_LOOP
    if signs.phase == PodPhase.FAILED:
        return Problem.POD_FAILED
    if reason and reason not in QUIET_REASONS:
        return Problem.OTHER_REASON
    return _how_it_runs(signs)


def _out_of_memory(signs: PodSigns) -> bool:
    """OOMKilled by its field (KUBERNETES-FACTS: lastState.terminated.reason); exit code 137
    (SIGKILL) counts only where no termination reason is known, since a container killed at the
    end of its grace period exits 137 too."""
    if OOM_KILLED in (signs.reason, signs.termination_reason):
        return True
    return signs.exit_code == OOM_EXIT_CODE and not signs.termination_reason


def _how_it_runs(signs: PodSigns) -> Problem | None:
    failed_exit = signs.exit_code not in (None, 0)
    if failed_exit and not signs.ready:
        return Problem.CONTAINER_EXITED
    if failed_exit and signs.restart_count:
        return Problem.RESTARTED  # spec §Do not wait for a StatefulSet Job ...: "still Running"
    if signs.phase == PodPhase.RUNNING and not signs.ready:
        return Problem.NOT_READY
    return None


def signs_of(pod: PodObs, nodes: Mapping[str, NodeObs]) -> PodSigns:
    """A pod as its Worker row will show it."""
    reason, _message = _reason(pod, nodes)
    return PodSigns(
        phase=pod.phase,
        ready=pod.ready,
        reason=reason,
        restart_count=pod.restart_count,
        exit_code=pod.exit_code,
        termination_reason=pod.termination_reason,
    )


# What a Task's message leaves out: a pod not ready yet is how every start looks (the Task's
# ready count says it), and a container that ended or restarted with an error and has no other
# sign is the troubleshooting panel's to explain (with its exit, for those who see it).
UNSAID_IN_TASK_MESSAGE = frozenset({Problem.NOT_READY, Problem.CONTAINER_EXITED, Problem.RESTARTED})


def pod_problem(pod: PodObs, nodes: Mapping[str, NodeObs]) -> Message | None:
    """The one-line problem of a pod for its Task's message (`classify`'s answer in the Task
    message's words), or None when it has none worth the Task's message."""
    signs = signs_of(pod, nodes)
    problem = classify(signs)
    if problem is None or problem in UNSAID_IN_TASK_MESSAGE:
        return None
    if problem == Problem.NODE_OFFLINE:
        code = "pod.node_lost" if signs.reason == NODE_LOST else "pod.node_not_ready"
        return Message(code, {"pod": pod.name, "node": pod.node_name or "?"})
    restarts: dict[str, Param] = {"pod": pod.name, "count": pod.restart_count}
    if problem == Problem.OUT_OF_MEMORY and pod.restart_count:
        exit_code = "?" if pod.exit_code is None else pod.exit_code
        return Message("pod.oom_killed", {**restarts, "code": exit_code})
    if problem == Problem.CRASH_LOOP:
        return Message("pod.crash_loop", {**restarts, "exit": _exit(pod)})
    if pod.phase == PodPhase.FAILED and not pod.status_reason:
        return Message("pod.failed", {"pod": pod.name, "exit": _exit(pod)})
    return _said(pod, signs.reason or OOM_KILLED, _kubernetes_text(pod, signs.reason))


def _kubernetes_text(pod: PodObs, reason: str) -> str:
    """What Kubernetes wrote beside the reason `_reason` chose."""
    if reason == pod.status_reason:
        return pod.status_message
    if reason == UNSCHEDULABLE and pod.unschedulable:
        return pod.scheduling_message
    if reason == pod.waiting_reason:
        return pod.waiting_message
    return ""


def first_problem(pods: Iterable[PodObs], nodes: Mapping[str, NodeObs]) -> Message | None:
    """The first problem in pod-name order (so the message is stable between cycles)."""
    for pod in sorted(pods, key=lambda pod: pod.name):
        if problem := pod_problem(pod, nodes):
            return problem
    return None
