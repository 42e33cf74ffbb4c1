"""The `failure` object on the API's Job (issue 34, item 5): the label, class and advice for the
Job's readers; the log line itself and where it was raised only for readers who see diagnostics
(spec §Pod and Worker status; jobs.diagnostics); nothing once the run Succeeded."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from console.models import ApiToken, Cluster, Project
from failures.models import Finding
from jobs.choices import JobPhase
from jobs.models import Job

AT = datetime(2026, 3, 2, 3, 12, 7, tzinfo=UTC)
LINE = "torch.distributed.DistBackendError: [Rank 2] Watchdog caught collective operation timeout"


@pytest.fixture
def job(project: Project, cluster: Cluster, alice: User) -> Job:
    job = Job.objects.create(
        project=project, cluster=cluster, name="train", namespace="default", owner=alice,
        spec={"tasks": []}, phase=JobPhase.FAILED, run=2,
    )  # fmt: skip
    Finding.objects.create(
        job=job, run=2, code="nccl_timeout", label="NCCL timeout",
        failure_class="network/collective", first_error=LINE, raised_at="trainer.py:218",
        pod_name="train-worker-2", container="main", attempt=0, line_number=41, at=AT,
    )  # fmt: skip
    Finding.objects.create(
        job=job, run=1, code="cuda_oom", label="old", failure_class="out of memory"
    )
    return job


def failure_of(user: User, job: Job, language: str = "en") -> Any:
    token = ApiToken.issue(user, name="test")[1]
    response = Client().get(
        f"/api/v1/jobs/{job.pk}",
        headers={"Authorization": f"Bearer {token}", "Accept-Language": language},
    )
    assert response.status_code == 200
    listed = Client().get("/api/v1/jobs", headers={"Authorization": f"Bearer {token}"})
    assert listed.json()["results"][0]["failure"] == response.json()["failure"] or language != "en"
    return response.json()["failure"]


def test_it_gives_a_member_the_label_class_and_advice_but_not_the_log_line(
    alice: User, job: Job
) -> None:
    failure = failure_of(alice, job)
    assert failure["label"] == "NCCL timeout" and failure["class"] == "network/collective"
    assert failure["advice"].startswith("A collective (all-reduce")
    where = (failure["pod"], failure["container"], failure["attempt"])
    assert where == ("train-worker-2", "main", 0)
    assert failure["at"] == "2026-03-02T03:12:07Z"
    assert failure["first_error"] is None and failure["raised_at"] is None


def test_it_gives_an_operator_the_first_error_and_where_it_was_raised(olga: User, job: Job) -> None:
    failure = failure_of(olga, job)
    assert failure["first_error"] == LINE and failure["raised_at"] == "trainer.py:218"


def test_it_gives_members_the_line_where_diagnostics_are_open_to_them(
    alice: User, job: Job, settings: Any
) -> None:
    settings.TRAINYARD_DIAGNOSTICS = "members"
    assert failure_of(alice, job)["first_error"] == LINE


def test_it_words_a_shipped_signature_in_chinese(alice: User, job: Job) -> None:
    failure = failure_of(alice, job, "zh-CN")
    assert failure["label"] == "NCCL 超时" and failure["class"] == "network/collective"


def test_it_names_no_failure_for_a_run_that_succeeded_or_was_never_judged(
    alice: User, job: Job
) -> None:
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.SUCCEEDED)
    assert failure_of(alice, job) is None
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.RUNNING, run=3)
    assert failure_of(alice, job) is None


def test_it_hides_another_projects_job_and_its_failure(charlie: User, job: Job) -> None:
    token = ApiToken.issue(charlie, name="test")[1]
    response = Client().get(f"/api/v1/jobs/{job.pk}", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 404 and b"NCCL" not in response.content
