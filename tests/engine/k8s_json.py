"""Objects shaped exactly as shared/KUBERNETES-FACTS.md describes real Kubernetes (1.30-1.35)
reporting them, for the parser and derivation tests."""

from __future__ import annotations

from typing import Any

T0 = "2025-03-01T10:00:00Z"
T1 = "2025-03-01T10:05:00Z"


def labels(job: int = 7, task: int = 11, run: int = 1, role: str = "worker") -> dict[str, str]:
    return {
        "app.kubernetes.io/managed-by": "trainyard",
        "trainyard.io/job": str(job),
        "trainyard.io/task": str(task),
        "trainyard.io/role": role,
        "trainyard.io/run": str(run),
    }


def _cond(kind: str, status: str, reason: str = "", message: str = "") -> dict[str, Any]:
    condition: dict[str, Any] = {
        "type": kind,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": T0,
    }
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


def pod_conditions(
    sandbox: bool = True, ready: bool = True, reason: str = "", scheduled: bool = True
) -> list[dict[str, Any]]:
    """The five kubelet conditions in their order."""
    not_ready = reason or "ContainersNotReady"
    message = "" if reason else "containers with unready status: [main]"
    return [
        _cond("PodReadyToStartContainers", "True" if sandbox else "False"),
        _cond("Initialized", "True"),
        _cond(
            "Ready",
            "True" if ready else "False",
            "" if ready else not_ready,
            "" if ready else message,
        ),
        _cond(
            "ContainersReady",
            "True" if ready else "False",
            "" if ready else not_ready,
            "" if ready else message,
        ),
        _cond("PodScheduled", "True" if scheduled else "False"),
    ]


def pod(
    name: str = "train-worker-0",
    *,
    phase: str = "Running",
    node: str = "node-1",
    ip: str = "10.0.1.5",
    job: int = 7,
    task: int = 11,
    run: int = 1,
    conditions: list[dict[str, Any]] | None = None,
    state: dict[str, Any] | None = None,
    last_state: dict[str, Any] | None = None,
    ready: bool = True,
    restarts: int = 0,
    gpus: int = 0,
    image: str = "ghcr.io/rlinf/rlinf:0.3",
    extra_status: dict[str, Any] | None = None,
    deletion: str | None = None,
    uid: str = "",
) -> dict[str, Any]:
    container_status: dict[str, Any] = {
        "name": "main",
        "image": image,
        "imageID": "",
        "containerID": "containerd://abc",
        "ready": ready,
        "started": ready,
        "restartCount": restarts,
        "state": state if state is not None else {"running": {"startedAt": T0}},
        "lastState": last_state or {},
    }
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": conditions if conditions is not None else pod_conditions(),
        "hostIP": "192.168.0.11",
        "hostIPs": [{"ip": "192.168.0.11"}],
        "startTime": T0,
        "qosClass": "Guaranteed",
        "containerStatuses": [container_status],
    }
    if ip:
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
    status.update(extra_status or {})
    resources: dict[str, Any] = {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}
    if gpus:
        resources["limits"]["nvidia.com/gpu"] = str(gpus)
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": uid or f"uid-{name}",
        "creationTimestamp": T0,
        "labels": {
            **labels(job, task, run),
            "controller-revision-hash": "train-worker-7757fc6447",
            "statefulset.kubernetes.io/pod-name": name,
            "apps.kubernetes.io/pod-index": name.rsplit("-", 1)[-1],
        },
    }
    if deletion:
        metadata["deletionTimestamp"] = deletion
        metadata["deletionGracePeriodSeconds"] = 30
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": image, "resources": resources}],
        "restartPolicy": "Always",
    }
    if node:
        spec["nodeName"] = node
    return {"metadata": metadata, "spec": spec, "status": status}


def crash_loop_pod(
    name: str = "train-worker-0", restarts: int = 4, exit_code: int = 3
) -> dict[str, Any]:
    return pod(
        name,
        phase="Running",
        ready=False,
        restarts=restarts,
        conditions=pod_conditions(ready=False),
        state={
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": (
                    f"back-off 5m0s restarting failed container=main pod={name}_default(uid)"
                ),
            }
        },
        last_state={
            "terminated": {
                "exitCode": exit_code,
                "reason": "Error",
                "startedAt": T0,
                "finishedAt": T1,
                "containerID": "containerd://abc",
            }
        },
    )


def unschedulable_pod(name: str = "train-worker-1") -> dict[str, Any]:
    item = pod(name, phase="Pending", node="", ip="")
    message = (
        "0/5 nodes are available: 1 node(s) had untolerated taint "
        "{node.kubernetes.io/not-ready: }, 1 node(s) were unschedulable, 2 Insufficient "
        "nvidia.com/gpu. preemption: 0/5 nodes are available: 2 No preemption victims found "
        "for incoming pod, 3 Preemption is not helpful for scheduling."
    )
    item["status"] = {
        "phase": "Pending",
        "qosClass": "Guaranteed",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": T0,
                "reason": "Unschedulable",
                "message": message,
            }
        ],
    }
    return item


