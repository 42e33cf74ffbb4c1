"""API-server defaulting and admission: the fields a real cluster fills in on create."""

from __future__ import annotations

from typing import Any

from simcluster.downward import default_env

Obj = dict[str, Any]

# DefaultTolerationSeconds admission: pods may stay on a lost node for five minutes.
NODE_LOSS_TOLERATIONS: list[Obj] = [
    {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
]


def default_container(container: Obj) -> None:
    image = container.get("image", "")
    tag = image.rsplit("/", 1)[-1]
    untagged = ":" not in tag and "@" not in tag
    always = untagged or tag.endswith(":latest")
    container.setdefault("imagePullPolicy", "Always" if always else "IfNotPresent")
    resources = container.setdefault("resources", {})
    if resources.get("limits") and not resources.get("requests"):
        resources["requests"] = dict(resources["limits"])
    elif resources.get("limits"):
        for name, value in resources["limits"].items():
            resources["requests"].setdefault(name, value)
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    default_env(container.get("env"))


def default_pod_spec(spec: Obj) -> None:
    for container in spec.get("containers") or []:
        default_container(container)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")


def admit_pod(pod: Obj) -> None:
    """Defaulting plus the admission plugins every cluster runs (service account, tolerations)."""
    spec = pod.setdefault("spec", {})
    default_pod_spec(spec)
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    tolerations = spec.setdefault("tolerations", [])
    present = {(t.get("key"), t.get("effect")) for t in tolerations}
    for toleration in NODE_LOSS_TOLERATIONS:
        if (toleration["key"], toleration["effect"]) not in present:
            tolerations.append(dict(toleration))
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}


def qos_class(spec: Obj) -> str:
    """Guaranteed when every container's cpu and memory limits equal its requests."""
    containers = spec.get("containers") or []
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    for r in resources:
        limits, requests = r.get("limits") or {}, r.get("requests") or {}
        for name in ("cpu", "memory"):
            if name not in limits or str(limits[name]) != str(requests.get(name, limits[name])):
                return "Burstable"
    return "Guaranteed"


def _default_template(obj: Obj) -> None:
    template = obj.setdefault("spec", {}).setdefault("template", {})
    template.setdefault("metadata", {})
    default_pod_spec(template.setdefault("spec", {}))


def default_statefulset(obj: Obj) -> None:
    _default_template(obj)
    spec = obj["spec"]
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
    if strategy.get("type", "RollingUpdate") == "RollingUpdate":
        strategy.setdefault("type", "RollingUpdate")
        strategy.setdefault("rollingUpdate", {"partition": 0})
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault(
        "persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"}
    )


def default_deployment(obj: Obj) -> None:
    _default_template(obj)
    spec = obj["spec"]
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {"type": "RollingUpdate"})
    if strategy.get("type", "RollingUpdate") == "RollingUpdate":
        strategy.setdefault("type", "RollingUpdate")
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)


def default_replicaset(obj: Obj) -> None:
    _default_template(obj)
    obj["spec"].setdefault("replicas", 1)


def default_daemonset(obj: Obj) -> None:
    _default_template(obj)
    spec = obj["spec"]
    strategy = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
    if strategy.get("type", "RollingUpdate") == "RollingUpdate":
        strategy.setdefault("type", "RollingUpdate")
        strategy.setdefault("rollingUpdate", {"maxUnavailable": 1, "maxSurge": 0})
    spec.setdefault("revisionHistoryLimit", 10)


def default_job(obj: Obj, uid: str) -> None:
    """Job defaulting, including the generated selector and the labels it puts on the template."""
    _default_template(obj)
    spec = obj["spec"]
    if "completions" not in spec and "parallelism" not in spec:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    spec.setdefault("manualSelector", None)
    if spec["manualSelector"] is None:
        del spec["manualSelector"]
    if not spec.get("manualSelector"):
        name = obj["metadata"]["name"]
        job_labels = {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": uid,
            "job-name": name,
        }
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        labels = spec["template"]["metadata"].setdefault("labels", {})
        labels.update(job_labels)


def default_service(obj: Obj, cluster_ip: str) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec.get("clusterIP") != "None":
        spec["clusterIP"] = spec.get("clusterIP") or cluster_ip
    spec["clusterIPs"] = [spec["clusterIP"]]
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
    obj["status"] = {"loadBalancer": {}}


def default_namespace(obj: Obj) -> None:
    name = obj["metadata"]["name"]
    obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
    obj["spec"] = {"finalizers": ["kubernetes"]}
    obj["status"] = {"phase": "Active"}
