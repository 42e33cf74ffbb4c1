"""What changed: the snapshot compared in memory with the loaded rows, for Tasks, Workers and
Jobs (spec §Task status, §Job status), pod instances, Nodes, Add-ons and Workflows. Only the
rows whose facts differ become `Changes`; nothing here writes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings

from console.engine.memory import Snapshot
from console.engine.observe import Change
from console.engine.rows import (
    AddonRow,
    JobRow,
    NodeRow,
    State,
    SyncedAddon,
    SyncedNode,
    TaskRow,
    load_blocked,
)
from console.engine.write import (
    BATCH,
    Changes,
    GoneInstance,
    InstanceWrite,
    JobChange,
    TaskWrite,
    VanishedWorker,
    WorkerWrite,
)
from console.kube.observations import AddonObs, NodeObs, PodObs, WorkloadObs
from console.models import Addon, Node
from jobs.choices import (
    JOB_TERMINAL,
    TASK_TERMINAL,
    WORKFLOW_TERMINAL,
    JobPhase,
    PodPhase,
    TaskKind,
)
from jobs.messages import Message, encode, waiting_for_upstream
from jobs.models import Job, Workflow
from jobs.status.lifecycle import TaskState, job_message, job_phase, workflow_phase
from jobs.status.observed import TaskView, addon_view, task_view
from jobs.status.problems import node_message, pod_reason
from usage.ledger import Pod, Seen
from workers.models import PodInstance


@dataclass
class Index:
    """The snapshot, indexed for the derivations."""

    workloads: dict[int, list[WorkloadObs]]
    pods: dict[int, list[PodObs]]
    nodes: dict[str, NodeObs]

    @classmethod
    def of(cls, snapshot: Snapshot) -> Index:
        workloads: dict[int, list[WorkloadObs]] = defaultdict(list)
        items: list[WorkloadObs] = [*snapshot.statefulsets, *snapshot.batch_jobs]
        for item in items:
            if item.owner.task_id is not None:
                workloads[item.owner.task_id].append(item)
        pods: dict[int, list[PodObs]] = defaultdict(list)
        for pod in snapshot.pods:
            if pod.owner.task_id is not None:
                pods[pod.owner.task_id].append(pod)
        return cls(workloads, pods, {node.name: node for node in snapshot.nodes})


def _current_workload(job: JobRow, task: TaskRow, index: Index) -> WorkloadObs | None:
    name = f"{job.name}-{task.role}"
    for item in index.workloads.get(task.pk, ()):
        if (item.owner.job_id, item.owner.run, item.kind, item.name) == (
            job.pk, job.run, task.kind, name,
        ):  # fmt: skip
            return item
    return None


def _current_pods(job: JobRow, task: TaskRow, index: Index) -> list[PodObs]:
    return [
        pod
        for pod in index.pods.get(task.pk, ())
        if pod.owner.job_id == job.pk and pod.owner.run == job.run
    ]


def _view(job: JobRow, task: TaskRow, index: Index, pods: list[PodObs]) -> TaskView:
    """Terminal Task phases are sticky: a finished batch Job whose object was removed keeps its
    result instead of falling back to Pending."""
    workload = _current_workload(job, task, index)
    if task.phase in TASK_TERMINAL and workload is None:
        return TaskView(task.phase, task.ready_replicas, task.message, task.workload_replicas)
    view = task_view(TaskKind(task.kind), job.stopped, workload, pods, index.nodes)
    if task.phase in TASK_TERMINAL:
        return TaskView(task.phase, view.ready_replicas, view.message, view.workload_replicas)
    return view


def _worker(
    pk: int | None, task: TaskRow, pod: PodObs, index: Index, last_phase: str | None,
    now: datetime,
) -> WorkerWrite:  # fmt: skip
    """Phase Unknown keeps the pod's last known phase (docs/decisions.md)."""
    reason, message = pod_reason(pod, index.nodes)
    phase = pod.phase or last_phase or PodPhase.PENDING
    return WorkerWrite(
        pk=pk, task_id=task.pk, pod_name=pod.name, pod_uid=pod.uid, node_name=pod.node_name,
        ip=pod.pod_ip, phase=str(phase), ready=pod.ready, reason=reason, message=message,
        restart_count=pod.restart_count, last_reported_at=now,
    )  # fmt: skip