def image_pull_pod(name: str = "train-worker-0") -> dict[str, Any]:
    message = (
        'Back-off pulling image "ghcr.io/rlinf/nonexistent:1": ErrImagePull: rpc error: code = '
        "NotFound desc = failed to pull and unpack image"
    )
    return pod(
        name,
        phase="Pending",
        ready=False,
        conditions=pod_conditions(ready=False),
        state={"waiting": {"reason": "ImagePullBackOff", "message": message}},
    )


def container_creating_pod(name: str = "train-worker-0") -> dict[str, Any]:
    item = pod(
        name,
        phase="Pending",
        ip="",
        ready=False,
        conditions=pod_conditions(sandbox=False, ready=False),
        state={"waiting": {"reason": "ContainerCreating"}},
    )
    return item


def oom_restarted_pod(name: str = "train-worker-0") -> dict[str, Any]:
    return pod(
        name,
        restarts=1,
        last_state={
            "terminated": {
                "exitCode": 137,
                "reason": "OOMKilled",
                "startedAt": T0,
                "finishedAt": T1,
                "containerID": "containerd://abc",
            }
        },
    )


def evicted_pod(name: str = "train-worker-0") -> dict[str, Any]:
    conditions = pod_conditions(ready=False, reason="PodFailed")
    conditions.append(
        {
            "type": "DisruptionTarget",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": T1,
            "reason": "TerminationByKubelet",
            "message": "The node was low on resource: memory.",
        }
    )
    return pod(
        name,
        phase="Failed",
        ready=False,
        conditions=conditions,
        state={
            "terminated": {
                "exitCode": 137,
                "reason": "ContainerStatusUnknown",
                "startedAt": T0,
                "finishedAt": T1,
            }
        },
        extra_status={
            "reason": "Evicted",
            "message": "The node was low on resource: memory. Threshold quantity: 100Mi, "
            "available: 87364Ki. Container main was using 1200Mi, request is 1Gi.",
        },
    )


def finished_pod(name: str, succeeded: bool) -> dict[str, Any]:
    return pod(
        name,
        phase="Succeeded" if succeeded else "Failed",
        ready=False,
        conditions=pod_conditions(ready=False, reason="PodCompleted" if succeeded else "PodFailed"),
        state={
            "terminated": {
                "exitCode": 0 if succeeded else 3,
                "reason": "Completed" if succeeded else "Error",
                "startedAt": T0,
                "finishedAt": T1,
            }
        },
    )


def node_lost_pod(name: str = "train-worker-0", evicting: bool = False) -> dict[str, Any]:
    """Phase stays Running, containers stale `ready: true`, only Ready flips to False."""
    conditions = pod_conditions()
    conditions[2] = _cond("Ready", "False", "NodeNotReady", "")
    item = pod(name, conditions=conditions, deletion=T1 if evicting else None)
    if evicting:
        item["status"]["conditions"].append(
            _cond(
                "DisruptionTarget",
                "True",
                "DeletionByTaintManager",
                "Taint manager: deleting due to NoExecute taint",
            )
        )
    return item


def unknown_pod(name: str = "train-worker-0") -> dict[str, Any]:
    item = pod(name)
    item["status"]["phase"] = "Unknown"
    return item


def statefulset(
    name: str = "train-worker", *, replicas: int = 2, ready: int = 2, job: int = 7, task: int = 11,
    run: int = 1, omit_replicas: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """Status fields omitted when 0 (readyReplicas, currentReplicas, updatedReplicas)."""
    status: dict[str, Any] = {
        "availableReplicas": ready,
        "replicas": replicas,
        "observedGeneration": 1,
        "currentRevision": f"{name}-7757fc6447",
        "updateRevision": f"{name}-7757fc6447",
        "collisionCount": 0,
    }
    if ready:
        status["readyReplicas"] = ready
        status["currentReplicas"] = ready
        status["updatedReplicas"] = ready
    spec: dict[str, Any] = {
        "serviceName": name,
        "podManagementPolicy": "OrderedReady",
        "selector": {"matchLabels": {"trainyard.io/job": str(job)}},
        "template": {"metadata": {"labels": labels(job, task, run)}, "spec": {"containers": []}},
    }
    if not omit_replicas:
        spec["replicas"] = replicas
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "generation": 1,
            "labels": labels(job, task, run),
        },
        "spec": spec,
        "status": status,
    }


def batch_job(
    name: str = "train-eval", *, outcome: str = "", parallelism: int = 1, job: int = 7,
    task: int = 12, active: int = 1, ready: int = 0,
) -> dict[str, Any]:  # fmt: skip
    status: dict[str, Any] = {"uncountedTerminatedPods": {}, "ready": ready, "terminating": 0}
    if active and not outcome:
        status["active"] = active
    if outcome == "complete":
        status["succeeded"] = parallelism
        status["completionTime"] = T1
        status["conditions"] = [
            {
                "type": kind,
                "status": "True",
                "reason": "CompletionsReached",
                "message": "Reached expected number of succeeded pods",
                "lastProbeTime": T1,
                "lastTransitionTime": T1,
            }
            for kind in ("SuccessCriteriaMet", "Complete")
        ]
    elif outcome == "failed":
        status["failed"] = 1
        status["conditions"] = [
            {
                "type": kind,
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit",
                "lastProbeTime": T1,
                "lastTransitionTime": T1,
            }
            for kind in ("FailureTarget", "Failed")
        ]
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "labels": labels(job, task, 1, "eval"),
        },
        "spec": {"parallelism": parallelism, "completions": parallelism, "backoffLimit": 0},
        "status": status,
    }


