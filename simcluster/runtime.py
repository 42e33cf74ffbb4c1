"""The kubelet's memory of each pod it runs, and how that memory reads as a Pod status."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from simcluster.behaviour import Behaviour, Instance
from simcluster.clock import go_duration, rfc3339
from simcluster.volumes import Mount

Obj = dict[str, Any]
OWN_CONDITIONS = (
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
)


class Stage(StrEnum):
    SANDBOX = "sandbox"
    PULLING = "pulling"
    CREATING = "creating"
    PULL_ERROR = "pull-error"
    PULL_BACKOFF = "pull-backoff"
    RUNNING = "running"
    EXITED = "exited"
    CRASH_BACKOFF = "crash-backoff"
    DONE = "done"


WAITING_TO_START = (Stage.SANDBOX, Stage.PULLING, Stage.CREATING)


@dataclass
class ContainerRuntime:
    name: str
    image: str
    pull_policy: str
    behaviour: Behaviour
    stage: Stage = Stage.SANDBOX
    until: float = math.inf
    restart_count: int = 0
    instances: list[Instance] = field(default_factory=list)
    last_terminated: Instance | None = None
    backoff: float = 0.0
    backoff_at: float = 0.0
    pull_backoff: float = 0.0
    pull_error: str = ""
    image_id: str = ""
    resolved_image: str = ""
    message: str = ""
    stopping: bool = False
    env: dict[str, str] = field(default_factory=dict)  # as the process sees it (downward API)
    mounts: list[Mount] = field(default_factory=list)

    @property
    def current(self) -> Instance | None:
        return self.instances[-1] if self.instances else None

    @property
    def ready(self) -> bool:
        return self.stage is Stage.RUNNING

    def ever_terminated(self) -> bool:
        return (
            self.stage in (Stage.EXITED, Stage.CRASH_BACKOFF, Stage.DONE)
            or self.last_terminated is not None
        )


@dataclass
class PodRuntime:
    uid: str
    namespace: str
    name: str
    node: str
    restart_policy: str
    containers: list[ContainerRuntime]
    started_at: float
    host_ip: str
    pod_ip: str = ""
    sandbox_ready: bool = False
    terminal_phase: str = ""
    deleting: bool = False
    stop_deadline: float = math.inf
    transitions: dict[str, tuple[str, str]] = field(default_factory=dict)
    queued_at: float = math.inf

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def next_event(self) -> float:
        return min((c.until for c in self.containers), default=math.inf)

    def finished(self) -> bool:
        return all(c.stage is Stage.DONE for c in self.containers)


def terminated_state(instance: Instance) -> Obj:
    state: Obj = {"exitCode": instance.exit_code if instance.exit_code is not None else 0}
    state["reason"] = instance.reason
    if instance.termination_message:  # what the kubelet read from terminationMessagePath
        state["message"] = instance.termination_message
    state["startedAt"] = rfc3339(instance.started_at)
    state["finishedAt"] = rfc3339(instance.finished_at or instance.started_at)
    state["containerID"] = instance.container_id
    return {"terminated": state}


def container_state(container: ContainerRuntime) -> Obj:
    stage, current = container.stage, container.current
    if stage in WAITING_TO_START:
        return {"waiting": {"reason": "ContainerCreating"}}
    if stage is Stage.PULL_ERROR:
        return {"waiting": {"reason": "ErrImagePull", "message": container.pull_error}}
    if stage is Stage.PULL_BACKOFF:
        return {"waiting": {"reason": "ImagePullBackOff", "message": container.message}}
    if stage is Stage.CRASH_BACKOFF:
        return {"waiting": {"reason": "CrashLoopBackOff", "message": container.message}}
    if stage is Stage.RUNNING and current is not None:
        return {"running": {"startedAt": rfc3339(current.started_at)}}
    if current is not None:
        return terminated_state(current)
    return {
        "terminated": {
            "exitCode": 137,
            "reason": "ContainerStatusUnknown",
            "message": "The container could not be located when the pod was terminated",
        }
    }


def last_state(container: ContainerRuntime) -> Obj:
    if container.stage is Stage.CRASH_BACKOFF and container.current is not None:
        return terminated_state(container.current)
    return terminated_state(container.last_terminated) if container.last_terminated else {}


def container_status(pod: PodRuntime, container: ContainerRuntime) -> Obj:
    status: Obj = {
        "name": container.name,
        "state": container_state(container),
        "lastState": last_state(container),
        "ready": container.ready and not pod.terminal_phase,
        "restartCount": container.restart_count,
        "image": container.resolved_image or container.image,
        "imageID": container.image_id,
    }
    if container.current is not None:
        status["containerID"] = container.current.container_id
    status["started"] = container.stage is Stage.RUNNING
    return status


def pod_phase(pod: PodRuntime) -> str:
    """kubelet getPhase: waiting keeps a pod Pending; exited containers follow restartPolicy."""
    if pod.terminal_phase:
        return pod.terminal_phase
    waiting = running = stopped = succeeded = 0
    for container in pod.containers:
        if container.stage is Stage.RUNNING:
            running += 1
        elif container.ever_terminated():
            stopped += 1
            current = container.current
            if container.stage is Stage.DONE and current is not None and current.exit_code == 0:
                succeeded += 1
        else:
            waiting += 1
    if waiting:
        return "Pending"
    if running:
        return "Running"
    if pod.restart_policy == "Always":
        return "Running"
    if stopped == succeeded and all(c.stage is Stage.DONE for c in pod.containers):
        return "Succeeded"
    if all(c.stage is Stage.DONE for c in pod.containers):
        return "Failed"
    return "Running"


def own_conditions(pod: PodRuntime, phase: str) -> list[tuple[str, str, str, str]]:
    """(type, status, reason, message) for the four conditions the kubelet owns."""
    unready = [c.name for c in pod.containers if not c.ready]
    if phase in ("Succeeded", "Failed"):
        reason = "PodCompleted" if phase == "Succeeded" else "PodFailed"
        ready = ("False", reason, "")
    elif unready:
        ready = (
            "False",
            "ContainersNotReady",
            f"containers with unready status: [{' '.join(unready)}]",
        )
    else:
        ready = ("True", "", "")
    sandbox = "True" if pod.sandbox_ready and phase not in ("Succeeded", "Failed") else "False"
    return [
        ("PodReadyToStartContainers", sandbox, "", ""),
        ("Initialized", "True", "", ""),
        ("Ready", *ready),
        ("ContainersReady", *ready),
    ]


def build_conditions(pod: PodRuntime, phase: str, existing: list[Obj], now: float) -> list[Obj]:
    """The five conditions in the kubelet's order, keeping transition times of unchanged ones;
    conditions other components own (PodScheduled, DisruptionTarget) are carried over."""
    previous = {c.get("type"): c for c in existing}
    result = []
    for type_, status, reason, message in own_conditions(pod, phase):
        old = previous.get(type_)
        since = (
            old["lastTransitionTime"]
            if old and old.get("status") == status and old.get("lastTransitionTime")
            else rfc3339(now)
        )
        condition: Obj = {
            "type": type_,
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": since,
        }
        if reason:
            condition["reason"] = reason
        if message:
            condition["message"] = message
        result.append(condition)
    scheduled = previous.get("PodScheduled") or {
        "type": "PodScheduled",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": rfc3339(pod.started_at),
    }
    result.append(scheduled)
    result.extend(c for c in existing if c.get("type") not in OWN_CONDITIONS)
    return result


def build_status(pod: PodRuntime, existing: Obj, now: float) -> Obj:
    phase = pod_phase(pod)
    status: Obj = {
        "phase": phase,
        "conditions": build_conditions(pod, phase, existing.get("conditions") or [], now),
    }
    status["hostIP"] = pod.host_ip
    status["hostIPs"] = [{"ip": pod.host_ip}]
    if pod.pod_ip:
        status["podIP"] = pod.pod_ip
        status["podIPs"] = [{"ip": pod.pod_ip}]
    status["startTime"] = rfc3339(pod.started_at)
    status["containerStatuses"] = [container_status(pod, c) for c in pod.containers]
    if "qosClass" in existing:
        status["qosClass"] = existing["qosClass"]
    for carried in ("reason", "message", "nominatedNodeName"):
        if carried in existing:
            status[carried] = existing[carried]
    return status


def crash_backoff_message(container: ContainerRuntime, pod: PodRuntime) -> str:
    return (
        f"back-off {go_duration(container.backoff)} restarting failed "
        f"container={container.name} pod={pod.name}_{pod.namespace}({pod.uid})"
    )
