"""Where to look first when a Job's status does not change (spec §Troubleshooting), pure.

The spec orders the search in four layers: 1. the Task statuses and messages; 2. the Task's target
cluster, node selection and workload status; 3. the Worker/Pod phase, node, IP and logs; 4. image,
resources, storage and network. `diagnose` takes plain values (what the engine observed, as the
page is allowed to show it) and returns every finding per layer plus the first layer that looks
wrong. No ORM, no clock: the view gathers the facts, the tests enumerate the situations.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from django.utils.functional import Promise as StrPromise
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from jobs.choices import Problem, TaskPhase
from jobs.status.problems import PodSigns, classify

HOSTNAME_LABEL = "kubernetes.io/hostname"


class Layer(IntEnum):
    """Spec §Troubleshooting, in the order the spec walks them."""

    TASKS = 1
    CLUSTER = 2
    WORKERS = 3
    DEPENDENCIES = 4


LAYER_TITLES: dict[Layer, StrPromise] = {
    Layer.TASKS: _("Task statuses and messages"),
    Layer.CLUSTER: _("Target cluster, node selection and workload status"),
    Layer.WORKERS: _("Worker (Pod) phase, node, IP and logs"),
    Layer.DEPENDENCIES: _("Image, resources, storage and network"),
}


ADVICE: dict[Problem, StrPromise] = {
    Problem.APPLY_ERROR: _(
        "The console could not apply this Task's workload to the cluster; it retries on every "
        "reconciliation. The error is what the Kubernetes API server answered."
    ),
    Problem.TASK_FAILED: _(
        "The Task reported failure. Save its logs and outputs, fix the spec, then clone the Job."
    ),
    Problem.CLUSTER_UNREACHABLE: _(
        "The console cannot reach the target cluster: every status on this page is the last "
        "report, frozen, not the present."
    ),
    Problem.CLUSTER_STALE: _(
        "The target cluster has not been synced recently: statuses on this page may be out of date."
    ),
    Problem.NO_MATCHING_NODE: _(
        "No Online, schedulable node matches this Task's node selector, so its pods cannot be "
        "placed. Fix the node selector or ask an operator about the nodes."
    ),
    Problem.UNSCHEDULABLE: _(
        "The scheduler cannot place this pod (FailedScheduling). Its message says why: a volume "
        "claim that does not exist or is not bound yet, or which nodes were rejected: node "
        "selector, taints, cordoned nodes or not enough CPU, memory or GPUs."
    ),
    Problem.NO_PODS: _(
        "The Task wants replicas but the cluster reports no pod for it: check that its workload "
        "exists and look at the apply result."
    ),
    Problem.NODE_OFFLINE: _(
        "This pod is on a node that is Offline: its phase is the node's last report and may be "
        "wrong. Kubernetes evicts it after a grace period and re-creates it elsewhere."
    ),
    Problem.CRASH_LOOP: _(
        "The container keeps crashing and Kubernetes restarts it with a growing back-off. Read "
        "the container's logs (and its previous logs) to find why it exits."
    ),
    Problem.CONTAINER_EXITED: _("The container exited with an error. Read its logs to find why."),
    Problem.RESTARTED: _(
        "The container exited with an error and Kubernetes restarted it: the pod is Running and "
        "ready again, so the Task and the Job still show Running although the process died. "
        "Read its previous logs and check that training resumed."
    ),
    Problem.POD_FAILED: _(
        "The pod Failed and will not be restarted under its policy. Read its logs."
    ),
    Problem.NOT_READY: _(
        "The pod runs but is not ready: the application may still be starting or failing its "
        "readiness check. Read its logs."
    ),
    Problem.NOT_IN_LAST_REPORT: _(
        "The last sync did not report this pod: it may have been deleted or replaced. The row "
        "shows its last known state."
    ),
    Problem.IMAGE_PULL: _(
        "The image cannot be pulled: check the image name and tag, that it exists in the "
        "registry, and the pull credentials."
    ),
    Problem.OUT_OF_MEMORY: _(
        "The container was killed for using more memory than its limit (OOMKilled, exit code "
        "137). Raise the Task's memory or lower the workload's use."
    ),
    Problem.EVICTED: _(
        "The kubelet evicted the pod because its node ran short of a resource (memory, disk)."
    ),
    Problem.CONFIG_ERROR: _(
        "The container could not be created from its configuration: a Secret, ConfigMap or "
        "volume it needs may be missing."
    ),
    Problem.OTHER_REASON: _(
        "Kubernetes gives this pod a reason the console does not know: its reason and message "
        "say what keeps it from running. Read them, and the pod's events."
    ),
}


@dataclass(frozen=True)
class ClusterFacts:
    name: str
    reachable: bool
    stale: bool
    message: str = ""


@dataclass(frozen=True)
class NodeFacts:
    """`labels` is None when the console does not know a node's labels (only its name)."""

    name: str
    online: bool
    schedulable: bool
    labels: Mapping[str, str] | None = None


