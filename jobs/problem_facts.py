"""The known problems of many Jobs at once, for the dashboard: the troubleshooting panel's own rule
(`jobs.status.troubleshoot.diagnose`) over the same facts, gathered in a fixed number of queries.

Two halves. `may_have_a_problem` is the database's coarse filter: every Job in which `diagnose`
can find a problem matches it (a few that match turn out fine once diagnosed). `known_problems`
then gathers the Tasks, suspect Workers and Nodes of the Jobs shown, in one query each, and lets
`diagnose` decide and word each problem exactly as the job page's panel does.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Exists, F, OuterRef, Q, Window
from django.db.models.functions import RowNumber

from console.models import Node
from jobs.choices import JobPhase, PodPhase, TaskPhase
from jobs.diagnostics import Diagnostics, worker_reason
from jobs.messages import render_text
from jobs.models import Job, Task
from jobs.status.attention import Reason, problem_reasons
from jobs.status.problems import STARTING, TERMINATING
from jobs.status.troubleshoot import (
    ClusterFacts,
    NodeFacts,
    PodFacts,
    TaskFacts,
    diagnose,
)
from workers.models import PodInstance, Worker

# The job page's panel looks at this many suspect pods of a Job; so does the dashboard.
SUSPECT_LIMIT = 200
# Reasons the console writes that are no problem by themselves (jobs.status.problems.pod_reason).
HARMLESS_REASONS = STARTING | {TERMINATING}


def patience(now: datetime) -> datetime:
    """Spec §Troubleshooting: wait for one normal reconciliation before calling a Task that is
    merely slow to start wrong (the panel's `patience`, TRAINYARD_STALE_AFTER)."""
    return now - timedelta(seconds=settings.TRAINYARD_STALE_AFTER)


def _settled(now: datetime, task: str = "") -> Q:
    """The Task was applied (or, never applied, its Job created) longer than `patience` ago."""
    cutoff = patience(now)
    return Q(**{f"{task}applied_at__lt": cutoff}) | Q(
        **{f"{task}applied_at__isnull": True, f"{task}job__created_at__lt": cutoff}
    )


def suspect_workers(now: datetime, diagnostics: Diagnostics) -> Q:
    """Worker rows in which `diagnose` can find a problem (jobs.status.problems.classify, and a
    pod missing from the last report or on an Offline node): a reason other than a healthy
    start, a Failed pod, a Running pod not ready once its Task has settled, and, where the
    reader sees restart counts, a restart. tests/jobs/test_pod_problems.py proves it admits
    every pod the classifier flags."""
    offline = Node.objects.filter(
        cluster_id=OuterRef("task__job__cluster_id"),
        name=OuterRef("node_name"),
        phase=Node.Phase.OFFLINE,
    )
    suspect = (
        (~Q(reason="") & ~Q(reason__in=HARMLESS_REASONS))
        | Q(phase=PodPhase.FAILED)
        | (Q(phase=PodPhase.RUNNING, ready=False) & _settled(now, "task__"))
        | Q(last_reported_at__lt=F("task__observed_at"))
        | Q(Exists(offline))
    )
    if not diagnostics.anywhere:
        return suspect
    return suspect | (Q(restart_count__gt=0) & diagnostics.rows("task__job__project"))


def _troubled_tasks(now: datetime) -> Q:
    """Task rows with a problem of their own: an apply error, a failure, or (once settled) no
    pod reported although replicas are wanted."""
    no_pods = (
        Q(observed_at__isnull=False, apply_error="", ready_replicas__lt=F("desired_replicas"))
        & ~Q(phase__in=(TaskPhase.SUCCEEDED, TaskPhase.FAILED))
        & ~Q(job__stopped=True)
        & ~Exists(Worker.objects.filter(task=OuterRef("pk")))
        & _settled(now)
    )
    return ~Q(apply_error="") | Q(phase=TaskPhase.FAILED) | no_pods


def may_have_a_problem(now: datetime, diagnostics: Diagnostics) -> Q:
    """The live Jobs `known_problems` may find something in (pods only while a Job is Pending or
    Running, as the panel judges a stopped Job by its apply and cluster layers only). A Failed
    Job is listed for its failure (console.views.dashboard), not here."""
    workers = Worker.objects.filter(suspect_workers(now, diagnostics)).values("task__job_id")
    tasks = Task.objects.filter(_troubled_tasks(now)).values("job_id")
    live = (JobPhase.PENDING, JobPhase.RUNNING)
    return Q(phase__in=live, pk__in=workers) | Q(phase__in=(*live, JobPhase.STOPPED), pk__in=tasks)


def known_problems(
    jobs: Sequence[Job], now: datetime, diagnostics: Diagnostics
) -> dict[int, tuple[Reason, ...]]:
    """What the troubleshooting panel would say about each Job to this user, worded alike, in
    three queries whatever the number of Jobs (four for a reader who sees exit details)."""
    ids = [job.pk for job in jobs]
    shown = {job.pk: diagnostics.shown(job.project_id) for job in jobs}
    tasks, pods = _tasks(ids), _pods(ids, now, diagnostics, shown)
    nodes = _nodes({job.cluster_id for job in jobs})
    found = {}
    for job in jobs:
        facts = [
            task_facts(job, task, pods.get(task.pk, ()), task.pods, now, shown[job.pk])
            for task in tasks.get(job.pk, [])
        ]
        found[job.pk] = _problems(job, nodes.get(job.cluster_id, []), facts)
    return found


def _problems(
    job: Job, nodes: Sequence[NodeFacts], tasks: Sequence[TaskFacts]
) -> tuple[Reason, ...]:
    diagnosis = diagnose(
        stopped=job.stopped,
        cluster=ClusterFacts(job.cluster.name, job.cluster.reachable, stale=False),
        nodes=nodes,
        tasks=tasks,
        patience=settings.TRAINYARD_STALE_AFTER,
    )
    return problem_reasons(diagnosis)


TASK_FIELDS = (
    "pk", "job_id", "role", "phase", "desired_replicas", "ready_replicas", "observed_at",
    "message", "apply_error", "node_selector", "applied_at",
)  # fmt: skip
POD_FIELDS = (
    "task_id", "task__job_id", "pod_name", "pod_uid", "node_name", "phase", "ready", "reason",
    "message", "restart_count", "last_reported_at", "task__observed_at",
)  # fmt: skip


def _tasks(job_ids: list[int]) -> dict[int, list[Any]]:
    rows = (
        Task.objects.filter(job_id__in=job_ids)
        .annotate(pods=Count("workers"))
        .order_by("job_id", "pk")
        .values_list(*TASK_FIELDS, "pods", named=True)
    )
    found: dict[int, list[Any]] = {}
    for row in rows:
        found.setdefault(row.job_id, []).append(row)
    return found


def _pods(
    job_ids: list[int], now: datetime, diagnostics: Diagnostics, shown: dict[int, bool]
) -> dict[int, list[PodFacts]]:
    """The suspect Workers of each Job, at most SUSPECT_LIMIT a Job as on the panel, by Task;
    `shown` says, per Job, whether the reader sees its diagnostics."""
    nth = Window(
        RowNumber(), partition_by=F("task__job_id"), order_by=(F("task_id"), F("pod_name"))
    )
    rows = list(
        Worker.objects.filter(task__job_id__in=job_ids)
        .filter(suspect_workers(now, diagnostics))
        .annotate(nth=nth)
        .filter(nth__lte=SUSPECT_LIMIT)
        .order_by("task_id", "pod_name")
        .values_list(*POD_FIELDS, named=True)
    )
    exits = instance_details([row for row in rows if shown[row.task__job_id]])
    found: dict[int, list[PodFacts]] = {}
    for row in rows:
        facts = pod_facts(row, shown[row.task__job_id], exits)
        found.setdefault(row.task_id, []).append(facts)
    return found


def instance_details(rows: Sequence[Any]) -> dict[str, tuple[int | None, str]]:
    """For readers who see diagnostics: the last exit code and termination reason of each
    current pod instance (no query when there is none)."""
    uids = [row.pod_uid for row in rows if row.pod_uid]
    if not uids:
        return {}
    instances = PodInstance.objects.filter(uid__in=uids).order_by()
    return {
        uid: (code, reason)
        for uid, code, reason in instances.values_list(
            "uid", "last_exit_code", "termination_reason"
        )
    }


def _nodes(cluster_ids: set[int]) -> dict[int, list[NodeFacts]]:
    rows = Node.objects.filter(cluster_id__in=cluster_ids).order_by()
    found: dict[int, list[NodeFacts]] = {}
    for cluster_id, name, phase, cordoned in rows.values_list(
        "cluster_id", "name", "phase", "unschedulable"
    ):
        found.setdefault(cluster_id, []).append(
            NodeFacts(name, phase == Node.Phase.ONLINE, not cordoned)
        )
    return found


def pod_facts(row: Any, diagnostics: bool, exits: dict[str, tuple[int | None, str]]) -> PodFacts:
    """A Worker row (values with `task__observed_at`) as the panel judges it, for the job page
    and the dashboard alike: restart counts, exit details and termination reasons only for a
    reader who sees diagnostics (jobs.diagnostics; `exits` is empty for anyone else)."""
    exit_code, termination = exits.get(row.pod_uid, (None, ""))
    observed: datetime | None = row.task__observed_at
    return PodFacts(
        pod_name=row.pod_name,
        node_name=row.node_name,
        phase=row.phase,
        ready=row.ready,
        reason=worker_reason(row.reason, row.message, diagnostics),
        message=render_text(row.message, diagnostics),
        in_last_report=observed is None or row.last_reported_at >= observed,
        restart_count=row.restart_count if diagnostics else None,
        last_exit_code=exit_code,
        termination_reason=termination,
    )


def task_facts(
    job: Job,
    task: Any,
    pods: Sequence[PodFacts],
    pod_count: int,
    now: datetime,
    diagnostics: bool,
) -> TaskFacts:
    """A Task (row or values) as the panel judges it, for the job page and the dashboard alike;
    its message as this reader may read it."""
    since = task.applied_at or job.created_at
    return TaskFacts(
        role=task.role,
        phase=task.phase,
        desired_replicas=task.desired_replicas,
        ready_replicas=task.ready_replicas,
        observed=task.observed_at is not None,
        message=render_text(task.message, diagnostics),
        apply_error=task.apply_error,
        node_selector=task.node_selector or {},
        pods=tuple(pods),
        pod_count=pod_count,
        waited_seconds=(now - since).total_seconds(),
    )
