"""Statuses derived from observations, pure: Task phase + message, add-on phase, node GPUs.

The phase rules themselves are `jobs.status.lifecycle` (spec §Task status); this module only turns
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
from jobs.choices import POD_TERMINAL, AddonPhase, TaskKind, TaskPhase
from jobs.messages import Message, Param, encode, kubernetes
from jobs.status.lifecycle import WorkloadObservation, task_phase
from jobs.status.problems import first_problem


@dataclass(frozen=True)
class TaskView:
    """`message` is stored form (jobs.messages.encode); `workload_replicas`: the workload's own
    desired count (None when there is none)."""

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


def _progress(workload: WorkloadObs, pods: Sequence[PodObs]) -> Message:
    if isinstance(workload, BatchJobObs):
        if workload.complete or workload.failed_condition:
            final = "Complete" if workload.complete else "Failed"
            if workload.condition_reason:
                reason = workload.condition_reason
                return Message("task.batch_finished_reason", {"condition": final, "reason": reason})
            return Message("task.batch_finished", {"condition": final})
        if workload.parallelism == 0:
            return Message("task.scaled_to_zero")
        counts = {"active": workload.active, "succeeded": workload.succeeded}
        counts["failed"] = workload.failed
        if workload.completions:
            return Message(
                "task.batch_progress_of", {**counts, "completions": workload.completions}
            )
        return Message("task.batch_progress", counts)
    if workload.replicas == 0:
        left = len(pods)
        if left:
            return Message("task.scaled_to_zero_terminating", {"count": left})
        return Message("task.scaled_to_zero")
    ready = {"ready": workload.ready_replicas, "desired": workload.replicas}
    return Message("task.replicas_ready", ready)


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
            return TaskView(TaskPhase.STOPPED, 0, encode(Message("task.not_created_stopped")), 0)
        waiting = Message("task.waiting_for_workload", {"kind": str(kind)})
        return TaskView(TaskPhase.PENDING, 0, encode(waiting))
    observation = workload_observation(kind, workload)
    phase = task_phase(observation)
    message = _progress(workload, pods)
    if problem := first_problem(pods, nodes):
        message = Message("task.with_problem", {"progress": message, "problem": problem})
    return TaskView(
        phase, observation.ready_replicas, encode(message), observation.desired_replicas
    )


# --- add-ons ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AddonView:
    """`message` is stored form (jobs.messages.encode)."""

    phase: AddonPhase
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
        return AddonView(AddonPhase.PENDING, "", encode(Message("addon.no_workload")))
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
        stuck = Message("addon.deadline_exceeded", {"version": template})
        return AddonView(AddonPhase.FAILED, current, encode(kubernetes(workload.message) or stuck))
    if settled and current == target:
        return AddonView(AddonPhase.READY, current, "")
    if not current:
        counts: dict[str, Param] = {"ready": workload.ready, "desired": workload.desired}
        counts["version"] = template
        return AddonView(AddonPhase.INSTALLING, "", encode(Message("addon.installing", counts)))
    if not settled:
        rollout: dict[str, Param] = {"updated": workload.updated, "desired": workload.desired}
        upgrading = Message("addon.upgrading", {**rollout, "version": template, "current": current})
        return AddonView(AddonPhase.UPGRADING, current, encode(upgrading))
    waiting = Message("addon.not_rolled_out", {"current": current, "version": target})
    return AddonView(AddonPhase.PENDING, current, encode(waiting))


def held_gpus(pod: PodObs) -> int:
    """The GPUs a pod holds on its node: requested, scheduled and not finished."""
    return pod.gpus if pod.node_name and pod.phase not in POD_TERMINAL else 0