@dataclass(frozen=True)
class PodFacts:
    """One Worker row as this user may see it: restart and exit details are None when hidden."""

    pod_name: str
    node_name: str
    phase: str
    ready: bool
    reason: str = ""
    message: str = ""
    in_last_report: bool = True
    restart_count: int | None = None
    last_exit_code: int | None = None
    termination_reason: str = ""

    @property
    def signs(self) -> PodSigns:
        """What `classify` judges: the row as this reader sees it."""
        return PodSigns(
            phase=self.phase,
            ready=self.ready,
            reason=self.reason,
            restart_count=self.restart_count,
            exit_code=self.last_exit_code,
            termination_reason=self.termination_reason,
        )


@dataclass(frozen=True)
class TaskFacts:
    """`pods` may be only the rows worth a look; `pod_count` counts every reported pod."""

    role: str
    phase: str
    desired_replicas: int
    ready_replicas: int
    observed: bool
    message: str = ""
    apply_error: str = ""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    pods: Sequence[PodFacts] = ()
    pod_count: int = 0
    # Seconds since the console last applied the Task (or created the Job): what is merely
    # slow to start is not called wrong before `patience` has passed.
    waited_seconds: float = math.inf


@dataclass(frozen=True)
class Finding:
    layer: Layer
    problem: Problem
    subject: str
    detail: str = ""

    @property
    def advice(self) -> str:
        return str(ADVICE[self.problem])


@dataclass(frozen=True)
class FindingGroup:
    """The findings of one problem in one layer: the page names a few subjects, counts the rest."""

    problem: Problem
    subjects: tuple[str, ...]
    details: tuple[str, ...]

    @property
    def advice(self) -> str:
        return str(ADVICE[self.problem])

    @property
    def shown(self) -> tuple[str, ...]:
        return self.subjects[:GROUP_SHOWN]

    @property
    def more(self) -> int:
        return max(0, len(self.subjects) - GROUP_SHOWN)


GROUP_SHOWN = 5


@dataclass(frozen=True)
class LayerCheck:
    layer: Layer
    findings: tuple[Finding, ...]

    @property
    def groups(self) -> tuple[FindingGroup, ...]:
        """Findings by problem, in order of first appearance; distinct details, at most three."""
        order: dict[Problem, list[Finding]] = {}
        for finding in self.findings:
            order.setdefault(finding.problem, []).append(finding)
        return tuple(
            FindingGroup(
                problem,
                tuple(f.subject for f in found),
                tuple(dict.fromkeys(f.detail for f in found if f.detail))[:3],
            )
            for problem, found in order.items()
        )

    @property
    def title(self) -> str:
        return str(LAYER_TITLES[self.layer])

    @property
    def looks_wrong(self) -> bool:
        return bool(self.findings)


@dataclass(frozen=True)
class Diagnosis:
    layers: tuple[LayerCheck, ...]
    first_wrong: Layer | None
    waiting: bool  # a Task is not ready yet and nothing wrong is observed

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(finding for check in self.layers for finding in check.findings)


def diagnose(
    *,
    stopped: bool,
    cluster: ClusterFacts,
    nodes: Sequence[NodeFacts],
    tasks: Sequence[TaskFacts],
    patience: float = 0.0,
) -> Diagnosis:
    """Spec §Troubleshooting: every finding, grouped by layer, and the first layer that looks wrong.

    A stopped Job is meant to have no pods, so only the apply and cluster layers are judged.
    "No pods yet" and "not ready yet" count only once a Task has waited `patience` seconds
    (spec: wait for one normal reconciliation first).
    """
    findings = [*_cluster_findings(cluster)]
    words = _Words()
    for task in tasks:
        findings += _task_findings(task)
        if not stopped:
            settled = task.waited_seconds >= patience
            findings += _placement_findings(task, nodes, settled)
            findings += _pod_findings(task, nodes, words, settled)
    layers = tuple(
        LayerCheck(layer, tuple(f for f in findings if f.layer == layer)) for layer in Layer
    )
    first = next((check.layer for check in layers if check.looks_wrong), None)
    waiting = first is None and not stopped and any(_wants_more(task) for task in tasks)
    return Diagnosis(layers, first, waiting)


def _cluster_findings(cluster: ClusterFacts) -> list[Finding]:
    if not cluster.reachable:
        return [Finding(Layer.CLUSTER, Problem.CLUSTER_UNREACHABLE, cluster.name, cluster.message)]
    if cluster.stale:
        return [Finding(Layer.CLUSTER, Problem.CLUSTER_STALE, cluster.name)]
    return []


