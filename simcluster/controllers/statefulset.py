"""StatefulSet controller: stable names, ordered creation and removal, rolling updates."""

from __future__ import annotations

import re
from typing import Any

from simcluster.controllers.base import Controller, PodView, pod_view
from simcluster.defaults import admit_pod
from simcluster.deletion import delete_pod
from simcluster.objects import controller_ref, pod_from_template, template_hash

Obj = dict[str, Any]


def revision_name(sts: Obj) -> str:
    collisions = (sts.get("status") or {}).get("collisionCount", 0)
    return f"{sts['metadata']['name']}-{template_hash(sts['spec']['template'], collisions)}"


class StatefulSetController(Controller):
    resource = "statefulsets"
    component = "statefulset-controller"

    def sync(self, sts: Obj, now: float) -> None:
        if "deletionTimestamp" in sts["metadata"]:
            return
        pods = self._pods_by_ordinal(sts)
        update_revision = revision_name(sts)
        current_revision = (sts.get("status") or {}).get("currentRevision") or update_revision
        self._reconcile(sts, pods, update_revision)
        pods = self._pods_by_ordinal(sts)
        self.write_status(sts, self._status(sts, pods, current_revision, update_revision, now))

    def _pods_by_ordinal(self, sts: Obj) -> dict[int, PodView]:
        pattern = re.compile(re.escape(sts["metadata"]["name"]) + r"-(0|[1-9][0-9]*)")
        pods = {}
        for pod in self.owned_pods(sts):
            match = pattern.fullmatch(pod.name)
            if match:
                pods[int(match.group(1))] = pod
        return pods

    def _reconcile(self, sts: Obj, pods: dict[int, PodView], revision: str) -> None:
        """One pass of the real control loop: replicas first (in order), then condemned pods
        from the highest ordinal, then the rolling update; OrderedReady stops at the first
        pod that is missing, terminating or not Running and Ready."""
        spec = sts["spec"]
        replicas = spec.get("replicas", 1)
        monotonic = spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady"
        for ordinal in range(replicas):
            pod = pods.get(ordinal)
            if pod is not None and pod.terminal and not pod.deleting:
                self._delete(sts, pod)
                pod = self._if_still_there(pod)
            if pod is None:
                self._create(sts, ordinal, revision)
                if monotonic:
                    return
                continue
            if monotonic and (pod.deleting or not _running_and_ready(pod)):
                return
        if self._scale_down(sts, pods, replicas, monotonic):
            return
        self._rolling_update(sts, pods, replicas, revision)

    def _scale_down(
        self, sts: Obj, pods: dict[int, PodView], replicas: int, monotonic: bool
    ) -> bool:
        condemned = sorted((o for o in pods if o >= replicas), reverse=True)
        unhealthy = [o for o in sorted(pods) if not _running_and_ready(pods[o])]
        first_unhealthy = unhealthy[0] if unhealthy else None
        for ordinal in condemned:
            pod = pods[ordinal]
            if pod.deleting:
                if monotonic:
                    return True
                continue
            if monotonic and not _running_and_ready(pod) and ordinal != first_unhealthy:
                return True
            self._delete(sts, pod)
            if monotonic:
                return True
        return bool(condemned)

    def _rolling_update(
        self, sts: Obj, pods: dict[int, PodView], replicas: int, revision: str
    ) -> None:
        strategy = sts["spec"].get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return
        partition = (strategy.get("rollingUpdate") or {}).get("partition", 0)
        if not all(_running_and_ready(pods[o]) for o in range(replicas) if o in pods):
            return
        for ordinal in range(replicas - 1, partition - 1, -1):
            pod = pods.get(ordinal)
            if pod is not None and pod.labels.get("controller-revision-hash") != revision:
                self._delete(sts, pod)
                return

    def _if_still_there(self, pod: PodView) -> PodView | None:
        """A finished pod is removed at once unless a finalizer holds it; then it is terminating."""
        version = self.ctx.store.get_version("pods", pod.key)
        return None if version is None else pod_view(pod.key, version)

    def _create(self, sts: Obj, ordinal: int, revision: str) -> None:
        meta, spec = sts["metadata"], sts["spec"]
        name = f"{meta['name']}-{ordinal}"
        labels = {
            "apps.kubernetes.io/pod-index": str(ordinal),
            "controller-revision-hash": revision,
            "statefulset.kubernetes.io/pod-name": name,
        }
        pod = pod_from_template(
            spec["template"], meta["namespace"], name, controller_ref("statefulsets", sts), labels
        )
        pod["spec"]["hostname"] = name
        if spec.get("serviceName"):
            pod["spec"]["subdomain"] = spec["serviceName"]
        admit_pod(pod)
        if self.create_pod(sts, pod):
            self.event(
                sts,
                "Normal",
                "SuccessfulCreate",
                f"create Pod {name} in StatefulSet {meta['name']} successful",
            )

    def _delete(self, sts: Obj, pod: PodView) -> None:
        delete_pod(self.ctx, pod.key)
        self.event(
            sts,
            "Normal",
            "SuccessfulDelete",
            f"delete Pod {pod.name} in StatefulSet {sts['metadata']['name']} successful",
        )

    def _status(
        self, sts: Obj, pods: dict[int, PodView], current: str, update: str, now: float
    ) -> Obj:
        """StatefulSetStatus with the Go omitempty rules: zero counts vanish except replicas
        and availableReplicas; currentRevision catches up once the rollout is complete."""
        replicas = sts["spec"].get("replicas", 1)
        min_ready = sts["spec"].get("minReadySeconds", 0)
        live = [p for p in pods.values() if not p.deleting]
        ready = sum(1 for p in live if _running_and_ready(p))
        updated = sum(1 for p in live if p.labels.get("controller-revision-hash") == update)
        available = sum(1 for p in live if _running_and_ready(p) and p.available(min_ready, now))
        if updated == replicas and ready == replicas and len(live) == replicas:
            current = update
        current_count = sum(1 for p in live if p.labels.get("controller-revision-hash") == current)
        status: Obj = {
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": len(pods),
        }
        for field, value in (
            ("readyReplicas", ready),
            ("currentReplicas", current_count),
            ("updatedReplicas", updated),
        ):
            if value:
                status[field] = value
        status.update(
            {
                "currentRevision": current,
                "updateRevision": update,
                "collisionCount": (sts.get("status") or {}).get("collisionCount", 0),
            }
        )
        status["availableReplicas"] = available
        if min_ready and available < ready:
            self.requeue((sts["metadata"]["namespace"], sts["metadata"]["name"]), now + 1.0)
        return status


def _running_and_ready(pod: PodView) -> bool:
    return pod.phase == "Running" and pod.ready and not pod.deleting
