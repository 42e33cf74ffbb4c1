"""The spec's status rules (status-and-lifecycle, every table and arrow), as pure functions."""

from __future__ import annotations

import pytest
from django.utils import translation
from hypothesis import given
from hypothesis import strategies as st

from jobs.choices import (
    JOB_TERMINAL,
    Action,
    JobPhase,
    PodPhase,
    TaskKind,
    TaskPhase,
    WorkflowPhase,
)
from jobs.messages import Message, encode, render_text
from jobs.status.lifecycle import (
    CycleError,
    TaskState,
    TransitionRefused,
    WorkloadObservation,
    allowed_actions,
    blocked_by,
    job_message,
    job_phase,
    phase_after_resume,
    phase_after_stop,
    task_phase,
    topological_order,
    workflow_phase,
)

P, R, S, F, X = (
    TaskPhase.PENDING,
    TaskPhase.RUNNING,
    TaskPhase.SUCCEEDED,
    TaskPhase.FAILED,
    TaskPhase.STOPPED,
)


def sts(desired: int, ready: int, exists: bool = True) -> WorkloadObservation:
    return WorkloadObservation(TaskKind.STATEFULSET, exists, desired, ready)


def batch(**fields: object) -> WorkloadObservation:
    values: dict = {"exists": True, "desired_replicas": 1, "ready_replicas": 0} | fields
    return WorkloadObservation(TaskKind.JOB, **values)


def test_the_vocabularies_are_exactly_the_spec_tables() -> None:
    """Spec §Job status, §Task status, §Pod and Worker status, §Workflow status."""
    assert JobPhase.values == ["Pending", "Running", "Succeeded", "Failed", "Stopped"]
    assert TaskPhase.values == ["Pending", "Running", "Succeeded", "Failed", "Stopped"]
    assert PodPhase.values == ["Pending", "Running", "Succeeded", "Failed"]
    assert WorkflowPhase.values == ["Pending", "Running", "Succeeded", "Failed"]
    assert JOB_TERMINAL == {JobPhase.SUCCEEDED, JobPhase.FAILED}


class TestTaskStatusTable:
    """Spec §Task status: one test per row, for each kind that can report it."""

    def test_it_is_pending_while_the_required_replicas_are_not_ready(self) -> None:
        assert task_phase(sts(3, 0)) == P
        assert task_phase(sts(3, 2)) == P

    def test_it_is_pending_while_the_workload_does_not_exist_yet(self) -> None:
        assert task_phase(sts(3, 0, exists=False)) == P
        assert task_phase(batch(exists=False)) == P

    def test_it_is_running_when_the_desired_replicas_are_ready(self) -> None:
        assert task_phase(sts(3, 3)) == R
        assert task_phase(sts(1, 1)) == R

    def test_it_is_stopped_when_the_desired_replica_count_is_zero(self) -> None:
        assert task_phase(sts(0, 0)) == X
        assert task_phase(sts(0, 2)) == X  # scaling down: desired already 0
        assert task_phase(batch(desired_replicas=0)) == X

    def test_a_batch_job_reports_succeeded(self) -> None:
        assert task_phase(batch(complete=True)) == S

    def test_a_batch_job_reports_failed(self) -> None:
        assert task_phase(batch(failed=True)) == F

    def test_a_batch_job_is_running_once_a_pod_is_ready(self) -> None:
        assert task_phase(batch(desired_replicas=4, ready_replicas=1)) == R
        assert task_phase(batch(desired_replicas=4, ready_replicas=0)) == P

    def test_a_batch_job_outcome_is_read_even_after_its_workload_is_scaled_down(self) -> None:
        assert task_phase(batch(desired_replicas=0, complete=True)) == S
        assert task_phase(batch(desired_replicas=0, failed=True)) == F

    @given(desired=st.integers(0, 1000), ready=st.integers(0, 1000), exists=st.booleans())
    def test_a_statefulset_task_never_reports_succeeded_or_failed(
        self, desired: int, ready: int, exists: bool
    ) -> None:
        """Spec §Do not wait for a StatefulSet Job to show success or failure by itself."""
        assert task_phase(sts(desired, ready, exists)) in (P, R, X)


