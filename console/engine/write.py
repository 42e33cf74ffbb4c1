"""The changes a cycle derived, and their writing in one transaction: only changed rows, in
bulk, and a Job's rows only while no operation changed the Job since it was loaded."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from django.db import transaction
from django.db.models import Model

from console.bulk import update_rows, update_where
from console.engine.rows import (
    ADDON_FACTS,
    INSTANCE_FACTS,
    INSTANCE_FACTS_OF,
    IS_PRESENT,
    NODE_FACTS,
    WORKER_FACTS,
    WORKER_FACTS_OF,
    State,
    SyncedInstance,
    SyncedWorker,
)
from console.models import Addon, Node
from console.statements import Statement
from jobs.models import Job, Task, Workflow
from workers.models import PodInstance, Worker

BATCH = 500


@dataclass
class JobChange:
    """A Job's new fields, written only while the row still has the values they came from."""

    pk: int
    seen: dict[str, Any]
    fields: dict[str, Any]


class TaskWrite(NamedTuple):
    """A Task's derived view, observed at the cycle's time."""

    pk: int
    phase: str
    ready_replicas: int
    message: str
    workload_replicas: int | None
    observed_at: datetime


class WorkerWrite(NamedTuple):
    """A Worker's facts as its pod reports them now (WORKER_FACTS); `pk` None for a new row."""

    pk: int | None
    task_id: int
    pod_name: str
    pod_uid: str
    node_name: str
    ip: str
    phase: str
    ready: bool
    reason: str
    message: str
    restart_count: int
    last_reported_at: datetime

    def facts(self) -> SyncedWorker:
        return SyncedWorker._make(WORKER_FACTS_OF(self))


class VanishedWorker(NamedTuple):
    """A Worker whose pod is gone: last reported by the sync before this one."""

    pk: int
    task_id: int
    last_reported_at: datetime


class InstanceWrite(NamedTuple):
    """A pod instance's facts as seen now (INSTANCE_FACTS); `pk` None for a new UID, first
    seen now, whose `created_at` is the pod's."""

    pk: int | None
    uid: str
    task_id: int
    pod_name: str
    node_name: str
    ip: str
    phase: str
    restart_count: int
    last_exit_code: int | None
    termination_reason: str
    last_seen_at: datetime
    gone_at: datetime | None = None
    created_at: datetime | None = None
    first_seen_at: datetime | None = None

    def facts(self) -> SyncedInstance:
        return SyncedInstance._make(INSTANCE_FACTS_OF(self))


class GoneInstance(NamedTuple):
    """An instance no longer listed: gone now, last seen by the last successful sync."""

    pk: int
    task_id: int
    gone_at: datetime
    last_seen_at: datetime


@dataclass
class Changes:
    jobs: list[JobChange] = field(default_factory=list)
    tasks: list[TaskWrite] = field(default_factory=list)
    new_workers: list[WorkerWrite] = field(default_factory=list)
    workers: list[WorkerWrite] = field(default_factory=list)
    vanished_workers: list[VanishedWorker] = field(default_factory=list)
    # Tasks written with `observed_at` = `reported_at`: their present Workers are reported then.
    reported_tasks: list[int] = field(default_factory=list)
    reported_at: datetime | None = None
    new_instances: list[InstanceWrite] = field(default_factory=list)
    instances: list[InstanceWrite] = field(default_factory=list)
    gone_instances: list[GoneInstance] = field(default_factory=list)
    new_nodes: list[Node] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    gone_nodes: list[int] = field(default_factory=list)
    new_addons: list[Addon] = field(default_factory=list)
    addons: list[Addon] = field(default_factory=list)
    workflows: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    # The Workflows derived for their recount marks, with the marks seen (cleared if unchanged).
    recounted: dict[int, datetime] = field(default_factory=dict)
    touched_jobs: set[int] = field(default_factory=set)

    def empty(self) -> bool:
        return not any(value for name, value in vars(self).items() if name != "reported_at")


# --- writing ---------------------------------------------------------------------------------


_LOCKED = Statement(
    lambda pks: (
        Job.objects.select_for_update(no_key=True)
        .filter(pk__any_of=pks)
        .values_list("pk", "run", "stopped", "delete_requested_at")
    ),
    list[int],
)


def _unchanged_jobs(changes: Changes, state: State) -> set[int]:
    """Locks the Jobs about to be written and keeps those no operation changed since they were
    loaded (a concurrent stop, resume or delete wins; the next cycle derives again).

    FOR NO KEY UPDATE, the lock an UPDATE of these rows takes anyway: it waits for an operation's
    update as FOR UPDATE would, but not for the key-share lock a row pointing at the Job takes
    (a signal or an Operation inserted): those requests never wait for the rest of the cycle's
    writes."""
    if not changes.touched_jobs:
        return set()
    loaded = {job.pk: (job.run, job.stopped, job.delete_requested_at) for job in state.jobs}
    return {
        pk
        for pk, run, stopped, deleting in _LOCKED.rows(list(changes.touched_jobs))
        if loaded.get(pk) == (run, stopped, deleting)
    }


