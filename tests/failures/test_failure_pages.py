"""Why a run failed, where it shows (issue 34, item 5): the banner at the top of the Job page,
a short label in the Jobs list and on the dashboard's attention list. Members see the label,
class and advice; the log line and the link to it in the kept log follow the diagnostics rule
(spec §Pod and Worker status; jobs.diagnostics). Words say Failed or Failing, never a colour."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from console.models import Cluster, Project
from failures.models import Finding, KeptLog, Signature
from jobs.choices import JobPhase
from jobs.models import Job

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
AT = datetime(2026, 3, 2, 3, 12, 7, tzinfo=UTC)
LINE = "torch.distributed.DistBackendError: [Rank 2] Watchdog caught collective operation timeout"
BANNER = "NCCL timeout (network/collective) on train-worker-2 at 03:12"


@pytest.fixture(autouse=True)
def frozen_clock() -> Iterator[None]:
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def job(project: Project, cluster: Cluster, alice: User) -> Job:
    job = Job.objects.create(
        project=project, cluster=cluster, name="train", namespace="default", owner=alice,
        spec={"tasks": []}, phase=JobPhase.FAILED, created_at=NOW - timedelta(hours=7),
    )  # fmt: skip
    kept = KeptLog.objects.create(
        project=project, job=job, job_name="train", run=1, pod_name="train-worker-2",
        pod_uid="uid-2", container="main", attempt=0, why=KeptLog.Why.FAILED, name="x.log.gz",
    )  # fmt: skip
    Finding.objects.create(
        job=job, run=1, code="nccl_timeout", label="NCCL timeout",
        failure_class="network/collective", first_error=LINE, raised_at="trainer.py:218",
        pod_name="train-worker-2", container="main", attempt=0, line_number=41, at=AT,
        kept_log=kept,
    )  # fmt: skip
    return job


def read(user: User, url: str, language: str = "en") -> str:
    client = Client(headers={"Accept-Language": language})
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200, url
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def page(user: User, job: Job, language: str = "en") -> str:
    return read(user, f"/jobs/{job.pk}/", language)


def test_it_names_the_failure_and_its_advice_to_a_member_without_the_log_line(
    alice: User, job: Job
) -> None:
    text = page(alice, job)
    assert f"Failed: {BANNER}" in text
    assert "What to do: A collective (all-reduce, broadcast, ...) did not finish in time" in text
    assert "Watchdog caught" not in text and "trainer.py:218" not in text
    assert "Open the line in the kept log" not in text
    assert "The log line itself is a diagnostic, shown to operators" in text


def test_it_shows_an_operator_the_first_error_and_links_to_its_line(olga: User, job: Job) -> None:
    text = page(olga, job)
    assert f"Failed: {BANNER} — first error: {LINE} (trainer.py:218)" in text
    client = Client()
    client.force_login(olga)
    body = client.get(f"/jobs/{job.pk}/").content.decode()
    kept = job.kept_logs.get()
    assert f'href="/jobs/{job.pk}/logs/?kept={kept.pk}#L41" id="failure-log-link"' in body


def test_it_shows_members_the_line_where_diagnostics_are_open_to_them(
    alice: User, job: Job, settings: Any
) -> None:
    settings.TRAINYARD_DIAGNOSTICS = "members"
    assert f"— first error: {LINE}" in page(alice, job)


def test_it_says_failing_while_the_job_runs_failed_once_stopped_nothing_once_succeeded(
    alice: User, job: Job
) -> None:
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.RUNNING)
    assert f"Failing: {BANNER}" in page(alice, job)
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.STOPPED, stopped=True)
    assert f"Failed: {BANNER}" in page(alice, job)
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.SUCCEEDED)
    assert "NCCL timeout" not in page(alice, job)


def test_it_names_the_failure_in_chinese(alice: User, job: Job) -> None:
    text = page(alice, job, "zh-CN")
    assert "失败： NCCL 超时（网络/集合通信），在 train-worker-2 上，03:12" in text
    assert "怎么办：" in text


def test_it_gives_a_short_label_in_the_jobs_list_and_the_attention_list(
    alice: User, job: Job
) -> None:
    """The dashboard lists a Failed Job until a member opens its page: read it first."""
    assert "Why: NCCL timeout (network/collective)" in read(alice, "/")
    assert "Why: NCCL timeout (network/collective)" in read(alice, "/jobs/")
    assert "原因：NCCL 超时（网络/集合通信）" in read(alice, "/jobs/", "zh-CN")


def test_it_hides_another_projects_failure(charlie: User, job: Job) -> None:
    client = Client()
    client.force_login(charlie)
    assert client.get(f"/jobs/{job.pk}/").status_code == 404
    assert "NCCL" not in read(charlie, "/jobs/") and "NCCL" not in read(charlie, "/")


def test_it_labels_by_an_operators_signature_in_their_words_without_a_query_per_job(
    alice: User, job: Job, project: Project, cluster: Cluster
) -> None:
    Signature.objects.create(
        code="comm_aborted", label="Communicator aborted", label_zh="通信器中止",
        failure_class="network/collective", pattern="communicator was aborted",
    )  # fmt: skip

    def more(count: int) -> None:
        for n in range(count):
            other = Job.objects.create(
                project=project, cluster=cluster, name=f"more-{Job.objects.count()}-{n}",
                namespace="default", spec={"tasks": []}, phase=JobPhase.FAILED,
            )  # fmt: skip
            Finding.objects.create(
                job=other, run=1, code="comm_aborted", label="Communicator aborted",
                failure_class="network/collective",
            )  # fmt: skip

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            text = read(alice, "/jobs/")
        assert "Why: Communicator aborted (network/collective)" in text
        return len(captured)

    more(1)
    few = queries()
    more(5)
    assert queries() == few
    assert "原因：通信器中止（网络/集合通信）" in read(alice, "/jobs/", "zh-CN")
