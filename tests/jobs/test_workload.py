"""The workload state (jobs.status.workload) from signals folded into the report
(jobs.workload.report), the API's `workload` and `policies`, stop_on_completion and
advance_on_workload_success."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

from console.models import ApiToken, Cluster
from jobs.choices import JobPhase, SignalSource, WorkloadState
from jobs.models import Job, Operation, Workflow, WorkflowEdge, WorkloadReport, WorkloadSpell
from jobs.spec import SpecInvalid, parse_job_spec
from jobs.status.workload import STALL_FLOOR, Policies, derive, stall_threshold, step_seconds
from jobs.workload.intake import BATCH, SignalBase, signal_token
from jobs.workload.report import record, report_of, workload_of

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
POD, UID = "ppo-head-0", "uid-a"


@pytest.fixture(autouse=True)
def _fresh_rate() -> None:
    cache.clear()


def running_job(alice: User, cluster: Cluster, name: str = "ppo", **policies: Any) -> Job:
    return Job.objects.create(
        project=alice.memberships.get().project, cluster=cluster, name=name,
        namespace="default", owner=alice, spec={"tasks": [], "policies": policies},
        phase=JobPhase.RUNNING,
    )  # fmt: skip


def items(*messages: dict[str, Any]) -> Sequence[SignalBase]:
    return BATCH.validate_python([{"pod": POD, "uid": UID, **m} for m in messages])


def say(
    job: Job, at: datetime, *messages: dict[str, Any], source: Any = SignalSource.SIGNAL
) -> Any:
    with time_machine.travel(at, tick=False):
        return record(job.pk, job.run, items(*messages), source)


def state_at(job: Job, at: datetime) -> Any:
    job.refresh_from_db()
    return workload_of(Job.objects.select_related("workload").get(pk=job.pk), at)


def progress(seq: int, step: int, at: datetime, **fields: Any) -> dict[str, Any]:
    return {"kind": "progress", "seq": seq, "step": step, "at": at.isoformat(), **fields}


# --- the rules, in order ------------------------------------------------------------------------


def test_a_job_that_never_signalled_is_silent(alice: User, cluster: Cluster) -> None:
    job = running_job(alice, cluster)
    workload = state_at(job, T0)
    assert workload.state == WorkloadState.SILENT
    assert workload.source is None and workload.reason.code == "workload.silent"


def test_steps_that_advance_are_progressing_with_eta_from_the_step_time(
    alice: User, cluster: Cluster
) -> None:
    job = running_job(alice, cluster)
    for n in range(5):
        at = T0 + timedelta(seconds=10 * n)
        say(job, at, progress(n, n * 2, at, max_steps=100, metrics={"reward": 0.1 * n}))
    workload = state_at(job, T0 + timedelta(seconds=45))
    assert workload.state == WorkloadState.PROGRESSING
    assert (workload.step, workload.max_steps) == (8, 100)
    assert workload.step_seconds == 5.0  # 10 s per 2 steps
    assert workload.eta_seconds == 92 * 5.0
    assert workload.source == SignalSource.SIGNAL
    assert workload.reported_at == T0 + timedelta(seconds=40)
    assert workload.metrics == {"reward": pytest.approx(0.4)}


def test_no_step_advance_past_the_threshold_is_stalled_and_silence_then_unresponsive(
    alice: User, cluster: Cluster
) -> None:
    job = running_job(alice, cluster, stall_after_seconds=20, heartbeat_seconds=10)
    say(job, T0, progress(0, 7, T0))
    for n in range(1, 4):  # heartbeats keep coming, the step does not move
        say(job, T0 + timedelta(seconds=10 * n), {"kind": "heartbeat", "seq": n})
    stalled = state_at(job, T0 + timedelta(seconds=31))
    assert stalled.state == WorkloadState.STALLED
    assert stalled.reason.params == {"step": 7, "seconds": 31, "limit": 20}
    # The last message was at 30 s: three 10 s heartbeats later, nothing at all is heard.
    assert state_at(job, T0 + timedelta(seconds=60)).state == WorkloadState.STALLED
    unresponsive = state_at(job, T0 + timedelta(seconds=61))
    assert unresponsive.state == WorkloadState.UNRESPONSIVE
    assert unresponsive.reason.code == "workload.quiet"


def test_the_stall_clock_waits_while_the_workload_checkpoints(
    alice: User, cluster: Cluster
) -> None:
    job = running_job(alice, cluster, stall_after_seconds=20)
    say(job, T0, progress(0, 7, T0))
    pause = T0 + timedelta(seconds=15)
    say(job, pause, {"kind": "phase", "seq": 1, "phase": "checkpointing", "at": pause.isoformat()})
    assert state_at(job, T0 + timedelta(seconds=30)).state == WorkloadState.PROGRESSING
    assert state_at(job, T0 + timedelta(seconds=36)).state == WorkloadState.STALLED


def test_fewer_ray_nodes_than_expected_is_degraded(alice: User, cluster: Cluster) -> None:
    job = running_job(alice, cluster)
    say(
        job,
        T0,
        progress(0, 3, T0),
        {"kind": "ray", "seq": 1, "expected_nodes": 4, "alive_nodes": 3},
    )
    workload = state_at(job, T0 + timedelta(seconds=5))
    assert workload.state == WorkloadState.DEGRADED
    assert workload.reason.params == {"alive": 3, "expected": 4}
    say(
        job,
        T0 + timedelta(seconds=6),
        {"kind": "ray", "seq": 2, "expected_nodes": 4, "alive_nodes": 4},
    )
    assert state_at(job, T0 + timedelta(seconds=7)).state == WorkloadState.PROGRESSING


def phase(seq: int, name: str, at: datetime) -> dict[str, Any]:
    return {"kind": "phase", "seq": seq, "phase": name, "at": at.isoformat()}


def ray(seq: int, alive: int, at: datetime, expected: int = 2) -> dict[str, Any]:
    return {"kind": "ray", "seq": seq, "expected_nodes": expected, "alive_nodes": alive,
            "at": at.isoformat()}  # fmt: skip


def test_it_reads_starting_never_degraded_while_the_driver_gathers_its_ray_nodes(
    alice: User, cluster: Cluster
) -> None:
    """Issue 31, item 3: the driver wrapper's start as a real Ray cluster showed it (a worker
    joining a few seconds after the head). Degraded is a run that had its nodes and lost one."""
    job = running_job(alice, cluster)
    at = [T0 + timedelta(seconds=n) for n in (0, 2, 7, 12, 20)]
    story = [
        [phase(1, "starting", at[0]), phase(2, "waiting_for_nodes", at[0])],
        [ray(3, 1, at[1])],
        [ray(4, 1, at[2])],
        [ray(5, 2, at[3]), phase(6, "initializing", at[3])],
        [progress(7, 1, at[4], max_steps=5)],
    ]
    seen = []
    for when, messages in zip(at, story, strict=True):
        say(job, when, *messages)
        seen.append(state_at(job, when + timedelta(seconds=1)))
    assert [w.state for w in seen] == [WorkloadState.STARTING] * 4 + [WorkloadState.PROGRESSING]
    assert seen[1].reason.code == "workload.gathering"
    assert seen[1].reason.params == {"alive": 1, "expected": 2}


def test_a_start_that_gathers_its_ray_nodes_stores_no_degraded_spell(
    alice: User, cluster: Cluster
) -> None:
    """Issue 31, item 3: the chart shades Degraded spells (jobs.status.spells); a driver's wait
    for its nodes (1 of 2 alive, then 2 of 2) is Starting, so it begins no Degraded spell and
    the report of every node alive ends none."""
    job = running_job(alice, cluster)
    say(job, T0, phase(1, "starting", T0), phase(2, "waiting_for_nodes", T0))
    for seq, alive, seconds in ((3, 1, 2), (4, 1, 7), (5, 2, 12)):
        at = T0 + timedelta(seconds=seconds)
        say(job, at, ray(seq, alive, at))
        ray_kept = WorkloadReport.objects.get(job=job).latest["ray"]
        assert "degraded_since" not in ray_kept
    at = T0 + timedelta(seconds=13)
    say(job, at, phase(6, "initializing", at), progress(7, 1, at))
    assert not WorkloadSpell.objects.filter(job=job).exists()


def test_a_node_lost_after_the_start_is_stored_as_a_degraded_spell_once_it_is_back(
    alice: User, cluster: Cluster
) -> None:
    job = running_job(alice, cluster)
    say(job, T0, phase(1, "waiting_for_nodes", T0), ray(2, 2, T0), progress(3, 1, T0))
    lost, back = T0 + timedelta(seconds=10), T0 + timedelta(seconds=30)
    say(job, lost, ray(4, 1, lost))
    say(job, back, ray(5, 2, back))
    spells = WorkloadSpell.objects.filter(job=job).values_list("state", "started_at", "ended_at")
    assert list(spells) == [(WorkloadState.DEGRADED, lost, back)]


def test_it_reads_degraded_when_a_node_is_lost_after_the_driver_had_them_all(
    alice: User, cluster: Cluster
) -> None:
    job = running_job(alice, cluster)
    say(job, T0, phase(1, "waiting_for_nodes", T0), ray(2, 2, T0))
    later = T0 + timedelta(seconds=3)
    say(job, later, phase(3, "initializing", later), ray(4, 1, later))
    workload = state_at(job, later + timedelta(seconds=1))
    assert workload.state == WorkloadState.DEGRADED
    assert workload.reason.code == "workload.degraded"


def test_it_reads_starting_when_a_recreated_head_gathers_its_nodes_again(
    alice: User, cluster: Cluster
) -> None:
    """A head pod re-created mid-run: its new driver waits for the nodes, newer than the last
    step; the run reads Starting until they are back, then Progressing from its next step."""
    job = running_job(alice, cluster)
    say(job, T0, progress(1, 40, T0), ray(2, 2, T0))
    again = T0 + timedelta(seconds=60)
    say(job, again, phase(3, "starting", again), phase(4, "waiting_for_nodes", again))
    say(job, again + timedelta(seconds=1), ray(5, 1, again + timedelta(seconds=1)))
    workload = state_at(job, again + timedelta(seconds=2))
    assert workload.state == WorkloadState.STARTING
    assert workload.reason.code == "workload.gathering"


def test_a_degraded_spell_ends_when_a_recreated_head_gathers_its_nodes_again(
    alice: User, cluster: Cluster
) -> None:
    """Degraded from the lost node until the new driver says it waits for its nodes (Starting
    from then on, judge's order); the wait and the report of every node back add no spell."""
    job = running_job(alice, cluster)
    lost, again = T0 + timedelta(seconds=10), T0 + timedelta(seconds=60)
    say(job, T0, progress(1, 40, T0), ray(2, 2, T0))
    say(job, lost, ray(3, 1, lost))
    say(job, again, phase(4, "starting", again), phase(5, "waiting_for_nodes", again))
    for seq, alive, seconds in ((6, 1, 61), (7, 2, 70)):
        at = T0 + timedelta(seconds=seconds)
        say(job, at, ray(seq, alive, at))
    spells = WorkloadSpell.objects.filter(job=job).values_list("state", "started_at", "ended_at")
    assert list(spells) == [(WorkloadState.DEGRADED, lost, again)]


def test_completion_wins_and_outlives_the_pods(alice: User, cluster: Cluster) -> None:
    job = running_job(alice, cluster)
    say(job, T0, progress(0, 3, T0))
    done = {"kind": "completion", "seq": 1, "outcome": "failed", "exit_code": 3, "reason": "NaN"}
    say(job, T0 + timedelta(seconds=1), done)
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.STOPPED, stopped=True)
    workload = state_at(job, T0 + timedelta(days=2))
    assert workload.state == WorkloadState.FAILED
    assert workload.completion["exit_code"] == 3
    assert workload.reason.code == "workload.completed_code"
    # A new attempt of the process starts over: the earlier completion is over.
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.RUNNING, stopped=False)
    say(job, T0 + timedelta(seconds=9), {"kind": "phase", "seq": 2, "phase": "starting"})
    assert state_at(job, T0 + timedelta(seconds=10)).state == WorkloadState.STARTING