def _of_jobs(rows: Iterable[Any], task_jobs: dict[int, int], keep: set[int]) -> list[Any]:
    return [row for row in rows if task_jobs.get(row.task_id) in keep]


def write(changes: Changes, state: State) -> int:
    """Writes the changes in one transaction (the cycle's, when it runs in one: no savepoint,
    a failure rolls the whole cycle back); returns the number of rows written."""
    task_jobs = {task.pk: job.pk for job in state.jobs for task in job.tasks}
    written = 0
    with transaction.atomic(savepoint=False):
        keep = _unchanged_jobs(changes, state)
        written += _write_jobs([change for change in changes.jobs if change.pk in keep])
        written += _report_workers(changes, task_jobs, keep)  # before the Tasks move on
        tasks = [task for task in changes.tasks if task_jobs.get(task.pk) in keep]
        written += update_rows(
            Task, ["phase", "ready_replicas", "message", "workload_replicas", "observed_at"], tasks
        )
        written += _write_workers(changes, task_jobs, keep)
        written += _write_instances(changes, task_jobs, keep)
        written += _write_platform(changes)
    return written


def _write_jobs(changes: Sequence[JobChange]) -> int:
    """Each Job's new fields where the row still has the values they came from (a concurrent
    stop wins): one conditional UPDATE per set of fields, sent for all the Jobs at once."""
    by_columns: dict[tuple[str, ...], list[JobChange]] = defaultdict(list)
    for change in changes:
        by_columns[(*change.fields, *change.seen)].append(change)
    written = 0
    for group in by_columns.values():
        fields, seen = list(group[0].fields), list(group[0].seen)
        values = [[*c.fields.values(), c.pk, *c.seen.values()] for c in group]
        written += update_where(Job, fields, ["pk", *seen], values)
    return written


def created[M: Model](model: type[M], rows: Sequence[NamedTuple], fields: Sequence[str]) -> int:
    """Inserts the rows (new ones: no `pk`), their `fields` only."""
    instances = [model(**{name: getattr(row, name) for name in fields}) for row in rows]
    model._default_manager.bulk_create(instances, batch_size=BATCH)
    return len(instances)


def _write_workers(changes: Changes, task_jobs: dict[int, int], keep: set[int]) -> int:
    new = _of_jobs(changes.new_workers, task_jobs, keep)
    updated = _of_jobs(changes.workers, task_jobs, keep)
    fields = [*WORKER_FACTS, "last_reported_at"]
    count = created(Worker, new, ["task_id", "pod_name", *fields])
    count += update_rows(Worker, fields, updated)
    vanished = _of_jobs(changes.vanished_workers, task_jobs, keep)
    return count + update_rows(Worker, ["last_reported_at"], vanished)


def _report_workers(changes: Changes, task_jobs: dict[int, int], keep: set[int]) -> int:
    """The present Workers of the written Tasks reported at the cycle's time, by the database
    (no row is read): present means reported since their Task's stored `observed_at`, so this
    runs before the Tasks are written."""
    tasks = [task for task in changes.reported_tasks if task_jobs.get(task) in keep]
    count = 0
    for start in range(0, len(tasks), BATCH):
        chunk = tasks[start : start + BATCH]
        rows = Worker.objects.filter(IS_PRESENT, task_id__any_of=chunk)
        count += rows.update(last_reported_at=changes.reported_at)
    return count


def _write_instances(changes: Changes, task_jobs: dict[int, int], keep: set[int]) -> int:
    new = _of_jobs(changes.new_instances, task_jobs, keep)
    updated = _of_jobs(changes.instances, task_jobs, keep)
    fields = [*INSTANCE_FACTS, "last_seen_at", "gone_at"]
    count = created(PodInstance, new, ["uid", "created_at", "first_seen_at", *fields])
    count += update_rows(PodInstance, fields, updated)
    return count + update_rows(PodInstance, ["gone_at", "last_seen_at"], changes.gone_instances)


def _write_platform(changes: Changes) -> int:
    Node.objects.bulk_create(changes.new_nodes)
    count = len(changes.new_nodes) + update_rows(Node, [*NODE_FACTS, "observed_at"], changes.nodes)
    if changes.gone_nodes:
        count += Node.objects.filter(pk__in=changes.gone_nodes).delete()[0]
    Addon.objects.bulk_create(changes.new_addons)
    count += len(changes.new_addons) + update_rows(
        Addon, [*ADDON_FACTS, "observed_at"], changes.addons
    )
    for pk, phase, fields in changes.workflows:
        count += Workflow.objects.filter(pk=pk, phase=phase).update(**fields)
    for pk, mark in changes.recounted.items():  # a mark set again since stays for the next cycle
        marked = Workflow.objects.filter(pk=pk, recount_requested_at=mark)
        count += marked.update(recount_requested_at=None)
    return count
