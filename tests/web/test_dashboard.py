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
from django.utils import translation

from console.models import Cluster, Membership, Node, Project
from console.web import age_words_in_steps as age_words
from jobs.choices import Action, JobPhase, PodPhase, TaskKind, TaskPhase
from jobs.messages import encode, kubernetes
from jobs.models import Job, Operation, Task
from jobs.status.troubleshoot import Problem
from workers.models import PodInstance, Worker

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
    fields.setdefault("ready", fields["phase"] == PodPhase.RUNNING and not fields.get("reason"))
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
    assert response.status_code == 200  # HX-Redirect: the whole page goes (console/sessions.py)
    assert response["HX-Redirect"].startswith("/accounts/login/?next=")


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
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    far = Cluster.objects.create(
        name="gpu-b",
        kubeconfig="secret-kubeconfig",
        reachable=False,
        message="connection refused",
        last_synced_at=NOW - timedelta(minutes=5),
    )
    project.clusters.add(far)
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


PENDING_POD = {"phase": PodPhase.PENDING, "ready": False}


@pytest.mark.parametrize(
    ("worker", "problem"),
    [
        ({**PENDING_POD, "reason": "ImagePullBackOff", "message": "Back-off pulling image"},
         Problem.IMAGE_PULL),
        ({**PENDING_POD, "reason": "ErrImagePull", "message": "manifest unknown"},
         Problem.IMAGE_PULL),
        ({"ready": False, "reason": "CrashLoopBackOff", "restart_count": 4}, Problem.CRASH_LOOP),
        ({"ready": False, "reason": "OOMKilled", "restart_count": 1}, Problem.OUT_OF_MEMORY),
        ({**PENDING_POD, "reason": "Unschedulable",
          "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."},
         Problem.UNSCHEDULABLE),
        ({**PENDING_POD, "reason": "CreateContainerConfigError", "message": "no secret s3"},
         Problem.CONFIG_ERROR),
        ({"phase": PodPhase.FAILED, "ready": False, "reason": "Evicted"}, Problem.EVICTED),
        ({"phase": PodPhase.FAILED, "ready": False}, Problem.POD_FAILED),
        ({"reason": "NodeNotReady", "message": "Node node-1 is not ready"}, Problem.NODE_OFFLINE),
    ],
)  # fmt: skip
def test_it_lists_a_job_as_soon_as_a_known_problem_is_observed_in_the_panels_words(
    client: Client,
    alice: User,
    reachable: Cluster,
    project: Project,
    worker: dict[str, object],
    problem: Problem,
) -> None:
    """Seconds after creation, not after 10 minutes Pending, and with the very words of the job
    page's troubleshooting panel (spec §Troubleshooting a status that does not change)."""
    job = make_job(
        project, reachable, "sick", phase=JobPhase.PENDING, created_at=NOW - timedelta(seconds=5)
    )
    make_worker(job, "sick-worker-0", **worker)
    make_worker(job, "sick-worker-1")
    row = attention_row(page(client, alice), "sick")
    words = f"{problem.label}: sick-worker-0"
    assert words in row and "sick-worker-1" not in row
    assert "Pending for" not in row
    panel = client.get(f"/jobs/{job.pk}/").content.decode()
    assert re.search(rf"<strong>{re.escape(str(problem.label))}</strong>: sick-worker-0\b", panel)


