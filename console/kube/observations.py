"""What a cluster reported, as frozen dataclasses parsed from raw LIST items.

Parsers read fields only, never a message's wording (KUBERNETES-FACTS: wording changes across
versions). Absent optional fields take Kubernetes' defaults (`readyReplicas` omitted when 0,
`spec.replicas` defaulting to 1, ...). A value outside an enum is accepted, never fatal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from django.conf import settings

from console.kube import ADDON_LABEL, JOB_LABEL, RUN_LABEL, TASK_LABEL

Item = Mapping[str, Any]
_EMPTY: Mapping[str, Any] = {}
# Kubernetes' pod phases; Unknown (a lost node, deprecated) and any other value read as absent.
POD_PHASES = frozenset({"Pending", "Running", "Succeeded", "Failed"})
STATEFULSET, BATCH_JOB = "StatefulSet", "Job"  # the workload kinds, as the API names them


@dataclass(frozen=True, slots=True)
class Owner:
    """The console's labels on an object: which Job, Task and run it belongs to."""

    job_id: int | None
    task_id: int | None
    run: int | None


@dataclass(frozen=True, slots=True)
class StatefulSetObs:
    namespace: str
    name: str
    uid: str
    owner: Owner
    replicas: int
    ready_replicas: int
    available_replicas: int
    updated_replicas: int

    kind = STATEFULSET


@dataclass(frozen=True, slots=True)
class BatchJobObs:
    namespace: str
    name: str
    uid: str
    owner: Owner
    parallelism: int
    completions: int | None
    active: int
    ready: int
    succeeded: int
    failed: int
    complete: bool
    failed_condition: bool
    condition_reason: str

    kind = BATCH_JOB


WorkloadObs = StatefulSetObs | BatchJobObs


@dataclass(frozen=True, slots=True)
class ServiceObs:
    namespace: str
    name: str
    uid: str
    owner: Owner


@dataclass(frozen=True, slots=True)
class TerminationCompletion:
    """A completion JSON a container wrote to its termination message
    (`{"trainyard": "completion", "outcome": ...}`, docs/workload-signals.md "Fallbacks").
    `instance` tells the container's runs apart: 0 for its first run, n for the run after n
    restarts."""

    outcome: str  # succeeded | failed
    exit_code: int | None
    reason: str
    message: str
    instance: int
    finished_at: datetime | None


@dataclass(frozen=True, slots=True)
class PodObs:
    """One pod. `phase` is None when the API said `Unknown` (or anything outside the enum):
    the sync then keeps the pod's last known phase (docs/decisions.md)."""

    namespace: str
    name: str
    uid: str
    owner: Owner
    addon: str
    node_name: str
    pod_ip: str
    phase: str | None  # one of POD_PHASES
    ready: bool
    waiting_reason: str
    waiting_message: str
    restart_count: int
    exit_code: int | None
    termination_reason: str
    terminated_now: bool
    created_at: datetime | None
    deleted_at: datetime | None
    unschedulable: bool
    scheduling_message: str
    status_reason: str
    status_message: str
    gpus: int
    image: str
    completion: TerminationCompletion | None = None
    # The GPU-hours ledger's times, as Kubernetes reports them: bound to its node (the
    # PodScheduled condition's transition), its main container running since, and every
    # container terminated at (the latest finishedAt; None while one still runs).
    scheduled_at: datetime | None = None
    running_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class NodeObs:
    """Ready True is Online; anything else, Unknown included, is Offline (spec §Node status)."""

    name: str
    online: bool
    unschedulable: bool
    cpu: str
    memory: str
    gpus: int
    heartbeat_at: datetime | None
    message: str  # the Ready condition's "reason: message", when not Ready
    ready_reported: bool = True  # False: the node reports no Ready condition at all


