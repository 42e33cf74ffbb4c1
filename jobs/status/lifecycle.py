"""The spec's status rules as pure functions: plain values in, plain values out.

No ORM and no clock: the sync, the operations and the pages call these, and the tests enumerate
every row of every status table and every arrow of the lifecycle diagram against them.
Sections cited are those of shared/spec/status-and-lifecycle.zh.md (English rendering beside it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from django.utils.translation import gettext

from jobs.choices import (
    JOB_TERMINAL,
    Action,
    JobPhase,
    TaskKind,
    TaskPhase,
    WorkflowPhase,
)
from jobs.messages import Message, Stored, encode, render_text


class TransitionRefused(Exception):
    """An operation the phase rules do not allow; `reason` says why (a coded message, worded in
    the language of whoever reads it)."""

    def __init__(self, reason: Message) -> None:
        self.reason = reason
        super().__init__(render_text(encode(reason)))


@dataclass(frozen=True)
class WorkloadObservation:
    """What the cluster last reported of a Task's workload (StatefulSet or batch Job).

    `exists` is False when the LIST did not contain the workload at all.
    For a batch Job, `desired_replicas` is its parallelism and `complete`/`failed` mirror its
    `Complete`/`Failed` conditions.
    """

    kind: TaskKind
    exists: bool
    desired_replicas: int = 0
    ready_replicas: int = 0
    complete: bool = False
    failed: bool = False


@dataclass(frozen=True)
class TaskState:
    role: str
    phase: TaskPhase
    message: str = ""


def task_phase(observed: WorkloadObservation) -> TaskPhase:
    """Spec §Task status.

    StatefulSet Tasks report only Pending, Running or Stopped: Running when the desired replicas
    are ready, nothing more. Only batch Jobs (the Task API) report Succeeded or Failed.
    """
    if observed.kind == TaskKind.JOB:
        if observed.failed:
            return TaskPhase.FAILED
        if observed.complete:
            return TaskPhase.SUCCEEDED
    if not observed.exists:
        return TaskPhase.PENDING
    if observed.desired_replicas == 0:
        return TaskPhase.STOPPED
    if observed.ready_replicas >= observed.desired_replicas:
        return TaskPhase.RUNNING
    if observed.kind == TaskKind.JOB and observed.ready_replicas > 0:
        return TaskPhase.RUNNING
    return TaskPhase.PENDING


def job_phase(current: JobPhase, stopped: bool, tasks: Sequence[TaskPhase]) -> JobPhase:
    """Spec §Job status and its lifecycle diagram.

    create -> Pending -> Running -> Succeeded | Failed;  Pending / Running -> Stopped -> Pending.
    Terminal states are sticky. Stopped wins while the flag is set. There is no arrow from
    Running back to Pending (a Job "may still show Running" while a replica is not ready), nor
    from Stopped straight to Running: a resumed Job passes through Pending.
    """
    if current in JOB_TERMINAL:
        return current
    if stopped:
        return JobPhase.STOPPED
    if current == JobPhase.STOPPED:
        return JobPhase.PENDING
    if TaskPhase.FAILED in tasks:
        return JobPhase.FAILED
    if tasks and all(phase == TaskPhase.SUCCEEDED for phase in tasks):
        return JobPhase.SUCCEEDED
    if current == JobPhase.RUNNING:
        return JobPhase.RUNNING
    if any(phase in (TaskPhase.RUNNING, TaskPhase.SUCCEEDED) for phase in tasks):
        return JobPhase.RUNNING
    return JobPhase.PENDING


def job_message(tasks: Iterable[TaskState]) -> str:
    """Spec §Task status: "a Job aggregates the phases and messages of its Tasks". Task messages
    and the result are in stored form (jobs.messages): the aggregate nests each Task's message."""
    parts = [
        Message("job.task_message", {"role": task.role, "phase": str(task.phase),
                                     "message": Stored(task.message)})
        if task.message
        else Message("job.task", {"role": task.role, "phase": str(task.phase)})
        for task in tasks
    ]  # fmt: skip
    return encode(Message("job.tasks", {"tasks": parts})) if parts else ""


def allowed_actions(phase: JobPhase, stopped: bool) -> frozenset[Action]:
    """Spec §Job status: which operations each phase offers.

    Clone and delete are always offered (delete is confirmed separately). No stop or resume on
    Succeeded. A Failed Job may still offer stop, which releases resources but keeps it Failed.
    """
    actions = {Action.CLONE, Action.DELETE}
    if phase in (JobPhase.PENDING, JobPhase.RUNNING):
        actions.add(Action.STOP)
    elif phase == JobPhase.STOPPED:
        actions.add(Action.RESUME)
    elif phase == JobPhase.FAILED and not stopped:
        actions.add(Action.STOP)
    return frozenset(actions)


