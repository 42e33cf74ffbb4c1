"""The Jobs list, the job page, its Worker rows and the stop/resume/delete actions (spec §Where to
look, §Job status, §Pod and Worker status): who may see and do what, each value with its layer
and age, live refresh that answers 204 when nothing changed, and a constant query count."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
import time_machine
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from console.models import Cluster, Membership, Node, Project
from console.web import AGE_STEP_SECONDS
from jobs.choices import Action, JobPhase, PodPhase, TaskKind, TaskPhase
from jobs.models import Job, Operation, Task
from jobs.spec import TaskSpec
from workers.models import PodInstance, Worker

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as Response

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
TEMPLATE = TaskSpec(role="worker", replicas=2, image="rlinf:1").model_dump(mode="json")
HTMX = {"HX-Request": "true"}


@pytest.fixture(autouse=True)
def frozen_clock() -> object:
    with time_machine.travel(NOW, tick=False) as traveller:
        yield traveller


@pytest.fixture
def reachable(cluster: Cluster) -> Cluster:
    cluster.reachable = True
    cluster.last_synced_at = cluster.last_attempt_at = NOW - timedelta(seconds=3)
    cluster.save()
    return cluster


@pytest.fixture
def viewer(bob: User, project: Project) -> User:
    """Bob, demoted to a viewer of the project: he may look, not operate."""
    Membership.objects.filter(user=bob, project=project).update(role=Membership.Role.VIEWER)
    return bob


@pytest.fixture
def operator(olga: User, project: Project) -> User:
    """Olga, an operator (she reads every project), also a viewer of this one."""
    Membership.objects.create(user=olga, project=project, role=Membership.Role.VIEWER)
    return olga


def make_job(
    project: Project, cluster: Cluster, name: str = "train", phase: str = JobPhase.RUNNING,
    owner: User | None = None, **fields: object,
) -> Job:  # fmt: skip
    fields.setdefault("created_at", NOW - timedelta(minutes=5))
    fields.setdefault("observed_at", NOW - timedelta(minutes=1))
    return Job.objects.create(
        project=project, cluster=cluster, name=name, namespace="default", owner=owner,
        spec={"tasks": [TEMPLATE]}, phase=phase, **fields,
    )  # fmt: skip


def add_task(job: Job, role: str = "worker", **fields: object) -> Task:
    fields.setdefault("phase", TaskPhase.RUNNING)
    fields.setdefault("desired_replicas", 2)
    fields.setdefault("ready_replicas", 2)
    fields.setdefault("observed_at", NOW - timedelta(minutes=1))
    return Task.objects.create(job=job, role=role, template={**TEMPLATE, "role": role}, **fields)


def add_worker(task: Task, pod: str, **fields: object) -> Worker:
    fields.setdefault("phase", PodPhase.RUNNING)
    fields.setdefault("ready", True)
    fields.setdefault("node_name", "node-1")
    fields.setdefault("ip", "10.0.0.7")
    fields.setdefault("last_reported_at", task.observed_at)
    return Worker.objects.create(task=task, pod_name=pod, **fields)


def record(job: Job, user: User, action: str, result: str, message: str = "") -> Operation:
    return Operation.objects.create(
        job=job, job_name=job.name, project=job.project, user=user, action=action,
        result=result, message=message,
    )  # fmt: skip


def get(client: Client, user: User | None, url: str, **headers: str) -> Response:
    if user is not None:
        client.force_login(user)
    return client.get(url, headers=headers)


def body(response: Response) -> str:
    return response.content.decode()


def version_in(html: str) -> str:
    match = re.search(r"[?&]amp;v=([0-9a-f]+)|[?&]v=([0-9a-f]+)", html)
    assert match, "the fragment carries its version in its polling URL"
    return match.group(1) or match.group(2)


@pytest.fixture
def job(project: Project, reachable: Cluster, alice: User) -> Job:
    job = make_job(project, reachable, owner=alice)
    task = add_task(job)
    add_worker(task, "train-worker-0")
    add_worker(task, "train-worker-1", node_name="node-2", ip="10.0.1.9")
    record(job, alice, Action.CREATE, Operation.Result.APPLIED, "Created.")
    return job


def pages_of(job: Job) -> list[str]:
    task = job.tasks.get()
    return [
        f"/jobs/{job.pk}/",
        f"/jobs/{job.pk}/?part=status",
        f"/jobs/{job.pk}/tasks/{task.pk}/workers/",
        f"/jobs/{job.pk}/clone/",
    ]


# --- who may see what -----------------------------------------------------------------------


def test_it_sends_anonymous_visitors_to_log_in(client: Client, job: Job) -> None:
    for url in ["/jobs/", "/jobs/new/", *pages_of(job)]:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/?next="), url


def test_it_hides_a_job_from_outsiders(client: Client, job: Job, charlie: User) -> None:
    for url in pages_of(job):
        assert get(client, charlie, url).status_code == 404, url
    assert "train" not in body(get(client, charlie, "/jobs/"))


def test_it_shows_every_page_to_the_owner(client: Client, job: Job, alice: User) -> None:
    for url in ["/jobs/", "/jobs/new/", *pages_of(job)]:
        assert get(client, alice, url).status_code == 200, url


def test_it_shows_a_viewer_the_job_without_any_action(
    client: Client, job: Job, viewer: User
) -> None:
    html = body(get(client, viewer, f"/jobs/{job.pk}/"))
    assert "train" in html
    for action in ("stop", "resume", "delete", "clone"):
        assert f"/jobs/{job.pk}/{action}/" not in html
    listing = body(get(client, viewer, "/jobs/"))
    assert 'href="/jobs/new/" aria-describedby="cannot-create-note"' in listing
    assert "you are a member of none" in listing
    refused = get(client, viewer, "/jobs/new/")
    assert refused.status_code == 403
    assert "You are a viewer in every project you belong to" in body(refused)


def test_it_refuses_every_action_to_a_viewer(client: Client, job: Job, viewer: User) -> None:
    client.force_login(viewer)
    for action in ("stop", "resume", "delete"):
        response = client.post(f"/jobs/{job.pk}/{action}/", {"confirm": "train"})
        assert response.status_code == 403, action
    job.refresh_from_db()
    assert (job.phase, job.stopped, job.delete_requested_at) == (JobPhase.RUNNING, False, None)


def test_it_answers_404_to_an_outsider_acting_on_a_job(
    client: Client, job: Job, charlie: User
) -> None:
    client.force_login(charlie)
    for action in ("stop", "resume", "delete"):
        assert client.post(f"/jobs/{job.pk}/{action}/").status_code == 404, action


def test_it_takes_actions_by_post_only(client: Client, job: Job, alice: User) -> None:
    for action in ("stop", "resume", "delete"):
        assert get(client, alice, f"/jobs/{job.pk}/{action}/").status_code == 405, action


# --- the list -------------------------------------------------------------------------------


def test_it_lists_phase_message_cluster_project_owner_age_and_last_observed(
    client: Client, job: Job, alice: User
) -> None:
    Job.objects.filter(pk=job.pk).update(message="worker: Running")
    html = body(get(client, alice, "/jobs/"))
    row = html[html.index(f'href="/jobs/{job.pk}/"') :].split("</tr>")[0]
    assert 'data-status="Running"' in row and "Running</span>" in row
    for text in ("worker: Running", "gpu-a", "vision", "alice", "5\xa0minutes"):
        assert text in row, text
    assert 'datetime="2026-03-02T11:59:57+00:00"' in row, "last observed: the last sync"
    assert "stale" not in row


def test_it_marks_rows_stale_when_the_cluster_is_unreachable_or_not_synced_lately(
    client: Client, job: Job, reachable: Cluster, alice: User
) -> None:
    reachable.reachable = False
    reachable.save()
    assert 'class="stale"' in body(get(client, alice, "/jobs/"))
    reachable.reachable = True
    reachable.last_synced_at = NOW - timedelta(seconds=settings.TRAINYARD_STALE_AFTER + 1)
    reachable.save()
    assert 'class="stale"' in body(get(client, alice, "/jobs/"))


def test_it_waits_for_the_first_sync_of_a_new_cluster_without_crying_stale(
    client: Client, project: Project, cluster: Cluster, alice: User
) -> None:
    """A cluster never synced (nor tried) is not "unreachable": nothing is known yet."""
    job = make_job(project, cluster, "fresh", JobPhase.PENDING, observed_at=None,
                   created_at=NOW - timedelta(seconds=5))  # fmt: skip
    assert 'class="stale"' not in body(get(client, alice, "/jobs/"))
    page = body(get(client, alice, f"/jobs/{job.pk}/"))
    assert "not synced yet" in page and "Stale data." not in page
    cluster.last_attempt_at = NOW
    cluster.save()
    assert 'class="stale"' in body(get(client, alice, "/jobs/"))


def test_it_filters_by_phase_cluster_project_and_name(
    client: Client, project: Project, other_project: Project, reachable: Cluster, alice: User
) -> None:
    Membership.objects.create(user=alice, project=other_project)
    other_cluster = Cluster.objects.create(name="gpu-b", kubeconfig="x")
    other_project.clusters.add(other_cluster)
    make_job(project, reachable, "alpha", JobPhase.RUNNING)
    make_job(project, reachable, "beta", JobPhase.STOPPED)
    make_job(other_project, other_cluster, "gamma", JobPhase.RUNNING)
    cases = {
        "?phase=Running": {"alpha", "gamma"},
        "?cluster=gpu-b": {"gamma"},
        "?project=vision": {"alpha", "beta"},
        "?q=ET": {"beta"},
        "?phase=Running&project=vision": {"alpha"},
        "?phase=Nonsense": {"alpha", "beta", "gamma"},
    }
    for query, expected in cases.items():
        html = body(get(client, alice, f"/jobs/{query}"))
        shown = set(re.findall(r'<td class="name"><a href="/jobs/\d+/">([a-z]+)</a>', html))
        assert shown == expected, query


def test_it_sorts_by_name_created_and_phase(
    client: Client, project: Project, reachable: Cluster, alice: User
) -> None:
    for minutes, name, phase in [(3, "bravo", "Stopped"), (2, "alpha", "Running"),
                                 (1, "charlie", "Failed")]:  # fmt: skip
        make_job(project, reachable, name, phase, created_at=NOW - timedelta(minutes=minutes))
    cases = {
        "": ["charlie", "alpha", "bravo"],
        "?sort=created": ["bravo", "alpha", "charlie"],
        "?sort=name": ["alpha", "bravo", "charlie"],
        "?sort=-name": ["charlie", "bravo", "alpha"],
        "?sort=phase": ["charlie", "alpha", "bravo"],
        "?sort=-phase": ["bravo", "alpha", "charlie"],
    }
    for query, expected in cases.items():
        html = body(get(client, alice, f"/jobs/{query}"))
        assert re.findall(r'<td class="name"><a href="/jobs/\d+/">([a-z]+)</a>', html) == expected


def test_it_shows_fifty_jobs_a_page(
    client: Client, project: Project, reachable: Cluster, alice: User
) -> None:
    Job.objects.bulk_create(
        Job(project=project, cluster=reachable, name=f"job-{n:03d}", namespace="default",
            spec={"tasks": [TEMPLATE]}, created_at=NOW - timedelta(seconds=n))
        for n in range(120)
    )  # fmt: skip
    first = body(get(client, alice, "/jobs/"))
    assert first.count('<td class="name">') == 50
    assert "Jobs 1–50 of 120" in first and "Page 1 of 3" in first
    last = body(get(client, alice, "/jobs/?page=3&sort=name"))
    assert last.count('<td class="name">') == 20
    assert "job-100" in last and "job-119" in last


def test_it_refreshes_the_rows_only_when_they_changed(
    client: Client, job: Job, alice: User
) -> None:
    first = get(client, alice, "/jobs/?phase=Running", **HTMX)
    assert first.status_code == 200
    html = body(first)
    assert html.lstrip().startswith('<div id="job-rows"'), "only the fragment"
    assert 'hx-trigger="every 5s, refresh"' in html and "data-poll" in html
    version = version_in(html)
    unchanged = get(client, alice, f"/jobs/?phase=Running&v={version}", **HTMX)
    assert unchanged.status_code == 204
    assert unchanged.content == b""
    other_filters = get(client, alice, f"/jobs/?v={version}", **HTMX)
    assert other_filters.status_code == 200
    Job.objects.filter(pk=job.pk).update(message="worker: Pending — 1/2 ready")
    changed = get(client, alice, f"/jobs/?phase=Running&v={version}", **HTMX)
    assert changed.status_code == 200
    assert "1/2 ready" in body(changed)


def test_it_refreshes_the_rows_when_their_data_turns_stale(
    client: Client, job: Job, alice: User, frozen_clock: time_machine.Traveller
) -> None:
    version = version_in(body(get(client, alice, "/jobs/", **HTMX)))
    frozen_clock.shift(timedelta(seconds=settings.TRAINYARD_STALE_AFTER + 5))
    response = get(client, alice, f"/jobs/?v={version}", **HTMX)
    assert response.status_code == 200
    assert 'class="stale"' in body(response)


def test_it_lists_with_a_query_count_that_does_not_grow_with_the_rows(
    client: Client, project: Project, reachable: Cluster, alice: User
) -> None:
    client.force_login(alice)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/jobs/").status_code == 200
        return len(captured)

    make_job(project, reachable, "first")
    few = queries()
    others = User.objects.bulk_create(User(username=f"user{n}") for n in range(5))
    Job.objects.bulk_create(
        Job(project=project, cluster=reachable, name=f"job-{n}", namespace="default",
            spec={"tasks": [TEMPLATE]}, owner=others[n % 5])
        for n in range(80)
    )  # fmt: skip
    assert queries() == few


# --- the job page ---------------------------------------------------------------------------


def test_it_shows_spec_status_and_the_last_operation_each_with_its_layer(
    client: Client, job: Job, alice: User
) -> None:
    record(job, alice, Action.STOP, Operation.Result.ACCEPTED, "Every workload is scaled to 0.")
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    for text in ("Desired", "Applied", "Observed", "spec.stopped", "<code>false</code>",
                 "Every workload is scaled to 0.", "result-accepted", "gpu-a / default",
                 "reachable", "Last sync"):  # fmt: skip
        assert text in html, text
    assert "2026-03-02 11:59:57" in html, "observed: the last successful sync"


def test_it_shows_the_tasks_with_desired_ready_phase_and_apply_result(
    client: Client, job: Job, alice: User
) -> None:
    add_task(job, "head", desired_replicas=1, ready_replicas=0, phase=TaskPhase.PENDING,
             message="head-0: ImagePullBackOff", apply_error="422 Invalid")  # fmt: skip
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    tasks = html[html.index('class="tasks-table"') :]
    head = tasks[tasks.index(">head<") :].split("</tr>")[0]
    cells = r'<td class="num" data-label="(?:Desired \(template\)|Ready)">(\d+)</td>'
    assert re.findall(cells, head) == ["1", "0"]
    assert 'data-status="Pending"' in head
    message = tasks[tasks.index(">head<") :].split('class="task-message"')[1].split("</tr>")[0]
    assert "head-0: ImagePullBackOff" in message
    assert "Apply error: 422 Invalid" in head
    worker = tasks[tasks.index(">worker<") :].split("</tr>")[0]
    assert re.search(r'class="num workers-count"[^>]*><span class="reported">2</span></td>', worker)


def test_it_warns_where_the_spec_warns(client: Client, job: Job, alice: User) -> None:
    """Spec §Job status and §Pod and Worker status: the warnings, where they apply."""
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    assert "A StatefulSet Job never turns Succeeded or Failed by itself." in html
    assert "Running is not progress." in html
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.PENDING)
    Task.objects.filter(job=job).update(kind=TaskKind.JOB)
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    assert "never turns Succeeded" not in html
    assert "Running is not progress." not in html


def test_it_points_the_troubleshooting_panel_at_the_first_wrong_layer(
    client: Client, job: Job, alice: User
) -> None:
    task = job.tasks.get()
    Task.objects.filter(pk=task.pk).update(phase=TaskPhase.PENDING, ready_replicas=1)
    Worker.objects.filter(pod_name="train-worker-1").update(
        phase=PodPhase.PENDING, ready=False, reason="ImagePullBackOff",
        message='Back-off pulling image "rlinf:nope"',
    )  # fmt: skip
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    panel = html[html.index('class="card troubleshoot"') :].split("</section>")[0]
    steps = re.findall(r'<li class="(first-wrong|wrong|fine)">', panel)
    assert steps == ["fine", "fine", "fine", "first-wrong"]
    assert "Image cannot be pulled" in panel and "train-worker-1" in panel
    assert "Back-off pulling image" in panel


def test_it_shows_a_stale_banner_when_the_cluster_is_unreachable(
    client: Client, job: Job, reachable: Cluster, alice: User
) -> None:
    reachable.reachable = False
    reachable.message = "connection refused"
    reachable.save()
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    assert "Stale data." in html and "cannot reach cluster gpu-a" in html
    panel = html[html.index('class="card troubleshoot"') :]
    assert "Cluster unreachable" in panel and "connection refused" in panel


def test_it_shows_the_operation_history(client: Client, job: Job, alice: User, bob: User) -> None:
    record(job, bob, Action.STOP, Operation.Result.REFUSED, "This Job is already Stopped.")
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    history = html[html.index('class="ops-table"') :]
    assert history.index("bob") < history.index("alice"), "newest first"
    assert "This Job is already Stopped." in history and "result-refused" in history


def test_it_refreshes_the_status_part_only_when_it_changed(
    client: Client, job: Job, alice: User
) -> None:
    first = body(get(client, alice, f"/jobs/{job.pk}/?part=status", **HTMX))
    assert first.lstrip().startswith('<div id="job-status"')
    assert 'hx-trigger="every 5s, refresh"' in first
    version = version_in(first)
    url = f"/jobs/{job.pk}/?part=status&v={version}"
    assert get(client, alice, url, **HTMX).status_code == 204
    Task.objects.filter(job=job).update(ready_replicas=1, observed_at=NOW)
    assert get(client, alice, url, **HTMX).status_code == 200


def test_it_answers_an_unchanged_status_poll_before_building_the_page(
    client: Client, job: Job, alice: User
) -> None:
    """docs/decisions.md, "Web: one age step": the version is decided from its own facts; the
    troubleshooting panel (Nodes, suspect Workers) is read only for a part that is rendered."""
    client.force_login(alice)
    version = version_in(body(client.get(f"/jobs/{job.pk}/?part=status", headers=HTMX)))

    def tables(url: str) -> tuple[int, str]:
        with CaptureQueriesContext(connection) as captured:
            status = client.get(url, headers=HTMX).status_code
        return status, " ".join(query["sql"] for query in captured)

    status, sql = tables(f"/jobs/{job.pk}/?part=status&v={version}")
    assert status == 204 and '"console_node"' not in sql
    status, sql = tables(f"/jobs/{job.pk}/?part=status&v=0")
    assert status == 200 and '"console_node"' in sql


def test_an_unchanged_poll_reads_the_reader_and_the_job_once(
    client: Client, job: Job, alice: User
) -> None:
    """A 204 asks only what its version needs: the session, the reader, their operator role,
    their memberships once for every check, then the Job's own facts; the worker rows' page is
    counted by their summary, not counted again."""
    client.force_login(alice)
    task = job.tasks.get()
    status_url = f"/jobs/{job.pk}/?part=status"
    workers_url = f"/jobs/{job.pk}/tasks/{task.pk}/workers/"
    for url, sep, most in ((status_url, "&", 8), (workers_url, "?", 9)):
        version = version_in(body(client.get(url, headers=HTMX)))
        with CaptureQueriesContext(connection) as captured:
            assert client.get(f"{url}{sep}v={version}", headers=HTMX).status_code == 204
        sql = [query["sql"] for query in captured]
        assert len(sql) <= most, sql
        assert sum('FROM "console_membership"' in q for q in sql) == 1
        assert not any(q.startswith("SELECT COUNT(*)") for q in sql)


def test_it_does_not_refresh_the_status_part_or_worker_rows_for_a_sync_alone(
    client: Client, job: Job, alice: User, reachable: Cluster,
    frozen_clock: time_machine.Traveller,
) -> None:  # fmt: skip
    """A sync that changed nothing moves only the times it confirms: no re-render each cycle;
    the age step shows the new time (docs/decisions.md, "Web: one age step")."""
    task = job.tasks.get()
    status_url = f"/jobs/{job.pk}/?part=status"
    workers_url = f"/jobs/{job.pk}/tasks/{task.pk}/workers/"
    versions = [version_in(body(get(client, alice, url, **HTMX)))
                for url in (status_url, workers_url)]  # fmt: skip
    polls = [f"{status_url}&v={versions[0]}", f"{workers_url}?v={versions[1]}"]
    frozen_clock.shift(timedelta(seconds=10))
    Cluster.objects.filter(pk=reachable.pk).update(last_synced_at=NOW + timedelta(seconds=10))
    assert [get(client, alice, url, **HTMX).status_code for url in polls] == [204, 204]
    frozen_clock.shift(timedelta(seconds=AGE_STEP_SECONDS))
    answers = [get(client, alice, url, **HTMX) for url in polls]
    assert [answer.status_code for answer in answers] == [200, 200]
    assert all("2026-03-02 12:00:10" in body(answer) for answer in answers)


def test_it_refreshes_the_status_part_once_the_cluster_reported_after_a_stop(
    client: Client, job: Job, alice: User, reachable: Cluster
) -> None:
    """The console's decision (spec §Job status) gives way to the observation at the first
    poll after a sync that reported after it, not an age step later."""
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.STOPPED, stopped=True)
    stop = record(job, alice, Action.STOP, Operation.Result.APPLIED)
    Operation.objects.filter(pk=stop.pk).update(requested_at=NOW - timedelta(seconds=1))
    first = body(get(client, alice, f"/jobs/{job.pk}/?part=status", **HTMX))
    assert "decided by the console" in first
    Cluster.objects.filter(pk=reachable.pk).update(last_synced_at=NOW)
    url = f"/jobs/{job.pk}/?part=status&v={version_in(first)}"
    answer = get(client, alice, url, **HTMX)
    assert answer.status_code == 200 and "decided by the console" not in body(answer)


def test_it_stops_polling_a_terminal_job(client: Client, job: Job, alice: User) -> None:
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.SUCCEEDED)
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    status = html[html.index('<div id="job-status"') :]
    assert "hx-trigger" not in status.split(">")[0]
    assert "no longer refreshes" in html
    task = job.tasks.get()
    workers = body(get(client, alice, f"/jobs/{job.pk}/tasks/{task.pk}/workers/", **HTMX))
    assert "hx-trigger" not in workers.split(">")[0]


def test_it_offers_the_actions_the_phase_allows(client: Client, job: Job, alice: User) -> None:
    """Spec §Job status via jobs.status.lifecycle.allowed_actions."""
    expected = {
        JobPhase.RUNNING: {"stop", "clone", "delete"},
        JobPhase.STOPPED: {"resume", "clone", "delete"},
        JobPhase.SUCCEEDED: {"clone", "delete"},
        JobPhase.FAILED: {"stop", "clone", "delete"},
    }
    for phase, actions in expected.items():
        Job.objects.filter(pk=job.pk).update(phase=phase, stopped=phase == JobPhase.STOPPED)
        html = body(get(client, alice, f"/jobs/{job.pk}/"))
        offered = set(re.findall(rf'/jobs/{job.pk}/(stop|resume|clone|delete)/"', html))
        assert offered == actions, phase


def test_it_says_stop_on_a_failed_job_only_releases_resources(
    client: Client, job: Job, alice: User
) -> None:
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.FAILED)
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    assert "Stop (release resources)" in html
    assert "Stopping it only releases the resources it still holds: it stays Failed" in html


def test_it_polls_a_stopped_job_and_says_the_pods_are_scaled_down(
    client: Client, job: Job, alice: User
) -> None:
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.STOPPED, stopped=True)
    Worker.objects.all().delete()
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    assert "<code>true</code>" in html and "scaled to 0" in html
    task = job.tasks.get()
    workers = body(get(client, alice, f"/jobs/{job.pk}/tasks/{task.pk}/workers/"))
    assert "the job is stopped, so its pods are scaled down" in workers


def test_it_renders_the_job_page_with_a_query_count_that_does_not_grow(
    client: Client, job: Job, operator: User
) -> None:
    """The rows shown (tasks, workers, operations) do not add queries, operators included."""
    client.force_login(operator)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(f"/jobs/{job.pk}/").status_code == 200
        return len(captured)

    Worker.objects.filter(pod_name="train-worker-0").update(restart_count=1, pod_uid="uid-0")
    few = queries()
    for n in range(6):
        task = add_task(job, f"role{n}", phase=TaskPhase.PENDING, ready_replicas=0)
        for pod in range(30):
            add_worker(task, f"train-role{n}-{pod}", ready=False, reason="CrashLoopBackOff",
                       restart_count=3, pod_uid=f"uid-{n}-{pod}")  # fmt: skip
            PodInstance.objects.create(
                task=task, uid=f"uid-{n}-{pod}", pod_name=f"train-role{n}-{pod}",
                phase=PodPhase.RUNNING, first_seen_at=NOW, last_seen_at=NOW, last_exit_code=1,
            )  # fmt: skip
        record(job, operator, Action.STOP, Operation.Result.REFUSED, "no")
    Node.objects.create(cluster=job.cluster, name="node-2", phase="Offline", observed_at=NOW)
    assert queries() == few


# --- the Worker rows ------------------------------------------------------------------------


def test_it_shows_each_worker_with_pod_node_ip_phase_and_last_reported_at(
    client: Client, job: Job, alice: User
) -> None:
    task = job.tasks.get()
    html = body(get(client, alice, f"/jobs/{job.pk}/tasks/{task.pk}/workers/", **HTMX))
    assert html.lstrip().startswith('<div class="workers"')
    row = html[html.index("train-worker-1") :].split("</tr>")[0]
    for text in ("node-2", "10.0.1.9", 'data-status="Running"', "✔ yes"):
        assert text in row, text
    assert "2026-03-02 11:59:57" in row, "reported by every sync since: the last one"
    assert "not a retry history" in html
    assert "Restarts" not in html and "Pod instance history" not in html


def test_it_marks_workers_missing_from_the_last_report_and_keeps_them(
    client: Client, job: Job, alice: User
) -> None:
    """workers.models.Worker: older than its Task's observation means missing from it."""
    task = job.tasks.get()
    Worker.objects.filter(pod_name="train-worker-1").update(
        last_reported_at=NOW - timedelta(minutes=2)
    )
    html = body(get(client, alice, f"/jobs/{job.pk}/tasks/{task.pk}/workers/"))
    missing = html[html.index("train-worker-1") :].split("</tr>")[0]
    assert "not in the last report" in missing and "2026-03-02 11:58:00" in missing
    present = html[html.index("train-worker-0") :].split("</tr>")[0]
    assert "not in the last report" not in present
    assert "1 row was not in the last report" in html
    page = body(get(client, alice, f"/jobs/{job.pk}/"))
    assert re.search(
        r'workers-count"[^>]*><span class="reported">1</span>'
        r'<div class="stale small">1 not in the last report',
        page,
    ), "spec §Pod and Worker status: a pod missing from the last report is not counted"


