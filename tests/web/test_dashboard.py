"""The dashboard: the user's Jobs by phase, clusters with reachability and sync age, and the Jobs
needing attention with the reason in words (spec §Troubleshooting a status that does not change)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from console.models import Cluster, Project
from console.views.dashboard import age_words
from jobs.choices import Action, JobPhase, PodPhase
from jobs.models import Job, Operation, Task
from workers.models import Worker

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
TASK = {"role": "worker", "kind": "StatefulSet", "replicas": 1, "image": "rlinf:1"}


@pytest.fixture(autouse=True)
def frozen_clock() -> object:
    with time_machine.travel(NOW, tick=False) as traveller:
        yield traveller


def make_job(
    project: Project, cluster: Cluster, name: str, phase: str = JobPhase.RUNNING, **fields: object
) -> Job:
    fields.setdefault("created_at", NOW - timedelta(minutes=1))
    fields.setdefault("observed_at", NOW - timedelta(seconds=2))
    return Job.objects.create(
        project=project,
        cluster=cluster,
        name=name,
        namespace="default",
        spec={"tasks": [TASK]},
        phase=phase,
        **fields,
    )


def make_worker(job: Job, pod: str, **fields: object) -> Worker:
    task, _ = Task.objects.get_or_create(job=job, role="worker", defaults={"template": TASK})
    fields.setdefault("phase", PodPhase.RUNNING)
    return Worker.objects.create(task=task, pod_name=pod, last_reported_at=NOW, **fields)


@pytest.fixture
def reachable(cluster: Cluster) -> Cluster:
    cluster.reachable = True
    cluster.last_synced_at = cluster.last_attempt_at = NOW - timedelta(seconds=7)
    cluster.save()
    return cluster


def page(client: Client, user: User, **headers: str) -> str:
    client.force_login(user)
    response = client.get("/", headers=headers)
    assert response.status_code == 200
    return response.content.decode()


def attention_row(html: str, job: str) -> str:
    match = re.search(rf'<tr data-job="{job}">(.*?)</tr>', html, re.S)
    assert match, f"{job} is not in the attention list"
    return match.group(1)


def test_it_sends_an_anonymous_visitor_to_the_login_page(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/"


def test_it_sends_an_anonymous_poll_to_the_login_page_too(client: Client) -> None:
    response = client.get("/?v=x", headers={"HX-Request": "true"})
    assert response.status_code == 302


def test_it_counts_the_users_jobs_by_phase_with_links_to_the_filtered_list(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    make_job(project, reachable, "a1")
    make_job(project, reachable, "a2")
    make_job(project, reachable, "a3", phase=JobPhase.SUCCEEDED)
    html = page(client, alice)
    for phase, count in [("Running", 2), ("Succeeded", 1), ("Pending", 0), ("Failed", 0)]:
        assert re.search(
            rf'href="/jobs/\?phase={phase}" data-phase="{phase}">'
            rf'.*?<span class="count">{count}</span>',
            html,
            re.S,
        ), phase


def test_it_counts_no_job_of_another_project_for_an_outsider(
    client: Client, alice: User, charlie: User, reachable: Cluster, project: Project
) -> None:
    make_job(
        project, reachable, "secret", phase=JobPhase.PENDING, created_at=NOW - timedelta(hours=1)
    )
    html = page(client, charlie)
    assert "secret" not in html
    assert re.search(r'data-phase="Pending">.*?<span class="count">0</span>', html, re.S)


def test_it_shows_each_cluster_with_reachability_and_sync_age(
    client: Client, alice: User, reachable: Cluster
) -> None:
    Cluster.objects.create(
        name="gpu-b",
        kubeconfig="secret-kubeconfig",
        reachable=False,
        message="connection refused",
        last_synced_at=NOW - timedelta(minutes=5),
    )
    html = page(client, alice)
    gpu_a = re.search(r'<tr data-cluster="gpu-a">(.*?)</tr>', html, re.S).group(1)  # type: ignore[union-attr]
    gpu_b = re.search(r'<tr data-cluster="gpu-b">(.*?)</tr>', html, re.S).group(1)  # type: ignore[union-attr]
    assert "reachable" in gpu_a and "last synced under 10 s ago" in gpu_a and "stale" not in gpu_a
    assert "unreachable" in gpu_b and "last synced 5 min ago" in gpu_b
    assert 'class="stale"' in gpu_b and "connection refused" in gpu_b
    assert "secret-kubeconfig" not in html


def test_it_lists_a_job_stuck_pending_past_the_threshold(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    make_job(
        project, reachable, "stuck", phase=JobPhase.PENDING, created_at=NOW - timedelta(minutes=25)
    )
    make_job(
        project, reachable, "fresh", phase=JobPhase.PENDING, created_at=NOW - timedelta(minutes=3)
    )
    html = page(client, alice)
    row = attention_row(html, "stuck")
    assert "Pending for 25 minutes" in row and 'href="/jobs/' in row
    assert 'data-job="fresh"' not in html


def test_it_counts_pending_from_the_last_resume_not_from_creation(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    job = make_job(
        project, reachable, "resumed", phase=JobPhase.PENDING, created_at=NOW - timedelta(days=2)
    )
    Operation.objects.create(
        job=job,
        job_name=job.name,
        project=project,
        user=alice,
        action=Action.RESUME,
        result=Operation.Result.APPLIED,
        requested_at=NOW - timedelta(minutes=2),
    )
    assert 'data-job="resumed"' not in page(client, alice)


@pytest.mark.parametrize(
    ("worker", "words"),
    [
        (
            {"reason": "CrashLoopBackOff", "restart_count": 4},
            [
                "1 pod is crash-looping or erroring (CrashLoopBackOff).",
                "Containers restarted 4 times.",
            ],
        ),
        (
            {"reason": "OOMKilled", "restart_count": 1},
            ["1 pod is crash-looping or erroring (OOMKilled).", "Containers restarted 1 time."],
        ),
        ({"phase": PodPhase.FAILED, "reason": "Evicted"}, ["1 pod failed."]),
        ({"restart_count": 2}, ["Containers restarted 2 times."]),
    ],
)
def test_it_lists_a_running_job_with_crash_looping_or_failed_pods(
    client: Client,
    alice: User,
    reachable: Cluster,
    project: Project,
    worker: dict[str, object],
    words: list[str],
) -> None:
    job = make_job(project, reachable, "crashy")
    make_worker(job, "crashy-worker-0", **worker)
    make_worker(job, "crashy-worker-1")
    row = attention_row(page(client, alice), "crashy")
    for sentence in words:
        assert sentence in row


def test_it_names_every_crash_reason_and_counts_the_pods(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    job = make_job(project, reachable, "crashy")
    for index, reason in enumerate(["CrashLoopBackOff", "CrashLoopBackOff", "Error"]):
        make_worker(job, f"crashy-worker-{index}", reason=reason, restart_count=1)
    row = attention_row(page(client, alice), "crashy")
    assert "3 pods are crash-looping or erroring (CrashLoopBackOff, Error)." in row
    assert "Containers restarted 3 times." in row


def test_it_leaves_out_a_healthy_running_job_and_a_stopped_one_with_old_restarts(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    make_worker(make_job(project, reachable, "healthy"), "healthy-worker-0")
    make_worker(
        make_job(project, reachable, "parked", phase=JobPhase.STOPPED), "parked-0", restart_count=3
    )
    html = page(client, alice)
    assert 'data-job="healthy"' not in html and 'data-job="parked"' not in html
    assert "Nothing needs attention" in html


def test_it_lists_a_job_whose_status_is_stale(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    """The cluster answers the last attempt, but no sync has succeeded for too long."""
    old = NOW - timedelta(seconds=settings.TRAINYARD_STALE_AFTER + 60)
    Cluster.objects.filter(pk=reachable.pk).update(last_synced_at=old)
    make_job(project, reachable, "old-news", observed_at=old, created_at=old - timedelta(hours=1))
    make_job(project, reachable, "done", phase=JobPhase.SUCCEEDED, observed_at=old)
    html = page(client, alice)
    assert "Stale status: last observed 90 s ago." in attention_row(html, "old-news")
    assert 'data-job="done"' not in html


def test_it_counts_an_unchanged_job_as_confirmed_by_every_sync_of_its_cluster(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    """The sync writes a Job only when it changed: its cluster's last sync also observed it."""
    make_job(
        project,
        reachable,
        "steady",
        observed_at=NOW - timedelta(days=3),
        created_at=NOW - timedelta(days=4),
    )
    assert 'data-job="steady"' not in page(client, alice)