@dataclass(frozen=True, slots=True)
class AddonObs:
    """A workload labelled `trainyard.io/addon`: its rollout counters and template image."""

    addon: str
    kind: str
    namespace: str
    workload_name: str
    image: str
    desired: int
    updated: int
    ready: int
    available: int
    generation: int
    observed_generation: int
    progress_deadline_exceeded: bool
    message: str

    @property
    def image_tag(self) -> str:
        return image_tag(self.image)


# --- small readers -------------------------------------------------------------------------


def parse_time(value: object) -> datetime | None:
    """RFC 3339 as the API writes it (`2024-05-01T10:00:00Z`); None when absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _label_int(labels: Item, key: str) -> int | None:
    value = labels.get(key)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def owner_of(labels: Item) -> Owner:
    return Owner(
        _label_int(labels, JOB_LABEL), _label_int(labels, TASK_LABEL), _label_int(labels, RUN_LABEL)
    )


def _meta(item: Item) -> tuple[str, str, str, Item]:
    meta = item.get("metadata") or _EMPTY
    return (
        meta.get("namespace", ""),
        meta.get("name", ""),
        meta.get("uid", ""),
        meta.get("labels") or _EMPTY,
    )


def _condition(conditions: object, kind: str) -> Item | None:
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, dict) and condition.get("type") == kind:
            return condition
    return None


def _is_true(conditions: object, kind: str) -> bool:
    condition = _condition(conditions, kind)
    return condition is not None and condition.get("status") == "True"


def image_tag(image: str) -> str:
    """`repo/name:v1.2@sha256:..` -> `v1.2`; no tag -> `latest`; digest only -> the digest."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        return last.rsplit(":", 1)[1]
    return digest or "latest"


# --- workloads -----------------------------------------------------------------------------


def parse_statefulset(item: Item) -> StatefulSetObs:
    namespace, name, uid, labels = _meta(item)
    spec = item.get("spec") or _EMPTY
    status = item.get("status") or _EMPTY
    return StatefulSetObs(
        namespace=namespace,
        name=name,
        uid=uid,
        owner=owner_of(labels),
        replicas=_int(spec.get("replicas"), 1),
        ready_replicas=_int(status.get("readyReplicas")),
        available_replicas=_int(status.get("availableReplicas")),
        updated_replicas=_int(status.get("updatedReplicas")),
    )


def parse_batch_job(item: Item) -> BatchJobObs:
    """Complete / Failed come from the conditions of those types (batch/v1 1.31+ also adds
    SuccessCriteriaMet / FailureTarget first: the final ones decide)."""
    namespace, name, uid, labels = _meta(item)
    spec = item.get("spec") or _EMPTY
    status = item.get("status") or _EMPTY
    conditions = status.get("conditions")
    complete, failed = _is_true(conditions, "Complete"), _is_true(conditions, "Failed")
    final = (
        _condition(conditions, "Failed" if failed else "Complete") if complete or failed else None
    )
    completions = spec.get("completions")
    return BatchJobObs(
        namespace=namespace,
        name=name,
        uid=uid,
        owner=owner_of(labels),
        parallelism=_int(spec.get("parallelism"), 1),
        completions=completions if isinstance(completions, int) else None,
        active=_int(status.get("active")),
        ready=_int(status.get("ready")),
        succeeded=_int(status.get("succeeded")),
        failed=_int(status.get("failed")),
        complete=complete,
        failed_condition=failed,
        condition_reason=str(final.get("reason", "")) if final else "",
    )


def parse_service(item: Item) -> ServiceObs:
    namespace, name, uid, labels = _meta(item)
    return ServiceObs(namespace=namespace, name=name, uid=uid, owner=owner_of(labels))


# --- pods ----------------------------------------------------------------------------------


def _main_status(spec: Item, status: Item) -> Item:
    """The status of the pod's first container (the console names it `main`)."""
    statuses = status.get("containerStatuses") or ()
    containers = spec.get("containers") or ()
    first = containers[0].get("name") if containers else None
    for container in statuses:
        if container.get("name") == first:
            return container
    return statuses[0] if statuses else _EMPTY