def test_it_counts_only_pods_in_the_last_report_and_labels_gone_rows_last_known(
    client: Client, job: Job, alice: User
) -> None:
    """Spec §Task status and §Pod and Worker status: after Stop the pods are scaled down and
    disappear; rows that are gone read as gone, their phase labelled as the last known one, and
    the block does not say "2 pods, 2 ready" over them."""
    task = job.tasks.get()
    Worker.objects.filter(task=task).update(last_reported_at=NOW - timedelta(minutes=2))
    html = body(get(client, alice, f"/jobs/{job.pk}/tasks/{task.pk}/workers/"))
    summary = html[html.index('class="workers-summary"') :].split("</span>")[0]
    assert "0 pods in the last report, 0 ready" in summary
    row = html[html.index("train-worker-0") :].split("</tr>")[0]
    phase = row[row.index('class="phase"') :].split("</td>")[0]
    assert "gone, last known:" in phase and 'data-status="Running"' in phase
    ready = row[row.index('class="ready"') :].split("</td>")[0]
    assert "gone, last known:" in ready


def test_it_says_1_pod_not_1_pods_in_both_languages(client: Client, job: Job, alice: User) -> None:
    task = job.tasks.get()
    Worker.objects.filter(pod_name="train-worker-1").delete()
    html = body(get(client, alice, f"/jobs/{job.pk}/tasks/{task.pk}/workers/"))
    assert "1 pod in the last report, 1 ready" in html and "1 pods" not in html
    chinese = body(get(client, None, f"/jobs/{job.pk}/tasks/{task.pk}/workers/",
                       **{"Accept-Language": "zh-Hans"}))  # fmt: skip
    assert "最近一次上报中有 1 个 Pod，1 个就绪" in chinese


