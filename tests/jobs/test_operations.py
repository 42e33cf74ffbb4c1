"""Operations on Jobs against the spec's lifecycle (spec §Job status), in every phase.

An allowed operation changes the Job, records an accepted Operation and schedules a reconcile on
commit; a forbidden one changes nothing, records a refused Operation with the reason, and
schedules nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from console.models import Cluster, Membership, Project
from jobs.choices import Action, JobPhase, PodPhase, TaskPhase
from jobs.messages import render_text
from jobs.models import Job, Operation, Task, Workflow, WorkflowEdge
from jobs.operations import (
    ConfirmationMismatch,
    OperationRefused,
    clone_job,
    create_job,
    create_workflow,
    delete_job,
    resume_job,
    stop_job,
)
from jobs.spec import SpecInvalid, parse_job_spec, parse_workflow_spec
from tests.jobs.test_spec import job_data, workflow_data
from workers.models import PodInstance, Worker

Result = Operation.Result


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def delay() -> Iterator[mock.MagicMock]:
    with mock.patch("console.tasks.reconcile_job.delay") as patched:
        yield patched


def make_job(
    user: User, phase: JobPhase = JobPhase.PENDING, stopped: bool = False, **changes: Any
) -> Job:
    job = create_job(user, parse_job_spec(job_data(**changes), user))
    Job.objects.filter(pk=job.pk).update(phase=phase, stopped=stopped)
    job.refresh_from_db()
    return job


def snapshot(job: Job) -> tuple[Any, ...]:
    job = Job.objects.get(pk=job.pk)
    tasks = list(job.tasks.order_by("role").values_list("role", "desired_replicas", "phase"))
    return job.phase, job.stopped, job.run, job.delete_requested_at, tasks


def last_operation(job: Job) -> Operation:
    operation = Operation.objects.filter(job_name=job.name).order_by("-pk").first()
    assert operation is not None
    return operation


# --- create --------------------------------------------------------------------------------


def test_create_makes_a_pending_job_and_its_tasks(
    alice: User, cluster: Cluster, delay: mock.MagicMock, django_capture_on_commit_callbacks: Any
) -> None:
    """Spec §Job status: create -> Pending; one Task per role, from the template."""
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        job = create_job(alice, parse_job_spec(job_data(), alice))
    assert (job.phase, job.stopped, job.run, job.owner, job.namespace) == (
        JobPhase.PENDING,
        False,
        1,
        alice,
        "default",
    )
    head, worker = job.tasks.order_by("pk")
    assert job.spec["tasks"] == [head.template, worker.template]
    assert (worker.role, worker.kind, worker.desired_replicas, worker.phase) == (
        "worker",
        "StatefulSet",
        4,
        TaskPhase.PENDING,
    )
    assert head.node_selector == {"nvidia.com/gpu.product": "A100-SXM4-80GB"}
    operation = last_operation(job)
    assert (operation.action, operation.result, operation.user, operation.job) == (
        Action.CREATE,
        Result.ACCEPTED,
        alice,
        job,
    )
    assert len(callbacks) == 1
    delay.assert_called_once_with(job.pk)


def test_create_checks_the_spec_again_at_commit_time(alice: User, cluster: Cluster) -> None:
    """A form validated a while ago: the name may have been taken meanwhile."""
    spec = parse_job_spec(job_data(), alice)
    create_job(alice, spec)
    with pytest.raises(SpecInvalid) as refused:
        create_job(alice, spec)
    assert list(refused.value.errors) == ["name"]
    assert Job.objects.count() == 1


def test_create_refuses_a_user_who_lost_the_project(alice: User, cluster: Cluster) -> None:
    spec = parse_job_spec(job_data(), alice)
    Membership.objects.filter(user=alice).update(role=Membership.Role.VIEWER)
    with pytest.raises(SpecInvalid) as refused:
        create_job(alice, spec)
    assert list(refused.value.errors) == ["project"]
    assert not Job.objects.exists()


# --- stop ----------------------------------------------------------------------------------

STOP_ALLOWED = [
    (JobPhase.PENDING, False, JobPhase.STOPPED),
    (JobPhase.RUNNING, False, JobPhase.STOPPED),
    (JobPhase.FAILED, False, JobPhase.FAILED),
]


@pytest.mark.parametrize(("phase", "stopped", "after"), STOP_ALLOWED)
def test_stop_sets_the_flag_and_the_phase(
    alice: User,
    cluster: Cluster,
    delay: mock.MagicMock,
    django_capture_on_commit_callbacks: Any,
    phase: JobPhase,
    stopped: bool,
    after: JobPhase,
) -> None:
    """Spec §Job status: Pending/Running -> Stopped; stop on Failed releases resources and the
    Job stays Failed (it never moves to Stopped)."""
    job = make_job(alice, phase, stopped)
    with django_capture_on_commit_callbacks(execute=True):
        stop_job(alice, job)
    job.refresh_from_db()
    assert (job.phase, job.stopped, job.run) == (after, True, 1)
    operation = last_operation(job)
    assert (operation.action, operation.result) == (Action.STOP, Result.ACCEPTED)
    if phase == JobPhase.FAILED:
        assert "stays Failed" in render_text(operation.message)
    delay.assert_called_once_with(job.pk)


STOP_REFUSED = [
    (JobPhase.SUCCEEDED, False, "Succeeded Job is terminal"),
    (JobPhase.STOPPED, True, "already Stopped"),
    (JobPhase.FAILED, True, "already stopped"),
]
RESUME_REFUSED = [
    (JobPhase.PENDING, False, "Only a Stopped Job can be resumed"),
    (JobPhase.RUNNING, False, "Only a Stopped Job can be resumed"),
    (JobPhase.SUCCEEDED, False, "Succeeded Job is terminal"),
    (JobPhase.FAILED, False, "Failed Job is terminal"),
    (JobPhase.FAILED, True, "Failed Job is terminal"),
]
REFUSED = [(stop_job, Action.STOP, *case) for case in STOP_REFUSED] + [
    (resume_job, Action.RESUME, *case) for case in RESUME_REFUSED
]


@pytest.mark.parametrize(("operate", "action", "phase", "stopped", "reason"), REFUSED)
def test_a_forbidden_transition_is_refused_recorded_and_changes_nothing(
    alice: User,
    cluster: Cluster,
    delay: mock.MagicMock,
    django_capture_on_commit_callbacks: Any,
    operate: Callable[[User, Job], Job],
    action: Action,
    phase: JobPhase,
    stopped: bool,
    reason: str,
) -> None:
    """Spec §Job status: no stop or resume on Succeeded; a Failed Job is fixed by cloning."""
    job = make_job(alice, phase, stopped)
    before = snapshot(job)
    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(OperationRefused) as refused,
    ):
        operate(alice, job)
    assert reason in refused.value.message
    assert snapshot(job) == before
    operation = last_operation(job)
    assert (operation.action, operation.result, render_text(operation.message)) == (
        action,
        Result.REFUSED,
        refused.value.message,
    )
    assert (operation.user, operation.job, operation.project) == (alice, job, job.project)
    assert callbacks == []
    delay.assert_not_called()


def test_stop_decides_on_the_stored_phase_not_the_callers_copy(
    alice: User, cluster: Cluster
) -> None:
    """Another request stopped the Job after the caller read it."""
    job = make_job(alice, JobPhase.RUNNING)
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.STOPPED, stopped=True)
    with pytest.raises(OperationRefused, match="already Stopped"):
        stop_job(alice, job)
    resumed = resume_job(alice, job)
    assert (resumed.phase, resumed.stopped, resumed.run) == (JobPhase.PENDING, False, 2)


def test_an_operation_on_a_job_being_deleted_is_refused(alice: User, cluster: Cluster) -> None:
    job = make_job(alice, JobPhase.RUNNING)
    Job.objects.filter(pk=job.pk).update(delete_requested_at=timezone.now())
    with pytest.raises(OperationRefused, match="being deleted"):
        stop_job(alice, job)
    assert Job.objects.get(pk=job.pk).stopped is False


def test_a_missed_conditional_update_rereads_and_refuses_with_the_reason(
    alice: User, cluster: Cluster, delay: mock.MagicMock
) -> None:
    """The Job was stopped between our read and our UPDATE: the UPDATE matches no row, the Job is
    read again, and the stop is refused for what the Job now is."""
    from jobs import operations

    job = make_job(alice, JobPhase.STOPPED, True)
    real = operations._current
    stale = iter([(JobPhase.RUNNING, False)])
    with (
        mock.patch.object(operations, "_current", lambda j: next(stale, None) or real(j)),
        pytest.raises(OperationRefused, match="already Stopped"),
    ):
        stop_job(alice, job)
    assert snapshot(job)[:3] == (JobPhase.STOPPED, True, 1)
    assert [o.result for o in Operation.objects.filter(job=job, action=Action.STOP)] == [
        Result.REFUSED
    ]
    delay.assert_not_called()


def test_an_operation_on_a_removed_job_is_refused_and_kept_by_name(
    alice: User, cluster: Cluster
) -> None:
    job = make_job(alice, JobPhase.RUNNING)
    Job.objects.filter(pk=job.pk).delete()
    with pytest.raises(OperationRefused, match="being deleted"):
        stop_job(alice, job)
    refused = Operation.objects.get(result=Result.REFUSED)
    assert (refused.job, refused.job_name, refused.project) == (None, "ppo-math", job.project)


# --- resume --------------------------------------------------------------------------------


def test_resume_goes_back_to_pending_with_a_new_run(
    alice: User, cluster: Cluster, delay: mock.MagicMock, django_capture_on_commit_callbacks: Any
) -> None:
    """Spec §Job status: Stopped -> Pending, the stop flag cleared."""
    job = make_job(alice, JobPhase.STOPPED, True)
    with django_capture_on_commit_callbacks(execute=True):
        resume_job(alice, job)
    job.refresh_from_db()
    assert (job.phase, job.stopped, job.run) == (JobPhase.PENDING, False, 2)
    operation = last_operation(job)
    assert (operation.action, operation.result) == (Action.RESUME, Result.ACCEPTED)
    assert render_text(operation.message).startswith("Run 2:")
    delay.assert_called_once_with(job.pk)


def test_resume_recreates_tasks_from_the_original_template(alice: User, cluster: Cluster) -> None:
    """Spec §Job status: "creates the Tasks again from the original template" — even when the
    Task rows were changed since (observed state, a drifted template, a role gone, a role added)."""
    job = make_job(alice, JobPhase.STOPPED, True)
    head = job.tasks.get(role="head")
    now = timezone.now()
    Task.objects.filter(pk=head.pk).update(
        template={"role": "head", "image": "drifted"},
        desired_replicas=7,
        ready_replicas=3,
        phase=TaskPhase.STOPPED,
        message="scaled down",
        observed_at=now,
        apply_error="boom",
        node_selector={},
    )
    job.tasks.filter(role="worker").delete()
    Task.objects.create(job=job, role="stray", template={}, desired_replicas=1)
    Worker.objects.create(
        task=head, pod_name="ppo-math-head-0", phase=PodPhase.RUNNING, last_reported_at=now
    )
    PodInstance.objects.create(
        task=head,
        uid="uid-1",
        pod_name="ppo-math-head-0",
        phase=PodPhase.RUNNING,
        first_seen_at=now,
        last_seen_at=now,
    )
    resume_job(alice, job)
    tasks = {task.role: task for task in job.tasks.all()}
    assert sorted(tasks) == ["head", "worker"]
    for template in job.spec["tasks"]:
        task = tasks[template["role"]]
        assert task.template == template
        assert (task.kind, task.node_selector, task.desired_replicas) == (
            template["kind"],
            template["node_selector"],
            template["replicas"],
        )
        assert (task.ready_replicas, task.phase, task.message, task.observed_at) == (
            0,
            TaskPhase.PENDING,
            "",
            None,
        )
        assert task.apply_error == ""
    assert not Worker.objects.filter(task__job=job).exists()
    assert PodInstance.objects.filter(uid="uid-1").exists()


# --- delete --------------------------------------------------------------------------------


@pytest.mark.parametrize("phase", list(JobPhase))
def test_delete_needs_the_jobs_name_in_every_phase(
    alice: User,
    cluster: Cluster,
    delay: mock.MagicMock,
    django_capture_on_commit_callbacks: Any,
    phase: JobPhase,
) -> None:
    """Spec §Job status: deletion is a separate operation and cannot be undone."""
    job = make_job(alice, phase, phase == JobPhase.STOPPED)
    with pytest.raises(ConfirmationMismatch, match="ppo-math"):
        delete_job(alice, job, "ppo")
    assert Job.objects.get(pk=job.pk).delete_requested_at is None
    assert last_operation(job).result == Result.REFUSED
    with django_capture_on_commit_callbacks(execute=True):
        delete_job(alice, job, "ppo-math")
    assert Job.objects.get(pk=job.pk).delete_requested_at is not None
    operation = last_operation(job)
    assert (operation.action, operation.result) == (Action.DELETE, Result.ACCEPTED)
    delay.assert_called_once_with(job.pk)


def test_delete_twice_is_refused(alice: User, cluster: Cluster) -> None:
    job = make_job(alice)
    delete_job(alice, job, "ppo-math")
    with pytest.raises(OperationRefused, match="already being deleted"):
        delete_job(alice, job, "ppo-math")


def test_operations_outlive_the_deleted_job(alice: User, cluster: Cluster) -> None:
    job = make_job(alice)
    delete_job(alice, job, "ppo-math")
    Job.objects.filter(pk=job.pk).delete()  # what reconcile does once the cluster is clean
    assert list(Operation.objects.values_list("job_name", "action", "job")) == [
        ("ppo-math", Action.DELETE, None),
        ("ppo-math", Action.CREATE, None),
    ]


# --- clone ---------------------------------------------------------------------------------


@pytest.mark.parametrize("phase", list(JobPhase))
def test_clone_is_allowed_from_every_phase(
    alice: User,
    cluster: Cluster,
    delay: mock.MagicMock,
    django_capture_on_commit_callbacks: Any,
    phase: JobPhase,
) -> None:
    """Spec §Job status: after a failure, fix the configuration, then clone into a new Job."""
    source = make_job(alice, phase, phase == JobPhase.STOPPED)
    with django_capture_on_commit_callbacks(execute=True):
        clone = clone_job(alice, source, "ppo-math-2")
    assert (clone.phase, clone.stopped, clone.run, clone.cloned_from) == (
        JobPhase.PENDING,
        False,
        1,
        source,
    )
    assert clone.spec == source.spec
    operation = last_operation(clone)
    assert (operation.action, operation.result, operation.job) == (
        Action.CLONE,
        Result.ACCEPTED,
        clone,
    )
    delay.assert_called_once_with(clone.pk)


def test_clone_starts_from_the_original_template(alice: User, cluster: Cluster) -> None:
    source = make_job(alice, JobPhase.FAILED)
    source.tasks.update(desired_replicas=0, template={})
    clone = clone_job(alice, source, "ppo-math-2")
    assert [task.template for task in clone.tasks.order_by("pk")] == source.spec["tasks"]


def test_clone_merges_overrides(alice: User, cluster: Cluster, project: Project) -> None:
    project.clusters.add(Cluster.objects.create(name="gpu-b", kubeconfig="x", namespace="training"))
    source = make_job(alice, JobPhase.FAILED)
    overrides = {
        "cluster": "gpu-b",
        "tasks": [{"role": "worker", "replicas": 8, "resources": {"gpu": 2}}],
    }
    clone = clone_job(alice, source, "ppo-math-2", overrides)
    worker = clone.tasks.get(role="worker")
    assert (clone.cluster.name, clone.namespace) == ("gpu-b", "default")
    assert (worker.desired_replicas, worker.template["resources"]["gpu"]) == (8, 2)
    assert clone.tasks.get(role="head").template == source.spec["tasks"][0]


def test_clone_validates_like_create(alice: User, cluster: Cluster) -> None:
    source = make_job(alice)
    with pytest.raises(SpecInvalid) as refused:
        clone_job(alice, source, "ppo-math", {"tasks": [{"role": "worker", "replicas": -1}]})
    assert set(refused.value.errors) == {"name", "tasks.1.replicas"}
    assert Job.objects.count() == 1


def test_clone_into_another_project_of_the_user(
    alice: User, cluster: Cluster, other_project: Project
) -> None:
    Membership.objects.create(user=alice, project=other_project)
    source = make_job(alice, project="vision")
    clone = clone_job(alice, source, "ppo-math-2", {"project": "speech"})
    assert clone.project == other_project


# --- workflows -----------------------------------------------------------------------------


def test_create_workflow_writes_the_dag(
    alice: User, cluster: Cluster, delay: mock.MagicMock, django_capture_on_commit_callbacks: Any
) -> None:
    """Spec §Workflow status: a DAG of child Jobs, each a normal Job."""
    with django_capture_on_commit_callbacks(execute=True):
        workflow = create_workflow(alice, parse_workflow_spec(workflow_data(), alice))
    children = {job.name: job for job in workflow.jobs.all()}
    assert sorted(children) == ["evaluate", "prepare", "train"]
    assert all(job.phase == JobPhase.PENDING and job.owner == alice for job in children.values())
    assert children["prepare"].tasks.get().kind == "Job"
    edges = {(e.upstream.name, e.downstream.name) for e in WorkflowEdge.objects.all()}
    assert edges == {("prepare", "train"), ("train", "evaluate")}
    assert Operation.objects.filter(action=Action.CREATE, result=Result.ACCEPTED).count() == 3
    assert sorted(call.args[0] for call in delay.call_args_list) == sorted(
        job.pk for job in children.values()
    )


def test_create_workflow_refuses_a_cycle_and_writes_nothing(alice: User, cluster: Cluster) -> None:
    data = workflow_data()
    data["jobs"][0]["depends_on"] = ["evaluate"]
    with pytest.raises(SpecInvalid) as refused:
        create_workflow(alice, parse_workflow_spec(data, alice))
    assert "cycle" in refused.value.errors["jobs"]
    assert not Workflow.objects.exists() and not Job.objects.exists()


def test_create_workflow_rechecks_names_at_commit_time(alice: User, cluster: Cluster) -> None:
    spec = parse_workflow_spec(workflow_data(), alice)
    make_job(alice, name="train")
    with pytest.raises(SpecInvalid) as refused:
        create_workflow(alice, spec)
    assert list(refused.value.errors) == ["jobs.1.name"]
    assert not Workflow.objects.exists()


def test_duplicate_dependencies_make_one_edge(alice: User, cluster: Cluster) -> None:
    data = workflow_data()
    data["jobs"][1]["depends_on"] = ["prepare", "prepare"]
    workflow = create_workflow(alice, parse_workflow_spec(data, alice))
    assert workflow.edges.count() == 2
