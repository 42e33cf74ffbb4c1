"""Simulated nodes: their objects and heartbeats, and the control-plane loops that watch them —
node lifecycle (Unknown after the grace period, unreachable taints), NoExecute taint eviction,
the unschedulable taint that follows `spec.unschedulable`, and pod garbage collection."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simcluster.clock import UNLIMITED, Budget, parse_rfc3339, rfc3339
from simcluster.context import Context, object_reference
from simcluster.deletion import delete_pod
from simcluster.facts import is_terminal_phase
from simcluster.nodeinfo import NodeRegistry, SimNode
from simcluster.objects import condition
from simcluster.quantity import parse_quantity
from simcluster.scheduling import tolerates
from simcluster.store import Key, Version

Obj = dict[str, Any]
HEARTBEAT_SECONDS = 10.0
# The kubelet renews its Lease every HEARTBEAT_SECONDS (what the node controller's grace period
# watches) but posts the Node's status, `lastHeartbeatTime` included, only when it changes or
# every nodeStatusReportFrequency (5 minutes): a quiet Node object changes every 5 minutes.
REPORT_SECONDS = 300.0
GRACE_SECONDS = 40.0
# The taint manager looks at a tainted node's pods at most this often (simulated seconds).
EVICTION_CHECK_SECONDS = 1.0
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
HEALTHY = (
    (
        "MemoryPressure",
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)


@dataclass(frozen=True)
class NodeShape:
    gpus: int
    cpu: str
    memory: str
    gpu_product: str = "NVIDIA-H100-80GB-HBM3"


def node_object(ctx: Context, sim: SimNode, shape: NodeShape) -> Obj:
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": sim.name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": f"sim-{shape.gpus}x-h100" if shape.gpus else "sim-cpu",
        "topology.kubernetes.io/zone": f"sim-zone-{'abc'[sim.index % 3]}",
    }
    if shape.gpus:
        labels.update(
            {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": shape.gpu_product,
                "nvidia.com/gpu.count": str(shape.gpus),
                "trainyard.io/gpu-product": shape.gpu_product,
            }
        )
    cidr = f"10.244.{sim.index}.0/24"
    spec = {"podCIDR": cidr, "podCIDRs": [cidr], "providerID": f"simcluster://{sim.name}"}
    return {
        "metadata": {
            "name": sim.name,
            "labels": labels,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": spec,
        "status": _node_status(ctx, sim, shape),
    }


def _node_status(ctx: Context, sim: SimNode, shape: NodeShape) -> Obj:
    memory_ki = int(parse_quantity(shape.memory)) // 1024
    capacity = {
        "cpu": shape.cpu,
        "ephemeral-storage": "1055762868Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{memory_ki}Ki",
        "pods": "110",
    }
    allocatable = dict(
        capacity,
        **{"ephemeral-storage": "972991057538", "memory": f"{memory_ki - 2 * 1024 * 1024}Ki"},
    )
    if shape.gpus:
        capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = str(shape.gpus)
    stamp = ctx.stamp()
    return {
        "capacity": capacity,
        "allocatable": allocatable,
        "conditions": [_condition(c, stamp, stamp) for c in HEALTHY],
        "addresses": [
            {"type": "InternalIP", "address": sim.internal_ip},
            {"type": "Hostname", "address": sim.name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": ctx.hex_id(32),
            "systemUUID": ctx.uid(),
            "bootID": ctx.uid(),
            "kernelVersion": "6.8.0-1021-aws",
            "osImage": "Ubuntu 22.04.5 LTS",
            "containerRuntimeVersion": "containerd://1.7.24",
            "kubeletVersion": "v1.33.0",
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def _condition(spec: tuple[str, str, str, str], heartbeat: str, transition: str) -> Obj:
    type_, status, reason, message = spec
    return {
        "type": type_,
        "status": status,
        "lastHeartbeatTime": heartbeat,
        "lastTransitionTime": transition,
        "reason": reason,
        "message": message,
    }


class NodeController:
    """Heartbeats of online simulated nodes; node lifecycle, taint eviction and pod GC loops."""

    def __init__(self, ctx: Context, registry: NodeRegistry, resync: Callable[[str], None]) -> None:
        self.ctx = ctx
        self.registry = registry
        self.resync = resync
        self.dirty: set[str] = set()
        self.no_execute: set[str] = set()
        self.gone: set[str] = set()
        self._checked_at: dict[str, float] = {}

    def on_change(self, resource: str, key: Key, old: Version | None, new: Version | None) -> None:
        if resource == "nodes":
            (self.dirty if new is not None else self.gone).add(key[1])

    def add_nodes(self, count: int, shape: NodeShape) -> None:
        for index in range(count):
            sim = self.registry.add(f"sim-node-{index}")
            sim.last_heartbeat = sim.last_reported = self.ctx.now()
            self.ctx.store.create("nodes", node_object(self.ctx, sim, shape), self.ctx.stamp())

    def run(self, now: float, budget: Budget = UNLIMITED) -> bool:
        busy = bool(self.dirty or self.gone)
        for sim in self.registry.nodes.values():
            if sim.online and now - sim.last_heartbeat >= HEARTBEAT_SECONDS:
                self._heartbeat(sim, now)
            elif (
                not sim.online
                and not sim.marked_unknown
                and now - sim.last_heartbeat >= GRACE_SECONDS
            ):
                self._mark_unknown(sim, now)
                busy = True
        for name in sorted(self.dirty):
            self._reconcile_taints(name, now)
        self.dirty.clear()
        busy |= self._collect_orphans()
        for name in sorted(self.no_execute):
            if now - self._checked_at.get(name, float("-inf")) >= EVICTION_CHECK_SECONDS:
                self._checked_at[name] = now
                busy |= self._evict(name, now)
        for sim in self.registry.nodes.values():
            if not sim.online:
                busy |= self._collect_terminating(sim.name, now)
        return busy

    # Kubelet side ----------------------------------------------------------------------------

    def _heartbeat(self, sim: SimNode, now: float) -> None:
        """The kubelet renews its Lease, and posts status when due: heartbeats move; a node
        coming back turns healthy again."""
        recovered = sim.marked_unknown
        sim.last_heartbeat = now
        node = self.ctx.store.get("nodes", ("", sim.name))
        if node is None or (not recovered and now - sim.last_reported < REPORT_SECONDS):
            return
        stamp = rfc3339(now)
        conditions = node["status"].get("conditions") or []
        for spec in HEALTHY:
            current = condition(conditions, spec[0])
            transition = (
                current["lastTransitionTime"]
                if current and current.get("status") == spec[1]
                else stamp
            )
            fresh = _condition(spec, stamp, transition)
            if current is None:
                conditions.append(fresh)
            else:
                current.update(fresh)
        node["status"]["conditions"] = conditions
        if recovered:
            _drop_taints(node, {UNREACHABLE})
        sim.last_reported, sim.marked_unknown = now, False
        self.ctx.store.update("nodes", node)
        if recovered:
            self._node_event(
                node, "Normal", "NodeReady", f"Node {sim.name} status is now: NodeReady", "kubelet"
            )

    def set_online(self, name: str, online: bool) -> None:
        sim = self.registry.get(name)
        if sim is None:
            raise KeyError(name)
        was_online, sim.online = sim.online, online
        if online and not was_online:
            # Post status at once, and let the kubelet catch up on every pod it ignored meanwhile.
            sim.last_heartbeat = float("-inf")
            self.resync(name)

    # Node lifecycle --------------------------------------------------------------------------

    def _mark_unknown(self, sim: SimNode, now: float) -> None:
        node = self.ctx.store.get("nodes", ("", sim.name))
        sim.marked_unknown = True
        if node is None:
            return
        stamp = rfc3339(now)
        for item in node["status"].get("conditions") or []:
            if item.get("status") != "Unknown":
                item.update(
                    {
                        "status": "Unknown",
                        "reason": "NodeStatusUnknown",
                        "message": "Kubelet stopped posting node status.",
                        "lastTransitionTime": stamp,
                    }
                )
        _add_taints(node, [(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")], stamp)
        self.ctx.store.update("nodes", node)
        self._node_event(
            node,
            "Normal",
            "NodeNotReady",
            f"Node {sim.name} status is now: NodeNotReady",
            "node-controller",
        )
        for key in self.ctx.store.pods_on_node(sim.name):
            self._mark_pod_not_ready(key, stamp)

    def _mark_pod_not_ready(self, key: Key, stamp: str) -> None:
        """MarkPodsNotReady: only the Ready condition flips; phase and containers go stale."""
        pod = self.ctx.store.get("pods", key)
        if pod is None or is_terminal_phase((pod.get("status") or {}).get("phase", "")):
            return
        ready = condition((pod.get("status") or {}).get("conditions") or [], "Ready")
        if ready is None or ready.get("status") == "False":
            return
        ready.update({"status": "False", "lastTransitionTime": stamp})
        self.ctx.store.update("pods", pod)
        self.ctx.events.record(
            object_reference("pods", pod),
            "Warning",
            "NodeNotReady",
            "Node is not ready",
            "node-controller",
        )

    def _node_event(self, node: Obj, type_: str, reason: str, message: str, component: str) -> None:
        reference = object_reference("nodes", node)
        reference["uid"] = node["metadata"]["name"]
        self.ctx.events.record(
            reference, type_, reason, message, component, node["metadata"]["name"]
        )

    def _reconcile_taints(self, name: str, now: float) -> None:
        """TaintNodesByCondition for cordons: the unschedulable taint mirrors spec.unschedulable."""
        node = self.ctx.store.get("nodes", ("", name))
        if node is None:
            self.no_execute.discard(name)
            return
        wanted = bool(node["spec"].get("unschedulable"))
        taints = node["spec"].get("taints") or []
        present = any(t.get("key") == UNSCHEDULABLE for t in taints)
        if wanted and not present:
            _add_taints(node, [(UNSCHEDULABLE, "NoSchedule")], rfc3339(now))
            self.ctx.store.update("nodes", node)
        elif present and not wanted:
            _drop_taints(node, {UNSCHEDULABLE})
            self.ctx.store.update("nodes", node)
        if any(t.get("effect") == "NoExecute" for t in node["spec"].get("taints") or []):
            self.no_execute.add(name)
        else:
            self.no_execute.discard(name)

    # Taint eviction and pod GC ---------------------------------------------------------------

    def _evict(self, name: str, now: float) -> bool:
        node = self.ctx.store.get("nodes", ("", name))
        taints = [
            t
            for t in (node or {}).get("spec", {}).get("taints") or []
            if t.get("effect") == "NoExecute"
        ]
        evicted = False
        for key in self.ctx.store.pods_on_node(name):
            version = self.ctx.store.get_version("pods", key)
            if (
                version is None
                or version.facts["_deleting"]
                or is_terminal_phase(version.facts["status.phase"])
            ):
                continue
            pod = self.ctx.store.get("pods", key)
            if pod is not None and _eviction_time(pod, taints, now) <= now:
                self._evict_pod(key, pod, now)
                evicted = True
        return evicted

    def _evict_pod(self, key: Key, pod: Obj, now: float) -> None:
        conditions = pod.setdefault("status", {}).setdefault("conditions", [])
        conditions[:] = [c for c in conditions if c.get("type") != "DisruptionTarget"]
        conditions.append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": rfc3339(now),
                "reason": "DeletionByTaintManager",
                "message": "Taint manager: deleting due to NoExecute taint",
            }
        )
        self.ctx.store.update("pods", pod)
        message = f"Marking for deletion Pod {key[0]}/{key[1]}"
        self.ctx.events.record(
            object_reference("pods", pod),
            "Normal",
            "TaintManagerEviction",
            message,
            "taint-eviction-controller",
        )
        delete_pod(self.ctx, key)

    def _collect_terminating(self, name: str, now: float) -> bool:
        """Pods terminating on a node whose kubelet is gone fail and go at their deadline."""
        collected = False
        for key in self.ctx.store.pods_on_node(name):
            version = self.ctx.store.get_version("pods", key)
            if version is None or not version.facts["_deleting"]:
                continue
            pod = self.ctx.store.get("pods", key)
            if pod is not None and parse_rfc3339(pod["metadata"]["deletionTimestamp"]) <= now:
                self._force_delete(pod)
                collected = True
        return collected

    def _collect_orphans(self) -> bool:
        """PodGC: pods bound to a node object that no longer exists."""
        if not self.gone:
            return False
        for name in sorted(self.gone):
            self.no_execute.discard(name)
            for key in self.ctx.store.pods_on_node(name):
                pod = self.ctx.store.get("pods", key)
                if pod is not None:
                    self._force_delete(pod)
        self.gone.clear()
        return True

    def _force_delete(self, pod: Obj) -> None:
        status = pod.setdefault("status", {})
        if not is_terminal_phase(status.get("phase", "")):
            status["phase"] = "Failed"
        meta = pod["metadata"]
        meta.setdefault("deletionTimestamp", self.ctx.stamp())
        meta["deletionGracePeriodSeconds"] = 0
        self.ctx.store.update("pods", pod)


def _eviction_time(pod: Obj, taints: list[Obj], now: float) -> float:
    """When the taint manager deletes the pod: at once for an untolerated taint, after the
    shortest tolerationSeconds otherwise, never if every taint is tolerated forever."""
    tolerations = pod["spec"].get("tolerations") or []
    moment = float("inf")
    for taint in taints:
        matching = [t for t in tolerations if tolerates(t, taint)]
        if not matching:
            return now
        bounded = [
            t["tolerationSeconds"] for t in matching if t.get("tolerationSeconds") is not None
        ]
        if bounded and len(bounded) == len(matching):
            added = parse_rfc3339(taint["timeAdded"]) if taint.get("timeAdded") else now
            moment = min(moment, added + max(0, min(bounded)))
    return moment


def _add_taints(node: Obj, wanted: list[tuple[str, str]], stamp: str) -> None:
    taints = node["spec"].setdefault("taints", [])
    for key, effect in wanted:
        if not any(t.get("key") == key and t.get("effect") == effect for t in taints):
            taints.append({"key": key, "effect": effect, "timeAdded": stamp})


def _drop_taints(node: Obj, keys: set[str]) -> None:
    taints = [t for t in node["spec"].get("taints") or [] if t.get("key") not in keys]
    if taints:
        node["spec"]["taints"] = taints
    else:
        node["spec"].pop("taints", None)
