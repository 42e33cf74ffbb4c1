"""One sync cycle of one cluster: LIST, derive, reconcile, write what changed.

- A per-cluster lease (`Cluster.sync_lease_until`, taken by a conditional UPDATE) makes
  overlapping beats skip rather than sync a cluster twice at once. Its value is the holder's
  token: renewal and release are conditional on it, so a cycle that outlived its lease writes
  nothing.
- The cluster is read first and in full (every LIST must succeed): a cluster that cannot be
  read, answers errors or garbage is marked unreachable with the error, and nothing else
  changes — never a transition invented from missing data (ARCHITECTURE §Principles).
- Everything of the cluster is loaded in a fixed number of queries, compared in memory, and only
  changed rows are written (bulk). A cycle in which nothing changed writes the Cluster row only.
- Observation times are written with the change they describe: an unchanged row was confirmed by
  every later sync, which `console.status` derives from `Cluster.last_synced_at`.
"""

from __future__ import annotations

import gc
import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.db.models import BooleanField, Case, F, Q, QuerySet, Value, When
from django.utils import timezone

from console import reconcile
from console.kube import kubeconfig
from console.kube.derive import TaskView, addon_view, gpus_by_node, task_view
from console.kube.gateway import ClusterUnreachable, Snapshot
from console.kube.observations import AddonObs, NodeObs, PodObs, WorkloadObs
from console.kube.problems import pod_reason
from console.models import Addon, Cluster, Node
from console.reconcile import JobRow, TaskRow
from jobs.choices import (
    JOB_TERMINAL,
    TASK_TERMINAL,
    WORKFLOW_TERMINAL,
    JobPhase,
    PodPhase,
    TaskKind,
)
from jobs.lifecycle import TaskState, job_message, job_phase, workflow_phase
from jobs.models import Job, Task, Workflow
from workers.models import PodInstance, Worker

logger = logging.getLogger(__name__)

WORKER_FIELDS = (
    "pk", "task_id", "pod_name", "pod_uid", "node_name", "ip", "phase", "ready", "reason",
    "message", "restart_count", "present",
)  # fmt: skip
WORKER_FACTS = [
    "pod_uid",
    "node_name",
    "ip",
    "phase",
    "ready",
    "reason",
    "message",
    "restart_count",
]
INSTANCE_FIELDS = (
    "pk", "uid", "task_id", "pod_name", "node_name", "ip", "phase", "restart_count",
    "last_exit_code", "termination_reason",
)  # fmt: skip
INSTANCE_FACTS = [
    "task_id", "pod_name", "node_name", "ip", "phase", "restart_count", "last_exit_code",
    "termination_reason",
]  # fmt: skip
NODE_FIELDS = (
    "pk", "name", "phase", "unschedulable", "message", "cpu_capacity", "memory_capacity",
    "gpu_capacity", "gpu_allocated", "last_heartbeat_at",
)  # fmt: skip
NODE_FACTS = NODE_FIELDS[2:]
ADDON_FIELDS = ("pk", "name", "desired_version", "namespace", "workload_kind", "current_version",
                "phase", "message")  # fmt: skip
ADDON_FACTS = ADDON_FIELDS[3:]
BATCH = 500
# A Worker was in the last sync that wrote its Task (console.status.worker_missing), computed by
# the database: comparing 10,000 datetimes in Python costs more than the whole comparison.
PRESENT = Case(
    When(
        Q(task__observed_at__isnull=True) | Q(last_reported_at__gte=F("task__observed_at")),
        then=Value(True),
    ),
    default=Value(False),
    output_field=BooleanField(),
)