class TestJobStatusTable:
    """Spec §Job status: each row of the table."""

    def test_pending_when_accepted_and_no_task_runs_yet(self) -> None:
        assert job_phase(JobPhase.PENDING, False, []) == JobPhase.PENDING
        assert job_phase(JobPhase.PENDING, False, [P, P]) == JobPhase.PENDING

    def test_running_when_at_least_one_task_entered_running(self) -> None:
        assert job_phase(JobPhase.PENDING, False, [R, P]) == JobPhase.RUNNING

    def test_succeeded_only_after_every_task_reported_success(self) -> None:
        assert job_phase(JobPhase.RUNNING, False, [S, S]) == JobPhase.SUCCEEDED
        assert job_phase(JobPhase.RUNNING, False, [S, R]) == JobPhase.RUNNING

    def test_failed_after_at_least_one_task_reported_failure(self) -> None:
        assert job_phase(JobPhase.RUNNING, False, [F, R]) == JobPhase.FAILED
        assert job_phase(JobPhase.RUNNING, False, [F, S]) == JobPhase.FAILED

    def test_stopped_while_spec_stopped_is_true(self) -> None:
        assert job_phase(JobPhase.RUNNING, True, [R, R]) == JobPhase.STOPPED
        assert job_phase(JobPhase.PENDING, True, [P]) == JobPhase.STOPPED


class TestJobLifecycleDiagram:
    """Spec §Job status diagram: every arrow, then the moves it does not draw."""

    def test_arrow_pending_to_running(self) -> None:
        assert job_phase(JobPhase.PENDING, False, [R]) == JobPhase.RUNNING

    def test_arrow_running_to_succeeded(self) -> None:
        assert job_phase(JobPhase.RUNNING, False, [S]) == JobPhase.SUCCEEDED

    def test_arrow_running_to_failed(self) -> None:
        assert job_phase(JobPhase.RUNNING, False, [F]) == JobPhase.FAILED

    def test_arrow_pending_to_stopped(self) -> None:
        assert phase_after_stop(JobPhase.PENDING, False) == JobPhase.STOPPED
        assert job_phase(JobPhase.PENDING, True, [P]) == JobPhase.STOPPED

    def test_arrow_running_to_stopped(self) -> None:
        assert phase_after_stop(JobPhase.RUNNING, False) == JobPhase.STOPPED
        assert job_phase(JobPhase.RUNNING, True, [R]) == JobPhase.STOPPED

    def test_arrow_stopped_to_pending(self) -> None:
        assert phase_after_resume(JobPhase.STOPPED, True) == JobPhase.PENDING
        assert job_phase(JobPhase.STOPPED, False, [X]) == JobPhase.PENDING

    def test_no_arrow_from_running_back_to_pending(self) -> None:
        """A replica that is not ready leaves the Job Running: it "may still show Running"."""
        assert job_phase(JobPhase.RUNNING, False, [P, P]) == JobPhase.RUNNING
        assert job_phase(JobPhase.RUNNING, False, [X]) == JobPhase.RUNNING

    def test_no_arrow_from_stopped_straight_to_running(self) -> None:
        assert job_phase(JobPhase.STOPPED, False, [R, R]) == JobPhase.PENDING

    def test_stopped_stays_stopped_while_the_flag_is_set(self) -> None:
        assert job_phase(JobPhase.STOPPED, True, [R]) == JobPhase.STOPPED
        assert job_phase(JobPhase.STOPPED, True, [F]) == JobPhase.STOPPED

    @pytest.mark.parametrize("terminal", [JobPhase.SUCCEEDED, JobPhase.FAILED])
    @pytest.mark.parametrize("stopped", [False, True])
    @pytest.mark.parametrize("tasks", [[], [P], [R], [S], [F], [X], [R, F], [S, S]])
    def test_terminal_states_are_sticky(
        self, terminal: JobPhase, stopped: bool, tasks: list[TaskPhase]
    ) -> None:
        """Spec §Job status: Succeeded and Failed are both terminal."""
        assert job_phase(terminal, stopped, tasks) == terminal

    def test_a_task_outcome_reported_before_any_running_observation_is_recorded(self) -> None:
        """docs/decisions.md: Pending -> Succeeded / Failed in one observation."""
        assert job_phase(JobPhase.PENDING, False, [F]) == JobPhase.FAILED
        assert job_phase(JobPhase.PENDING, False, [S]) == JobPhase.SUCCEEDED