def test_it_lists_a_job_never_observed_long_after_creation(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    created = NOW - timedelta(minutes=5)
    Cluster.objects.filter(pk=reachable.pk).update(last_synced_at=created - timedelta(minutes=1))
    make_job(
        project, reachable, "unseen", phase=JobPhase.PENDING, observed_at=None, created_at=created
    )
    assert "No sync has observed this job yet." in attention_row(page(client, alice), "unseen")


def test_it_leaves_out_a_job_created_since_the_last_sync(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    make_job(
        project,
        reachable,
        "brand-new",
        phase=JobPhase.PENDING,
        observed_at=None,
        created_at=NOW - timedelta(seconds=2),
    )
    assert 'data-job="brand-new"' not in page(client, alice)


def test_it_lists_every_live_job_of_an_unreachable_cluster(
    client: Client, alice: User, cluster: Cluster, project: Project
) -> None:
    make_job(project, cluster, "cut-off")
    row = attention_row(page(client, alice), "cut-off")
    assert "Cluster gpu-a is unreachable: the status shown is the last one observed." in row


def test_it_hides_the_attention_list_of_other_projects(
    client: Client, alice: User, charlie: User, cluster: Cluster, project: Project
) -> None:
    make_job(project, cluster, "cut-off")
    assert 'data-job="cut-off"' not in page(client, charlie)


def poll_url(html: str) -> str:
    match = re.search(r'id="board"[^>]*hx-get="([^"]+)"', html)
    assert match
    return match.group(1).replace("&amp;", "&")


def test_it_refreshes_the_board_as_a_fragment_that_polls_while_visible(
    client: Client, alice: User, reachable: Cluster
) -> None:
    html = page(client, alice, **{"HX-Request": "true"})
    assert not html.lstrip().startswith("<!doctype")
    assert html.lstrip().startswith('<div id="board"')
    assert 'hx-trigger="every 5s, refresh"' in html and "data-poll" in html


def test_it_answers_204_when_nothing_shown_changed(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    make_job(
        project, reachable, "stuck", phase=JobPhase.PENDING, created_at=NOW - timedelta(minutes=25)
    )
    url = poll_url(page(client, alice))
    response = client.get(url, headers={"HX-Request": "true"})
    assert response.status_code == 204
    assert response.content == b""


def test_it_answers_a_fresh_fragment_once_something_shown_changed(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    url = poll_url(page(client, alice))
    make_job(project, reachable, "new")
    response = client.get(url, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert poll_url(response.content.decode()) != url


def test_it_answers_a_fresh_fragment_only_once_the_sync_age_shown_changes(
    client: Client, alice: User, reachable: Cluster, frozen_clock: time_machine.Traveller
) -> None:
    """Synced 7 s ago, then 9 s: still "under 10 s ago" (204); at 12 s it reads "10 s ago"."""
    url = poll_url(page(client, alice))
    frozen_clock.shift(timedelta(seconds=2))
    assert client.get(url, headers={"HX-Request": "true"}).status_code == 204
    frozen_clock.shift(timedelta(seconds=3))
    response = client.get(url, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert "last synced 10 s ago" in response.content.decode()


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(0, "under 10 s ago"), (9.9, "under 10 s ago"), (10, "10 s ago"), (119, "110 s ago"),
     (120, "2 min ago"), (7199, "119 min ago"), (7200, "2 h ago"), (172800, "2 d ago")],
)  # fmt: skip
def test_it_words_an_age_in_steps_that_change_only_when_it_moved_on(
    seconds: float, words: str
) -> None:
    assert age_words(NOW - timedelta(seconds=seconds), NOW) == words
    assert age_words(None, NOW) == "never"


def test_it_renders_the_full_page_without_javascript_even_with_a_version(
    client: Client, alice: User, reachable: Cluster
) -> None:
    url = poll_url(page(client, alice))
    response = client.get(url)
    assert response.status_code == 200
    assert b"<!doctype html>" in response.content


def _queries(client: Client) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get("/").status_code == 200
    return len(captured)


def test_it_uses_the_same_number_of_queries_for_3_and_30_jobs_needing_attention(
    client: Client, alice: User, cluster: Cluster, project: Project
) -> None:
    """Counts are aggregated, the attention list is one query and one grouped Worker query."""
    client.force_login(alice)

    def add(first: int, count: int) -> None:
        for index in range(first, first + count):
            job = make_job(project, cluster, f"job-{index}", created_at=NOW - timedelta(hours=1))
            make_worker(job, f"job-{index}-worker-0", reason="CrashLoopBackOff", restart_count=2)
            Cluster.objects.create(name=f"extra-{index}", kubeconfig="x")

    add(0, 3)
    small = _queries(client)
    add(3, 27)
    assert _queries(client) == small
    html = client.get("/").content.decode()
    assert html.count('<tr data-job="job-') == 30