@dataclass(frozen=True)
class SyncResult:
    cluster_id: int
    name: str = ""
    skipped: bool = False
    reachable: bool = False
    message: str = ""
    seconds: float = 0.0
    jobs: int = 0
    workloads: int = 0
    pods: int = 0
    nodes: int = 0
    api_writes: int = 0
    rows_written: int = 0

    def summary(self) -> str:
        """One line for `manage.py sync_clusters` (prefixed there by the cluster's name)."""
        if self.skipped:
            return "skipped: another sync of this cluster is running"
        if not self.reachable:
            return f"UNREACHABLE after {self.seconds:.2f}s: {self.message}"
        return (
            f"{self.jobs} jobs, {self.workloads} workloads, {self.pods} pods, {self.nodes} nodes; "
            f"{self.api_writes} API writes, {self.rows_written} rows written in {self.seconds:.2f}s"
        )


# --- the lease -------------------------------------------------------------------------------


def lease_seconds() -> int:
    """A few intervals, and always more than one slow request can take."""
    connect, read = kubeconfig.timeouts()
    return 3 * settings.TRAINYARD_SYNC_INTERVAL + 2 * (connect + read)


def take_lease(cluster_id: int, now: datetime) -> datetime | None:
    """The lease's token (its expiry), or None when another cycle holds it."""
    until = now + timedelta(seconds=lease_seconds())
    free = Q(sync_lease_until__isnull=True) | Q(sync_lease_until__lt=now)
    taken = Cluster.objects.filter(free, pk=cluster_id).update(sync_lease_until=until)
    return until if taken else None


def renew_lease(cluster_id: int, lease: datetime) -> datetime | None:
    until = timezone.now() + timedelta(seconds=lease_seconds())
    held = Cluster.objects.filter(pk=cluster_id, sync_lease_until=lease)
    return until if held.update(sync_lease_until=until) else None


def _renewal_due(lease: datetime) -> bool:
    """Before writing, a cycle that used up half its lease renews it (or learns it lost it)."""
    return (lease - timezone.now()).total_seconds() < lease_seconds() / 2


def finish(cluster_id: int, lease: datetime, **fields: Any) -> None:
    """Releases the lease in the same UPDATE that records the cycle's result."""
    Cluster.objects.filter(pk=cluster_id, sync_lease_until=lease).update(
        sync_lease_until=None, **fields
    )


# --- what the database holds for a cluster ---------------------------------------------------


@dataclass
class State:
    cluster: Cluster
    jobs: list[JobRow]
    workers: dict[int, dict[str, tuple[Any, ...]]]
    instances: dict[str, tuple[Any, ...]]
    nodes: dict[str, tuple[Any, ...]]
    addons: dict[str, tuple[Any, ...]]
    operations: dict[int, list[reconcile.PendingOperation]]
    blocked: dict[int, list[str]] = field(default_factory=dict)


def raw_rows(queryset: QuerySet[Any, Any]) -> list[tuple[Any, ...]]:
    """The rows of a values_list() of plain columns, straight from the cursor.

    Django's per-row conversion is most of the cost of loading 10,000 rows; these columns need
    none (strings, integers; booleans come back as 0/1 from SQLite, equal to False/True). The
    column order is the values_list order, annotations last."""
    compiler = queryset.query.get_compiler(using=queryset.db)
    sql, params = compiler.as_sql()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()  # type: ignore[no-any-return]


def load_state(cluster: Cluster) -> State:
    """Everything of the cluster in a fixed number of queries, as plain tuples."""
    jobs = reconcile.jobs_of_cluster(cluster.pk)
    workers: dict[int, dict[str, tuple[Any, ...]]] = defaultdict(dict)
    rows = Worker.objects.filter(task__job__cluster_id=cluster.pk).annotate(present=PRESENT)
    for row in raw_rows(rows.values_list(*WORKER_FIELDS)):
        workers[row[1]][row[2]] = row
    instances = PodInstance.objects.filter(task__job__cluster_id=cluster.pk, gone_at__isnull=True)
    nodes = Node.objects.filter(cluster_id=cluster.pk).values_list(*NODE_FIELDS)
    addons = Addon.objects.filter(cluster_id=cluster.pk).values_list(*ADDON_FIELDS)
    return State(
        cluster=cluster,
        jobs=jobs,
        workers=workers,
        instances={row[1]: row for row in raw_rows(instances.values_list(*INSTANCE_FIELDS))},
        nodes={row[1]: row for row in nodes},
        addons={row[1]: row for row in addons},
        operations=reconcile.pending_operations(Q(job__cluster_id=cluster.pk)),
    )


