"""Operator-only diagnostics (spec §Pod and Worker status: restart counts, termination reasons,
previous logs and live events are for authorised operators), decided by one policy
(jobs.diagnostics) for pages, fragments, messages, the record and the API. The facts are stored
whoever reads them; a member gets their meaning, and `TRAINYARD_DIAGNOSTICS=members` opens them
to the members of a Job's project (viewers never)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.test import Client

from console.models import ApiToken, Cluster, Membership, Project
from jobs.choices import JobPhase, PodPhase, TaskPhase
from jobs.messages import Message, Stored, encode, withhold
from jobs.models import Job, Task, Workflow
from workers.models import PodInstance, Worker

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SEEN = NOW - timedelta(seconds=3)
EXIT = Message("exit.code_reason", {"code": 3, "reason": "Error"})
CRASH = Message("pod.crash_loop", {"pod": "train-actor-0", "count": 33, "exit": EXIT})
TASK_MESSAGE = encode(
    Message("task.with_problem", {
        "progress": Message("task.replicas_ready", {"ready": 1, "desired": 2}), "problem": CRASH,
    })
)  # fmt: skip
JOB_MESSAGE = encode(
    Message("job.tasks", {"tasks": [Message("job.task_message", {
        "role": "actor", "phase": "Running", "message": Stored(TASK_MESSAGE)})]})
)  # fmt: skip
OOM = encode(Message("worker.exit.code_reason", {"code": 137, "reason": "OOMKilled"}))
FACTS = "33 restarts, last exit code 3 (Error)"
MEANING = "the container keeps restarting after an error; read its logs or ask an operator"


@pytest.fixture(autouse=True)
def frozen_clock() -> Any:
    with time_machine.travel(NOW, tick=False) as traveller:
        yield traveller


@pytest.fixture
def job(project: Project, cluster: Cluster, alice: User) -> Job:
    """A StatefulSet Job still Running while its actor crash-loops, one pod OOMKilled once."""
    Cluster.objects.filter(pk=cluster.pk).update(
        reachable=True, last_synced_at=SEEN, last_attempt_at=SEEN
    )
    job = Job.objects.create(
        project=project, cluster=cluster, name="train", namespace="default", owner=alice,
        spec={"tasks": []}, phase=JobPhase.RUNNING, message=JOB_MESSAGE, observed_at=SEEN,
        created_at=NOW - timedelta(hours=1), workflow=Workflow.objects.create(
            project=project, name="pipe"),
    )  # fmt: skip
    task = Task.objects.create(
        job=job, role="actor", template={}, phase=TaskPhase.RUNNING, desired_replicas=2,
        ready_replicas=1, message=TASK_MESSAGE, observed_at=SEEN,
    )  # fmt: skip
    Worker.objects.create(
        task=task, pod_name="train-actor-0", pod_uid="uid-0", phase=PodPhase.RUNNING,
        ready=False, restart_count=33, reason="CrashLoopBackOff", last_reported_at=SEEN,
    )  # fmt: skip
    Worker.objects.create(
        task=task, pod_name="train-actor-1", pod_uid="uid-1", phase=PodPhase.RUNNING,
        ready=False, restart_count=1, reason="OOMKilled", message=OOM, last_reported_at=SEEN,
    )  # fmt: skip
    PodInstance.objects.create(
        task=task, uid="uid-1", pod_name="train-actor-1", phase=PodPhase.RUNNING,
        restart_count=1, last_exit_code=137, termination_reason="OOMKilled",
        first_seen_at=NOW - timedelta(hours=1), last_seen_at=SEEN,
    )  # fmt: skip
    return job


@pytest.fixture
def viewer(bob: User, project: Project) -> User:
    Membership.objects.filter(user=bob, project=project).update(role=Membership.Role.VIEWER)
    return bob


def page(client: Client, user: User, url: str) -> str:
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200, url
    return response.content.decode()


def api(user: User, path: str) -> Any:
    token = ApiToken.issue(user, name="test")[1]
    response = Client().get(f"/api/v1{path}", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    return response.json()


def pages(job: Job) -> dict[str, str]:
    task = job.tasks.get()
    return {
        "job page": f"/jobs/{job.pk}/",
        "status fragment": f"/jobs/{job.pk}/?part=status",
        "list": "/jobs/",
        "workers": f"/jobs/{job.pk}/tasks/{task.pk}/workers/",
        "record": f"/jobs/{job.pk}/record/",
        "workflow": f"/workflows/{job.workflow_id}/",
        "dashboard": "/",
    }


def test_it_words_a_diagnostic_message_as_its_meaning_wherever_it_is_nested() -> None:
    """Store facts, render per reader: the stored message is the same for everyone."""
    withheld = withhold(Message("job.tasks", {"tasks": [Stored(TASK_MESSAGE)]}))
    assert isinstance(withheld, Message)
    stored = encode(withheld)
    assert "33" not in stored and "exit" not in stored and "crash_loop_meaning" in stored
    progress = Message("task.replicas_ready", {"ready": 1, "desired": 2})
    assert withhold(progress) == progress


@pytest.mark.parametrize("reader", ["alice", "viewer"])
def test_members_and_viewers_get_the_meaning_and_no_count_on_any_page(
    client: Client, job: Job, reader: str, request: pytest.FixtureRequest
) -> None:
    user = request.getfixturevalue(reader)
    for name, url in pages(job).items():
        html = page(client, user, url)
        assert FACTS not in html and "33 restarts" not in html, name
        assert not re.search(r"[Ee]xit code \d", html), name
        assert "OOMKilled" not in html and "uid-1" not in html, name
    assert MEANING in page(client, user, f"/jobs/{job.pk}/")
    workers = page(client, user, pages(job)["workers"])
    assert "Restarts" not in workers and "<strong>Terminated</strong>" in workers
    assert "its exit code and termination reason are for operators" in workers


def test_an_operator_sees_the_facts_everywhere(client: Client, job: Job, olga: User) -> None:
    assert FACTS in page(client, olga, f"/jobs/{job.pk}/")
    assert FACTS in page(client, olga, "/jobs/")
    workers = page(client, olga, pages(job)["workers"])
    assert "Restarts" in workers and "<strong>OOMKilled</strong>" in workers
    assert "Exit code 137 (OOMKilled)" in workers and "uid-1" in workers
    record = page(client, olga, pages(job)["record"])
    assert "restarts 1, exit code 137, termination reason OOMKilled" in record
    assert "reason OOMKilled" in record
    dashboard = page(client, olga, "/")
    assert "Restarted after an error: train-actor-1" not in dashboard  # OOM is named first
    assert "Out of memory (OOMKilled): train-actor-1" in dashboard


def test_the_api_gives_members_the_meaning_and_null_counts(
    job: Job, alice: User, olga: User
) -> None:
    mine = api(alice, f"/jobs/{job.pk}")
    (task,) = mine["tasks"]
    assert FACTS not in json.dumps(mine) and MEANING in mine["message"]
    problem = task["message_params"]["problem"]
    assert problem == {"code": "pod.crash_loop_meaning", "params": {"pod": "train-actor-0"}}
    assert [w["restart_count"] for w in task["workers"]] == [None, None]
    assert [w["reason"] for w in task["workers"]] == ["CrashLoopBackOff", "Terminated"]
    listed = api(alice, "/jobs")["results"][0]
    assert FACTS not in listed["message"]

    theirs = api(olga, f"/jobs/{job.pk}")
    assert FACTS in theirs["message"]
    assert theirs["tasks"][0]["message_params"]["problem"]["params"]["count"] == 33
    assert [w["restart_count"] for w in theirs["tasks"][0]["workers"]] == [33, 1]
    assert [w["reason"] for w in theirs["tasks"][0]["workers"]] == ["CrashLoopBackOff", "OOMKilled"]


def test_the_setting_opens_them_to_the_projects_members_not_its_viewers(
    client: Client, job: Job, alice: User, viewer: User, charlie: User, settings: Any
) -> None:
    settings.TRAINYARD_DIAGNOSTICS = "members"
    assert FACTS in page(client, alice, f"/jobs/{job.pk}/")
    assert "uid-1" in page(client, alice, pages(job)["workers"])
    assert api(alice, f"/jobs/{job.pk}")["tasks"][0]["workers"][0]["restart_count"] == 33
    assert FACTS not in page(client, viewer, f"/jobs/{job.pk}/")
    assert api(viewer, f"/jobs/{job.pk}")["tasks"][0]["workers"][0]["restart_count"] is None


def test_the_dashboard_names_a_restart_only_where_the_reader_sees_diagnostics(
    client: Client, job: Job, alice: User, settings: Any
) -> None:
    """A pod Running and ready again after an error is only known from its restart count."""
    Worker.objects.filter(pod_name="train-actor-1").update(ready=True, reason="", message="")
    PodInstance.objects.filter(uid="uid-1").update(last_exit_code=2, termination_reason="Error")
    Worker.objects.filter(pod_name="train-actor-0").delete()
    Task.objects.update(message="", ready_replicas=2)
    Job.objects.update(message="")
    assert 'data-job="train"' not in page(client, alice, "/")
    settings.TRAINYARD_DIAGNOSTICS = "members"
    assert "Restarted after an error: train-actor-1" in page(client, alice, "/")


def test_the_openapi_document_says_who_gets_restart_counts(client: Client, db: None) -> None:
    schemas = client.get("/api/v1/openapi.json").json()["components"]["schemas"]
    restart = schemas["WorkerOut"]["properties"]["restart_count"]
    assert {"type": "null"} in restart["anyOf"]
    assert "TRAINYARD_DIAGNOSTICS=members" in restart["description"]
    assert "Terminated" in schemas["WorkerOut"]["properties"]["reason"]["description"]
