"""DaemonSet controller: a pod per eligible node, pinned by node affinity, rolled one at a time."""

from __future__ import annotations

from typing import Any

from simcluster.controllers.base import Controller, PodView
from simcluster.defaults import admit_pod
from simcluster.deletion import delete_pod
from simcluster.objects import controller_ref, percent_or_int, pod_from_template, template_hash
from simcluster.scheduling import NodeView, filter_node, tolerates
from simcluster.store import Key, Version

Obj = dict[str, Any]

# What the DaemonSet controller adds so its pods survive node trouble and cordons.
DAEMON_TOLERATIONS: list[Obj] = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]


class DaemonSetController(Controller):
    resource = "daemonsets"
    component = "daemonset-controller"

    def on_change(self, resource: str, key: Key, old: Version | None, new: Version | None) -> None:
        super().on_change(resource, key, old, new)
        if resource == "nodes" and (
            old is None or new is None or old.facts["_shape"] != new.facts["_shape"]
        ):
            self.dirty.update(self.ctx.store.keys("daemonsets"))

    def sync(self, ds: Obj, now: float) -> None:
        if "deletionTimestamp" in ds["metadata"]:
            return
        nodes = {node["metadata"]["name"]: node for node in self.ctx.store.objects("nodes")}
        spec = self._pod_spec(ds)
        should_run = {name for name, node in nodes.items() if _should_run(spec, node)}
        may_stay = {name for name, node in nodes.items() if _may_continue(spec, node)}
        pods = [p for p in self.owned_pods(ds) if not p.terminal or not p.deleting]
        by_node: dict[str, list[PodView]] = {}
        for pod in pods:
            if pod.terminal:
                delete_pod(self.ctx, pod.key)
                continue
            by_node.setdefault(_target_node(self.ctx.store.get("pods", pod.key)), []).append(pod)
        for name in sorted(should_run - set(by_node)):
            self._create(ds, name)
        for name, node_pods in by_node.items():
            if name not in may_stay:
                for pod in node_pods:
                    delete_pod(self.ctx, pod.key)
        self._roll(ds, by_node)
        self.write_status(ds, self._status(ds, should_run, self._pods_by_node(ds), now))

    def _pods_by_node(self, ds: Obj) -> dict[str, list[PodView]]:
        grouped: dict[str, list[PodView]] = {}
        for pod in self.owned_pods(ds):
            if not pod.terminal:
                grouped.setdefault(_target_node(self.ctx.store.get("pods", pod.key)), []).append(
                    pod
                )
        return grouped

    def _pod_spec(self, ds: Obj) -> Obj:
        spec = dict(ds["spec"]["template"].get("spec") or {})
        spec["tolerations"] = list(spec.get("tolerations") or []) + DAEMON_TOLERATIONS
        return spec

    def _create(self, ds: Obj, node: str) -> None:
        meta = ds["metadata"]
        name = f"{meta['name']}-{self.ctx.suffix()}"
        labels = {
            "controller-revision-hash": template_hash(ds["spec"]["template"]),
            "pod-template-generation": str(meta.get("generation", 1)),
        }
        pod = pod_from_template(
            ds["spec"]["template"],
            meta["namespace"],
            name,
            controller_ref("daemonsets", ds),
            labels,
        )
        pod["metadata"]["generateName"] = f"{meta['name']}-"
        pod_spec = pod["spec"]
        pod_spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                }
            }
        }
        pod_spec["tolerations"] = list(pod_spec.get("tolerations") or []) + DAEMON_TOLERATIONS
        admit_pod(pod)
        if self.create_pod(ds, pod):
            self.event(ds, "Normal", "SuccessfulCreate", f"Created pod: {name}")

    def _roll(self, ds: Obj, by_node: dict[str, list[PodView]]) -> None:
        """RollingUpdate with maxUnavailable: replace outdated pods while few enough are down."""
        strategy = ds["spec"].get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return
        revision = template_hash(ds["spec"]["template"])
        pods = [p for node_pods in by_node.values() for p in node_pods]
        allowed = max(
            1,
            percent_or_int(
                (strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1), len(by_node), True
            ),
        )
        unavailable = sum(1 for p in pods if not p.ready or p.deleting)
        outdated = sorted(
            (
                p
                for p in pods
                if p.labels.get("controller-revision-hash") != revision and not p.deleting
            ),
            key=lambda p: p.ready,
        )
        for pod in outdated:
            if pod.ready and unavailable >= allowed:
                break
            delete_pod(self.ctx, pod.key)
            unavailable += pod.ready

    def _status(
        self, ds: Obj, should_run: set[str], pods: dict[str, list[PodView]], now: float
    ) -> Obj:
        revision = template_hash(ds["spec"]["template"])
        min_ready = ds["spec"].get("minReadySeconds", 0)
        scheduled = {n for n, ps in pods.items() if ps}
        ready = [p for ps in pods.values() for p in ps if p.ready and not p.deleting]
        available = sum(1 for p in ready if p.available(min_ready, now))
        status: Obj = {
            "currentNumberScheduled": len(scheduled & should_run),
            "numberMisscheduled": len(scheduled - should_run),
            "desiredNumberScheduled": len(should_run),
            "numberReady": len(ready),
            "observedGeneration": ds["metadata"].get("generation", 1),
        }
        updated = sum(
            1
            for ps in pods.values()
            for p in ps
            if p.labels.get("controller-revision-hash") == revision and not p.deleting
        )
        for field, value in (
            ("updatedNumberScheduled", updated),
            ("numberAvailable", available),
            ("numberUnavailable", len(should_run) - available),
        ):
            if value > 0:
                status[field] = value
        return status


def _target_node(pod: Obj | None) -> str:
    """The node a daemon pod is pinned to by its matchFields affinity (or already bound to)."""
    if pod is None:
        return ""
    if pod["spec"].get("nodeName"):
        return str(pod["spec"]["nodeName"])
    terms = (
        pod["spec"]
        .get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms", [])
    )
    for term in terms:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return str(field["values"][0])
    return ""


def _should_run(spec: Obj, node: Obj) -> bool:
    """Selector and affinity match, and every NoSchedule/NoExecute taint is tolerated."""
    view = NodeView.of(node)
    view.unschedulable = False
    reasons, _ = filter_node(spec, {}, view)
    return not [r for r in reasons if r != "Too many pods"]


def _may_continue(spec: Obj, node: Obj) -> bool:
    view = NodeView.of(node)
    taints = [t for t in view.taints if t.get("effect") == "NoExecute"]
    if any(not any(tolerates(tol, t) for tol in spec.get("tolerations") or []) for t in taints):
        return False
    view.taints, view.unschedulable = [], False
    reasons, _ = filter_node(spec, {}, view)
    return not [r for r in reasons if r != "Too many pods"]