def test_pods_gone_without_a_completion_is_lost_and_pending_pods_are_starting(
    alice: User, cluster: Cluster
) -> None:
    job = running_job(alice, cluster)
    say(job, T0, {"kind": "heartbeat", "seq": 0})
    assert state_at(job, T0).state == WorkloadState.STARTING
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.PENDING)
    assert state_at(job, T0).reason.code == "workload.pods_starting"
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.FAILED)
    lost = state_at(job, T0)
    assert lost.state == WorkloadState.LOST and lost.reason.params == {"phase": "Failed"}


def test_a_new_run_starts_a_new_report_and_an_earlier_runs_word_is_ignored(
    alice: User, cluster: Cluster
) -> None:
    job = running_job(alice, cluster)
    say(job, T0, {"kind": "completion", "seq": 0, "outcome": "succeeded"})
    Job.objects.filter(pk=job.pk).update(run=2)
    job.refresh_from_db()
    assert state_at(job, T0).state == WorkloadState.SILENT  # the report is run 1's
    say(job, T0, progress(1, 1, T0))
    report = WorkloadReport.objects.get(job=job)
    assert report.run == 2 and report.outcome == "" and "completion" not in report.latest
    with time_machine.travel(T0, tick=False):
        record(job.pk, 1, items({"kind": "completion", "seq": 5, "outcome": "failed"}))
    assert WorkloadReport.objects.get(job=job).outcome == ""


