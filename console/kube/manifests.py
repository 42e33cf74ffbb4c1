"""The objects the console creates for a Task: pure functions of plain values.

A StatefulSet Task gets a StatefulSet and a headless Service of the same name (`serviceName`);
an API Task of kind Job gets a batch/v1 Job. Every object and every pod template carries the
console's labels (managed-by, job, task, role, run); selectors include the run, so pods of an
earlier run are never adopted by the workload that replaced them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from console.kube import JOB_LABEL, MANAGED_BY, MANAGER, ROLE_LABEL, RUN_LABEL, TASK_LABEL
from console.kube.observations import STATEFULSET

CONTAINER = "main"
GPU_RESOURCE = "nvidia.com/gpu"
SHM_VOLUME = "dshm"
SHM_PATH = "/dev/shm"


@dataclass(frozen=True)
class Target:
    """One Task of one run of a Job, as reconcile wants it in the cluster."""

    job_id: int
    job_name: str
    namespace: str
    run: int
    task_id: int
    role: str
    kind: str  # StatefulSet or Job
    replicas: int
    template: Mapping[str, Any] = field(default_factory=dict)
    signal_url: str = ""  # where the pods post signals; "" gives them no URL nor token
    signal_token: str = ""
    pod_user: str = "1000"  # a user ID, "image" or "any" (security)
    shm_size: str | None = None  # the size limit of /dev/shm; None: unlimited
    heartbeat_seconds: int | None = None  # how often the Job's policy wants a heartbeat

    @property
    def name(self) -> str:
        return f"{self.job_name}-{self.role}"


def labels(target: Target) -> dict[str, str]:
    return {
        MANAGED_BY: MANAGER,
        JOB_LABEL: str(target.job_id),
        TASK_LABEL: str(target.task_id),
        ROLE_LABEL: target.role,
        RUN_LABEL: str(target.run),
    }


def selector(target: Target) -> dict[str, str]:
    return {
        JOB_LABEL: str(target.job_id),
        TASK_LABEL: str(target.task_id),
        RUN_LABEL: str(target.run),
    }


# The pod's own name and UID, resolved by the kubelet (the downward API): a re-created pod has a
# new UID, and its signals a new sequence.
DOWNWARD = {"TRAINYARD_POD": "metadata.name", "TRAINYARD_POD_UID": "metadata.uid"}


def console_env(target: Target) -> dict[str, str]:
    ours = {
        "TRAINYARD_JOB_ID": str(target.job_id),
        "TRAINYARD_TASK_ID": str(target.task_id),
        "TRAINYARD_ROLE": target.role,
        "TRAINYARD_RUN": str(target.run),
        "TRAINYARD_JOB": target.job_name,
        "TRAINYARD_TASK": target.role,
    }
    if target.signal_url:
        ours["TRAINYARD_SIGNAL_URL"] = target.signal_url
        ours["TRAINYARD_SIGNAL_TOKEN"] = target.signal_token
    if target.heartbeat_seconds:  # the driver wrapper and the signal client beat this often
        ours["TRAINYARD_HEARTBEAT_SECONDS"] = str(target.heartbeat_seconds)
    return ours


def pod_env(target: Target) -> list[dict[str, Any]]:
    """The console's variables first; a template variable of the same name cannot shadow them."""
    ours = console_env(target)
    reserved = ours.keys() | DOWNWARD.keys()
    theirs = {
        k: v for k, v in sorted((target.template.get("env") or {}).items()) if k not in reserved
    }
    plain = [{"name": k, "value": v} for k, v in {**ours, **theirs}.items()]
    return plain + [
        {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}
        for name, path in DOWNWARD.items()
    ]


