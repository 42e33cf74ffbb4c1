"""Plan: the writes that make a cluster hold what a Job asks for. Deterministic, level-triggered
and idempotent: from a Job's rows, the objects the cluster reported for it and three settings
read through `rows.target_of` (TRAINYARD_PUBLIC_URL for the signal URL, SECRET_KEY for the
signal token, TRAINYARD_POD_USER), the writes that are missing; no query, no API call, and
running it on what it produced gives nothing more to do, so a second reconcile makes no API
write. Not pure: the settings are read when it runs (a test overrides them).

Rules (spec §Job status): a stopped Job has every workload scaled to 0, also a Failed one (its
resources are released, it stays Failed) — nothing is ever created for it; a terminal Job is
otherwise left alone (no reconcile after Succeeded/Failed); a resumed Job (new `run`) has the
workloads of older runs deleted and re-created from the original template; drift (a workload
deleted or rescaled behind the console's back) is repaired; a Workflow child whose upstreams have
not Succeeded gets nothing. Only objects labelled managed-by trainyard are ever touched: the
streams select by that label, and `create` refuses to adopt anything else.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from console.engine.rows import JobRow, TaskRow, target_of
from console.kube.gateway import BATCH_JOBS, SERVICES, STATEFULSETS, Resource
from console.kube.manifests import headless_service, workload
from console.kube.observations import BatchJobObs, ServiceObs, StatefulSetObs, WorkloadObs
from jobs.choices import JOB_TERMINAL, TASK_TERMINAL, TaskKind

# --- plan (no query, no API call; settings through target_of) --------------------------------


class Verb(StrEnum):
    CREATE = "create"
    SCALE = "scale"
    DELETE = "delete"


@dataclass(frozen=True)
class Write:
    verb: Verb
    resource: Resource
    namespace: str
    name: str
    task_id: int | None
    manifest: dict[str, Any] | None = None
    replicas: int = 0
    uid: str = ""


@dataclass(frozen=True)
class JobObjects:
    """The console's objects labelled with one Job's id, as the cluster last reported them."""

    workloads: tuple[WorkloadObs, ...] = ()
    services: tuple[ServiceObs, ...] = ()


def group_by_job(
    workloads: Iterable[WorkloadObs], services: Iterable[ServiceObs]
) -> dict[int, JobObjects]:
    by_job: dict[int, tuple[list[WorkloadObs], list[ServiceObs]]] = defaultdict(lambda: ([], []))
    for item in workloads:
        if item.owner.job_id is not None:
            by_job[item.owner.job_id][0].append(item)
    for service in services:
        if service.owner.job_id is not None:
            by_job[service.owner.job_id][1].append(service)
    return {pk: JobObjects(tuple(w), tuple(s)) for pk, (w, s) in by_job.items()}


def _resource(item: WorkloadObs) -> Resource:
    return STATEFULSETS if isinstance(item, StatefulSetObs) else BATCH_JOBS


def _replicas(item: WorkloadObs) -> int:
    return item.replicas if isinstance(item, StatefulSetObs) else item.parallelism


def _finished(item: WorkloadObs) -> bool:
    return isinstance(item, BatchJobObs) and (item.complete or item.failed_condition)


def _delete(item: WorkloadObs | ServiceObs, resource: Resource) -> Write:
    return Write(Verb.DELETE, resource, item.namespace, item.name, item.owner.task_id, uid=item.uid)


def _scale(item: WorkloadObs, replicas: int) -> Write:
    return Write(
        Verb.SCALE, _resource(item), item.namespace, item.name, item.owner.task_id,
        replicas=replicas,
    )  # fmt: skip


def _create(resource: Resource, manifest: dict[str, Any], task_id: int) -> Write:
    meta = manifest["metadata"]
    return Write(Verb.CREATE, resource, meta["namespace"], meta["name"], task_id, manifest)


def _current(job: JobRow, task: TaskRow, item: WorkloadObs | ServiceObs) -> bool:
    return (
        item.owner.task_id == task.pk
        and item.owner.run == job.run
        and item.name == f"{job.name}-{task.role}"
        and item.namespace == job.namespace
    )


def _plan_task(job: JobRow, task: TaskRow, objects: JobObjects) -> list[Write]:
    """One Task of a Job that should run: replace older runs, create, repair replicas."""
    if task.phase in TASK_TERMINAL:
        return []  # a finished batch Job is never run again (its object may have been removed)
    mine = [w for w in objects.workloads if w.owner.task_id == task.pk]
    current = [w for w in mine if _current(job, task, w) and w.kind == task.kind]
    writes = [_delete(w, _resource(w)) for w in mine if w not in current]
    if not current:
        resource = STATEFULSETS if task.kind == TaskKind.STATEFULSET else BATCH_JOBS
        writes.append(_create(resource, workload(target_of(job, task)), task.pk))
    elif _replicas(current[0]) != task.desired_replicas and not _finished(current[0]):
        writes.append(_scale(current[0], task.desired_replicas))
    services = [s for s in objects.services if s.owner.task_id == task.pk]
    wanted = task.kind == TaskKind.STATEFULSET
    kept = [s for s in services if wanted and _current(job, task, s)]
    writes += [_delete(s, SERVICES) for s in services if s not in kept]
    if wanted and not kept:
        writes.append(_create(SERVICES, headless_service(target_of(job, task)), task.pk))
    return writes


def plan(job: JobRow, objects: JobObjects, blocked: Sequence[str] = ()) -> list[Write]:
    """The writes that make the cluster match `job`; [] when it already does."""
    if job.delete_requested_at is not None:
        return [_delete(w, _resource(w)) for w in objects.workloads] + [
            _delete(s, SERVICES) for s in objects.services
        ]
    if job.stopped:
        return [_scale(w, 0) for w in objects.workloads if _replicas(w) != 0 and not _finished(w)]
    if job.phase in JOB_TERMINAL or blocked:
        return []
    known = {task.pk for task in job.tasks}
    writes = [_delete(w, _resource(w)) for w in objects.workloads if w.owner.task_id not in known]
    writes += [_delete(s, SERVICES) for s in objects.services if s.owner.task_id not in known]
    for task in job.tasks:
        writes += _plan_task(job, task, objects)
    return writes
