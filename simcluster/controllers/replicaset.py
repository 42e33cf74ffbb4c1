"""ReplicaSet controller: keeps `replicas` active pods, removing the least settled ones first."""

from __future__ import annotations

from typing import Any

from simcluster.controllers.base import Controller, PodView
from simcluster.defaults import admit_pod
from simcluster.deletion import delete_pod
from simcluster.objects import controller_ref, pod_from_template

Obj = dict[str, Any]
BURST = 500


def deletion_rank(pod: PodView) -> tuple[bool, bool, bool]:
    """Unscheduled before scheduled, pending before running, unready before ready."""
    return (bool(pod.node), pod.phase == "Running", pod.ready)


class ReplicaSetController(Controller):
    resource = "replicasets"
    component = "replicaset-controller"

    def sync(self, rs: Obj, now: float) -> None:
        if "deletionTimestamp" in rs["metadata"]:
            return
        pods = self.owned_pods(rs)
        active = [p for p in pods if p.active]
        wanted = rs["spec"].get("replicas", 1)
        if len(active) < wanted:
            for _ in range(min(wanted - len(active), BURST)):
                self._create(rs)
        elif len(active) > wanted:
            for pod in sorted(active, key=deletion_rank)[: len(active) - wanted]:
                delete_pod(self.ctx, pod.key)
                self.event(rs, "Normal", "SuccessfulDelete", f"Deleted pod: {pod.name}")
        self.write_status(rs, self._status(rs, self.owned_pods(rs), now))

    def _create(self, rs: Obj) -> None:
        meta = rs["metadata"]
        name = f"{meta['name']}-{self.ctx.suffix()}"
        pod = pod_from_template(
            rs["spec"]["template"], meta["namespace"], name, controller_ref("replicasets", rs), {}
        )
        pod["metadata"]["generateName"] = f"{meta['name']}-"
        admit_pod(pod)
        if self.create_pod(rs, pod):
            self.event(rs, "Normal", "SuccessfulCreate", f"Created pod: {name}")

    def _status(self, rs: Obj, pods: list[PodView], now: float) -> Obj:
        min_ready = rs["spec"].get("minReadySeconds", 0)
        active = [p for p in pods if p.active]
        status: Obj = {"replicas": len(active)}
        selector_labels = (rs["spec"].get("selector") or {}).get("matchLabels") or {}
        template_labels = (
            (rs["spec"]["template"].get("metadata") or {}).get("labels")
        ) or selector_labels
        counts = {
            "fullyLabeledReplicas": sum(
                1 for p in active if all(p.labels.get(k) == v for k, v in template_labels.items())
            ),
            "readyReplicas": sum(1 for p in active if p.ready),
            "availableReplicas": sum(1 for p in active if p.available(min_ready, now)),
        }
        status.update({k: v for k, v in counts.items() if v})
        status["observedGeneration"] = rs["metadata"].get("generation", 1)
        if min_ready and counts["availableReplicas"] < counts["readyReplicas"]:
            self.requeue((rs["metadata"]["namespace"], rs["metadata"]["name"]), now + 1.0)
        return status
