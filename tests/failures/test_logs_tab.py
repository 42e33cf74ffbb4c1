"""The Logs tab reads both (issue 34, item 2): the live pods as before, and every container run
the console kept, with search, download and line numbers; a run of a pod it saw and did not
keep says "not kept". Kept logs and previous containers are diagnostics (spec §Pod and Worker
status: "previous logs ... are checked by authorised operators"; jobs.diagnostics): operators,
or members where TRAINYARD_DIAGNOSTICS=members; outsiders get 404."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from console.models import Cluster, Project
from failures import store
from failures.models import KeptLog
from jobs.choices import JobPhase, PodPhase, TaskPhase
from jobs.models import Job, Task
from workers.models import PodInstance

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
TEXT = (
    "2026-03-02T03:11:58.000000001Z step 41 loss 0.52\n"
    "2026-03-02T03:12:07.000000001Z torch.OutOfMemoryError: CUDA out of memory\n"
    "2026-03-02T03:12:08.000000001Z killed by ray.kill\n"
)


@pytest.fixture(autouse=True)
def kept_in_tmp(settings: Any, tmp_path: Path) -> None:
    settings.STORAGES = {
        **settings.STORAGES,
        "kept_logs": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path)},
        },
    }


@pytest.fixture
def job(project: Project, cluster: Cluster, alice: User) -> Job:
    """A Failed Job whose worker restarted twice: its second run (restart 1) was kept."""
    job = Job.objects.create(
        project=project, cluster=cluster, name="train", namespace="default", owner=alice,
        spec={"tasks": []}, phase=JobPhase.FAILED,
    )  # fmt: skip
    task = Task.objects.create(job=job, role="worker", template={}, phase=TaskPhase.FAILED)
    PodInstance.objects.create(
        task=task, uid="uid-1", pod_name="train-worker-0", phase=PodPhase.RUNNING,
        restart_count=2, first_seen_at=NOW - timedelta(hours=1), last_seen_at=NOW,
    )  # fmt: skip
    tail = store.Tail("train-worker-0", "uid-1", "main", 1, TEXT, False)
    store.save(job, KeptLog.Why.RESTART, [tail], NOW)
    return job


def get(user: User, url: str) -> Any:
    client = Client()
    client.force_login(user)
    return client.get(url)


def text_of(response: Any) -> str:
    assert response.status_code == 200
    body = re.sub(r"<[^>]+>", " ", response.content.decode())
    return " ".join(html.unescape(body).split())


def test_it_lists_every_run_kept_or_not_for_an_operator(olga: User, job: Job) -> None:
    kept = KeptLog.objects.get()
    text = text_of(get(olga, f"/jobs/{job.pk}/logs/"))
    assert "Kept logs of earlier runs" in text
    # Restart 1 kept (run 1, because the container restarted); restart 0 was not.
    assert "train-worker-0 main 1 1" in text and "the container restarted" in text
    assert "train-worker-0 main not kept 0 — not kept not kept" in text
    assert "Kept logs of earlier runs operators " in text
    assert (
        f'href="/jobs/{job.pk}/logs/?kept={kept.pk}"'
        in get(olga, f"/jobs/{job.pk}/logs/").content.decode()
    )


def test_it_shows_a_kept_log_with_line_numbers_and_search(olga: User, job: Job) -> None:
    kept = KeptLog.objects.get()
    body = get(olga, f"/jobs/{job.pk}/logs/?kept={kept.pk}&q=cuda").content.decode()
    assert '<span class="log-line" id="L2" data-n="2">' in body
    assert '<span class="log-line" id="L1" data-n="1" hidden>' in body
    text = text_of(get(olga, f"/jobs/{job.pk}/logs/?kept={kept.pk}"))
    assert "Kept log · train-worker-0 / main · run 1, restart 1" in text
    assert "kept because the container restarted" in text and "3 lines" in text
    download = get(olga, f"/jobs/{job.pk}/logs/download/?kept={kept.pk}")
    assert download.status_code == 200 and download.content.decode() == TEXT
    assert 'filename="train-worker-0-main-run1-restart1.log"' in download["Content-Disposition"]


def test_it_never_gives_a_member_a_kept_or_previous_log(alice: User, job: Job) -> None:
    kept = KeptLog.objects.get()
    page = text_of(get(alice, f"/jobs/{job.pk}/logs/"))
    assert "Kept logs of earlier runs" not in page and "not kept" not in page
    assert get(alice, f"/jobs/{job.pk}/logs/?kept={kept.pk}").status_code == 403
    assert get(alice, f"/jobs/{job.pk}/logs/download/?kept={kept.pk}").status_code == 403
    assert (
        "CUDA" not in get(alice, f"/jobs/{job.pk}/logs/download/?kept={kept.pk}").content.decode()
    )


def test_it_gives_members_kept_logs_where_diagnostics_are_open_to_them(
    alice: User, job: Job, settings: Any
) -> None:
    settings.TRAINYARD_DIAGNOSTICS = "members"
    kept = KeptLog.objects.get()
    assert "CUDA out of memory" in text_of(get(alice, f"/jobs/{job.pk}/logs/?kept={kept.pk}"))
    assert get(alice, f"/jobs/{job.pk}/logs/download/?kept={kept.pk}").content.decode() == TEXT
    page = text_of(get(alice, f"/jobs/{job.pk}/logs/"))
    assert "Kept logs of earlier runs operators and project members " in page


def test_it_hides_kept_logs_from_outsiders_and_other_jobs(
    charlie: User, olga: User, job: Job, other_project: Project, cluster: Cluster
) -> None:
    kept = KeptLog.objects.get()
    for url in (
        f"/jobs/{job.pk}/logs/?kept={kept.pk}",
        f"/jobs/{job.pk}/logs/download/?kept={kept.pk}",
    ):
        assert get(charlie, url).status_code == 404
    other = Job.objects.create(
        project=other_project, cluster=cluster, name="other", namespace="default",
        spec={"tasks": []}, phase=JobPhase.FAILED,
    )  # fmt: skip
    assert get(olga, f"/jobs/{other.pk}/logs/?kept={kept.pk}").status_code == 404
    assert get(olga, f"/jobs/{other.pk}/logs/download/?kept={kept.pk}").status_code == 404
    assert get(olga, f"/jobs/{job.pk}/logs/?kept=x").status_code == 404