def _derive_workers(
    task: TaskRow, pods: list[PodObs], index: Index, changes: Changes, state: State,
    task_changed: bool, now: datetime,
) -> bool:  # fmt: skip
    """Writes the Workers of the touched pods whose facts changed; True when the Task must be
    written (its view changed, a Worker changed, appeared or vanished).

    A written Task's present Workers are reported with its `observed_at` (by the database,
    `Changes.reported_tasks`), so a Worker older than its Task was missing
    (jobs.status.freshness.worker_missing). A Worker that vanishes now was last reported by the
    previous successful sync. The Workers of untouched pods are neither loaded nor compared:
    their pods did not change (state.scope)."""
    stored = state.workers.get(task.pk, {})
    present = {name: row for name, row in stored.items() if row.present}
    names = {pod.name for pod in pods}
    vanished = [row for name, row in present.items() if name not in names]
    written = False
    for pod in pods:
        if not state.scope.holds_pod(pod.uid):
            continue
        row = stored.get(pod.name)
        if row is None:
            changes.new_workers.append(_worker(None, task, pod, index, None, now))
        else:
            worker = _worker(row.pk, task, pod, index, row.phase, now)
            if row.present and row.facts() == worker.facts():
                continue
            changes.workers.append(worker)
        written = True
    if not (written or vanished or task_changed):
        return False
    changes.reported_tasks.append(task.pk)
    changes.reported_at = now
    last_sync = state.cluster.last_synced_at
    for row in vanished:
        if last_sync is not None:  # a present row was written by a sync up to that one
            changes.vanished_workers.append(VanishedWorker(row.pk, task.pk, last_sync))
    return True


def _task_changed(task: TaskRow, view: TaskView) -> bool:
    return (task.phase, task.ready_replicas, task.message, task.workload_replicas) != (
        view.phase, view.ready_replicas, view.message, view.workload_replicas,
    )  # fmt: skip


def _derive_job(job: JobRow, index: Index, state: State, changes: Changes, now: datetime) -> None:
    states: list[TaskState] = []
    for task in job.tasks:
        pods = _current_pods(job, task, index)
        view = _view(job, task, index, pods)
        task_changed = _task_changed(task, view)
        if _derive_workers(task, pods, index, changes, state, task_changed, now):
            changes.tasks.append(
                TaskWrite(task.pk, view.phase, view.ready_replicas, view.message,
                          view.workload_replicas, observed_at=now)
            )  # fmt: skip
            changes.touched_jobs.add(job.pk)
            task.phase, task.ready_replicas, task.message, task.workload_replicas = (
                view.phase, view.ready_replicas, view.message, view.workload_replicas,
            )  # fmt: skip
        states.append(TaskState(task.role, view.phase, view.message))
    new_phase = job_phase(JobPhase(job.phase), job.stopped, [state.phase for state in states])
    job.phase = new_phase
    job.message = job_message(states)


