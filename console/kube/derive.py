"""Statuses derived from observations, pure: Task phase + message, add-on phase, node GPUs.

The phase rules themselves are `jobs.lifecycle` (spec §Task status); this module only turns
what the cluster reported into its inputs and composes the messages.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from console.kube.observations import (
    AddonObs,
    BatchJobObs,
    NodeObs,
    PodObs,
    StatefulSetObs,
    WorkloadObs,
    image_tag,
)
from console.kube.problems import first_problem
from console.models import Addon
from jobs.choices import POD_TERMINAL, TaskKind, TaskPhase
from jobs.lifecycle import WorkloadObservation, task_phase


@dataclass(frozen=True)
class TaskView:
    """`workload_replicas`: the workload's own desired count (None when there is none)."""

    phase: TaskPhase
    ready_replicas: int
    message: str
    workload_replicas: int | None = None


def workload_observation(kind: TaskKind, workload: WorkloadObs | None) -> WorkloadObservation:
    if workload is None:
        return WorkloadObservation(kind=kind, exists=False)
    if isinstance(workload, StatefulSetObs):
        return WorkloadObservation(
            kind=kind,
            exists=True,
            desired_replicas=workload.replicas,
            ready_replicas=workload.ready_replicas,
        )
    return WorkloadObservation(
        kind=kind,
        exists=True,
        desired_replicas=workload.parallelism,
        ready_replicas=workload.ready,
        complete=workload.complete,
        failed=workload.failed_condition,
    )


def _progress(workload: WorkloadObs, pods: Sequence[PodObs]) -> str:
    if isinstance(workload, BatchJobObs):
        if workload.complete or workload.failed_condition:
            final = "Complete" if workload.complete else "Failed"
            return f"{final} ({workload.condition_reason})" if workload.condition_reason else final
        if workload.parallelism == 0:
            return "scaled to 0"
        done = f"{workload.succeeded}/{workload.completions}" if workload.completions else "0"
        return f"{workload.active} active, {done} succeeded, {workload.failed} failed"
    if workload.replicas == 0:
        left = len(pods)
        return f"scaled to 0, {left} pods terminating" if left else "scaled to 0"
    return f"{workload.ready_replicas}/{workload.replicas} replicas ready"


def task_view(
    kind: TaskKind,
    stopped: bool,
    workload: WorkloadObs | None,
    pods: Sequence[PodObs],
    nodes: Mapping[str, NodeObs],
) -> TaskView:
    """Spec §Task status. A stopped Job's workload that does not exist has desired replicas 0
    (it is not created while stopped): Stopped, not Pending (docs/decisions.md)."""
    if workload is None:
        if stopped:
            return TaskView(TaskPhase.STOPPED, 0, "not created: the job is stopped", 0)
        return TaskView(TaskPhase.PENDING, 0, f"waiting for the {kind} to be created")
    observation = workload_observation(kind, workload)
    phase = task_phase(observation)
    message = _progress(workload, pods)
    if problem := first_problem(pods, nodes):
        message = f"{message}; {problem}"
    return TaskView(phase, observation.ready_replicas, message, observation.desired_replicas)


# --- add-ons ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AddonView:
    phase: Addon.Phase
    current_version: str
    message: str


def running_version(pods: Iterable[PodObs]) -> str:
    """The image tag most ready pods run ("" when none is ready)."""
    tags = Counter(image_tag(pod.image) for pod in pods if pod.ready and pod.image)
    return tags.most_common(1)[0][0] if tags else ""


def addon_view(workload: AddonObs | None, pods: Sequence[PodObs], desired: str) -> AddonView:
    """Spec §Node and Addon status: Ready means the desired version (empty: whatever the
    workload asks for) runs and is available. Installing while the first rollout is not
    available; Upgrading while a new version rolls out; Failed when the rollout exceeded its
    progress deadline; Pending when the workload is missing or the desired version is not the
    one the workload asks for."""
    if workload is None:
        return AddonView(Addon.Phase.PENDING, "", "No workload carries this add-on's label.")
    template = workload.image_tag
    current = running_version(pods)
    if not current and workload.desired == 0:
        current = template
    settled = (
        workload.observed_generation >= workload.generation
        and workload.updated == workload.desired
        and workload.available >= workload.desired
        and current == template
    )
    target = desired or template
    if workload.progress_deadline_exceeded:
        message = workload.message or f"The rollout of {template} exceeded its progress deadline."
        return AddonView(Addon.Phase.FAILED, current, message)
    if settled and current == target:
        return AddonView(Addon.Phase.READY, current, "")
    if not current:
        message = f"{workload.ready}/{workload.desired} ready, installing {template}"
        return AddonView(Addon.Phase.INSTALLING, "", message)
    if not settled:
        message = f"{workload.updated}/{workload.desired} updated to {template}, running {current}"
        return AddonView(Addon.Phase.UPGRADING, current, message)
    return AddonView(
        Addon.Phase.PENDING, current, f"Running {current}; {target} is not rolled out."
    )


def gpus_by_node(pods: Iterable[PodObs]) -> dict[str, int]:
    """GPUs requested by the pods listed on each node, finished pods excluded."""
    total: dict[str, int] = {}
    seen: set[str] = set()
    for pod in pods:
        if pod.gpus and pod.node_name and pod.phase not in POD_TERMINAL and pod.uid not in seen:
            seen.add(pod.uid)
            total[pod.node_name] = total.get(pod.node_name, 0) + pod.gpus
    return total
