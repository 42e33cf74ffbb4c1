"""The pure halves of reconcile and sync: which writes a Job needs (spec §Job status), what a
Task shows (spec §Task status) and what an add-on shows (spec §Node and Addon status)."""

from __future__ import annotations

from datetime import UTC, datetime

from console.engine.plan import JobObjects, Verb, plan
from console.engine.rows import JobRow, TaskRow
from console.kube.observations import (
    ServiceObs,
    parse_addon,
    parse_batch_job,
    parse_node,
    parse_pod,
    parse_service,
    parse_statefulset,
)
from console.models import Addon
from jobs.choices import JobPhase, TaskKind, TaskPhase
from jobs.messages import render_text
from jobs.status.observed import addon_view, held_gpus, task_view
from tests.engine import k8s_json as k8s

NOW = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)
TEMPLATE = {
    "role": "worker",
    "kind": "StatefulSet",
    "replicas": 2,
    "image": "img:1",
    "resources": {},
}


def job(*, phase: JobPhase = JobPhase.PENDING, stopped: bool = False, run: int = 1,
        deleting: bool = False, kind: TaskKind = TaskKind.STATEFULSET,
        task_phase: TaskPhase = TaskPhase.PENDING) -> JobRow:  # fmt: skip
    task = TaskRow(
        pk=11, job_id=7, role="worker", kind=kind, template={**TEMPLATE, "kind": kind},
        desired_replicas=2, ready_replicas=0, phase=task_phase, message="", observed_at=None,
        applied_at=None, apply_error="",
    )  # fmt: skip
    return JobRow(
        pk=7, name="train", namespace="default", run=run, stopped=stopped, phase=phase,
        message="", started_at=None, finished_at=None, observed_at=None,
        delete_requested_at=NOW if deleting else None, workflow_id=None, created_at=NOW,
        tasks=[task],
    )  # fmt: skip


def objects(replicas: int = 2, run: int = 1, service: bool = True) -> JobObjects:
    sts = parse_statefulset(k8s.statefulset(replicas=replicas, ready=replicas, run=run))
    services: tuple[ServiceObs, ...] = ()
    if service:
        item = {"metadata": {"name": "train-worker", "namespace": "default", "uid": "svc",
                             "labels": k8s.labels(run=run)}}  # fmt: skip
        services = (parse_service(item),)
    return JobObjects((sts,), services)


def verbs(writes: list) -> list[tuple[str, str, str]]:
    return [(w.verb, w.resource.kind, w.name) for w in writes]


def test_it_creates_the_statefulset_and_its_service_of_a_new_job() -> None:
    writes = plan(job(), JobObjects())
    assert verbs(writes) == [
        (Verb.CREATE, "StatefulSet", "train-worker"),
        (Verb.CREATE, "Service", "train-worker"),
    ]
    assert writes[0].manifest is not None and writes[0].manifest["spec"]["replicas"] == 2


def test_it_needs_nothing_when_the_cluster_already_matches() -> None:
    """Level-triggered and idempotent: the second reconcile makes no write."""
    assert plan(job(), objects()) == []


def test_it_sets_replicas_changed_behind_its_back_back() -> None:
    writes = plan(job(), objects(replicas=5))
    assert verbs(writes) == [(Verb.SCALE, "StatefulSet", "train-worker")]
    assert writes[0].replicas == 2


def test_it_scales_every_workload_of_a_stopped_job_to_zero_and_creates_nothing() -> None:
    """Spec §Job status: stop sets the desired replicas of the generated workloads to 0."""
    assert [(w.verb, w.replicas) for w in plan(job(stopped=True), objects())] == [(Verb.SCALE, 0)]
    assert plan(job(stopped=True), JobObjects()) == []
    assert plan(job(stopped=True), objects(replicas=0)) == []


def test_it_releases_a_failed_jobs_resources_when_stopped_but_leaves_it_alone_otherwise() -> None:
    """Spec §Job status: a Failed Job is not reconciled again; its stop only releases resources."""
    assert plan(job(phase=JobPhase.FAILED), JobObjects()) == []
    assert [w.verb for w in plan(job(phase=JobPhase.FAILED, stopped=True), objects())] == [
        Verb.SCALE
    ]


def test_it_replaces_the_workloads_of_an_earlier_run_from_the_template() -> None:
    """Spec §Job status: resume re-creates the Tasks from the original template."""
    writes = plan(job(run=2), objects(run=1))
    assert verbs(writes) == [
        (Verb.DELETE, "StatefulSet", "train-worker"),
        (Verb.CREATE, "StatefulSet", "train-worker"),
        (Verb.DELETE, "Service", "train-worker"),
        (Verb.CREATE, "Service", "train-worker"),
    ]
    assert writes[0].uid == "uid-train-worker"
    assert writes[1].manifest is not None
    assert writes[1].manifest["metadata"]["labels"]["trainyard.io/run"] == "2"


def test_it_deletes_everything_of_a_job_whose_deletion_was_requested() -> None:
    writes = plan(job(deleting=True), objects())
    assert [(w.verb, w.resource.kind) for w in writes] == [
        (Verb.DELETE, "StatefulSet"),
        (Verb.DELETE, "Service"),
    ]