def test_it_shows_the_workloads_desired_replicas_beside_the_templates(
    client: Client, job: Job, alice: User
) -> None:
    """Spec §Task status: Stopped means the workload's desired replicas are 0; the template
    still asks for 2 (what resume re-creates)."""
    job.tasks.update(workload_replicas=0, phase=TaskPhase.STOPPED, ready_replicas=0)
    html = body(get(client, alice, f"/jobs/{job.pk}/"))
    row = html[html.index('class="tasks-table"') :]
    row = row[row.index(">worker<") :].split("</tr>")[0]
    assert '<td class="num" data-label="Desired (template)">2</td>' in row
    assert re.search(r'class="num workload-replicas"[^>]*>0</td>', row)


def test_it_shows_operators_restarts_and_the_instance_history(
    client: Client, job: Job, operator: User
) -> None:
    task = job.tasks.get()
    Worker.objects.filter(pod_name="train-worker-0").update(restart_count=4, pod_uid="uid-b")
    for uid, seen, code, reason in [("uid-a", 10, 137, "OOMKilled"), ("uid-b", 5, None, "")]:
        PodInstance.objects.create(
            task=task, uid=uid, pod_name="train-worker-0", node_name="node-1", ip="10.0.0.7",
            phase=PodPhase.RUNNING, restart_count=4, last_exit_code=code,
            termination_reason=reason, first_seen_at=NOW - timedelta(minutes=seen),
            last_seen_at=NOW - timedelta(minutes=seen - 1),
            gone_at=NOW - timedelta(minutes=seen - 1) if uid == "uid-a" else None,
        )  # fmt: skip
    html = body(get(client, operator, f"/jobs/{job.pk}/tasks/{task.pk}/workers/"))
    assert "Restarts" in html and 'data-label="Restarts">4</td>' in html
    history = html[html.index("Pod instance history") :]
    assert history.index("uid-a") < history.index("uid-b"), "oldest first per pod"
    assert "OOMKilled" in history and ">137<" in history and "gone since" in history