def test_it_quotes_what_kubernetes_said_beside_the_panels_words(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    job = make_job(project, reachable, "pull", phase=JobPhase.PENDING)
    make_worker(job, "pull-worker-0", **PENDING_POD, reason="ImagePullBackOff",
                message='Back-off pulling image "rlinf:typo"')  # fmt: skip
    row = attention_row(page(client, alice), "pull")
    assert "Image cannot be pulled: pull-worker-0" in row
    assert "ImagePullBackOff · Back-off pulling image &quot;rlinf:typo&quot;" in row


def test_it_words_the_messages_the_sync_stores_as_codes(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    """The sync stores its messages as a code plus parameters (jobs.messages): the attention
    list shows them worded, never in their stored form."""
    job = make_job(project, reachable, "pull", phase=JobPhase.PENDING)
    stored = encode(kubernetes('Back-off pulling image "rlinf:typo"'))
    make_worker(job, "pull-worker-0", **PENDING_POD, reason="ImagePullBackOff", message=stored)
    row = attention_row(page(client, alice), "pull")
    assert "ImagePullBackOff · Back-off pulling image &quot;rlinf:typo&quot;" in row
    assert "&quot;c&quot;" not in row and '"c"' not in row


def test_it_words_a_problem_in_chinese_exactly_as_the_panel_does(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    job = make_job(project, reachable, "pull", phase=JobPhase.PENDING)
    make_worker(job, "pull-0", **PENDING_POD, reason="ImagePullBackOff")
    for index in range(1, 7):
        make_worker(job, f"pull-{index}", **PENDING_POD, reason="ErrImagePull")
    with translation.override("zh-hans"):
        label = str(Problem.IMAGE_PULL.label)
    assert label != "Image cannot be pulled"
    client.force_login(alice)
    chinese = {"Accept-Language": "zh-hans"}
    row = attention_row(client.get("/", headers=chinese).content.decode(), "pull")
    assert f"{label}: pull-0, pull-1, pull-2, pull-3, pull-4 等另外 2 个" in row
    panel = client.get(f"/jobs/{job.pk}/", headers=chinese).content.decode()
    assert f"<strong>{label}</strong>: pull-0, pull-1, pull-2, pull-3, pull-4 等另外 2 个" in panel


def test_it_names_a_few_pods_with_the_same_problem_and_counts_the_rest(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    job = make_job(project, reachable, "crashy")
    for index in range(7):
        make_worker(job, f"crashy-{index}", ready=False, reason="CrashLoopBackOff", restart_count=1)
    row = attention_row(page(client, alice), "crashy")
    assert "Crash loop: crashy-0, crashy-1, crashy-2, crashy-3, crashy-4 and 2 more" in row


def test_it_waits_for_one_reconciliation_before_calling_a_starting_pod_not_ready(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    """Spec §Troubleshooting: wait for one normal reconciliation first (the panel's patience)."""
    young = make_job(project, reachable, "young", created_at=NOW - timedelta(seconds=5))
    make_worker(young, "young-0", ready=False)
    make_worker(young, "young-1", reason="ContainerCreating", phase=PodPhase.PENDING)
    old = make_job(project, reachable, "older", created_at=NOW - timedelta(minutes=5))
    make_worker(old, "older-0", ready=False)
    html = page(client, alice)
    assert 'data-job="young"' not in html
    assert "Not ready: older-0" in attention_row(html, "older")


def test_it_shows_restart_details_only_to_an_operator_as_the_panel_does(
    client: Client, alice: User, olga: User, reachable: Cluster, project: Project
) -> None:
    """Spec §Where to look: restart counts and termination reasons are for operators."""
    Membership.objects.create(user=olga, project=project)
    job = make_job(project, reachable, "restarted")
    worker = make_worker(job, "restarted-0", restart_count=2, pod_uid="uid-1")
    PodInstance.objects.create(
        task=worker.task, uid="uid-1", pod_name="restarted-0", phase=PodPhase.RUNNING,
        restart_count=2, last_exit_code=1, first_seen_at=NOW, last_seen_at=NOW,
    )  # fmt: skip
    assert 'data-job="restarted"' not in page(client, alice)
    row = attention_row(page(client, olga), "restarted")
    assert "Restarted after an error: restarted-0" in row and "2 restarts" in row


def failed_job(project: Project, cluster: Cluster, name: str = "broke", **fields: object) -> Job:
    job = make_job(project, cluster, name, phase=JobPhase.FAILED, **fields)
    Task.objects.create(
        job=job, role="eval", kind=TaskKind.JOB, template=TASK, phase=TaskPhase.FAILED,
        message="BackoffLimitExceeded", observed_at=NOW,
    )  # fmt: skip
    return job


def test_it_lists_a_failed_job_until_a_member_opens_its_page(
    client: Client, alice: User, bob: User, reachable: Cluster, project: Project
) -> None:
    """Spec §Job status: after a failure, save logs and outputs, fix, clone: someone must look."""
    job = failed_job(project, reachable)
    row = attention_row(page(client, alice), "broke")
    assert "Failed, and no member of the project has opened it since" in row
    assert "Task failed: eval" in row and "BackoffLimitExceeded" in row
    assert client.get(f"/jobs/{job.pk}/").status_code == 200  # alice, a member, looks
    job.refresh_from_db()
    assert job.failure_seen_at == NOW and job.failure_seen_by == alice
    assert 'data-job="broke"' not in page(client, bob)
    client.force_login(bob)
    client.get(f"/jobs/{job.pk}/")
    job.refresh_from_db()
    assert job.failure_seen_by == alice  # the first look is kept


def test_it_keeps_listing_a_failed_job_that_only_a_viewer_opened(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    viewer = User.objects.create_user("vera")
    Membership.objects.create(user=viewer, project=project, role=Membership.Role.VIEWER)
    job = failed_job(project, reachable)
    client.force_login(viewer)
    assert client.get(f"/jobs/{job.pk}/").status_code == 200
    job.refresh_from_db()
    assert job.failure_seen_at is None
    assert 'data-job="broke"' in page(client, alice)


def test_it_records_no_look_from_an_outsider(
    client: Client, alice: User, charlie: User, reachable: Cluster, project: Project
) -> None:
    job = failed_job(project, reachable)
    client.force_login(charlie)
    assert client.get(f"/jobs/{job.pk}/").status_code == 404
    job.refresh_from_db()
    assert job.failure_seen_at is None


def test_it_stops_listing_a_failed_job_once_it_was_cloned(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    job = failed_job(project, reachable)
    make_job(project, reachable, "broke-2", cloned_from=job)
    html = page(client, alice)
    assert 'data-job="broke"' not in html


def test_it_does_not_list_a_succeeded_job(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    make_job(project, reachable, "done", phase=JobPhase.SUCCEEDED)
    assert 'data-job="done"' not in page(client, alice)


def test_it_gives_the_same_answer_in_the_page_and_in_the_polled_fragment(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    failed_job(project, reachable)
    pulling = make_job(project, reachable, "pull", phase=JobPhase.PENDING)
    make_worker(pulling, "pull-0", **PENDING_POD, reason="ErrImagePull", message="not found")
    full = page(client, alice)
    fragment = page(client, alice, **{"HX-Request": "true"})

    def attention(html: str) -> str:
        match = re.search(r'<section aria-labelledby="attention-title">.*?</section>', html, re.S)
        assert match
        return match.group(0)

    assert attention(full) == attention(fragment)
    assert 'data-job="broke"' in fragment and "Image cannot be pulled: pull-0" in fragment


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


def add_troubled_jobs(project: Project, cluster: Cluster, first: int, count: int) -> None:
    """Jobs with every kind of trouble: pods crash-looping, pulling, pending on an Offline node,
    restarted (for operators), a Failed job nobody opened, an unreachable cluster, ..."""
    Node.objects.get_or_create(
        cluster=cluster, name="node-1", defaults={"phase": Node.Phase.OFFLINE, "observed_at": NOW}
    )
    for index in range(first, first + count):
        name = f"job-{index}"
        if index % 4 == 3:
            failed_job(project, cluster, name)
            continue
        job = make_job(project, cluster, name, created_at=NOW - timedelta(hours=1))
        make_worker(job, f"{name}-0", ready=False, reason="CrashLoopBackOff", restart_count=2,
                    pod_uid=f"uid-{index}")  # fmt: skip
        make_worker(job, f"{name}-1", **PENDING_POD, reason="ImagePullBackOff")
        make_worker(job, f"{name}-2", node_name="node-1", restart_count=1)
        Cluster.objects.create(name=f"extra-{index}", kubeconfig="x")


@pytest.mark.parametrize("user", ["alice", "olga"])
def test_it_uses_the_same_number_of_queries_for_3_and_30_jobs_needing_attention(
    client: Client, cluster: Cluster, project: Project, user: str, request: pytest.FixtureRequest
) -> None:
    """Counts are aggregated; the attention list is one query, then one each for the Tasks,
    Workers, Nodes (and, for an operator, pod instances) of all the Jobs shown, and one reads
    the live Jobs' workload reports; two read the reader's permissions
    (jobs.access.is_operator); one the runs' failures (failures.Finding) and one the GPUs held
    by runs not progressing (usage.views.held_not_progressing)."""
    viewer = request.getfixturevalue(user)
    Membership.objects.get_or_create(user=viewer, project=project)
    client.force_login(viewer)
    add_troubled_jobs(project, cluster, 0, 3)
    small = _queries(client)
    add_troubled_jobs(project, cluster, 3, 27)
    assert _queries(client) == small <= 13
    html = client.get("/").content.decode()
    assert html.count('<tr data-job="job-') == 30
    assert "Crash loop: job-29-0" in html and "Image cannot be pulled: job-29-1" in html
    assert "Node offline: job-29-2" in html and 'data-job="job-27"' in html


def test_it_shows_the_newest_fifty_and_counts_every_job_needing_a_look(
    client: Client, alice: User, reachable: Cluster, project: Project
) -> None:
    for index in range(80):
        failed_job(
            project, reachable, f"broke-{index:02d}", created_at=NOW - timedelta(minutes=80 - index)
        )
    html = page(client, alice)
    assert html.count('<tr data-job="broke-') == 50
    assert 'data-job="broke-79"' in html and 'data-job="broke-29"' not in html
    assert "Showing the newest 50 of 80." in html
