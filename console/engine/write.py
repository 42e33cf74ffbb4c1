"""The changes a cycle derived, and their writing in one transaction: only changed rows, in
bulk, and a Job's rows only while no operation changed the Job since it was loaded."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from console.engine.rows import ADDON_FACTS, INSTANCE_FACTS, NODE_FACTS, WORKER_FACTS, State
from console.models import Addon, Node
from jobs.models import Job, Task, Workflow
from workers.models import PodInstance, Worker

BATCH = 500


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
            tasks,
            ["phase", "ready_replicas", "message", "workload_replicas", "observed_at"],
            batch_size=BATCH,
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