def phase_after_stop(phase: JobPhase, stopped: bool) -> JobPhase:
    """Spec §Job status: Pending/Running -> Stopped; stop on Failed keeps it Failed."""
    if Action.STOP not in allowed_actions(phase, stopped):
        raise TransitionRefused(_refusal(Action.STOP, phase, stopped))
    return JobPhase.FAILED if phase == JobPhase.FAILED else JobPhase.STOPPED


def phase_after_resume(phase: JobPhase, stopped: bool) -> JobPhase:
    """Spec §Job status: Stopped -> Pending, Tasks re-created from the original template."""
    if Action.RESUME not in allowed_actions(phase, stopped):
        raise TransitionRefused(_refusal(Action.RESUME, phase, stopped))
    return JobPhase.PENDING


def _refusal(action: Action, phase: JobPhase, stopped: bool) -> Message:
    """Why the action is refused; worded for whoever reads it (jobs.messages)."""
    if phase == JobPhase.SUCCEEDED and action == Action.RESUME:
        return Message("refused.succeeded_resume")
    if phase == JobPhase.SUCCEEDED:
        return Message("refused.succeeded_stop")
    if phase == JobPhase.FAILED and action == Action.RESUME:
        return Message("refused.failed_resume")
    if phase == JobPhase.FAILED:
        return Message("refused.failed_stop")
    if action == Action.RESUME:
        return Message("refused.resume_not_stopped", {"phase": str(phase)})
    return Message("refused.already", {"phase": str(phase)})


def workflow_phase(children: Sequence[JobPhase]) -> WorkflowPhase:
    """Spec §Workflow status, from the child Jobs' phases.

    Failed as soon as a child failed (the Workflow cannot complete as defined); Succeeded when
    every child succeeded; Running once any child has started; Pending before that.
    """
    if JobPhase.FAILED in children:
        return WorkflowPhase.FAILED
    if children and all(phase == JobPhase.SUCCEEDED for phase in children):
        return WorkflowPhase.SUCCEEDED
    if any(phase in (JobPhase.RUNNING, JobPhase.SUCCEEDED) for phase in children):
        return WorkflowPhase.RUNNING
    return WorkflowPhase.PENDING


def counted_phase(phase: JobPhase, *, workload_succeeded: bool, advance: bool) -> JobPhase:
    """A child Job's phase as its Workflow counts it, for its dependants and for the Workflow's
    phase. A StatefulSet Job never Succeeds (spec §Task status), so a Workflow of them never
    finishes; with the Workflow's `advance_on_workload_success`, a child whose workload reported
    success counts as Succeeded (its own phase is left as it is). A Failed Job stays Failed."""
    if advance and workload_succeeded and phase != JobPhase.FAILED:
        return JobPhase.SUCCEEDED
    return phase


class CycleError(ValueError):
    """The edges of a Workflow do not form a DAG."""


def topological_order(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> list[str]:
    """Kahn's algorithm, ties broken by name so the order is stable; raises CycleError."""
    upstreams: dict[str, set[str]] = {node: set() for node in nodes}
    for upstream, downstream in edges:
        if upstream not in upstreams or downstream not in upstreams:
            raise ValueError(f"edge {upstream} -> {downstream} names an unknown job")
        upstreams[downstream].add(upstream)
    order: list[str] = []
    ready = sorted(node for node, ups in upstreams.items() if not ups)
    while ready:
        node = ready.pop(0)
        order.append(node)
        for other, ups in upstreams.items():
            if node in ups:
                ups.discard(node)
                if not ups and other not in order and other not in ready:
                    ready.append(other)
        ready.sort()
    if len(order) != len(upstreams):
        stuck = sorted(set(upstreams) - set(order))
        raise CycleError(
            gettext("the dependencies form a cycle through %(jobs)s") % {"jobs": ", ".join(stuck)}
        )
    return order


def blocked_by(
    job: str, phases: Mapping[str, JobPhase], edges: Iterable[tuple[str, str]]
) -> list[str]:
    """The upstream Jobs that have not Succeeded yet: `job` may not start while any remain."""
    return sorted(
        upstream
        for upstream, downstream in edges
        if downstream == job and phases[upstream] != JobPhase.SUCCEEDED
    )