def gpu_resources() -> tuple[str, ...]:
    """The extended resources counted as GPUs (TRAINYARD_GPU_RESOURCES), read when used."""
    return tuple(getattr(settings, "TRAINYARD_GPU_RESOURCES", ("nvidia.com/gpu",)))


def _count(amounts: Item, names: tuple[str, ...]) -> int | None:
    """The whole units of the named resources in `amounts`; None when none is named."""
    found = [amounts[name] for name in names if name in amounts]
    if not found:
        return None
    return sum(int(text) for text in map(str, found) if text.isdigit())


def _gpus(spec: Item) -> int:
    """GPUs requested (an extended resource's request defaults to its limit)."""
    names = gpu_resources()
    total = 0
    for container in spec.get("containers") or ():
        resources = container.get("resources") or _EMPTY
        amount = _count(resources.get("requests") or _EMPTY, names)
        if amount is None:
            amount = _count(resources.get("limits") or _EMPTY, names)
        total += amount or 0
    return total


def _scheduled_at(scheduled: Item | None) -> datetime | None:
    """When the pod was bound to its node: the PodScheduled condition's time, once True."""
    if scheduled is None or scheduled.get("status") != "True":
        return None
    return parse_time(scheduled.get("lastTransitionTime"))


def _finished_at(spec: Item, status: Item) -> datetime | None:
    """When the last of the pod's containers terminated; None while one has not."""
    statuses = status.get("containerStatuses") or ()
    if not statuses or len(statuses) < len(spec.get("containers") or ()):
        return None
    times = []
    for container in statuses:
        terminated = (container.get("state") or _EMPTY).get("terminated")
        moment = parse_time(terminated.get("finishedAt")) if terminated else None
        if moment is None:
            return None
        times.append(moment)
    return max(times)


def _pod_phase(value: object) -> str | None:
    return value if isinstance(value, str) and value in POD_PHASES else None


COMPLETION_OUTCOMES = frozenset({"succeeded", "failed"})
TERMINATION_MESSAGE_BYTES = 4096  # the kubelet keeps at most this much: nothing longer is read


def parse_completion(message: object) -> dict[str, Any] | None:
    """The completion JSON of a termination message; None for anything else (a plain text
    message, a truncated or malformed JSON, another object): the message is the container's
    free text, never an error of ours."""
    if not isinstance(message, str) or '"trainyard"' not in message:
        return None
    try:
        data = orjson.loads(message[:TERMINATION_MESSAGE_BYTES])
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict) or data.get("trainyard") != "completion":
        return None
    return data if data.get("outcome") in COMPLETION_OUTCOMES else None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _termination_completion(main: Item) -> TerminationCompletion | None:
    """The completion of the current run (`state.terminated`) or else of the previous one
    (`lastState.terminated`): the current run is the restart count's, the previous one before."""
    restarts = _int(main.get("restartCount"))
    for key, instance in (("state", restarts), ("lastState", restarts - 1)):
        terminated = (main.get(key) or _EMPTY).get("terminated") or _EMPTY
        data = parse_completion(terminated.get("message"))
        if data is not None:
            exit_code = data.get("exit_code")
            return TerminationCompletion(
                outcome=data["outcome"],
                exit_code=exit_code if _is_int(exit_code) else None,
                reason=_text(data.get("reason")),
                message=_text(data.get("message")),
                instance=max(instance, 0),
                finished_at=parse_time(terminated.get("finishedAt")),
            )
    return None


