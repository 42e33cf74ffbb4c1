"""The disruption controller: each PodDisruptionBudget's status from the pods it selects.

As `pkg/controller/disruption`: `expectedPods` is the number of selected pods for an integer
`minAvailable`, otherwise the summed scale of their controllers; `currentHealthy` counts the
selected pods that are Ready, not being deleted and not recently disrupted (an eviction writes
the pod into `disruptedPods`; the entry goes when the pod is deleted or after two minutes);
`disruptionsAllowed = max(0, currentHealthy - desiredHealthy)`.
"""

from __future__ import annotations

from typing import Any

from simcluster.clock import parse_rfc3339
from simcluster.controllers.base import Controller
from simcluster.disruption import budget_selects, pod_ready
from simcluster.objects import condition, percent_or_int
from simcluster.store import Key, Version

Obj = dict[str, Any]
DISRUPTION_TIMEOUT = 120.0  # seconds an eviction's entry in disruptedPods is believed
SCALED = {"ReplicaSet": "replicasets", "StatefulSet": "statefulsets"}


class DisruptionController(Controller):
    resource = "poddisruptionbudgets"
    component = "controllermanager"

    def on_change(self, resource: str, key: Key, old: Version | None, new: Version | None) -> None:
        if resource == self.resource:
            self.dirty.add(key)
        elif resource == "pods" or resource in SCALED.values():
            self.dirty.update(self.ctx.store.keys(self.resource, key[0]))

    def sync(self, budget: Obj, now: float) -> None:
        meta = budget["metadata"]
        pods = [
            pod
            for pod in self.ctx.store.objects("pods", meta["namespace"])
            if budget_selects(budget, pod["metadata"].get("labels") or {})
        ]
        disrupted = _still_disrupted(budget, pods, now)
        expected, desired = self._expectation(budget, pods)
        healthy = sum(
            1
            for pod in pods
            if pod_ready(pod)
            and "deletionTimestamp" not in pod["metadata"]
            and pod["metadata"]["name"] not in disrupted
        )
        allowed = max(0, healthy - desired) if expected > 0 or desired == 0 else 0
        old = budget.get("status") or {}
        status: Obj = {
            "observedGeneration": meta.get("generation", 1),
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "conditions": [self._condition(old, allowed, meta.get("generation", 1))],
        }
        if disrupted:
            status["disruptedPods"] = disrupted
        self.write_status(budget, status)
        if disrupted:
            self.requeue((meta["namespace"], meta["name"]), now + 5)

    def _expectation(self, budget: Obj, pods: list[Obj]) -> tuple[int, int]:
        spec = budget.get("spec") or {}
        if "maxUnavailable" in spec:
            expected = self._scale(pods)
            unavailable = percent_or_int(spec["maxUnavailable"], expected, True)
            return expected, max(0, expected - unavailable)
        minimum = spec.get("minAvailable", 0)
        if isinstance(minimum, int):
            return len(pods), minimum
        expected = self._scale(pods)
        return expected, percent_or_int(minimum, expected, True)

    def _scale(self, pods: list[Obj]) -> int:
        """The summed `spec.replicas` of the selected pods' controllers (each counted once)."""
        total, seen = 0, set()
        for pod in pods:
            owner = next(
                (r for r in pod["metadata"].get("ownerReferences") or () if r.get("controller")),
                None,
            )
            if owner is None or owner["uid"] in seen or owner["kind"] not in SCALED:
                continue
            seen.add(owner["uid"])
            key = (pod["metadata"]["namespace"], owner["name"])
            found = self.ctx.store.get(SCALED[owner["kind"]], key)
            total += ((found or {}).get("spec") or {}).get("replicas", 0)
        return total

    def _condition(self, old: Obj, allowed: int, generation: int) -> Obj:
        status = "True" if allowed > 0 else "False"
        previous = condition(old.get("conditions") or [], "DisruptionAllowed") or {}
        changed = previous.get("status") != status
        return {
            "type": "DisruptionAllowed",
            "status": status,
            "observedGeneration": generation,
            "lastTransitionTime": self.ctx.stamp()
            if changed
            else previous.get("lastTransitionTime", self.ctx.stamp()),
            "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
            "message": "",
        }


def _still_disrupted(budget: Obj, pods: list[Obj], now: float) -> dict[str, str]:
    """The evictions still believed: pod present, not yet being deleted, entry fresh."""
    entries = (budget.get("status") or {}).get("disruptedPods") or {}
    present = {
        pod["metadata"]["name"] for pod in pods if "deletionTimestamp" not in pod["metadata"]
    }
    return {
        name: at
        for name, at in entries.items()
        if name in present and parse_rfc3339(at) + DISRUPTION_TIMEOUT > now
    }