# --- what changed ----------------------------------------------------------------------------


@dataclass
class JobChange:
    """A Job's new fields, written only while the row still has the values they came from."""

    pk: int
    seen: dict[str, Any]
    fields: dict[str, Any]


@dataclass
class Changes:
    jobs: list[JobChange] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)
    new_workers: list[Worker] = field(default_factory=list)
    workers: list[Worker] = field(default_factory=list)
    vanished_workers: list[Worker] = field(default_factory=list)
    new_instances: list[PodInstance] = field(default_factory=list)
    instances: list[PodInstance] = field(default_factory=list)
    gone_instances: list[PodInstance] = field(default_factory=list)
    new_nodes: list[Node] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    gone_nodes: list[int] = field(default_factory=list)
    new_addons: list[Addon] = field(default_factory=list)
    addons: list[Addon] = field(default_factory=list)
    workflows: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    touched_jobs: set[int] = field(default_factory=set)

    def empty(self) -> bool:
        return not any(value for value in vars(self).values())


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
        return TaskView(task.phase, task.ready_replicas, task.message)
    view = task_view(TaskKind(task.kind), job.stopped, workload, pods, index.nodes)
    if task.phase in TASK_TERMINAL:
        return TaskView(task.phase, view.ready_replicas, view.message)
    return view


def _worker_facts(pod: PodObs, index: Index, last_phase: str | None) -> tuple[Any, ...]:
    """Phase Unknown keeps the pod's last known phase (docs/decisions.md)."""
    reason, message = pod_reason(pod, index.nodes)
    phase = pod.phase or last_phase or PodPhase.PENDING
    return (
        pod.uid, pod.node_name, pod.pod_ip, str(phase), pod.ready, reason, message,
        pod.restart_count,
    )  # fmt: skip


def _derive_workers(
    task: TaskRow, pods: list[PodObs], index: Index, changes: Changes, state: State,
    task_changed: bool, now: datetime,
) -> bool:  # fmt: skip
    """Writes the Workers of a Task when anything about them changed; True when it did.

    The present Workers' `last_reported_at` is written with the Task's `observed_at`, so a Worker
    older than its Task was missing (console.status.worker_missing). A Worker that vanishes now
    was last reported by the previous successful sync."""
    stored = state.workers.get(task.pk, {})
    present = {name: row for name, row in stored.items() if row[11]}
    facts = {pod.name: _worker_facts(pod, index, _last_phase(stored, pod)) for pod in pods}
    vanished = [row for name, row in present.items() if name not in facts]
    changed = task_changed or bool(vanished)
    changed = changed or any(
        name not in present or present[name][3:11] != f for name, f in facts.items()
    )
    if not changed:
        return False
    for name, values in facts.items():
        worker = Worker(task_id=task.pk, pod_name=name, last_reported_at=now)
        worker.__dict__.update(zip(WORKER_FACTS, values, strict=True))
        if name in stored:
            worker.pk = stored[name][0]
            changes.workers.append(worker)
        else:
            changes.new_workers.append(worker)
    last_sync = state.cluster.last_synced_at
    for row in vanished:
        if last_sync is not None:  # a present row was written by a sync up to that one
            changes.vanished_workers.append(
                Worker(pk=row[0], task_id=task.pk, last_reported_at=last_sync)
            )
    return True


def _last_phase(stored: dict[str, tuple[Any, ...]], pod: PodObs) -> str | None:
    row = stored.get(pod.name)
    return row[6] if row is not None else None


def _task_changed(task: TaskRow, view: TaskView) -> bool:
    return (task.phase, task.ready_replicas, task.message) != (
        view.phase, view.ready_replicas, view.message,
    )  # fmt: skip