def test_it_refreshes_the_worker_rows_only_when_they_changed(
    client: Client, job: Job, alice: User
) -> None:
    task = job.tasks.get()
    url = f"/jobs/{job.pk}/tasks/{task.pk}/workers/"
    version = version_in(body(get(client, alice, url, **HTMX)))
    assert get(client, alice, f"{url}?v={version}", **HTMX).status_code == 204
    Worker.objects.filter(pod_name="train-worker-0").update(ip="10.0.0.99")
    changed = get(client, alice, f"{url}?v={version}", **HTMX)
    assert changed.status_code == 200 and "10.0.0.99" in body(changed)


def test_it_opens_the_worker_rows_as_a_page_without_javascript(
    client: Client, job: Job, alice: User
) -> None:
    task = job.tasks.get()
    page = body(get(client, alice, f"/jobs/{job.pk}/"))
    assert f'<a href="/jobs/{job.pk}/tasks/{task.pk}/workers/">' in page
    assert f'hx-get="/jobs/{job.pk}/tasks/{task.pk}/workers/"' in page
    full = body(get(client, alice, f"/jobs/{job.pk}/tasks/{task.pk}/workers/"))
    assert full.startswith("<!doctype html>") and "Workers of train-worker" in full


def test_it_pages_the_worker_rows_in_the_order_people_count(
    client: Client, job: Job, alice: User
) -> None:
    task = job.tasks.get()
    Worker.objects.all().delete()
    Worker.objects.bulk_create(
        Worker(task=task, pod_name=f"train-worker-{n}", phase=PodPhase.RUNNING, ready=True,
               last_reported_at=NOW)
        for n in range(120)
    )  # fmt: skip
    url = f"/jobs/{job.pk}/tasks/{task.pk}/workers/"
    first = body(get(client, alice, url, **HTMX))
    pods = re.findall(r'<td class="pod">([^<]+)</td>', first)
    assert pods == [f"train-worker-{n}" for n in range(50)]
    assert "Rows 1–50 of 120" in first and "120 pods in the last report, 120 ready" in first
    assert f'hx-get="{url}?page=2"' in first, "next page, loaded in place"
    last = body(get(client, alice, f"{url}?page=3"))
    assert re.findall(r'<td class="pod">([^<]+)</td>', last)[-1] == "train-worker-119"
    assert last.startswith("<!doctype html>"), "plain links work without JavaScript"