def test_a_late_older_message_changes_nothing_and_a_step_back_restarts_the_history(
    alice: User, cluster: Cluster
) -> None:
    job = running_job(alice, cluster)
    later, earlier = T0 + timedelta(seconds=20), T0
    say(job, later, progress(2, 40, later))
    say(job, later, progress(1, 30, earlier))
    assert WorkloadReport.objects.get(job=job).latest["progress"]["step"] == 40
    back = later + timedelta(seconds=10)
    say(job, back, progress(3, 20, back))  # restarted from a checkpoint
    assert WorkloadReport.objects.get(job=job).steps == [[back.timestamp(), 20]]


def test_the_state_says_where_its_word_came_from(alice: User, cluster: Cluster) -> None:
    job = running_job(alice, cluster)
    say(job, T0, progress(5, 5, T0), source=SignalSource.LOGS)
    assert state_at(job, T0).source == SignalSource.LOGS
    done = {"kind": "completion", "seq": 9, "outcome": "succeeded"}
    say(job, T0, done, source=SignalSource.TERMINATION_LOG)
    assert state_at(job, T0).source == SignalSource.TERMINATION_LOG


def test_the_step_time_and_the_stall_threshold() -> None:
    assert step_seconds([[0, 0], [10, 5], [30, 10]], None) == 3.0  # median of 2 and 4
    assert step_seconds([[0, 0]], 7.5) == 7.5
    assert step_seconds([], None) is None
    assert stall_threshold(Policies(), None) == STALL_FLOOR
    assert stall_threshold(Policies(), 60.0) == 300.0
    assert stall_threshold(Policies(stall_after_seconds=9), 60.0) == 9.0