class TestOperationsByPhase:
    """Spec §Job status: what the console offers in each phase, and the moves it refuses."""

    @pytest.mark.parametrize(
        ("phase", "stopped", "expected"),
        [
            (JobPhase.PENDING, False, {Action.STOP, Action.CLONE, Action.DELETE}),
            (JobPhase.RUNNING, False, {Action.STOP, Action.CLONE, Action.DELETE}),
            (JobPhase.STOPPED, True, {Action.RESUME, Action.CLONE, Action.DELETE}),
            (JobPhase.SUCCEEDED, False, {Action.CLONE, Action.DELETE}),
            (JobPhase.SUCCEEDED, True, {Action.CLONE, Action.DELETE}),
            (JobPhase.FAILED, False, {Action.STOP, Action.CLONE, Action.DELETE}),
            (JobPhase.FAILED, True, {Action.CLONE, Action.DELETE}),
        ],
    )
    def test_it_offers_exactly(self, phase: JobPhase, stopped: bool, expected: set) -> None:
        assert allowed_actions(phase, stopped) == expected

    @given(phase=st.sampled_from(JobPhase), stopped=st.booleans())
    def test_clone_and_delete_are_always_offered(self, phase: JobPhase, stopped: bool) -> None:
        assert {Action.CLONE, Action.DELETE} <= allowed_actions(phase, stopped)

    def test_no_stop_or_resume_on_succeeded(self) -> None:
        with pytest.raises(TransitionRefused, match="terminal"):
            phase_after_stop(JobPhase.SUCCEEDED, False)
        with pytest.raises(TransitionRefused, match="terminal"):
            phase_after_resume(JobPhase.SUCCEEDED, False)

    def test_stop_on_failed_releases_resources_but_stays_failed(self) -> None:
        assert phase_after_stop(JobPhase.FAILED, False) == JobPhase.FAILED
        with pytest.raises(TransitionRefused, match="already stopped"):
            phase_after_stop(JobPhase.FAILED, True)

    def test_failed_is_never_resumed(self) -> None:
        with pytest.raises(TransitionRefused, match="clone"):
            phase_after_resume(JobPhase.FAILED, True)

    def test_stop_twice_is_refused(self) -> None:
        with pytest.raises(TransitionRefused, match="already Stopped"):
            phase_after_stop(JobPhase.STOPPED, True)

    @pytest.mark.parametrize("phase", [JobPhase.PENDING, JobPhase.RUNNING])
    def test_resume_of_a_job_that_is_not_stopped_is_refused(self, phase: JobPhase) -> None:
        with pytest.raises(TransitionRefused, match="Only a Stopped Job"):
            phase_after_resume(phase, False)


class TestJobMessage:
    def test_it_aggregates_the_phases_and_messages_of_its_tasks(self) -> None:
        """Spec §Task status: a Job aggregates the phases and messages of its Tasks."""
        ready = encode(Message("task.replicas_ready", {"ready": 1, "desired": 2}))
        message = job_message([TaskState("head", R), TaskState("worker", P, ready)])
        assert render_text(message) == "head: Running; worker: Pending — 1/2 replicas ready"
        with translation.override("zh-hans"):
            assert render_text(message) == "head：Running；worker：Pending — 1/2 个副本就绪"

    def test_it_keeps_a_task_message_stored_as_plain_text(self) -> None:
        """Rows written before messages were coded are shown as they were stored."""
        message = job_message([TaskState("worker", P, "1/2 ready; worker-1 CrashLoopBackOff")])
        assert render_text(message) == "worker: Pending — 1/2 ready; worker-1 CrashLoopBackOff"
        assert job_message([]) == ""


class TestWorkflowStatusTable:
    """Spec §Workflow status: each row."""

    def test_pending_while_no_child_has_started(self) -> None:
        assert workflow_phase([JobPhase.PENDING, JobPhase.PENDING]) == WorkflowPhase.PENDING
        assert workflow_phase([]) == WorkflowPhase.PENDING

    def test_running_when_a_child_runs(self) -> None:
        assert workflow_phase([JobPhase.RUNNING, JobPhase.PENDING]) == WorkflowPhase.RUNNING

    def test_running_between_children(self) -> None:
        assert workflow_phase([JobPhase.SUCCEEDED, JobPhase.PENDING]) == WorkflowPhase.RUNNING

    def test_succeeded_when_every_child_succeeded(self) -> None:
        assert workflow_phase([JobPhase.SUCCEEDED] * 3) == WorkflowPhase.SUCCEEDED

    def test_failed_when_a_child_failed(self) -> None:
        assert workflow_phase([JobPhase.FAILED, JobPhase.RUNNING]) == WorkflowPhase.FAILED

    def test_a_stopped_child_neither_fails_nor_completes_it(self) -> None:
        """docs/decisions.md: Workflow phase when a child Job is Stopped."""
        assert workflow_phase([JobPhase.STOPPED, JobPhase.PENDING]) == WorkflowPhase.PENDING
        assert workflow_phase([JobPhase.STOPPED, JobPhase.SUCCEEDED]) == WorkflowPhase.RUNNING

    def test_statefulset_children_may_keep_it_running_forever(self) -> None:
        """Spec §Workflow status: it may never reach a terminal state by itself."""
        assert workflow_phase([JobPhase.SUCCEEDED, JobPhase.RUNNING]) == WorkflowPhase.RUNNING


