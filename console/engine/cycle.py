"""One sync cycle of one cluster: read what changed, apply it, reconcile, write what changed.

    lease -> read (watch from the cursors, or relist) -> touched Jobs/Nodes/add-ons -> load their
    stored objects and rows -> reconcile them -> derive -> one transaction (objects + rows) ->
    release the lease with the new cursors

- A per-cluster lease (`Cluster.sync_lease_until`, taken by a conditional UPDATE) makes
  overlapping beats skip rather than sync a cluster twice at once. Its value is the holder's
  token: renewal and release are conditional on it, so a cycle that outlived its lease writes
  nothing, and its cursors do not advance.
- Every stream must be read (console.engine.observe): a cluster that cannot be read, answers
  errors or garbage, is marked unreachable with the error, its cursors are dropped (the next
  cycle relists), and nothing else changes — never a transition invented from missing data
  (ARCHITECTURE §Principles).
- The work follows the changes: only the Jobs whose objects changed, that need attention
  (rows.needing_attention) or, on a relist, whose objects drifted from their plan, are loaded,
  reconciled and derived; a quiet cycle reads no Job at all.
- A Workflow is derived with its touched children, and also when a change no watch sees marked
  it (a child's workload outcome, a stop, a resume, a delete:
  jobs.records.recount_workflow): every cycle derives the marked Workflows and clears the
  marks it read (rows.workflows_to_recount), so a Workflow is up to date one cycle after anything
  it counts changed.
- Observation times are written with the change they describe: an unchanged row was confirmed by
  every later sync, which `jobs.status.freshness` derives from `Cluster.last_synced_at`.
- Reconcile runs before the derivation, and the objects the API server answered to its creates
  and scales replace what was stored of them: the cycle that applies a stop already shows the
  Tasks Stopped (spec §Task status: desired replicas 0), not one cycle later.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from console import kubeconfig
from console.engine import memory
from console.engine.apply import apply_job, record, unreachable_reason
from console.engine.completions import record_completions
from console.engine.derive import (
    Index,
    derive_addons,
    derive_blocked,
    derive_instances,
    derive_jobs,
    derive_nodes,
    derive_workflows,
    gpu_pods,
)
from console.engine.gateways import gateway_for
from console.engine.keep_logs import WHY, Due, before_removal, due_after
from console.engine.memory import Snapshot, Touched
from console.engine.observe import Change, Reading, relist_all, watch_all
from console.engine.plan import JobObjects, group_by_job, plan
from console.engine.rows import (
    State,
    addons_need_attention,
    job_rows,
    load_state,
    needing_attention,
    pods_of_note,
)
from console.engine.stored import SCHEMA
from console.engine.streams import STREAMS
from console.engine.write import Changes, write
from console.kube import client
from console.kube.gateway import ClusterUnreachable, Gateway, WatchExpired
from console.kube.observations import BatchJobObs, StatefulSetObs, WorkloadObs
from console.models import Cluster, ObservedObject
from failures.judge import REASONS as POD_REASONS
from jobs.messages import encode
from notify import record as notify_record
from notify.record import hold_for_judgement
from notify.watch import after_cycle as notify_after_cycle
from usage import ledger, utilisation

logger = logging.getLogger(__name__)
Started = tuple[float, float]  # (time.monotonic(), time.process_time()) at the cycle's start


@dataclass(frozen=True)
class SyncResult:
    cluster_id: int
    name: str = ""
    skipped: bool = False
    reachable: bool = False
    relisted: bool = False
    message: str = ""
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    changes: int = 0
    jobs: int = 0
    api_requests: int = 0
    api_writes: int = 0
    bytes_received: int = 0
    rows_written: int = 0
    # Logs to keep now that the cycle committed (console.engine.keep_logs): the task queues them.
    logs_due: tuple[Due, ...] = ()
    # Jobs a pod of which now shows a reason Kubernetes names a failure by (failing_pods).
    judge_due: tuple[int, ...] = ()

    def summary(self) -> str:
        """One line for `manage.py sync_clusters` (prefixed there by the cluster's name) and the
        log of every beat-driven cycle: what the cycle cost here and on the API server."""
        if self.skipped:
            return "skipped: another sync of this cluster is running"
        if not self.reachable:
            return f"UNREACHABLE after {self.seconds:.2f}s: {self.message}"
        read = "relist" if self.relisted else "watch"
        return (
            f"{read}: {self.changes} changes applied, {self.jobs} jobs touched; "
            f"{self.api_requests} API requests ({self.api_writes} writes), "
            f"{self.bytes_received / 1e6:.3f} MB received, {self.rows_written} rows written; "
            f"{self.seconds:.2f}s wall, {self.cpu_seconds:.3f}s CPU"
        )


def failing_pods(changes: Changes, state: State) -> tuple[int, ...]:
    """The Jobs a Worker of which took, or left, a reason Kubernetes names a failure by
    (Evicted, DeadlineExceeded, an image that cannot be pulled): judged then (failures.judge),
    since a Job stuck on an image never turns Failed, a StatefulSet re-creates an evicted pod at
    once, and an image pulled at last withdraws what was said of it."""
    job_of = {task.pk: job.pk for job in state.jobs for task in job.tasks}
    due = set()
    for worker in [*changes.new_workers, *changes.workers]:
        before = state.workers.get(worker.task_id, {}).get(worker.pod_name)
        reasons = {worker.reason, before.reason if before else ""}
        if reasons & set(POD_REASONS) and worker.task_id in job_of:
            due.add(job_of[worker.task_id])
    return tuple(sorted(due))


# --- the lease -------------------------------------------------------------------------------


def lease_seconds() -> int:
    """A few intervals, and always more than one slow request can take."""
    connect, read = client.timeouts()
    watching = settings.TRAINYARD_WATCH_SECONDS
    return 3 * settings.TRAINYARD_SYNC_INTERVAL + 2 * (connect + read + watching)


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


# --- reconcile inside the cycle --------------------------------------------------------------


@dataclass
class Reconciled:
    rows_written: int = 0
    answered: list[WorkloadObs] = field(default_factory=list)


def reconcile_cluster(gateway: Any, state: State, snapshot: Snapshot, now: datetime) -> Reconciled:
    """Plans the touched Jobs against what the cluster holds, applies, records; returns the rows
    written and the workloads as the API server answered the writes."""
    items: list[WorkloadObs] = [*snapshot.statefulsets, *snapshot.batch_jobs]
    objects = group_by_job(items, snapshot.services)
    result = Reconciled()
    for job in state.jobs:
        blocked = state.blocked.get(job.pk, []) if job.delete_requested_at is None else []
        writes = plan(job, objects.get(job.pk, JobObjects()), blocked)
        operations = state.operations.get(job.pk, [])
        needs_record = writes or operations or job.delete_requested_at is not None
        if not needs_record and not any(task.apply_error for task in job.tasks):
            continue
        before_removal(job, writes)
        outcome = apply_job(gateway, writes)
        result.rows_written += record(job, outcome, operations, blocked, now, state.cluster.name)
        result.answered += outcome.answered
        if outcome.unreachable:
            break
    return result


def with_answers(snapshot: Snapshot, answered: Sequence[WorkloadObs]) -> Snapshot:
    """The snapshot with each written workload as the API server answered the write."""
    if not answered:
        return snapshot
    keys = {(type(item), item.namespace, item.name) for item in answered}
    statefulsets = [
        *(s for s in snapshot.statefulsets if (StatefulSetObs, s.namespace, s.name) not in keys),
        *(item for item in answered if isinstance(item, StatefulSetObs)),
    ]
    batch_jobs = [
        *(j for j in snapshot.batch_jobs if (BatchJobObs, j.namespace, j.name) not in keys),
        *(item for item in answered if isinstance(item, BatchJobObs)),
    ]
    return replace(snapshot, statefulsets=statefulsets, batch_jobs=batch_jobs)


# --- the cycle -------------------------------------------------------------------------------


def sync_cluster(cluster_id: int) -> SyncResult:
    """One cycle (what the beat and `manage.py sync_clusters` run)."""
    started, now = (time.monotonic(), time.process_time()), timezone.now()
    lease = take_lease(cluster_id, now)
    if lease is None:
        return SyncResult(cluster_id, skipped=True)
    finished = False
    collecting = gc.isenabled()
    gc.disable()  # a relist allocates ~10^6 acyclic objects: no cycle-collector passes over them
    try:
        result = _cycle(cluster_id, lease, now, started)
        finished = True
        return result
    finally:
        if collecting:
            gc.enable()
        if not finished:
            release(cluster_id, lease)


def release(cluster_id: int, lease: datetime) -> None:
    """Gives back the lease of a cycle that failed. When the database failed (a restart, a
    fail-over), the connection is replaced and the release tried every second until the lease
    would have run out anyway: the first tick after the database returns syncs the cluster,
    instead of waiting out the lease (lease_seconds(): 102 s with the defaults)."""
    while True:
        try:
            finish(cluster_id, lease)
            return
        except DatabaseError:
            connection.close()
            if timezone.now() >= lease:
                return
            time.sleep(1)


def _unreachable(
    cluster: Cluster, lease: datetime, now: datetime,
    error: ClusterUnreachable | kubeconfig.KubeconfigRejected, started: Started,
) -> SyncResult:  # fmt: skip
    message = str(error)
    stored = encode(unreachable_reason(error))
    dropped = {"observations": SCHEMA}  # no stream cursor: the next cycle relists
    ledger.unreachable(cluster.pk, cluster.last_synced_at, now)  # its GPUs' time is unknown
    with transaction.atomic():  # the occurrence of cluster.unreachable with the row saying so
        finish(
            cluster.pk, lease, reachable=False, message=stored, last_attempt_at=now,
            watch_cursors=dropped,
        )  # fmt: skip
        notify_record.cluster_reachability(cluster, False, message, now)
    return _costs(SyncResult(cluster.pk, cluster.name, message=message), started)


def _costs(result: SyncResult, started: Started) -> SyncResult:
    wall, cpu = started
    seconds, cpu_seconds = time.monotonic() - wall, time.process_time() - cpu
    return dataclasses.replace(result, seconds=seconds, cpu_seconds=cpu_seconds)


def _relist_due(cluster: Cluster, now: datetime) -> bool:
    cursors = cluster.watch_cursors or {}
    if cluster.relisted_at is None or any(stream.name not in cursors for stream in STREAMS):
        return True
    return (now - cluster.relisted_at).total_seconds() >= settings.TRAINYARD_RELIST_SECONDS


def forget_if_stale(cluster: Cluster) -> None:
    """Observations stored under other fields (an older release) are forgotten: this cycle
    relists and derives everything, as a cluster's first one."""
    if (cluster.watch_cursors or {}).get("observations") != SCHEMA:
        ObservedObject.objects.filter(cluster_id=cluster.pk).delete()
        cluster.watch_cursors, cluster.relisted_at = {}, None


def read(gateway: Gateway, cluster: Cluster, now: datetime) -> Reading:
    """The changes since the cursors, by watch; by relist when none, when due, or on 410."""
    if not _relist_due(cluster, now):
        try:
            return watch_all(gateway, cluster.watch_cursors, settings.TRAINYARD_WATCH_SECONDS)
        except WatchExpired as expired:
            logger.info("cluster %s: %s; relisting", cluster.name, expired)
    return relist_all(gateway, memory.stored(cluster.pk))


def drifted(cluster_id: int, changes: Sequence[Change]) -> set[int]:
    """On a relist, the Jobs whose workloads or services differ from their plan (deleted or
    rescaled behind the console's back while nothing said so): the periodic drift check."""
    jobs = job_rows(Q(cluster_id=cluster_id))
    workloads = ("statefulsets", "jobs", "services")
    snapshot = memory.load(cluster_id, Touched(everything=True), changes, only=workloads)
    items: list[WorkloadObs] = [*snapshot.statefulsets, *snapshot.batch_jobs]
    objects = group_by_job(items, snapshot.services)
    return {job.pk for job in jobs if plan(job, objects.get(job.pk, JobObjects()))}


def touched(cluster: Cluster, reading: Reading) -> Touched:
    attention = needing_attention(cluster.pk)
    result = memory.touched(cluster.pk, reading.changes, attention)
    result.addons = result.addons or addons_need_attention(cluster.pk)
    result.everything = cluster.relisted_at is None  # the first cycle: every row is compared
    if reading.relisted and not result.everything:
        result.jobs |= drifted(cluster.pk, reading.changes)
    return result


def _derive(state: State, snapshot: Snapshot, gpus: Mapping[str, int], now: datetime) -> Changes:
    """Everything the snapshot changes in the loaded rows (nothing written yet)."""
    changes = Changes()
    derive_jobs(state, Index.of(snapshot), changes, now)
    derive_instances(state, snapshot.pods, changes, now)
    derive_nodes(state, snapshot, gpus, changes, now)
    derive_addons(state, snapshot, changes, now)
    derive_workflows(state, changes, now)
    return changes


def _phased(changes: Changes) -> set[int]:
    """The Jobs whose phase the cycle writes: their events and their pods' GPU-hours classes
    may have turned (notify.watch, usage.ledger)."""
    return {change.pk for change in changes.jobs if "phase" in change.fields}


def _addon_phases(changes: Changes) -> dict[str, str]:
    return {addon.name: addon.phase for addon in [*changes.new_addons, *changes.addons]}


def keep_ledger(
    cluster_id: int, pods: Sequence[ledger.Pod], judged_jobs: set[int], now: datetime
) -> int:
    """The GPU-hours ledger's part of the cycle (usage.ledger.after_sync), in a savepoint: a
    failure there is logged and its rows rolled back, never the cycle's (the Jobs' phases matter
    more than their figures). Due runs are judged again by the next cycle; a pod change it
    missed is counted from that pod's next change."""
    try:
        with transaction.atomic():
            return ledger.after_sync(cluster_id, pods, judged_jobs, now)
    except Exception:
        logger.exception("cluster %s: the GPU-hours ledger was not kept this cycle", cluster_id)
        return 0


def measure_utilisation(cluster: Cluster, now: datetime) -> int:
    """GPU utilisation from the cluster's Prometheus, when it has one (usage.utilisation): after
    the cycle's transaction, since a request leaves the console. A failure is logged, never the
    cycle's: the figures inform, the Jobs' phases matter more."""
    try:
        return utilisation.measure(cluster, now)
    except Exception:
        logger.exception("cluster %s: GPU utilisation was not measured this cycle", cluster.pk)
        return 0


def _cycle(cluster_id: int, lease: datetime, now: datetime, started: Started) -> SyncResult:
    cluster = Cluster.objects.get(pk=cluster_id)
    forget_if_stale(cluster)
    try:
        gateway = gateway_for(cluster)
        reading = read(gateway, cluster, now)
        scope = touched(cluster, reading)
        snapshot = memory.load(cluster.pk, scope, reading.changes, noted=pods_of_note(scope))
    except (ClusterUnreachable, kubeconfig.KubeconfigRejected) as error:
        return _unreachable(cluster, lease, now, error, started)
    state = load_state(cluster, scope, snapshot.pods)
    held = renew_lease(cluster_id, lease) if _renewal_due(lease) else lease
    if held is None:
        return SyncResult(cluster_id, cluster.name, skipped=True)
    derive_blocked(state)
    reconciled = reconcile_cluster(gateway, state, snapshot, now)
    allocated = {name: row.gpu_allocated for name, row in state.nodes.items()}
    gpus = memory.gpus_by_node(
        cluster.pk, scope, reading.changes, allocated, incremental=not reading.relisted
    )
    changes = _derive(state, with_answers(snapshot, reconciled.answered), gpus, now)
    held = renew_lease(cluster_id, held) if _renewal_due(held) else held
    if held is None:  # the derivation outlived the lease: another cycle owns the rows now
        return SyncResult(cluster_id, cluster.name, skipped=True)
    with transaction.atomic():
        rows = memory.save(cluster.pk, reading.changes)
        rows += reconciled.rows_written + (write(changes, state) if not changes.empty() else 0)
        rows += notify_after_cycle(
            cluster, _phased(changes), _addon_phases(changes), now, changes.touched_jobs
        )
        due = due_after(changes, state)
        rows += hold_for_judgement([d.job_id for d in due if d.why == WHY.FAILED], now)
        pods = gpu_pods(state, snapshot.pods, reading.changes, now)
        rows += keep_ledger(cluster.pk, pods, _phased(changes) | set(state.operations), now)
    ended = record_completions(cluster_id, reading.changes)
    rows += measure_utilisation(cluster, now)
    logs_due = (*due, *ended)
    judge_due = failing_pods(changes, state)
    relisted_at = now if reading.relisted else cluster.relisted_at
    finish(
        cluster_id, held, reachable=True, message="", last_synced_at=now, last_attempt_at=now,
        watch_cursors={**reading.cursors, "observations": SCHEMA}, relisted_at=relisted_at,
    )  # fmt: skip
    result = SyncResult(
        cluster_id,
        cluster.name,
        reachable=True,
        relisted=reading.relisted,
        changes=len(reading.changes),
        jobs=len(state.jobs),
        api_requests=gateway.requests,
        api_writes=gateway.writes,
        bytes_received=gateway.bytes_received,
        rows_written=rows,
        logs_due=logs_due,
        judge_due=judge_due,
    )
    return _costs(result, started)