def test_derive_is_pure_on_a_report_built_by_hand() -> None:
    report = report_of(
        WorkloadReport(
            run=1, first_received_at=T0, last_received_at=T0,
            latest={"heartbeat": {"at": T0.isoformat(), "received_at": T0.isoformat()}}, steps=[],
        )
    )  # fmt: skip
    assert derive(report, JobPhase.RUNNING, 1, Policies(), T0).state == WorkloadState.STARTING
    assert derive(report, JobPhase.RUNNING, 2, Policies(), T0).state == WorkloadState.SILENT


# --- policies in the spec ----------------------------------------------------------------------


def test_policies_are_checked_stored_and_cloned(alice: User, cluster: Cluster) -> None:
    data = {
        "name": "ppo", "cluster": cluster.name,
        "tasks": [{"role": "head", "image": "rlinf/rlinf:1"}],
    }  # fmt: skip
    assert parse_job_spec(data, alice).policies.heartbeat_seconds == 30
    with pytest.raises(SpecInvalid) as refused:
        parse_job_spec(
            data | {"policies": {"heartbeat_seconds": 4, "stop_on_completion": "yes", "x": 1}},
            alice,
        )
    assert refused.value.errors == {
        "policies.heartbeat_seconds": "Must be at least 5.",
        "policies.stop_on_completion": "Must be true or false.",
        "policies.x": "Unknown field.",
    }


# --- the API -----------------------------------------------------------------------------------


def api(user: User) -> Client:
    token = ApiToken.issue(user, "test")[1]
    return Client(headers={"Authorization": f"Bearer {token}"})