def _derive_job(job: JobRow, index: Index, state: State, changes: Changes, now: datetime) -> None:
    states: list[TaskState] = []
    for task in job.tasks:
        pods = _current_pods(job, task, index)
        view = _view(job, task, index, pods)
        task_changed = _task_changed(task, view)
        if _derive_workers(task, pods, index, changes, state, task_changed, now):
            changes.tasks.append(
                Task(pk=task.pk, phase=view.phase, ready_replicas=view.ready_replicas,
                     message=view.message, observed_at=now)
            )  # fmt: skip
            changes.touched_jobs.add(job.pk)
            task.phase, task.ready_replicas, task.message = (
                view.phase, view.ready_replicas, view.message,
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


def derive_jobs(state: State, index: Index, changes: Changes, now: datetime) -> None:
    """Task, Worker and Job phases (spec §Task status, §Job status), then blocked children."""
    seen = {job.pk: {"phase": job.phase, "message": job.message} for job in state.jobs}
    live = [job for job in state.jobs if job.delete_requested_at is None]
    for job in live:
        _derive_job(job, index, state, changes, now)
    state.blocked = reconcile.load_blocked(live)
    for job in live:
        if job.pk in state.blocked:
            job.message = f"Waiting for upstream jobs: {', '.join(state.blocked[job.pk])}."
        fields = _job_fields(job, seen[job.pk], now)
        if fields:
            guard = {"phase": seen[job.pk]["phase"], "stopped": job.stopped, "run": job.run}
            changes.jobs.append(JobChange(job.pk, guard, fields))
            changes.touched_jobs.add(job.pk)


# --- pod instances, nodes, add-ons, workflows ------------------------------------------------


def _instance_facts(pod: PodObs, last_phase: str | None) -> tuple[Any, ...]:
    phase = pod.phase or last_phase or PodPhase.PENDING
    return (
        pod.owner.task_id, pod.name, pod.node_name, pod.pod_ip, str(phase), pod.restart_count,
        pod.exit_code, pod.termination_reason,
    )  # fmt: skip


def derive_instances(state: State, pods: Sequence[PodObs], changes: Changes, now: datetime) -> None:
    """Every pod UID of the console's live Jobs (PRODUCT: instance history for operators)."""
    tasks = {t.pk: j.pk for j in state.jobs if j.delete_requested_at is None for t in j.tasks}
    listed: set[str] = set()
    new: dict[str, tuple[Any, ...]] = {}
    for pod in pods:
        if pod.owner.task_id not in tasks or not pod.uid:
            continue
        listed.add(pod.uid)
        row = state.instances.get(pod.uid)
        facts = _instance_facts(pod, row[6] if row else None)
        if row is None:
            new[pod.uid] = (*facts, pod.created_at)
        elif row[2:10] != facts:
            instance = PodInstance(pk=row[0], last_seen_at=now)
            instance.__dict__.update(zip(INSTANCE_FACTS, facts, strict=True))
            changes.instances.append(instance)
            changes.touched_jobs.add(tasks[pod.owner.task_id])
    for values in new.values():
        changes.touched_jobs.add(tasks[values[0]])
    _add_instances(new, changes, now)
    last_sync = state.cluster.last_synced_at
    for uid, row in state.instances.items():
        if uid not in listed:  # listed until the last successful sync, written up to it
            seen = PodInstance(
                pk=row[0], task_id=row[2], gone_at=now, last_seen_at=last_sync or now
            )
            changes.gone_instances.append(seen)


def _add_instances(new: dict[str, tuple[Any, ...]], changes: Changes, now: datetime) -> None:
    """New UIDs; one that was marked gone and is listed again is brought back (same row)."""
    back: dict[str, int] = {}
    uids = list(new)
    for start in range(0, len(uids), BATCH):
        chunk = uids[start : start + BATCH]
        back.update(PodInstance.objects.filter(uid__in=chunk).values_list("uid", "pk"))
    for uid, values in new.items():
        instance = PodInstance(uid=uid, created_at=values[8], first_seen_at=now, last_seen_at=now)
        instance.__dict__.update(zip(INSTANCE_FACTS, values[:8], strict=True))
        if uid in back:
            instance.pk, instance.gone_at = back[uid], None
            changes.instances.append(instance)
        else:
            changes.new_instances.append(instance)


def _heartbeat(row: tuple[Any, ...] | None, node: NodeObs) -> datetime | None:
    """A newer heartbeat alone is recorded once the stored one is TRAINYARD_STALE_AFTER old:
    kubelets post every few seconds to minutes, and a heartbeat is not a change of status
    (docs/decisions.md). Any other change of the node records the latest one."""
    stored, latest = (row[9] if row else None), node.heartbeat_at
    if stored is None or latest is None:
        return latest
    due = (latest - stored).total_seconds() >= settings.TRAINYARD_STALE_AFTER
    return latest if due else stored


def derive_nodes(state: State, snapshot: Snapshot, changes: Changes, now: datetime) -> None:
    """Spec §Node status: Online/Offline, `unschedulable` apart. Vanished nodes are deleted."""
    gpus = gpus_by_node([*snapshot.pods, *snapshot.addon_pods])
    for node in snapshot.nodes:
        phase = Node.Phase.ONLINE if node.online else Node.Phase.OFFLINE
        row = state.nodes.get(node.name)
        facts = (
            phase, node.unschedulable, node.message, node.cpu, node.memory, node.gpus,
            gpus.get(node.name, 0), _heartbeat(row, node),
        )  # fmt: skip
        if row is not None and row[2:] == facts:
            continue
        facts = (*facts[:-1], node.heartbeat_at)
        values = Node(cluster=state.cluster, name=node.name, observed_at=now)
        values.__dict__.update(zip(NODE_FACTS, facts, strict=True))
        if row is None:
            changes.new_nodes.append(values)
        else:
            values.pk = row[0]
            changes.nodes.append(values)
    listed = {node.name for node in snapshot.nodes}
    changes.gone_nodes = [row[0] for name, row in state.nodes.items() if name not in listed]


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
        view = addon_view(workload, pods.get(name, []), row[2] if row else "")
        namespace = workload.namespace if workload else row[3] if row else "kube-system"
        kind = workload.kind if workload else row[4] if row else ""
        facts = (namespace, kind, view.current_version, view.phase, view.message)
        if row is not None and row[3:] == facts:
            continue
        addon = Addon(cluster=state.cluster, name=name, observed_at=now)
        addon.__dict__.update(zip(ADDON_FACTS, facts, strict=True))
        if row is None:
            changes.new_addons.append(addon)
        else:
            addon.pk = row[0]
            changes.addons.append(addon)


def derive_workflows(state: State, changes: Changes, now: datetime) -> None:
    """Spec §Workflow status, with this cycle's phases for this cluster's children."""
    ids = {job.workflow_id for job in state.jobs if job.workflow_id is not None}
    if not ids:
        return
    ours = {job.pk: JobPhase(job.phase) for job in state.jobs if job.delete_requested_at is None}
    children: dict[int, list[JobPhase]] = defaultdict(list)
    rows = Job.objects.filter(workflow_id__in=ids, delete_requested_at__isnull=True)
    for pk, workflow_id, phase in rows.values_list("pk", "workflow_id", "phase"):
        children[workflow_id].append(ours.get(pk, JobPhase(phase)))
    stored = Workflow.objects.filter(pk__in=ids).values_list(
        "pk", "phase", "message", "finished_at"
    )
    for pk, phase, message, finished_at in stored:
        new_phase = workflow_phase(children[pk])
        done = sum(1 for child in children[pk] if child == JobPhase.SUCCEEDED)
        new_message = f"{done}/{len(children[pk])} jobs succeeded"
        if (new_phase, new_message) != (phase, message):
            fields: dict[str, Any] = {"phase": new_phase, "message": new_message}
            if new_phase in WORKFLOW_TERMINAL and finished_at is None:
                fields["finished_at"] = now
            elif new_phase not in WORKFLOW_TERMINAL:
                fields["finished_at"] = None
            changes.workflows.append((pk, phase, fields))


# --- writing ---------------------------------------------------------------------------------


def _unchanged_jobs(changes: Changes, state: State) -> set[int]:
    """Locks the Jobs about to be written and keeps those no operation changed since they were
    loaded (a concurrent stop, resume or delete wins; the next cycle derives again)."""
    if not changes.touched_jobs:
        return set()
    loaded = {job.pk: (job.run, job.stopped, job.delete_requested_at) for job in state.jobs}
    rows = Job.objects.select_for_update().filter(pk__in=changes.touched_jobs)
    return {
        pk
        for pk, run, stopped, deleting in rows.values_list(
            "pk", "run", "stopped", "delete_requested_at"
        )
        if loaded.get(pk) == (run, stopped, deleting)
    }


def _of_jobs(rows: Iterable[Any], task_jobs: dict[int, int], keep: set[int]) -> list[Any]:
    return [row for row in rows if task_jobs.get(row.task_id) in keep]


def write(changes: Changes, state: State) -> int:
    """Writes the changes in one transaction; returns the number of rows written."""
    task_jobs = {task.pk: job.pk for job in state.jobs for task in job.tasks}
    written = 0
    with transaction.atomic():
        keep = _unchanged_jobs(changes, state)
        for change in changes.jobs:
            if change.pk in keep:
                written += Job.objects.filter(pk=change.pk, **change.seen).update(**change.fields)
        tasks = [task for task in changes.tasks if task_jobs.get(task.pk) in keep]
        written += Task.objects.bulk_update(
            tasks, ["phase", "ready_replicas", "message", "observed_at"], batch_size=BATCH
        )
        written += _write_workers(changes, task_jobs, keep)
        written += _write_instances(changes, task_jobs, keep)
        written += _write_platform(changes)
    return written


def _write_workers(changes: Changes, task_jobs: dict[int, int], keep: set[int]) -> int:
    new = _of_jobs(changes.new_workers, task_jobs, keep)
    updated = _of_jobs(changes.workers, task_jobs, keep)
    Worker.objects.bulk_create(new, batch_size=BATCH)
    fields = [*WORKER_FACTS, "last_reported_at"]
    count = len(new) + Worker.objects.bulk_update(updated, fields, batch_size=BATCH)
    vanished = _of_jobs(changes.vanished_workers, task_jobs, keep)
    return count + Worker.objects.bulk_update(vanished, ["last_reported_at"], batch_size=BATCH)


def _write_instances(changes: Changes, task_jobs: dict[int, int], keep: set[int]) -> int:
    new = _of_jobs(changes.new_instances, task_jobs, keep)
    updated = _of_jobs(changes.instances, task_jobs, keep)
    PodInstance.objects.bulk_create(new, batch_size=BATCH)
    fields = [*INSTANCE_FACTS, "last_seen_at", "gone_at"]
    count = len(new) + PodInstance.objects.bulk_update(updated, fields, batch_size=BATCH)
    gone = changes.gone_instances
    return count + PodInstance.objects.bulk_update(
        gone, ["gone_at", "last_seen_at"], batch_size=BATCH
    )


def _write_platform(changes: Changes) -> int:
    Node.objects.bulk_create(changes.new_nodes)
    count = len(changes.new_nodes) + Node.objects.bulk_update(
        changes.nodes, [*NODE_FACTS, "observed_at"]
    )
    if changes.gone_nodes:
        count += Node.objects.filter(pk__in=changes.gone_nodes).delete()[0]
    Addon.objects.bulk_create(changes.new_addons)
    count += len(changes.new_addons) + Addon.objects.bulk_update(
        changes.addons, [*ADDON_FACTS, "observed_at"]
    )
    for pk, phase, fields in changes.workflows:
        count += Workflow.objects.filter(pk=pk, phase=phase).update(**fields)
    return count


# --- reconcile inside the cycle --------------------------------------------------------------


def reconcile_cluster(gateway: Any, state: State, snapshot: Snapshot, now: datetime) -> int:
    """Plans every Job against the snapshot, applies, records; returns the rows written."""
    items: list[WorkloadObs] = [*snapshot.statefulsets, *snapshot.batch_jobs]
    objects = reconcile.group_by_job(items, snapshot.services)
    written = 0
    for job in state.jobs:
        blocked = state.blocked.get(job.pk, []) if job.delete_requested_at is None else []
        writes = reconcile.plan(job, objects.get(job.pk, reconcile.JobObjects()), blocked)
        operations = state.operations.get(job.pk, [])
        needs_record = writes or operations or job.delete_requested_at is not None
        if not needs_record and not any(task.apply_error for task in job.tasks):
            continue
        outcome = reconcile.apply_job(gateway, writes)
        written += reconcile.record(job, outcome, operations, blocked, now)
        if outcome.unreachable:
            break
    return written


# --- the cycle -------------------------------------------------------------------------------


def sync_cluster(cluster_id: int) -> SyncResult:
    """One full reconcile-and-poll cycle (what the beat and `manage.py sync_clusters` run)."""
    started, now = time.monotonic(), timezone.now()
    lease = take_lease(cluster_id, now)
    if lease is None:
        return SyncResult(cluster_id, skipped=True)
    finished = False
    collecting = gc.isenabled()
    gc.disable()  # the cycle allocates ~10^6 acyclic objects: no cycle-collector passes over them
    try:
        result = _cycle(cluster_id, lease, now, started)
        finished = True
        return result
    finally:
        if collecting:
            gc.enable()
        if not finished:
            finish(cluster_id, lease)


def _unreachable(
    cluster: Cluster, lease: datetime, now: datetime, error: Exception, started: float
) -> SyncResult:
    message = str(error)
    finish(cluster.pk, lease, reachable=False, message=message, last_attempt_at=now)
    logger.warning("cluster %s unreachable: %s", cluster.name, message)
    return SyncResult(cluster.pk, cluster.name, message=message, seconds=time.monotonic() - started)


def _cycle(cluster_id: int, lease: datetime, now: datetime, started: float) -> SyncResult:
    cluster = Cluster.objects.get(pk=cluster_id)
    try:
        gateway = reconcile.gateway_for(cluster)
        snapshot = gateway.snapshot()
    except (ClusterUnreachable, kubeconfig.KubeconfigRejected) as error:
        return _unreachable(cluster, lease, now, error, started)
    state = load_state(cluster)
    changes = Changes()
    derive_jobs(state, Index.of(snapshot), changes, now)
    derive_instances(state, snapshot.pods, changes, now)
    derive_nodes(state, snapshot, changes, now)
    derive_addons(state, snapshot, changes, now)
    derive_workflows(state, changes, now)
    held = renew_lease(cluster_id, lease) if _renewal_due(lease) else lease
    if held is None:
        return SyncResult(cluster_id, cluster.name, skipped=True)
    rows = reconcile_cluster(gateway, state, snapshot, now)
    rows += write(changes, state) if not changes.empty() else 0
    finish(cluster_id, held, reachable=True, message="", last_synced_at=now, last_attempt_at=now)
    return SyncResult(
        cluster_id,
        cluster.name,
        reachable=True,
        seconds=time.monotonic() - started,
        jobs=len(state.jobs),
        workloads=len(snapshot.statefulsets) + len(snapshot.batch_jobs),
        pods=len(snapshot.pods),
        nodes=len(snapshot.nodes),
        api_writes=gateway.writes,
        rows_written=rows,
    )