class TestDag:
    def test_it_orders_jobs_along_their_dependencies(self) -> None:
        edges = [("prep", "train"), ("train", "eval"), ("prep", "eval")]
        assert topological_order(["eval", "train", "prep"], edges) == ["prep", "train", "eval"]

    def test_it_refuses_a_cycle(self) -> None:
        with pytest.raises(CycleError, match="a, b"):
            topological_order(["a", "b", "c"], [("a", "b"), ("b", "a")])

    def test_it_refuses_an_unknown_job(self) -> None:
        with pytest.raises(ValueError, match="unknown"):
            topological_order(["a"], [("a", "z")])

    def test_a_child_waits_for_every_upstream_to_succeed(self) -> None:
        edges = [("prep", "train"), ("data", "train")]
        phases = {"prep": JobPhase.SUCCEEDED, "data": JobPhase.RUNNING, "train": JobPhase.PENDING}
        assert blocked_by("train", phases, edges) == ["data"]
        phases["data"] = JobPhase.SUCCEEDED
        assert blocked_by("train", phases, edges) == []


task_phases = st.lists(st.sampled_from(TaskPhase), max_size=8)


class TestInvariants:
    """Properties over random task sets and random observation sequences."""

    @given(current=st.sampled_from(JobPhase), stopped=st.booleans(), tasks=task_phases)
    def test_a_job_is_never_succeeded_while_a_task_is_not(
        self, current: JobPhase, stopped: bool, tasks: list[TaskPhase]
    ) -> None:
        if (
            current != JobPhase.SUCCEEDED
            and job_phase(current, stopped, tasks) == JobPhase.SUCCEEDED
        ):
            assert tasks and all(task == S for task in tasks)

    @given(current=st.sampled_from(JobPhase), stopped=st.booleans(), tasks=task_phases)
    def test_a_job_only_fails_after_a_task_reported_failure(
        self, current: JobPhase, stopped: bool, tasks: list[TaskPhase]
    ) -> None:
        if current != JobPhase.FAILED and job_phase(current, stopped, tasks) == JobPhase.FAILED:
            assert F in tasks

    @given(
        start=st.sampled_from(JobPhase),
        steps=st.lists(st.tuples(st.booleans(), task_phases), max_size=12),
    )
    def test_every_observed_move_is_an_arrow_of_the_diagram(
        self, start: JobPhase, steps: list[tuple[bool, list[TaskPhase]]]
    ) -> None:
        arrows = {
            (JobPhase.PENDING, JobPhase.RUNNING),
            (JobPhase.PENDING, JobPhase.SUCCEEDED),  # docs/decisions.md
            (JobPhase.PENDING, JobPhase.FAILED),  # docs/decisions.md
            (JobPhase.RUNNING, JobPhase.SUCCEEDED),
            (JobPhase.RUNNING, JobPhase.FAILED),
            (JobPhase.PENDING, JobPhase.STOPPED),
            (JobPhase.RUNNING, JobPhase.STOPPED),
            (JobPhase.STOPPED, JobPhase.PENDING),
        }
        phase = start
        for stopped, tasks in steps:
            after = job_phase(phase, stopped, tasks)
            assert after == phase or (phase, after) in arrows
            phase = after

    @given(phases=st.lists(st.sampled_from(JobPhase), max_size=8))
    def test_a_workflow_is_succeeded_only_when_every_child_is(self, phases: list[JobPhase]) -> None:
        if workflow_phase(phases) == WorkflowPhase.SUCCEEDED:
            assert phases and all(phase == JobPhase.SUCCEEDED for phase in phases)