def parse_pod(item: Item) -> PodObs:
    namespace, name, uid, labels = _meta(item)
    meta = item.get("metadata") or _EMPTY
    spec = item.get("spec") or _EMPTY
    status = item.get("status") or _EMPTY
    main = _main_status(spec, status)
    state = main.get("state") or _EMPTY
    waiting = state.get("waiting") or _EMPTY
    terminated = state.get("terminated") or (main.get("lastState") or _EMPTY).get("terminated")
    terminated = terminated or _EMPTY
    conditions = status.get("conditions")
    scheduled = _condition(conditions, "PodScheduled")
    unschedulable = scheduled is not None and scheduled.get("status") == "False"
    containers = spec.get("containers") or ()
    exit_code = terminated.get("exitCode")
    return PodObs(
        namespace=namespace,
        name=name,
        uid=uid,
        owner=owner_of(labels),
        addon=str(labels.get(ADDON_LABEL, "")),
        node_name=spec.get("nodeName") or "",
        pod_ip=status.get("podIP") or "",
        phase=_pod_phase(status.get("phase")),
        ready=_is_true(conditions, "Ready"),
        waiting_reason=waiting.get("reason", ""),
        waiting_message=waiting.get("message", ""),
        restart_count=_int(main.get("restartCount")),
        exit_code=exit_code if isinstance(exit_code, int) else None,
        termination_reason=terminated.get("reason", ""),
        terminated_now="terminated" in state,
        created_at=parse_time(meta.get("creationTimestamp")),
        deleted_at=parse_time(meta.get("deletionTimestamp")),
        unschedulable=unschedulable,
        scheduling_message=scheduled.get("message", "") if unschedulable and scheduled else "",
        status_reason=status.get("reason", ""),
        status_message=status.get("message", ""),
        gpus=_gpus(spec),
        image=containers[0].get("image", "") if containers else "",
        completion=_termination_completion(main),
        scheduled_at=_scheduled_at(scheduled),
        running_at=parse_time((state.get("running") or _EMPTY).get("startedAt")),
        finished_at=_finished_at(spec, status),
    )


# --- nodes ---------------------------------------------------------------------------------


def parse_node(item: Item) -> NodeObs:
    _, name, _, _ = _meta(item)
    spec = item.get("spec") or _EMPTY
    status = item.get("status") or _EMPTY
    capacity = status.get("capacity") or _EMPTY
    ready = _condition(status.get("conditions"), "Ready")
    online = ready is not None and ready.get("status") == "True"
    if ready is None or online:
        message = ""
    else:
        message = f"{ready.get('reason', '')}: {ready.get('message', '')}".strip(": ")
    gpus = str(_count(capacity, gpu_resources()) or 0)
    return NodeObs(
        name=name,
        online=online,
        unschedulable=bool(spec.get("unschedulable", False)),
        cpu=str(capacity.get("cpu", "")),
        memory=str(capacity.get("memory", "")),
        gpus=int(gpus) if gpus.isdigit() else 0,
        heartbeat_at=parse_time(ready.get("lastHeartbeatTime")) if ready else None,
        message=message,
        ready_reported=ready is not None,
    )


# --- add-ons -------------------------------------------------------------------------------


def _rollout(kind: str, spec: Item, status: Item) -> tuple[int, int, int, int]:
    """(desired, updated, ready, available) in the words of each workload kind."""
    if kind == "DaemonSet":
        return (
            _int(status.get("desiredNumberScheduled")),
            _int(status.get("updatedNumberScheduled")),
            _int(status.get("numberReady")),
            _int(status.get("numberAvailable")),
        )
    return (
        _int(spec.get("replicas"), 1),
        _int(status.get("updatedReplicas")),
        _int(status.get("readyReplicas")),
        _int(status.get("availableReplicas")),
    )


def parse_addon(item: Item, kind: str) -> AddonObs:
    """`kind` is the workload kind of the LIST (items of a list carry no kind of their own)."""
    namespace, name, _, labels = _meta(item)
    meta = item.get("metadata") or _EMPTY
    spec = item.get("spec") or _EMPTY
    status = item.get("status") or _EMPTY
    pod_spec = ((spec.get("template") or _EMPTY).get("spec")) or _EMPTY
    containers = pod_spec.get("containers") or ()
    progressing = _condition(status.get("conditions"), "Progressing")
    stuck = progressing is not None and progressing.get("reason") == "ProgressDeadlineExceeded"
    desired, updated, ready, available = _rollout(kind, spec, status)
    return AddonObs(
        addon=str(labels.get(ADDON_LABEL, name)) or name,
        kind=kind,
        namespace=namespace,
        workload_name=name,
        image=containers[0].get("image", "") if containers else "",
        desired=desired,
        updated=updated,
        ready=ready,
        available=available,
        generation=_int(meta.get("generation")),
        observed_generation=_int(status.get("observedGeneration")),
        progress_deadline_exceeded=stuck,
        message=str(progressing.get("message", "")) if stuck and progressing else "",
    )