def test_it_creates_nothing_for_a_workflow_child_waiting_for_upstreams() -> None:
    assert plan(job(), JobObjects(), blocked=["prepare"]) == []


def test_it_never_runs_a_finished_batch_task_again() -> None:
    finished = job(kind=TaskKind.JOB, task_phase=TaskPhase.SUCCEEDED)
    assert plan(finished, JobObjects()) == []


def test_it_creates_a_batch_job_without_a_service() -> None:
    assert verbs(plan(job(kind=TaskKind.JOB), JobObjects())) == [
        (Verb.CREATE, "Job", "train-worker")
    ]


# --- Task view ---------------------------------------------------------------------------------


def test_it_shows_a_statefulset_task_running_when_its_replicas_are_ready() -> None:
    sts = parse_statefulset(k8s.statefulset(replicas=2, ready=2))
    view = task_view(TaskKind.STATEFULSET, False, sts, [parse_pod(k8s.pod())], {})
    assert (view.phase, view.ready_replicas, render_text(view.message, diagnostics=True)) == (
        TaskPhase.RUNNING,
        2,
        "2/2 replicas ready",
    )


def test_it_keeps_a_crash_looping_statefulset_task_pending_and_says_why() -> None:
    """KUBERNETES-FACTS: a crash-looping -0 keeps replicas 1 under OrderedReady."""
    sts = parse_statefulset(k8s.statefulset(replicas=2, ready=0))
    view = task_view(TaskKind.STATEFULSET, False, sts, [parse_pod(k8s.crash_loop_pod())], {})
    assert view.phase == TaskPhase.PENDING
    assert (
        render_text(view.message, diagnostics=True)
        == "0/2 replicas ready; train-worker-0: CrashLoopBackOff, 4 restarts, "
        "last exit code 3 (Error)"
    )


def test_it_shows_batch_results_and_a_stopped_jobs_missing_workload() -> None:
    done = task_view(
        TaskKind.JOB, False, parse_batch_job(k8s.batch_job(outcome="complete")), [], {}
    )
    failed = task_view(
        TaskKind.JOB, False, parse_batch_job(k8s.batch_job(outcome="failed")), [], {}
    )
    assert (done.phase, render_text(done.message, diagnostics=True)) == (
        TaskPhase.SUCCEEDED, "Complete (CompletionsReached)",
    )  # fmt: skip
    assert (failed.phase, render_text(failed.message, diagnostics=True)) == (
        TaskPhase.FAILED, "Failed (BackoffLimitExceeded)",
    )  # fmt: skip
    assert task_view(TaskKind.STATEFULSET, True, None, [], {}).phase == TaskPhase.STOPPED
    assert task_view(TaskKind.STATEFULSET, False, None, [], {}).phase == TaskPhase.PENDING


# --- add-ons and nodes -------------------------------------------------------------------------

RAY = "quay.io/kuberay/operator"


def test_it_shows_an_addon_ready_with_the_version_its_ready_pods_run() -> None:
    workload = parse_addon(k8s.deployment(image=f"{RAY}:v1.2.2"), "Deployment")
    pods = [parse_pod(k8s.addon_pod("kuberay-operator", f"{RAY}:v1.2.2"))]
    assert addon_view(workload, pods, "") == addon_view(workload, pods, "v1.2.2")
    assert addon_view(workload, pods, "").phase == Addon.Phase.READY
    assert addon_view(workload, pods, "").current_version == "v1.2.2"


def test_it_shows_installing_upgrading_failed_and_pending() -> None:
    first = parse_addon(k8s.deployment(updated=1, ready=0, available=0), "Deployment")
    assert addon_view(first, [], "").phase == Addon.Phase.INSTALLING
    rolling = parse_addon(
        k8s.deployment(image=f"{RAY}:nonexistent", generation=2, observed=2, available=1, ready=1),
        "Deployment",
    )
    old = [parse_pod(k8s.addon_pod("kuberay-operator", f"{RAY}:v1.2.2"))]
    upgrading = addon_view(rolling, old, "")
    assert (upgrading.phase, upgrading.current_version) == (Addon.Phase.UPGRADING, "v1.2.2")
    stuck = parse_addon(k8s.deployment(image=f"{RAY}:nonexistent", stuck=True), "Deployment")
    assert addon_view(stuck, old, "").phase == Addon.Phase.FAILED
    assert addon_view(None, [], "v1").phase == Addon.Phase.PENDING
    steady = parse_addon(k8s.deployment(image=f"{RAY}:v1.2.2"), "Deployment")
    assert addon_view(steady, old, "v1.3.0").phase == Addon.Phase.PENDING


def test_it_counts_gpus_requested_by_live_pods_per_node() -> None:
    pods = [
        parse_pod(k8s.pod("a", gpus=2)),
        parse_pod(k8s.pod("b", gpus=1)),
        parse_pod(k8s.finished_pod("c", succeeded=True)),
    ]
    assert [held_gpus(pod) for pod in pods] == [2, 1, 0]
    assert parse_node(k8s.node()).gpus == 8
