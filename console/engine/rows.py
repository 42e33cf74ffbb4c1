"""The rows a cycle works from, typed, and their loading: the touched Jobs with their Tasks,
Workers and open pod instances, the touched Nodes, the add-ons when touched — a fixed number of
queries, whatever the number of rows, and never the rows of Jobs nothing touched."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter
from typing import Any, NamedTuple

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import BooleanField, Case, F, Q, QuerySet, Value, When

from console.engine.memory import BATCH, Touched
from console.kube.manifests import Target
from console.kube.observations import PodObs
from console.models import Addon, Cluster, Node
from console.statements import Statement
from jobs.choices import JobPhase, PodPhase, TaskKind, TaskPhase
from jobs.models import Job, Operation, Task, Workflow, WorkflowEdge
from jobs.status.lifecycle import blocked_by
from jobs.validators import shm_size_of
from jobs.workload.intake import signal_token, signal_url
from workers.models import PodInstance, Worker


@dataclass
class TaskRow:
    pk: int
    job_id: int
    role: str
    kind: TaskKind
    template: dict[str, Any]
    desired_replicas: int
    ready_replicas: int
    phase: TaskPhase
    message: str
    observed_at: datetime | None
    applied_at: datetime | None
    apply_error: str
    workload_replicas: int | None = None


@dataclass
class JobRow:
    pk: int
    name: str
    namespace: str
    run: int
    stopped: bool
    phase: JobPhase
    message: str
    started_at: datetime | None
    finished_at: datetime | None
    observed_at: datetime | None
    delete_requested_at: datetime | None
    workflow_id: int | None
    created_at: datetime
    # The Job's heartbeat policy, told to its pods (a spec stored before policies has none).
    heartbeat_seconds: int | None = None
    tasks: list[TaskRow] = field(default_factory=list)


# The facts the sync keeps of a Worker, a pod instance, a Node and an add-on: what a row loaded
# here and the one derived from the cluster now are compared by (`facts()`), and what is
# written when they differ. Named, so that no class's field order decides what is compared.
class SyncedWorker(NamedTuple):
    pod_uid: str
    node_name: str
    ip: str
    phase: str
    ready: bool
    reason: str
    message: str
    restart_count: int


class SyncedInstance(NamedTuple):
    task_id: int
    pod_name: str
    node_name: str
    ip: str
    phase: str
    restart_count: int
    last_exit_code: int | None
    termination_reason: str


class SyncedNode(NamedTuple):
    phase: str
    unschedulable: bool
    message: str
    cpu_capacity: str
    memory_capacity: str
    gpu_capacity: int
    gpu_allocated: int
    last_heartbeat_at: datetime | None


class SyncedAddon(NamedTuple):
    namespace: str
    workload_kind: str
    current_version: str
    phase: str
    message: str


class WorkerRow(NamedTuple):
    pk: int
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
    present: bool  # in the last sync that wrote its Task (jobs.status.freshness.worker_missing)

    def facts(self) -> SyncedWorker:
        return SyncedWorker._make(WORKER_FACTS_OF(self))


class InstanceRow(NamedTuple):
    pk: int
    uid: str
    task_id: int
    pod_name: str
    node_name: str
    ip: str
    phase: str
    restart_count: int
    last_exit_code: int | None
    termination_reason: str

    def facts(self) -> SyncedInstance:
        return SyncedInstance._make(INSTANCE_FACTS_OF(self))


class NodeRow(NamedTuple):
    pk: int
    name: str
    phase: str
    unschedulable: bool
    message: str
    cpu_capacity: str
    memory_capacity: str
    gpu_capacity: int
    gpu_allocated: int
    last_heartbeat_at: datetime | None

    def facts(self) -> SyncedNode:
        return SyncedNode._make(NODE_FACTS_OF(self))


class AddonRow(NamedTuple):
    pk: int
    name: str
    desired_version: str
    namespace: str
    workload_kind: str
    current_version: str
    phase: str
    message: str

    def facts(self) -> SyncedAddon:
        return SyncedAddon._make(ADDON_FACTS_OF(self))


@dataclass(frozen=True)
class PendingOperation:
    pk: int
    job_id: int
    message: str


# The columns of a JobRow, in its order; the heartbeat is read out of the stored spec.
JOB_FIELDS = tuple(
    {"heartbeat_seconds": "spec__policies__heartbeat_seconds"}.get(name, name)
    for name in JobRow.__dataclass_fields__
    if name != "tasks"
)
TASK_FIELDS = tuple(TaskRow.__dataclass_fields__)
WORKER_FACTS = list(SyncedWorker._fields)
INSTANCE_FACTS = list(SyncedInstance._fields)
NODE_FACTS = list(SyncedNode._fields)
ADDON_FACTS = list(SyncedAddon._fields)
# Each fact read by its name from a row (stored or derived): fast, and blind to field order.
WORKER_FACTS_OF = attrgetter(*WORKER_FACTS)
INSTANCE_FACTS_OF = attrgetter(*INSTANCE_FACTS)
NODE_FACTS_OF = attrgetter(*NODE_FACTS)
ADDON_FACTS_OF = attrgetter(*ADDON_FACTS)
# A Worker was in the last sync that wrote its Task (jobs.status.freshness.worker_missing),
# computed by the database: comparing 10,000 datetimes in Python costs more than the whole
# comparison.
IS_PRESENT = Q(task__observed_at__isnull=True) | Q(last_reported_at__gte=F("task__observed_at"))
PRESENT = Case(
    When(IS_PRESENT, then=Value(True)), default=Value(False), output_field=BooleanField()
)


@dataclass
class State:
    """What the database holds of the touched part of a cluster."""

    cluster: Cluster
    jobs: list[JobRow]
    workers: dict[int, dict[str, WorkerRow]]
    instances: dict[str, InstanceRow]
    nodes: dict[str, NodeRow]
    addons: dict[str, AddonRow]
    operations: dict[int, list[PendingOperation]]
    blocked: dict[int, list[str]] = field(default_factory=dict)
    # The pods whose Workers and instances were loaded: the others are not compared.
    scope: Touched = field(default_factory=lambda: Touched(everything=True))
    # The Workflows marked for a recount (workflows_to_recount), with their marks.
    recount: dict[int, datetime] = field(default_factory=dict)


def raw_rows(queryset: QuerySet[Any, Any]) -> list[tuple[Any, ...]]:
    """The rows of a values_list() of plain columns, straight from the cursor.

    Django's per-row conversion is most of the cost of loading 10,000 rows; these columns need
    none (strings, integers; booleans come back as 0/1 from SQLite, equal to False/True). The
    column order is the values_list order, annotations last."""
    compiler = queryset.query.get_compiler(using=queryset.db)
    try:
        sql, params = compiler.as_sql()
    except EmptyResultSet:  # an empty `pk__in`: no query at all
        return []
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()  # type: ignore[no-any-return]


def load_jobs(jobs: Iterable[Any], tasks: Iterable[Any]) -> list[JobRow]:
    """JobRows from two value-lists (one query each, whatever the number of Jobs)."""
    rows = {values[0]: JobRow(*values) for values in jobs}
    for values in tasks:
        task = TaskRow(*values)
        if task.job_id in rows:
            rows[task.job_id].tasks.append(task)
    return list(rows.values())


def job_rows(jobs: Q) -> list[JobRow]:
    """The Jobs matching `jobs` (a Q on Job) with their Tasks: two queries."""
    job_values = Job.objects.filter(jobs).order_by("pk").values_list(*JOB_FIELDS)
    task_values = Task.objects.filter(job__in=Job.objects.filter(jobs)).order_by("pk")
    return load_jobs(job_values, task_values.values_list(*TASK_FIELDS))


def of_jobs(cluster_id: int, touched: Touched) -> Q:
    everything = Q(cluster_id=cluster_id)
    return everything if touched.everything else everything & Q(pk__any_of=touched.jobs)


# A watch cycle asks the same questions with other ids every time: compiled once per process
# (console.statements), each of these costs its round trip and its rows, not the ORM's building
# and compiling of the query again (docs/decisions.md). The ORM's own queries remain for the
# first cycle and for sets of ids beyond BATCH.
_JOBS = Statement(
    lambda cluster_id, pks: (
        Job.objects.filter(cluster_id=cluster_id, pk__any_of=pks)
        .order_by("pk")
        .values_list(*JOB_FIELDS)
    ),
    int,
    list[int],
)
_TASKS = Statement(
    lambda cluster_id, pks: (
        Task.objects.filter(job__cluster_id=cluster_id, job_id__any_of=pks)
        .order_by("pk")
        .values_list(*TASK_FIELDS)
    ),
    int,
    list[int],
)
_OPEN_INSTANCES = Statement(
    lambda tasks, uids: PodInstance.objects.filter(
        task_id__any_of=tasks, uid__any_of=uids, gone_at__isnull=True
    ).values_list(*InstanceRow._fields),
    list[int],
    list[str],
)
_WORKERS = Statement(
    lambda tasks, names: (
        Worker.objects.filter(task_id__any_of=tasks, pod_name__any_of=names)
        .annotate(present=PRESENT)
        .values_list(*WorkerRow._fields)
    ),
    list[int],
    list[str],
)
_NODES = Statement(
    lambda cluster_id, names: Node.objects.filter(
        cluster_id=cluster_id, name__any_of=names
    ).values_list(*NodeRow._fields),
    int,
    list[str],
)
_OPERATIONS = Statement(
    lambda pks: Operation.objects.filter(
        result=Operation.Result.ACCEPTED, job_id__any_of=pks
    ).values_list("pk", "job_id", "message"),
    list[int],
)


def load_state(cluster: Cluster, touched: Touched, pods: Sequence[PodObs] = ()) -> State:
    """The touched rows of the cluster in a fixed number of queries, typed: the touched Jobs
    with their Tasks, and the Workers and open instances of the touched pods only (`pods`: the
    snapshot's, to name them; the instances name the Workers of deleted pods). The marked
    Workflows are read first: what marked them was committed before the Jobs are read."""
    recount = workflows_to_recount()
    jobs = of_jobs(cluster.pk, touched)
    if touched.everything:
        loaded = job_rows(jobs)
    else:
        pks = list(touched.jobs)
        loaded = load_jobs(_JOBS.rows(cluster.pk, pks), _TASKS.rows(cluster.pk, pks))
    tasks = {task.pk for job in loaded for task in job.tasks}
    instances = _open_instances(jobs, tasks, touched)
    names = {pod.name for pod in pods if pod.uid in touched.pods}
    names |= {row.pod_name for row in instances}
    return State(
        cluster=cluster,
        jobs=loaded,
        workers=_workers(jobs, tasks, touched, names),
        instances={row.uid: row for row in instances},
        nodes=_nodes(cluster.pk, touched),
        addons=_addons(cluster.pk, touched),
        operations=_operations(jobs, loaded),
        scope=touched,
        recount=recount,
    )


def _fits(*values: set[Any]) -> bool:
    return all(len(some) <= BATCH for some in values)


def _of_tasks(jobs: Q, tasks: set[int]) -> Q:
    """The rows of the loaded Jobs' Tasks (a Q on a row with a `task`): by Task id, and by the
    Jobs' filter when the ids do not fit one statement."""
    return _among("task_id", tasks, Q(task__job__in=Job.objects.filter(jobs)))


def _open_instances(jobs: Q, tasks: set[int], touched: Touched) -> list[InstanceRow]:
    if not touched.everything and _fits(tasks, touched.pods):
        found = _OPEN_INSTANCES.rows(list(tasks), list(touched.pods))
    else:
        rows = PodInstance.objects.filter(_of_tasks(jobs, tasks), gone_at__isnull=True)
        if not touched.everything:
            rows = rows.filter(_among("uid", touched.pods))
        found = raw_rows(rows.values_list(*InstanceRow._fields))
    return [row for row in map(InstanceRow._make, found) if touched.holds_pod(row.uid)]


def _operations(jobs: Q, loaded: Sequence[JobRow]) -> dict[int, list[PendingOperation]]:
    """The pending Operations of the loaded Jobs: by the Jobs' ids, by their filter when the
    ids do not fit one statement."""
    pks = {job.pk for job in loaded}
    if not _fits(pks):
        return pending_operations(Q(job__in=Job.objects.filter(jobs)))
    return _by_job(_OPERATIONS.rows(list(pks)))


def _workers(
    jobs: Q, tasks: set[int], touched: Touched, names: set[str]
) -> dict[int, dict[str, WorkerRow]]:
    """Task pk -> pod name -> Worker, of the pods named (all of them for `everything`)."""
    if not touched.everything and _fits(tasks, names):
        found = _WORKERS.rows(list(tasks), list(names))
    else:
        rows = Worker.objects.filter(_of_tasks(jobs, tasks))
        if not touched.everything:
            rows = rows.filter(_among("pod_name", names))
        found = raw_rows(rows.annotate(present=PRESENT).values_list(*WorkerRow._fields))
    workers: dict[int, dict[str, WorkerRow]] = defaultdict(dict)
    for row in found:
        worker = WorkerRow._make(row)
        if touched.everything or worker.pod_name in names:
            workers[worker.task_id][worker.pod_name] = worker
    return workers


def pods_of_note(touched: Touched) -> Q:
    """The stored pods of the touched Jobs a Task's view needs besides the touched ones (a
    filter on ObservedObject): those whose Worker may have a problem the Task's message names
    (jobs.status.problems.pod_problem, `classify`'s answer): a reason, phase Failed, a
    restart — and every pod of a Task scaled to zero (its message counts them). The other pods
    neither changed nor say anything in their Task's view; tests/jobs/test_pod_problems.py
    proves it admits every pod the classifier flags for a Task's message."""
    noted = Q(reason__gt="") | Q(phase=PodPhase.FAILED) | Q(restart_count__gt=0)
    noted |= Q(task__desired_replicas=0) | Q(task__workload_replicas=0)
    workers = Worker.objects.filter(noted, task__job_id__any_of=touched.jobs)
    return Q(uid__in=workers.values("pod_uid"))


def _among[V: (str, int)](name: str, values: set[V], beyond: Q | None = None) -> Q:
    """`name` among `values` (one `any_of` parameter) up to BATCH values; beyond, `beyond` or
    else every row of the touched Jobs is read (a relist after a long outage) and the caller
    keeps those it needs."""
    if len(values) <= BATCH:
        return Q(**{f"{name}__any_of": values})
    return beyond if beyond is not None else Q()


def _nodes(cluster_id: int, touched: Touched) -> dict[str, NodeRow]:
    if touched.everything:
        rows = Node.objects.filter(cluster_id=cluster_id).values_list(*NodeRow._fields)
        return {node.name: node for node in map(NodeRow._make, rows)}
    found = _NODES.rows(cluster_id, list(touched.nodes))
    return {node.name: node for node in map(NodeRow._make, found)}


def _addons(cluster_id: int, touched: Touched) -> dict[str, AddonRow]:
    if not (touched.addons or touched.everything):
        return {}
    # Registry add-ons are the console's own (console.engine.addons), not the sync's to derive.
    unmanaged = Addon.objects.filter(cluster_id=cluster_id, managed=False)
    rows = unmanaged.values_list(*AddonRow._fields)
    return {addon.name: addon for addon in map(AddonRow._make, rows)}


def pending_operations(jobs: Q) -> dict[int, list[PendingOperation]]:
    """The accepted Operations of the Jobs matching `jobs` (a Q on the Operation), by Job."""
    rows = Operation.objects.filter(result=Operation.Result.ACCEPTED, job__isnull=False).filter(
        jobs
    )
    return _by_job(rows.values_list("pk", "job_id", "message"))


def _by_job(rows: Iterable[tuple[int, int, str]]) -> dict[int, list[PendingOperation]]:
    by_job: dict[int, list[PendingOperation]] = defaultdict(list)
    for pk, job_id, message in rows:
        by_job[job_id].append(PendingOperation(pk, job_id, message))
    return by_job


# The Jobs a cycle plans whatever changed, and the add-ons it derives again whatever changed.
_NOT_STOPPED_YET = [TaskPhase.PENDING, TaskPhase.RUNNING]
_ATTENTION = Statement(
    lambda cluster_id: (
        Job.objects.filter(
            Q(operations__result=Operation.Result.ACCEPTED)
            | Q(delete_requested_at__isnull=False)
            | Q(tasks__apply_error__gt="")
            | Q(workflow__isnull=False, phase=JobPhase.PENDING)
            | Q(stopped=True, tasks__phase__in=_NOT_STOPPED_YET),
            cluster_id=cluster_id,
        )
        .order_by()
        .values_list("pk")
        .distinct()
    ),
    int,
)
_VERSION_CHANGED = (
    Q(phase=Addon.Phase.READY) & ~Q(desired_version="") & ~Q(desired_version=F("current_version"))
)
_ADDON_ATTENTION = Statement(
    lambda cluster_id: (
        Addon.objects.filter(
            ~Q(phase=Addon.Phase.READY) | _VERSION_CHANGED, cluster_id=cluster_id, managed=False
        )
        .order_by()
        .values_list("pk")[:1]
    ),
    int,
)


def needing_attention(cluster_id: int) -> set[int]:
    """The Jobs a cycle plans whatever changed: an accepted Operation, a deletion under way, an
    apply error to retry, a Pending Workflow child (its upstreams may have Succeeded), a
    stopped Job whose Tasks do not read Stopped yet (a stop applied by the operation's own
    reconcile before any object was made changes nothing a watch sees; spec §Task status:
    desired replicas 0 is Stopped). Each leaves the set once derived; docs/decisions.md, "What
    a cycle derives only for the Jobs it touches"."""
    return {pk for (pk,) in _ATTENTION.rows(cluster_id)}


_RECOUNT = Statement(
    lambda: (
        Workflow.objects.filter(recount_requested_at__isnull=False)
        .order_by()
        .values_list("pk", "recount_requested_at")
    ),
)


def workflows_to_recount() -> dict[int, datetime]:
    """The Workflows whose counts changed where no watch sees it
    (jobs.records.recount_workflow), with their marks: every cycle derives them, whatever
    it touched (their children may be on any cluster, or gone), and clears each mark that no
    later change renewed (write.Changes.recounted)."""
    return dict(_RECOUNT.rows())


def addons_need_attention(cluster_id: int) -> bool:
    """An add-on whose desired version an operator changed, or not Ready yet, is derived again
    whatever changed: its desired version is the console's, not the cluster's."""
    return bool(_ADDON_ATTENTION.rows(cluster_id))


def target_of(job: JobRow, task: TaskRow) -> Target:
    return Target(
        job_id=job.pk,
        job_name=job.name,
        namespace=job.namespace,
        run=job.run,
        task_id=task.pk,
        role=task.role,
        kind=TaskKind(task.kind),
        replicas=task.desired_replicas,
        template=task.template,
        signal_url=signal_url(job.pk),
        signal_token=signal_token(job.pk, job.run),
        pod_user=settings.TRAINYARD_POD_USER,
        shm_size=shm_size_of(task.template),
        heartbeat_seconds=job.heartbeat_seconds,
    )


# --- blocked Workflow children ---------------------------------------------------------------


def blocked_upstreams(
    jobs: Sequence[JobRow], edges: Iterable[tuple[int, int]], names: Mapping[int, str],
    phases: Mapping[int, JobPhase],
) -> dict[int, list[str]]:  # fmt: skip
    """Job pk -> names of its upstream Jobs that have not Succeeded (lifecycle.blocked_by)."""
    pairs = [(str(up), str(down)) for up, down in edges]
    by_key = {str(pk): phase for pk, phase in phases.items()}
    blocked: dict[int, list[str]] = {}
    for job in jobs:
        if job.workflow_id is not None:
            waiting = blocked_by(str(job.pk), by_key, pairs)
            if waiting:
                blocked[job.pk] = [names.get(int(pk), pk) for pk in waiting]
    return blocked


def load_blocked(jobs: Sequence[JobRow]) -> dict[int, list[str]]:
    """Two queries: the edges of the Workflows involved and the phases of all their children
    (children may live on other clusters)."""
    workflows = {job.workflow_id for job in jobs if job.workflow_id is not None}
    if not workflows:
        return {}
    edges = WorkflowEdge.objects.filter(workflow_id__in=workflows).values_list(
        "upstream_id", "downstream_id"
    )
    children = Job.objects.filter(workflow_id__in=workflows).counted_children()
    names = {child.pk: child.name for child in children}
    phases = {child.pk: child.phase for child in children}
    return blocked_upstreams(jobs, list(edges), names, phases)