def _task_findings(task: TaskFacts) -> list[Finding]:
    found = []
    if task.apply_error:
        found.append(Finding(Layer.TASKS, Problem.APPLY_ERROR, task.role, task.apply_error))
    if task.phase == TaskPhase.FAILED:
        found.append(Finding(Layer.TASKS, Problem.TASK_FAILED, task.role, task.message))
    return found


def _wants_more(task: TaskFacts) -> bool:
    return (
        task.phase not in (TaskPhase.SUCCEEDED, TaskPhase.FAILED)
        and task.ready_replicas < task.desired_replicas
    )


def _placement_findings(
    task: TaskFacts, nodes: Sequence[NodeFacts], settled: bool
) -> list[Finding]:
    """Layer 2: can this Task's pods be placed at all, and does its workload report pods?
    Nothing is concluded from what was never reported (no node known, a Task not observed
    yet): that is the wait for one normal reconciliation, not a problem."""
    if not _wants_more(task):
        return []
    found = []
    if nodes and not any(_may_match(node, task.node_selector) for node in nodes):
        selector = ", ".join(f"{key}={value}" for key, value in sorted(task.node_selector.items()))
        found.append(Finding(Layer.CLUSTER, Problem.NO_MATCHING_NODE, task.role, selector))
    if settled and task.observed and task.pod_count == 0 and not task.apply_error:
        found.append(Finding(Layer.CLUSTER, Problem.NO_PODS, task.role, task.message))
    return found


def _may_match(node: NodeFacts, selector: Mapping[str, str]) -> bool:
    """Online, schedulable and not ruled out by the selector (unknown labels are not ruled out)."""
    if not (node.online and node.schedulable):
        return False
    labels = dict(node.labels or {})
    labels.setdefault(HOSTNAME_LABEL, node.name)
    for key, value in selector.items():
        if key in labels and labels[key] != value:
            return False
        if key not in labels and node.labels is not None:
            return False
    return True


def _pod_findings(
    task: TaskFacts, nodes: Sequence[NodeFacts], words: _Words, settled: bool
) -> list[Finding]:
    offline = {node.name for node in nodes if not node.online}
    found: list[Finding] = []
    for pod in task.pods:
        found += _one_pod(pod, offline, words, settled)
    return found


def _one_pod(pod: PodFacts, offline: Iterable[str], words: _Words, settled: bool) -> list[Finding]:
    """The pod's one problem (jobs.status.problems.classify), besides its absence from the last
    report and its node being Offline, which the panel names as well."""
    found = []
    if not pod.in_last_report:
        found.append(Finding(Layer.WORKERS, Problem.NOT_IN_LAST_REPORT, pod.pod_name))
    problem = classify(pod.signs)
    if (pod.node_name and pod.node_name in offline) or problem == Problem.NODE_OFFLINE:
        detail = " · ".join(part for part in (pod.node_name, pod.message) if part)
        found.append(Finding(Layer.WORKERS, Problem.NODE_OFFLINE, pod.pod_name, detail))
    if problem == Problem.NOT_READY and not settled:
        problem = None
    if problem is not None and problem != Problem.NODE_OFFLINE:
        layer = Layer.DEPENDENCIES if problem in _DEPENDENCY_PROBLEMS else _LAYER_OF[problem]
        found.append(Finding(layer, problem, pod.pod_name, _pod_detail(pod, words)))
    return found


_DEPENDENCY_PROBLEMS = frozenset(
    {Problem.IMAGE_PULL, Problem.OUT_OF_MEMORY, Problem.EVICTED, Problem.CONFIG_ERROR}
)
_LAYER_OF = {
    Problem.UNSCHEDULABLE: Layer.CLUSTER,
    Problem.CRASH_LOOP: Layer.WORKERS,
    Problem.CONTAINER_EXITED: Layer.WORKERS,
    Problem.RESTARTED: Layer.WORKERS,
    Problem.POD_FAILED: Layer.WORKERS,
    Problem.NOT_READY: Layer.WORKERS,
    Problem.OTHER_REASON: Layer.WORKERS,
}


class _Words:
    """The detail's words, translated once per diagnosis (a job may have a thousand pods)."""

    def __init__(self) -> None:
        self.exit_code = gettext("exit code %(code)s")
        self._restarts: dict[int, str] = {}

    def restarts(self, count: int) -> str:
        if count not in self._restarts:
            text = ngettext("%(count)s restart", "%(count)s restarts", count)
            self._restarts[count] = text % {"count": count}
        return self._restarts[count]


def _pod_detail(pod: PodFacts, words: _Words) -> str:
    parts = [part for part in (pod.reason, pod.message) if part]
    if pod.termination_reason and pod.termination_reason != pod.reason:
        parts.append(pod.termination_reason)
    if pod.last_exit_code not in (None, 0):
        parts.append(words.exit_code % {"code": pod.last_exit_code})
    if pod.restart_count:
        parts.append(words.restarts(pod.restart_count))
    return " · ".join(parts)