def test_it_shows_only_the_rows_that_need_a_look_when_asked(
    client: Client, job: Job, alice: User
) -> None:
    task = job.tasks.get()
    Worker.objects.filter(pod_name="train-worker-1").update(ready=False, reason="CrashLoopBackOff")
    url = f"/jobs/{job.pk}/tasks/{task.pk}/workers/"
    html = body(get(client, alice, f"{url}?only=problems", **HTMX))
    assert re.findall(r'<td class="pod">([^<]+)</td>', html) == ["train-worker-1"]
    assert "Not ready or not reported (1)" in html
    Worker.objects.filter(pod_name="train-worker-1").update(ready=True, reason="")
    html = body(get(client, alice, f"{url}?only=problems", **HTMX))
    assert "Every pod is ready and in the last report." in html


def test_it_answers_404_for_a_task_of_another_job(
    client: Client, job: Job, project: Project, reachable: Cluster, alice: User
) -> None:
    other = add_task(make_job(project, reachable, "other"))
    assert get(client, alice, f"/jobs/{job.pk}/tasks/{other.pk}/workers/").status_code == 404


# --- the actions ----------------------------------------------------------------------------


def post(client: Client, user: User, url: str, data: dict[str, str] | None = None) -> str:
    client.force_login(user)
    return body(client.post(url, data or {}, follow=True))