def resources(template: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Requests equal limits (Guaranteed QoS); GPUs only when asked for."""
    wanted = template.get("resources") or {}
    amounts = {key: str(wanted[key]) for key in ("cpu", "memory") if wanted.get(key)}
    if int(wanted.get("gpu") or 0) > 0:
        amounts[GPU_RESOURCE] = str(int(wanted["gpu"]))
    return {"requests": dict(amounts), "limits": dict(amounts)} if amounts else {}


def volumes(
    template: Mapping[str, Any], shm_size: str | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pod's volumes and the container's mounts: each claim in the spec's order, then the
    shared memory, which every pod gets (the container runtime's own /dev/shm is 64Mi), limited
    to `shm_size` (the Target's: jobs.validators.shm_size_of)."""
    pod_volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    for index, volume in enumerate(template.get("volumes") or ()):
        name = f"claim-{index}"
        claim: dict[str, Any] = {"claimName": volume["claim"]}
        mount: dict[str, Any] = {"name": name, "mountPath": volume["mount_path"]}
        if volume.get("read_only"):
            claim["readOnly"] = mount["readOnly"] = True
        if volume.get("sub_path"):
            mount["subPath"] = volume["sub_path"]
        pod_volumes.append({"name": name, "persistentVolumeClaim": claim})
        mounts.append(mount)
    memory: dict[str, Any] = {"medium": "Memory"}
    if shm_size:
        memory["sizeLimit"] = shm_size
    pod_volumes.append({"name": SHM_VOLUME, "emptyDir": memory})
    mounts.append({"name": SHM_VOLUME, "mountPath": SHM_PATH})
    return pod_volumes, mounts


_TOLERATION_FIELDS = {
    "key": "key",
    "operator": "operator",
    "value": "value",
    "effect": "effect",
    "toleration_seconds": "tolerationSeconds",
}


def tolerations(template: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The spec's tolerations in the API's field names; empty fields are left out, as the API
    server leaves them out when it returns a pod."""
    return [
        {
            ours: item[spec]
            for spec, ours in _TOLERATION_FIELDS.items()
            if item.get(spec) not in ("", None)
        }
        for item in template.get("tolerations") or ()
    ]


def security(pod_user: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod's and the container's securityContext: what the Pod Security "restricted" level
    asks (non-root, no privilege escalation, no capabilities, the runtime's seccomp profile), so
    the pods run in namespaces that enforce it. A user ID also sets the group and the volumes'
    group (fsGroup), so a mounted volume is writable; `image` keeps the image's user (the kubelet
    refuses to start it if that is root); `any` sets nothing, for images that must run as root."""
    if pod_user == "any":
        return {}, {}
    pod: dict[str, Any] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    if pod_user != "image":
        pod |= {"runAsUser": int(pod_user), "runAsGroup": int(pod_user), "fsGroup": int(pod_user)}
    return pod, {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def pod_template(target: Target, restart_policy: str) -> dict[str, Any]:
    template = target.template
    pod_security, container_security = security(target.pod_user)
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": template["image"],
        "env": pod_env(target),
    }
    if container_security:
        container["securityContext"] = container_security
    if template.get("command"):
        container["command"] = list(template["command"])
    if template.get("args"):
        container["args"] = list(template["args"])
    if limits := resources(template):
        container["resources"] = limits
    pod_volumes, container["volumeMounts"] = volumes(template, target.shm_size)
    spec: dict[str, Any] = {
        "restartPolicy": restart_policy,
        "containers": [container],
        "volumes": pod_volumes,
    }
    if template.get("node_selector"):
        spec["nodeSelector"] = dict(template["node_selector"])
    if wanted := tolerations(template):
        spec["tolerations"] = wanted
    if pod_security:
        spec["securityContext"] = pod_security
    return {"metadata": {"labels": labels(target)}, "spec": spec}


def _metadata(target: Target) -> dict[str, Any]:
    return {"name": target.name, "namespace": target.namespace, "labels": labels(target)}


def statefulset(target: Target) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _metadata(target),
        "spec": {
            "replicas": target.replicas,
            "serviceName": target.name,
            "podManagementPolicy": target.template.get("pod_management_policy", "OrderedReady"),
            "selector": {"matchLabels": selector(target)},
            "template": pod_template(target, "Always"),
        },
    }


def headless_service(target: Target) -> dict[str, Any]:
    """Stable DNS for the pods of a StatefulSet (Ray needs the head before it is ready)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(target),
        "spec": {
            "clusterIP": "None",
            "selector": selector(target),
            "publishNotReadyAddresses": True,
        },
    }


def batch_job(target: Target) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(target),
        "spec": {
            "parallelism": target.replicas,
            "completions": target.replicas,
            "backoffLimit": int(target.template.get("backoff_limit", 0)),
            "template": pod_template(target, "Never"),
        },
    }


def workload(target: Target) -> dict[str, Any]:
    return statefulset(target) if target.kind == STATEFULSET else batch_job(target)
