"""The default scheduler's filters (the pod's claims, unschedulable, taints, node affinity,
resources fit), its least-allocated choice among feasible nodes, and its FitError message with the
preemption part."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from simcluster.claims import claim_names
from simcluster.clock import MIN_BATCH, UNLIMITED, Budget, rfc3339
from simcluster.context import Context, object_reference
from simcluster.facts import is_terminal_phase
from simcluster.objects import condition
from simcluster.quantity import QuantityError, scaled_amount
from simcluster.store import Key, Version

Obj = dict[str, Any]
RETRY_SECONDS = 10.0
UNRESOLVABLE = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
SCORED = ("cpu", "memory")
SCORED_WITH_GPU = ("cpu", "memory", "nvidia.com/gpu")


def tolerates(toleration: Obj, taint: Obj) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint.get("key")
    return toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get(
        "value", ""
    )


@dataclass
class NodeView:
    name: str
    labels: dict[str, str]
    unschedulable: bool
    taints: list[Obj]
    allocatable: dict[str, int]
    index: int = 0
    used: Counter[str] = field(default_factory=Counter)
    scored: Counter[str] = field(default_factory=Counter)
    pods: int = 0

    def add(self, requests: dict[str, int]) -> None:
        self.used.update(requests)
        self.scored.update(scoring_requests(requests))
        self.pods += 1

    @classmethod
    def of(cls, node: Obj) -> NodeView:
        allocatable = {}
        for name, value in (node.get("status") or {}).get("allocatable", {}).items():
            try:
                allocatable[name] = scaled_amount(name, value)
            except QuantityError:
                continue
        spec = node.get("spec") or {}
        return cls(
            node["metadata"]["name"],
            node["metadata"].get("labels") or {},
            bool(spec.get("unschedulable")),
            spec.get("taints") or [],
            allocatable,
        )


def _term_matches(term: Obj, node: NodeView) -> bool:
    for expression in term.get("matchExpressions") or []:
        if not _expression_matches(expression, node.labels.get(expression["key"])):
            return False
    for expression in term.get("matchFields") or []:
        value = node.name if expression["key"] == "metadata.name" else None
        if not _expression_matches(expression, value):
            return False
    return True


def _expression_matches(expression: Obj, value: str | None) -> bool:
    operator, values = expression["operator"], expression.get("values") or []
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and value.lstrip("-").isdigit():
        return int(value) > int(values[0]) if operator == "Gt" else int(value) < int(values[0])
    return False


def filter_node(spec: Obj, requests: dict[str, int], node: NodeView) -> tuple[list[str], bool]:
    """The first failing filter's reasons for this node, and whether preemption could help."""
    static = static_filter(spec, node)
    return (static, False) if static else (_fit(requests, node), True)


def static_filter(spec: Obj, node: NodeView) -> list[str]:
    """Filters independent of what runs on the node: unschedulable, taints, node affinity."""
    tolerations = spec.get("tolerations") or []
    unschedulable = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    if node.unschedulable and not any(tolerates(t, unschedulable) for t in tolerations):
        return ["node(s) were unschedulable"]
    for taint in node.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
            tolerates(t, taint) for t in tolerations
        ):
            return [f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"]
    if not _affinity_matches(spec, node):
        return ["node(s) didn't match Pod's node affinity/selector"]
    return []


def _affinity_matches(spec: Obj, node: NodeView) -> bool:
    for key, value in (spec.get("nodeSelector") or {}).items():
        if node.labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    return not terms or any(_term_matches(term, node) for term in terms)


def _fit(requests: dict[str, int], node: NodeView) -> list[str]:
    """NodeResourcesFit: every shortfall counts, in resource-name order."""
    reasons = []
    used, allocatable = node.used, node.allocatable
    if node.pods + 1 > allocatable.get("pods", 110):
        reasons.append("Too many pods")
    for name in sorted(requests):
        amount = requests[name]
        if amount and used[name] + amount > allocatable.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


def fit_error(total: int, failures: dict[str, tuple[list[str], bool]]) -> str:
    """FitError.Error(): counts per reason, sorted as strings, then the preemption diagnosis."""
    if total == 0:
        return "no nodes available to schedule pods"
    reasons: Counter[str] = Counter()
    preemption: Counter[str] = Counter()
    for node_reasons, resolvable in failures.values():
        reasons.update(node_reasons)
        preemption[NO_VICTIMS if resolvable else UNRESOLVABLE] += 1
    listed = ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items()))
    after = ", ".join(sorted(f"{count} {reason}" for reason, count in preemption.items()))
    return (
        f"0/{total} nodes are available: {listed}. "
        f"preemption: 0/{total} nodes are available: {after}."
    )