def test_it_stops_a_running_job(client: Client, job: Job, alice: User) -> None:
    html = post(client, alice, f"/jobs/{job.pk}/stop/")
    assert "Stop requested: every workload of the job is scaled to 0." in html
    job.refresh_from_db()
    assert (job.phase, job.stopped) == (JobPhase.STOPPED, True)
    assert job.operations.filter(action=Action.STOP, result=Operation.Result.ACCEPTED).exists()


def test_it_stops_a_failed_job_and_keeps_it_failed(client: Client, job: Job, alice: User) -> None:
    """Spec §Job status: stop on Failed only releases resources; the Job stays Failed."""
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.FAILED)
    html = post(client, alice, f"/jobs/{job.pk}/stop/")
    assert "the job&#x27;s resources are released; it stays Failed." in html
    job.refresh_from_db()
    assert (job.phase, job.stopped) == (JobPhase.FAILED, True)


def test_it_shows_why_a_refused_stop_was_refused(client: Client, job: Job, alice: User) -> None:
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.SUCCEEDED)
    html = post(client, alice, f"/jobs/{job.pk}/stop/")
    assert "Refused: A Succeeded Job is terminal" in html
    job.refresh_from_db()
    assert (job.phase, job.stopped) == (JobPhase.SUCCEEDED, False)