def _job_fields(job: JobRow, seen: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The Job's changed fields (phase, message, started/finished times), {} when none."""
    fields: dict[str, Any] = {}
    if job.phase != seen["phase"]:
        fields["phase"] = job.phase
        if job.phase != JobPhase.PENDING and job.phase != JobPhase.STOPPED and not job.started_at:
            fields["started_at"] = now
        if job.phase in JOB_TERMINAL and not job.finished_at:
            fields["finished_at"] = now
    if job.message != seen["message"]:
        fields["message"] = job.message
    if fields:
        fields["observed_at"] = now
    return fields


def derive_blocked(state: State) -> None:
    """The Workflow children that wait for upstream Jobs (from the stored phases): reconcile
    leaves them alone and their message says what they wait for."""
    state.blocked = load_blocked([job for job in state.jobs if job.delete_requested_at is None])


def derive_jobs(state: State, index: Index, changes: Changes, now: datetime) -> None:
    """Task, Worker and Job phases (spec §Task status, §Job status), then blocked children
    (`derive_blocked` ran first)."""
    seen = {job.pk: {"phase": job.phase, "message": job.message} for job in state.jobs}
    live = [job for job in state.jobs if job.delete_requested_at is None]
    for job in live:
        _derive_job(job, index, state, changes, now)
    for job in live:
        if job.pk in state.blocked:
            job.message = encode(waiting_for_upstream(state.blocked[job.pk]))
        fields = _job_fields(job, seen[job.pk], now)
        if fields:
            guard = {"phase": seen[job.pk]["phase"], "stopped": job.stopped, "run": job.run}
            changes.jobs.append(JobChange(job.pk, guard, fields))
            changes.touched_jobs.add(job.pk)


# --- pod instances, nodes, add-ons, workflows ------------------------------------------------


def _instance(
    pk: int | None, task_id: int, pod: PodObs, last_phase: str | None, now: datetime
) -> InstanceWrite:
    phase = pod.phase or last_phase or PodPhase.PENDING
    return InstanceWrite(
        pk=pk, uid=pod.uid, task_id=task_id, pod_name=pod.name, node_name=pod.node_name,
        ip=pod.pod_ip, phase=str(phase), restart_count=pod.restart_count,
        last_exit_code=pod.exit_code, termination_reason=pod.termination_reason, last_seen_at=now,
    )  # fmt: skip


def derive_instances(state: State, pods: Sequence[PodObs], changes: Changes, now: datetime) -> None:
    """Every pod UID of the console's live Jobs (PRODUCT: instance history for operators); the
    touched pods' only (state.scope): an untouched pod did not change."""
    tasks = {t.pk: j.pk for j in state.jobs if j.delete_requested_at is None for t in j.tasks}
    listed: set[str] = set()
    new: dict[str, InstanceWrite] = {}
    for pod in pods:
        task_id = pod.owner.task_id
        if task_id not in tasks or task_id is None or not pod.uid:
            continue
        listed.add(pod.uid)
        if not state.scope.holds_pod(pod.uid):
            continue
        row = state.instances.get(pod.uid)
        if row is None:
            first = _instance(None, task_id, pod, None, now)
            new[pod.uid] = first._replace(created_at=pod.created_at, first_seen_at=now)
            changes.touched_jobs.add(tasks[task_id])
            continue
        instance = _instance(row.pk, task_id, pod, row.phase, now)
        if row.facts() != instance.facts():
            changes.instances.append(instance)
            changes.touched_jobs.add(tasks[task_id])
    _add_instances(new, changes)
    last_sync = state.cluster.last_synced_at
    for uid, row in state.instances.items():
        if uid not in listed:  # listed until the last successful sync, written up to it
            gone = GoneInstance(row.pk, row.task_id, gone_at=now, last_seen_at=last_sync or now)
            changes.gone_instances.append(gone)


def gpu_pods(
    state: State, pods: Sequence[PodObs], changed: Sequence[Change], now: datetime
) -> list[Pod]:
    """What the GPU-hours ledger looks at (usage.ledger.after_sync): the touched pods of the
    live Jobs that request GPUs, and the deleted pods (their last state when the watch
    reported it; none when a relist found them gone)."""
    jobs = {t.pk: j for j in state.jobs if j.delete_requested_at is None for t in j.tasks}
    cluster = state.cluster.pk
    found = []
    for pod in pods:
        job = jobs.get(pod.owner.task_id or 0)
        if job is not None and pod.gpus and state.scope.holds_pod(pod.uid):
            run = pod.owner.run or job.run
            found.append(Pod(pod.uid, job.pk, run, pod.owner.task_id or 0, cluster, _seen(pod)))
    for change in changed:
        if change.stream == "pods" and change.data is None:
            last = change.observation if isinstance(change.observation, PodObs) else None
            if last is None or last.gpus:
                seen = _seen(last) if last else None
                found.append(Pod(change.uid, 0, 0, 0, cluster, seen, gone_at=now))
    return found


def _seen(pod: PodObs) -> Seen:
    return Seen(
        pod.name, pod.node_name, pod.phase, pod.gpus, pod.scheduled_at, pod.running_at,
        pod.deleted_at, pod.finished_at,
    )  # fmt: skip


def _add_instances(new: dict[str, InstanceWrite], changes: Changes) -> None:
    """New UIDs; one that was marked gone and is listed again is brought back (same row)."""
    back: dict[str, int] = {}
    uids = list(new)
    for start in range(0, len(uids), BATCH):
        chunk = uids[start : start + BATCH]
        back.update(PodInstance.objects.filter(uid__any_of=chunk).values_list("uid", "pk"))
    for uid, instance in new.items():
        if uid in back:
            changes.instances.append(instance._replace(pk=back[uid]))
        else:
            changes.new_instances.append(instance)


def _heartbeat(row: NodeRow | None, node: NodeObs) -> datetime | None:
    """A newer heartbeat alone is recorded once the stored one is TRAINYARD_STALE_AFTER old:
    kubelets post every few seconds to minutes, and a heartbeat is not a change of status
    (docs/decisions.md). Any other change of the node records the latest one."""
    stored, latest = (row.last_heartbeat_at if row else None), node.heartbeat_at
    if stored is None or latest is None:
        return latest
    due = (latest - stored).total_seconds() >= settings.TRAINYARD_STALE_AFTER
    return latest if due else stored


def derive_nodes(
    state: State, snapshot: Snapshot, gpus: Mapping[str, int], changes: Changes, now: datetime
) -> None:
    """Spec §Node status: Online/Offline, `unschedulable` apart. Vanished nodes are deleted.
    `gpus`: the GPUs held on each node (memory.gpus_by_node)."""
    for node in snapshot.nodes:
        phase = Node.Phase.ONLINE if node.online else Node.Phase.OFFLINE
        row = state.nodes.get(node.name)
        facts = SyncedNode(
            phase=phase, unschedulable=node.unschedulable, message=encode(node_message(node)),
            cpu_capacity=node.cpu, memory_capacity=node.memory, gpu_capacity=node.gpus,
            gpu_allocated=gpus.get(node.name, 0), last_heartbeat_at=_heartbeat(row, node),
        )  # fmt: skip
        if row is not None and row.facts() == facts:
            continue
        written = facts._replace(last_heartbeat_at=node.heartbeat_at)
        values = Node(cluster=state.cluster, name=node.name, observed_at=now, **written._asdict())
        _stage(values, row, changes.new_nodes, changes.nodes)
    listed = {node.name for node in snapshot.nodes}
    changes.gone_nodes = [row.pk for name, row in state.nodes.items() if name not in listed]


def _stage[M: (Node, Addon)](
    instance: M, row: NodeRow | AddonRow | None, new: list[M], changed: list[M]
) -> None:
    """A row the cluster reported for the first time is inserted; a known one is updated."""
    if row is None:
        new.append(instance)
    else:
        instance.pk = row.pk
        changed.append(instance)


def derive_addons(state: State, snapshot: Snapshot, changes: Changes, now: datetime) -> None:
    """Spec §Node and Addon status, from the labelled workloads and their pods."""
    workloads: dict[str, AddonObs] = {}
    for item in snapshot.addons:
        workloads.setdefault(item.addon, item)
    pods: dict[str, list[PodObs]] = defaultdict(list)
    for pod in snapshot.addon_pods:
        pods[pod.addon].append(pod)
    for name in sorted(set(workloads) | set(state.addons)):
        row, workload = state.addons.get(name), workloads.get(name)
        view = addon_view(workload, pods.get(name, []), row.desired_version if row else "")
        namespace = workload.namespace if workload else row.namespace if row else "kube-system"
        kind = workload.kind if workload else row.workload_kind if row else ""
        facts = SyncedAddon(
            namespace=namespace, workload_kind=kind, current_version=view.current_version,
            phase=view.phase, message=view.message,
        )  # fmt: skip
        if row is not None and row.facts() == facts:
            continue
        addon = Addon(cluster=state.cluster, name=name, observed_at=now, **facts._asdict())
        _stage(addon, row, changes.new_addons, changes.addons)


def derive_workflows(state: State, changes: Changes, now: datetime) -> None:
    """Spec §Workflow status, with this cycle's phases for this cluster's children: the
    Workflows of the loaded Jobs and those marked for a recount (state.recount)."""
    ids = {job.workflow_id for job in state.jobs if job.workflow_id is not None}
    ids |= set(state.recount)
    changes.recounted = dict(state.recount)
    if not ids:
        return
    ours = {job.pk: JobPhase(job.phase) for job in state.jobs if job.delete_requested_at is None}
    children: dict[int, list[JobPhase]] = defaultdict(list)
    rows = Job.objects.filter(workflow_id__in=ids, delete_requested_at__isnull=True)
    for child in rows.counted_children(ours):
        children[child.workflow_id or 0].append(child.phase)
    stored = Workflow.objects.filter(pk__in=ids).values_list(
        "pk", "phase", "message", "finished_at"
    )
    for pk, phase, message, finished_at in stored:
        new_phase = workflow_phase(children[pk])
        done = sum(1 for child in children[pk] if child == JobPhase.SUCCEEDED)
        progress = {"succeeded": done, "total": len(children[pk])}
        new_message = encode(Message("workflow.progress", progress))
        if (new_phase, new_message) != (phase, message):
            fields: dict[str, Any] = {"phase": new_phase, "message": new_message}
            if new_phase in WORKFLOW_TERMINAL and finished_at is None:
                fields["finished_at"] = now
            elif new_phase not in WORKFLOW_TERMINAL:
                fields["finished_at"] = None
            changes.workflows.append((pk, phase, fields))