# --- drains --------------------------------------------------------------------------------

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


@dataclass(frozen=True, slots=True)
class PodOnNode:
    """A pod on a node being drained, any namespace: what kubectl's drain filters read."""

    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]
    controller_kind: str  # the controlling ownerReference's kind, "" without one
    controller_name: str
    mirror: bool
    phase: str | None
    ready: bool
    deleting: bool
    empty_dirs: tuple[str, ...]  # the names of its emptyDir volumes
    grace_seconds: int
    gpus: int
    job_id: int | None  # the console's Job label


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist (matchLabels read as In)
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class BudgetObs:
    """A PodDisruptionBudget. `selector` None selects nothing (policy/v1); () selects all."""

    namespace: str
    name: str
    selector: tuple[LabelRequirement, ...] | None
    disruptions_allowed: int
    current_healthy: int
    desired_healthy: int
    expected_pods: int


def parse_pod_on_node(item: Item) -> PodOnNode:
    namespace, name, uid, labels = _meta(item)
    meta = item.get("metadata") or _EMPTY
    spec, status = item.get("spec") or _EMPTY, item.get("status") or _EMPTY
    controller = next(
        (ref for ref in meta.get("ownerReferences") or () if ref.get("controller")), _EMPTY
    )
    volumes = spec.get("volumes") or ()
    return PodOnNode(
        namespace=namespace,
        name=name,
        uid=uid,
        labels={str(k): str(v) for k, v in labels.items()},
        controller_kind=str(controller.get("kind", "")),
        controller_name=str(controller.get("name", "")),
        mirror=MIRROR_ANNOTATION in (meta.get("annotations") or _EMPTY),
        phase=_pod_phase(status.get("phase")),
        ready=_is_true(status.get("conditions"), "Ready"),
        deleting="deletionTimestamp" in meta,
        empty_dirs=tuple(str(v.get("name", "")) for v in volumes if "emptyDir" in v),
        # The grace its deletion was given, once deleting; else the one it declares.
        grace_seconds=_int(
            meta.get("deletionGracePeriodSeconds"),
            _int(spec.get("terminationGracePeriodSeconds"), 30),
        ),
        gpus=_gpus(spec),
        job_id=_label_int(labels, JOB_LABEL),
    )


def _requirements(selector: object) -> tuple[LabelRequirement, ...] | None:
    if not isinstance(selector, dict):
        return None
    found = [
        LabelRequirement(str(key), "In", (str(value),))
        for key, value in (selector.get("matchLabels") or _EMPTY).items()
    ]
    for expression in selector.get("matchExpressions") or ():
        values = tuple(str(v) for v in expression.get("values") or ())
        found.append(
            LabelRequirement(
                str(expression.get("key", "")), str(expression.get("operator", "")), values
            )
        )
    return tuple(found)


def parse_budget(item: Item) -> BudgetObs:
    namespace, name, _, _ = _meta(item)
    spec, status = item.get("spec") or _EMPTY, item.get("status") or _EMPTY
    return BudgetObs(
        namespace=namespace,
        name=name,
        selector=_requirements(spec.get("selector")),
        disruptions_allowed=_int(status.get("disruptionsAllowed")),
        current_healthy=_int(status.get("currentHealthy")),
        desired_healthy=_int(status.get("desiredHealthy")),
        expected_pods=_int(status.get("expectedPods")),
    )