def test_it_resumes_a_stopped_job(client: Client, job: Job, alice: User) -> None:
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.STOPPED, stopped=True)
    html = post(client, alice, f"/jobs/{job.pk}/resume/")
    assert "Resume requested: the job is Pending" in html
    job.refresh_from_db()
    assert (job.phase, job.stopped, job.run) == (JobPhase.PENDING, False, 2)


def test_it_refuses_to_resume_a_running_job(client: Client, job: Job, alice: User) -> None:
    html = post(client, alice, f"/jobs/{job.pk}/resume/")
    assert "Refused: Only a Stopped Job can be resumed; this one is Running." in html
    assert Job.objects.get(pk=job.pk).run == 1


def test_it_asks_again_when_the_name_typed_to_delete_is_wrong(
    client: Client, job: Job, alice: User
) -> None:
    client.force_login(alice)
    response = client.post(f"/jobs/{job.pk}/delete/", {"confirm": "trian"})
    assert response.status_code == 200
    html = body(response)
    assert "cannot be undone" in html
    assert "You typed &#x27;trian&#x27;; type the job name, train, exactly." in html
    assert 'value="trian"' in html
    assert Job.objects.get(pk=job.pk).delete_requested_at is None


def test_it_deletes_a_job_once_its_name_is_typed(client: Client, job: Job, alice: User) -> None:
    client.force_login(alice)
    response = client.post(f"/jobs/{job.pk}/delete/", {"confirm": "train"})
    assert response.status_code == 302 and response["Location"] == "/jobs/"
    assert Job.objects.get(pk=job.pk).delete_requested_at == NOW
    listing = body(client.get("/jobs/"))
    assert "Deletion of train requested" in listing
    assert f'href="/jobs/{job.pk}/"' not in listing
    assert client.get(f"/jobs/{job.pk}/").status_code == 404