def post_signals(job: Job, body: Any) -> Any:
    headers = {"Authorization": f"Bearer {signal_token(job.pk, job.run)}"}
    return Client().post(
        f"/api/v1/jobs/{job.pk}/signals", json.dumps(body), "application/json", headers=headers
    )


def test_the_api_gives_the_workload_and_the_policies(alice: User, cluster: Cluster) -> None:
    job = running_job(alice, cluster, stop_on_completion=False, heartbeat_seconds=30)
    body = [
        {"kind": "progress", "pod": POD, "uid": UID, "seq": 1, "step": 10, "max_steps": 20},
        {"kind": "checkpoint", "pod": POD, "uid": UID, "seq": 2, "step": 10, "path": "/out/c10"},
        {"kind": "ray", "pod": POD, "uid": UID, "seq": 3, "expected_nodes": 2, "alive_nodes": 2},
    ]
    assert post_signals(job, body).status_code == 202
    got = api(alice).get(f"/api/v1/jobs/{job.pk}").json()
    assert got["phase"] == "Running"
    assert got["policies"]["heartbeat_seconds"] == 30
    workload = got["workload"]
    assert workload["state"] == "Progressing" and workload["source"] == "signal"
    assert workload["reason"] == "At step 10." and workload["reason_code"] == "workload.progressing"
    assert (workload["step"], workload["max_steps"]) == (10, 20)
    assert workload["last_checkpoint"]["path"] == "/out/c10"
    assert workload["ray"]["expected"] == 2 and workload["ray"]["alive"] == 2
    assert workload["completion"] is None
    listed = api(alice).get("/api/v1/jobs").json()["results"]
    assert [job["workload"]["state"] for job in listed] == ["Progressing"]


def test_stop_on_completion_stops_the_job_as_the_console_once(
    alice: User, cluster: Cluster, django_capture_on_commit_callbacks: Any
) -> None:
    job = running_job(alice, cluster, stop_on_completion=True)
    done = {"kind": "completion", "pod": POD, "uid": UID, "seq": 1, "outcome": "succeeded"}
    with django_capture_on_commit_callbacks():
        assert post_signals(job, done).status_code == 202
        assert post_signals(job, done | {"seq": 2}).status_code == 202
    job.refresh_from_db()
    assert (job.phase, job.stopped) == (JobPhase.STOPPED, True)
    stop = Operation.objects.get(job=job, action="stop")
    assert stop.user is None and stop.result == Operation.Result.ACCEPTED
    assert "stop_on_completion" in str(api(alice).get(f"/api/v1/jobs/{job.pk}/operations").json())
    got = api(alice).get(f"/api/v1/jobs/{job.pk}").json()
    assert got["phase"] == "Stopped" and got["workload"]["state"] == "Succeeded"


def test_without_the_policy_the_job_keeps_running_beside_a_succeeded_workload(
    alice: User, cluster: Cluster
) -> None:
    job = running_job(alice, cluster)
    done = {"kind": "completion", "pod": POD, "uid": UID, "seq": 1, "outcome": "succeeded"}
    assert post_signals(job, done).status_code == 202
    got = api(alice).get(f"/api/v1/jobs/{job.pk}").json()
    assert (got["phase"], got["workload"]["state"]) == ("Running", "Succeeded")
    assert not Operation.objects.filter(job=job).exists()


# --- Workflows ---------------------------------------------------------------------------------


@pytest.mark.parametrize("advance", [True, False])
def test_a_child_whose_workload_succeeded_counts_as_succeeded_only_with_the_policy(
    alice: User, cluster: Cluster, advance: bool
) -> None:
    workflow = Workflow.objects.create(
        project=alice.memberships.get().project, name="w",
        policies={"advance_on_workload_success": advance},
    )  # fmt: skip
    first, second = (running_job(alice, cluster, name) for name in ("a", "b"))
    Job.objects.filter(pk__in=[first.pk, second.pk]).update(workflow=workflow)
    WorkflowEdge.objects.create(workflow=workflow, upstream=first, downstream=second)
    say(first, T0, {"kind": "completion", "seq": 1, "outcome": "succeeded"})
    counted = {child.name: child.phase for child in workflow.jobs.all().counted_children()}
    assert counted == {"a": JobPhase.SUCCEEDED if advance else JobPhase.RUNNING, "b": "Running"}