def node(
    name: str = "node-1", *, ready: str = "True", cordoned: bool = False, gpus: int = 8,
    heartbeat: str = T0,
) -> dict[str, Any]:  # fmt: skip
    if ready == "Unknown":
        reason, message = "NodeStatusUnknown", "Kubelet stopped posting node status."
        others = "Unknown"
    elif ready == "False":
        reason = "KubeletNotReady"
        message = (
            "container runtime network not ready: NetworkReady=false "
            "reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not "
            "initialized"
        )
        others = "False"
    else:
        reason, message, others = "KubeletReady", "kubelet is posting ready status", "False"
    conditions = [
        {
            "type": kind,
            "status": others,
            "reason": reason if ready == "Unknown" else f"KubeletHasNo{kind}",
            "message": message,
            "lastHeartbeatTime": heartbeat,
            "lastTransitionTime": T0,
        }
        for kind in ("MemoryPressure", "DiskPressure", "PIDPressure")
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": ready,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": heartbeat,
            "lastTransitionTime": T0,
        }
    )
    spec: dict[str, Any] = {}
    taints = []
    if cordoned:
        spec["unschedulable"] = True
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    if ready == "Unknown":
        taints += [
            {"key": "node.kubernetes.io/unreachable", "effect": effect, "timeAdded": T1}
            for effect in ("NoSchedule", "NoExecute")
        ]
    if taints:
        spec["taints"] = taints
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {"kubernetes.io/hostname": name},
        },
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": conditions,
            "nodeInfo": {
                "machineID": "m",
                "systemUUID": "s",
                "bootID": "b",
                "kernelVersion": "6.1.0",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.13",
                "kubeletVersion": "v1.31.4",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def deployment(
    name: str = "kuberay-operator", *, image: str = "quay.io/kuberay/operator:v1.2.2",
    replicas: int = 1, updated: int = 1, ready: int = 1, available: int = 1,
    stuck: bool = False, generation: int = 1, observed: int = 1,
) -> dict[str, Any]:  # fmt: skip
    conditions = [
        {
            "type": "Available",
            "status": "True" if available >= replicas else "False",
            "reason": "MinimumReplicasAvailable",
            "message": "Deployment has minimum availability.",
        },
        {
            "type": "Progressing",
            "status": "False" if stuck else "True",
            "reason": "ProgressDeadlineExceeded" if stuck else "NewReplicaSetAvailable",
            "message": f'ReplicaSet "{name}-6d4cf56db6" has timed out progressing.'
            if stuck
            else f'ReplicaSet "{name}-6d4cf56db6" has successfully progressed.',
        },
    ]
    status: dict[str, Any] = {
        "observedGeneration": observed,
        "replicas": replicas,
        "conditions": conditions,
    }
    for key, value in (
        ("updatedReplicas", updated),
        ("readyReplicas", ready),
        ("availableReplicas", available),
    ):
        if value:
            status[key] = value
    return {
        "metadata": {
            "name": name,
            "namespace": "kube-system",
            "uid": f"uid-{name}",
            "generation": generation,
            "labels": {"trainyard.io/addon": name},
        },
        "spec": {
            "replicas": replicas,
            "progressDeadlineSeconds": 600,
            "template": {
                "metadata": {"labels": {"trainyard.io/addon": name}},
                "spec": {"containers": [{"name": "operator", "image": image}]},
            },
        },
        "status": status,
    }


def daemonset(
    name: str = "nvidia-device-plugin", *, image: str = "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
    desired: int = 3, updated: int = 3, ready: int = 3,
) -> dict[str, Any]:  # fmt: skip
    return {
        "metadata": {
            "name": name,
            "namespace": "kube-system",
            "uid": f"uid-{name}",
            "generation": 1,
            "labels": {"trainyard.io/addon": name},
        },
        "spec": {
            "template": {
                "metadata": {"labels": {"trainyard.io/addon": name}},
                "spec": {"containers": [{"name": "plugin", "image": image}]},
            }
        },
        "status": {
            "currentNumberScheduled": desired,
            "desiredNumberScheduled": desired,
            "numberMisscheduled": 0,
            "numberReady": ready,
            "numberAvailable": ready,
            "updatedNumberScheduled": updated,
            "observedGeneration": 1,
        },
    }


def addon_pod(addon: str, image: str, ready: bool = True, name: str = "") -> dict[str, Any]:
    item = pod(
        name or f"{addon}-abcde", image=image, ready=ready, conditions=pod_conditions(ready=ready)
    )
    item["metadata"]["namespace"] = "kube-system"
    item["metadata"]["labels"] = {"trainyard.io/addon": addon}
    return item