def prefilter_error(total: int, message: str) -> str:
    """FitError.Error() when a PreFilter plugin refused the pod: its message instead of the
    per-node reasons, and no node where preemption would help."""
    return (
        f"0/{total} nodes are available: {message}. "
        f"preemption: 0/{total} nodes are available: {total} {UNRESOLVABLE}."
    )


def scoring_requests(requests: dict[str, int]) -> dict[str, int]:
    """Scoring counts a pod without requests as 100m CPU and 200Mi, so such pods still spread."""
    defaults = {"cpu": 100, "memory": 200 * 1024 * 1024}
    return {**defaults, **{k: v for k, v in requests.items() if v}}


def _score(wanted: dict[str, int], node: NodeView) -> float:
    """LeastAllocated over cpu and memory (and GPUs when asked for): emptier nodes first."""
    names = SCORED_WITH_GPU if "nvidia.com/gpu" in wanted else SCORED
    total, counted = 0.0, 0
    allocatable, scored = node.allocatable, node.scored
    for name in names:
        capacity = allocatable.get(name, 0)
        if capacity:
            total += (capacity - scored[name] - wanted.get(name, 0)) / capacity
            counted += 1
    return total / counted if counted else 0.0


class Scheduler:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.queue: set[Key] = set()
        self.unschedulable: set[Key] = set()
        self.cluster_changed = False
        self.retry_at = 0.0

    def on_change(self, resource: str, key: Key, old: Version | None, new: Version | None) -> None:
        if resource == "nodes" and (
            old is None or new is None or old.facts["_shape"] != new.facts["_shape"]
        ):
            self.cluster_changed = True
        if resource == "persistentvolumeclaims":
            self.cluster_changed = True  # a claim created or bound: its pods may fit now
        if resource != "pods":
            return
        if new is not None and not new.facts["spec.nodeName"] and not new.facts["_deleting"]:
            if key not in self.unschedulable:
                self.queue.add(key)
        elif (
            old is not None
            and old.facts["spec.nodeName"]
            and (new is None or is_terminal_phase(new.facts["status.phase"]))
        ):
            self.cluster_changed = True

    def run(self, now: float, budget: Budget = UNLIMITED) -> bool:
        if self.unschedulable and (self.cluster_changed or now >= self.retry_at):
            self.queue |= self.unschedulable
            self.unschedulable.clear()
        self.cluster_changed = False
        if not self.queue:
            return False
        keys, self.queue = self.queue, set()
        nodes = self._node_views()
        pending = [
            (v.facts["_created"], k, v)
            for k in keys
            if (v := self.ctx.store.get_version("pods", k)) is not None
        ]
        static: dict[bytes, list[list[str]]] = {}
        ordered = sorted(pending)
        for index, (_, key, version) in enumerate(ordered):
            if index >= MIN_BATCH and budget.exhausted():
                self.queue.update(k for _, k, _ in ordered[index:])
                break
            if not version.facts["spec.nodeName"] and not version.facts["_deleting"]:
                self._schedule(key, version.facts["_requests"], nodes, static, now)
        self.retry_at = now + RETRY_SECONDS
        return True

    def _node_views(self) -> list[NodeView]:
        views = [NodeView.of(node) for node in self.ctx.store.objects("nodes")]
        for index, view in enumerate(views):
            view.index = index
            for key in self.ctx.store.pods_on_node(view.name):
                version = self.ctx.store.get_version("pods", key)
                if version is not None and not is_terminal_phase(version.facts["status.phase"]):
                    view.add(version.facts["_requests"])
        return views

    def _schedule(
        self,
        key: Key,
        requests: dict[str, int],
        nodes: list[NodeView],
        static: dict[bytes, list[list[str]]],
        now: float,
    ) -> None:
        """Filters then scores; pods with the same placement rules share the static filters."""
        pod = self.ctx.store.get("pods", key)
        if pod is None:
            return
        spec = pod["spec"]
        if claim_problem := self._claim_problem(pod):
            self._unschedulable(key, pod, prefilter_error(len(nodes), claim_problem), now)
            return
        rules = orjson.dumps([spec.get(f) for f in ("nodeSelector", "affinity", "tolerations")])
        if rules not in static:
            static[rules] = [static_filter(spec, node) for node in nodes]
        failures: dict[str, tuple[list[str], bool]] = {}
        wanted = scoring_requests(requests)
        best: tuple[float, int] | None = None
        chosen: NodeView | None = None
        for node, refused in zip(nodes, static[rules], strict=True):
            reasons = refused or _fit(requests, node)
            if reasons:
                failures[node.name] = (reasons, not refused)
                continue
            rank = (_score(wanted, node), -node.index)
            if best is None or rank > best:
                best, chosen = rank, node
        if chosen is None:
            self._unschedulable(key, pod, fit_error(len(nodes), failures), now)
            return
        chosen.add(requests)
        self._bind(pod, chosen.name, now)

    def _claim_problem(self, pod: Obj) -> str:
        """VolumeBinding's PreFilter: every claim exists, is not being deleted, and is bound."""
        namespace = pod["metadata"]["namespace"]
        claims = [
            (name, self.ctx.store.get("persistentvolumeclaims", (namespace, name)))
            for name in claim_names(pod["spec"])
        ]
        for name, claim in claims:
            if claim is None:
                return f'persistentvolumeclaim "{name}" not found'
            if claim["metadata"].get("deletionTimestamp"):
                return f'persistentvolumeclaim "{name}" is being deleted'
        if any((claim or {}).get("status", {}).get("phase") != "Bound" for _, claim in claims):
            return "pod has unbound immediate PersistentVolumeClaims"
        return ""

    def _bind(self, pod: Obj, node: str, now: float) -> None:
        pod["spec"]["nodeName"] = node
        conditions = pod.setdefault("status", {}).setdefault("conditions", [])
        conditions[:] = [c for c in conditions if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": rfc3339(now),
            }
        )
        self.ctx.store.update("pods", pod)
        meta = pod["metadata"]
        message = f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}"
        self.ctx.events.record(
            object_reference("pods", pod), "Normal", "Scheduled", message, "default-scheduler"
        )

    def _unschedulable(self, key: Key, pod: Obj, message: str, now: float) -> None:
        self.unschedulable.add(key)
        status = pod.setdefault("status", {})
        current = condition(status.get("conditions") or [], "PodScheduled")
        wanted = {
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": None,
            "lastTransitionTime": rfc3339(now),
            "reason": "Unschedulable",
            "message": message,
        }
        if current is None or current.get("message") != message or current.get("status") != "False":
            if current is not None and current.get("status") == "False":
                wanted["lastTransitionTime"] = current["lastTransitionTime"]
            status["conditions"] = [
                c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"
            ] + [wanted]
            self.ctx.store.update("pods", pod)
        self.ctx.events.record(
            object_reference("pods", pod),
            "Warning",
            "FailedScheduling",
            message,
            "default-scheduler",
        )
