"""Workflow pages (spec §Workflow status): scoped by project, the DAG drawn with every child Job
labelled by name and phase in words (never colour alone), and what each child still waits for."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
import time_machine
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from console.models import Cluster, Project
from jobs.choices import JobPhase, TaskKind, WorkflowPhase
from jobs.models import Job, Task, Workflow, WorkflowEdge

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
TASK = {"role": "worker", "kind": "StatefulSet", "replicas": 1, "image": "rlinf:1"}


@pytest.fixture(autouse=True)
def frozen_clock() -> object:
    with time_machine.travel(NOW, tick=False) as traveller:
        yield traveller


def make_workflow(
    project: Project,
    cluster: Cluster,
    name: str,
    children: dict[str, str],
    edges: list[tuple[str, str]],
    phase: str = WorkflowPhase.RUNNING,
    kind: str = TaskKind.STATEFULSET,
) -> Workflow:
    """children: job name -> phase; edges: (upstream name, downstream name)."""
    workflow = Workflow.objects.create(project=project, name=name, phase=phase)
    jobs = {}
    for job_name, job_phase in children.items():
        jobs[job_name] = Job.objects.create(
            project=project,
            cluster=cluster,
            name=f"{name}-{job_name}",
            namespace="default",
            spec={"tasks": [TASK]},
            phase=job_phase,
            workflow=workflow,
            message=f"{job_name} says hello",
        )
        Task.objects.create(job=jobs[job_name], role="worker", kind=kind, template=TASK)
    for up, down in edges:
        WorkflowEdge.objects.create(workflow=workflow, upstream=jobs[up], downstream=jobs[down])
    return workflow


@pytest.fixture
def pipeline(project: Project, cluster: Cluster) -> Workflow:
    """prepare -> train -> evaluate, and prepare -> evaluate."""
    return make_workflow(
        project,
        cluster,
        "pipe",
        {"prepare": JobPhase.SUCCEEDED, "train": JobPhase.RUNNING, "evaluate": JobPhase.PENDING},
        [("prepare", "train"), ("train", "evaluate"), ("prepare", "evaluate")],
    )


def get(client: Client, user: User, url: str, **headers: str) -> str:
    client.force_login(user)
    response = client.get(url, headers=headers)
    assert response.status_code == 200
    return response.content.decode()


def table_row(html: str, job: str) -> str:
    match = re.search(rf'<tr data-job="{job}">(.*?)</tr>', html, re.S)
    assert match, job
    return match.group(1)


def svg_box(html: str, job: str) -> str:
    match = re.search(
        rf'<(a|g) class="dag-node[^"]*"[^>]*data-job="{job}"[^>]*>(.*?)</\1>', html, re.S
    )
    assert match, job
    return match.group(0)


@pytest.mark.parametrize("htmx", [False, True])
def test_it_sends_an_anonymous_visitor_to_the_login_page(
    client: Client, pipeline: Workflow, htmx: bool
) -> None:
    headers = {"HX-Request": "true"} if htmx else {}
    for url in ("/workflows/", f"/workflows/{pipeline.pk}/"):
        response = client.get(url, headers=headers)
        if htmx:  # the whole page goes to the login form (console/sessions.py)
            assert response.status_code == 200
            assert response["HX-Redirect"] == f"/accounts/login/?next={url}"
        else:
            assert response.status_code == 302
            assert response["Location"] == f"/accounts/login/?next={url}"


@pytest.mark.parametrize("htmx", [False, True])
def test_it_answers_404_to_an_outsider_and_lists_nothing(
    client: Client, pipeline: Workflow, charlie: User, htmx: bool
) -> None:
    """charlie belongs to another project: he does not learn the workflow exists."""
    client.force_login(charlie)
    headers = {"HX-Request": "true"} if htmx else {}
    assert client.get(f"/workflows/{pipeline.pk}/", headers=headers).status_code == 404
    listing = client.get("/workflows/", headers=headers)
    assert listing.status_code == 200 and b"pipe" not in listing.content


def test_it_shows_the_workflow_to_an_operator_of_no_project(
    client: Client, pipeline: Workflow, olga: User
) -> None:
    """Operators read every project (jobs.access)."""
    assert 'data-workflow="pipe"' in get(client, olga, "/workflows/")
    assert 'data-job="pipe-train"' in get(client, olga, f"/workflows/{pipeline.pk}/")


@pytest.mark.parametrize("htmx", [False, True])
def test_it_shows_the_workflow_to_a_member(
    client: Client, alice: User, bob: User, pipeline: Workflow, htmx: bool
) -> None:
    headers = {"HX-Request": "true"} if htmx else {}
    for user in (alice, bob):
        assert 'data-workflow="pipe"' in get(client, user, "/workflows/", **headers)
        assert 'data-job="pipe-train"' in get(client, user, f"/workflows/{pipeline.pk}/", **headers)


def test_it_lists_name_project_phase_child_counts_and_creation(
    client: Client, alice: User, pipeline: Workflow, project: Project, cluster: Cluster
) -> None:
    make_workflow(project, cluster, "empty", {}, [], phase=WorkflowPhase.PENDING)
    html = get(client, alice, "/workflows/")
    pipe = re.search(r'<tr data-workflow="pipe">(.*?)</tr>', html, re.S).group(1)  # type: ignore[union-attr]
    assert f'href="/workflows/{pipeline.pk}/"' in pipe and "<td>vision</td>" in pipe
    assert re.search(r'data-status="Running".*?</span>\s*</td>', pipe, re.S)
    counts = re.findall(
        r'data-status="(\w+)".*?<span class="count">(\d+)</span>',
        pipe.split('class="child-counts"')[1],
        re.S,
    )
    assert counts == [("Pending", "1"), ("Running", "1"), ("Succeeded", "1")]
    assert "2026-03-02 12:00:00" in pipe
    assert "no jobs" in html


def test_it_draws_one_labelled_box_per_child_job_linking_to_it(
    client: Client, alice: User, pipeline: Workflow
) -> None:
    html = get(client, alice, f"/workflows/{pipeline.pk}/")
    assert html.count('class="dag-node ') == 3
    train = Job.objects.get(name="pipe-train")
    box = svg_box(html, "pipe-train")
    assert f'href="/jobs/{train.pk}/"' in box and 'class="dag-node tone-run"' in box
    assert '<text class="dag-name"' in box and ">pipe-train</text>" in box
    assert re.search(
        r'<text class="dag-phase"[^>]*><tspan aria-hidden="true">▶</tspan> Running</text>', box
    )
    assert "✔</tspan> Succeeded" in svg_box(html, "pipe-prepare")
    assert "◷</tspan> Pending" in svg_box(html, "pipe-evaluate")


def test_it_places_boxes_by_layer_and_draws_an_arrow_per_dependency(
    client: Client, alice: User, pipeline: Workflow
) -> None:
    html = get(client, alice, f"/workflows/{pipeline.pk}/")
    xs = {
        job: int(re.search(r'<rect x="(\d+)"', svg_box(html, f"pipe-{job}")).group(1))  # type: ignore[union-attr]
        for job in ("prepare", "train", "evaluate")
    }
    assert xs["prepare"] < xs["train"] < xs["evaluate"]
    assert html.count('class="dag-edge') == 3
    assert html.count('class="dag-edge done"') == 2  # both arrows leaving the Succeeded job
    assert 'marker-end="url(#dag-arrow)"' in html


def test_it_lists_children_with_message_dependencies_and_what_they_wait_for(
    client: Client, alice: User, pipeline: Workflow
) -> None:
    html = get(client, alice, f"/workflows/{pipeline.pk}/")
    evaluate = table_row(html, "pipe-evaluate")
    assert "evaluate says hello" in evaluate and 'data-status="Pending"' in evaluate
    assert '<td data-label="Depends on">pipe-prepare, pipe-train</td>' in evaluate
    assert re.search(r'class="waiting"[^>]*>.*pipe-train</span>', evaluate, re.S)
    assert "pipe-prepare</span>" not in evaluate  # prepare Succeeded: no longer waited for
    prepare = table_row(html, "pipe-prepare")
    assert '<td class="waiting" data-label="Waiting for">—</td>' in prepare


def test_it_lists_children_in_the_order_of_the_picture(
    client: Client, alice: User, pipeline: Workflow
) -> None:
    html = get(client, alice, f"/workflows/{pipeline.pk}/")
    table = html.split("<tbody>")[-1]
    assert re.findall(r'<tr data-job="([\w-]+)">', table) == [
        "pipe-prepare",
        "pipe-train",
        "pipe-evaluate",
    ]


def test_it_warns_that_a_workflow_of_statefulset_jobs_may_never_finish(
    client: Client, alice: User, pipeline: Workflow, project: Project, cluster: Cluster
) -> None:
    assert "may never reach a terminal state" in get(client, alice, f"/workflows/{pipeline.pk}/")
    batch = make_workflow(project, cluster, "batch", {"a": JobPhase.RUNNING}, [], kind=TaskKind.JOB)
    assert "may never reach a terminal state" not in get(client, alice, f"/workflows/{batch.pk}/")


def test_it_stops_polling_once_the_workflow_and_every_child_are_terminal(
    client: Client, alice: User, project: Project, cluster: Cluster, pipeline: Workflow
) -> None:
    done = make_workflow(
        project,
        cluster,
        "done",
        {"a": JobPhase.SUCCEEDED, "b": JobPhase.FAILED},
        [("a", "b")],
        phase=WorkflowPhase.FAILED,
    )
    assert "data-poll" not in get(client, alice, f"/workflows/{done.pk}/")
    assert "data-poll" in get(client, alice, f"/workflows/{pipeline.pk}/")


def test_it_keeps_polling_a_failed_workflow_whose_other_child_still_runs(
    client: Client, alice: User, project: Project, cluster: Cluster
) -> None:
    failed = make_workflow(
        project,
        cluster,
        "half",
        {"a": JobPhase.FAILED, "b": JobPhase.RUNNING},
        [],
        phase=WorkflowPhase.FAILED,
    )
    assert "data-poll" in get(client, alice, f"/workflows/{failed.pk}/")


def test_it_says_so_when_the_stored_dependencies_form_a_cycle(
    client: Client, alice: User, project: Project, cluster: Cluster
) -> None:
    looped = make_workflow(
        project,
        cluster,
        "loop",
        {"a": JobPhase.PENDING, "b": JobPhase.PENDING},
        [("a", "b"), ("b", "a")],
    )
    html = get(client, alice, f"/workflows/{looped.pk}/")
    assert "cannot be drawn: the dependencies form a cycle through" in html
    assert 'data-job="loop-a"' in html


def test_it_does_not_link_a_child_whose_deletion_was_requested(
    client: Client, alice: User, pipeline: Workflow
) -> None:
    Job.objects.filter(name="pipe-evaluate").update(delete_requested_at=NOW)
    html = get(client, alice, f"/workflows/{pipeline.pk}/")
    assert svg_box(html, "pipe-evaluate").startswith("<g ")
    assert "deletion requested" in table_row(html, "pipe-evaluate")


def poll_url(html: str) -> str:
    match = re.search(r'hx-get="([^"]+)"', html)
    assert match
    return match.group(1).replace("&amp;", "&")


@pytest.mark.parametrize("which", ["list", "detail"])
def test_it_answers_204_until_a_child_changes_phase(
    client: Client, alice: User, pipeline: Workflow, which: str
) -> None:
    url = "/workflows/" if which == "list" else f"/workflows/{pipeline.pk}/"
    poll = poll_url(get(client, alice, url))
    assert client.get(poll, headers={"HX-Request": "true"}).status_code == 204
    Job.objects.filter(name="pipe-train").update(phase=JobPhase.SUCCEEDED)
    response = client.get(poll, headers={"HX-Request": "true"})
    assert response.status_code == 200 and b"<!doctype html>" not in response.content


def _queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


def test_it_uses_the_same_number_of_queries_for_a_small_and_a_large_workflow(
    client: Client, alice: User, project: Project, cluster: Cluster
) -> None:
    small = make_workflow(
        project,
        cluster,
        "small",
        {f"s{i}": JobPhase.PENDING for i in range(3)},
        [("s0", "s1"), ("s1", "s2")],
    )
    names = [f"l{i}" for i in range(30)]
    large = make_workflow(
        project,
        cluster,
        "large",
        dict.fromkeys(names, JobPhase.RUNNING),
        [(names[i], names[i + 1]) for i in range(29)] + [("l0", "l29")],
    )
    client.force_login(alice)
    assert _queries(client, f"/workflows/{small.pk}/") == _queries(
        client, f"/workflows/{large.pk}/"
    )
    assert get(client, alice, f"/workflows/{large.pk}/").count('class="dag-node ') == 30


def test_it_uses_the_same_number_of_queries_for_3_and_30_workflows(
    client: Client, alice: User, project: Project, cluster: Cluster
) -> None:
    client.force_login(alice)
    for index in range(3):
        make_workflow(project, cluster, f"w{index}", {"a": JobPhase.RUNNING}, [])
    small = _queries(client, "/workflows/")
    for index in range(3, 30):
        make_workflow(
            project, cluster, f"w{index}", {"a": JobPhase.RUNNING, "b": JobPhase.PENDING}, []
        )
    assert _queries(client, "/workflows/") == small
    assert get(client, alice, "/workflows/").count("<tr data-workflow=") == 30


def test_it_names_the_workflow_in_the_breadcrumb_not_its_project(
    client: Client, alice: User, pipeline: Workflow
) -> None:
    html = get(client, alice, f"/workflows/{pipeline.pk}/")
    crumbs = re.search(r'<nav class="crumbs"[^>]*>(.*?)</nav>', html, re.S)
    assert crumbs, "the workflow page has no breadcrumb"
    assert re.sub(r"<[^>]+>", "", crumbs.group(1)).split() == ["Workflows", "/", "pipe"]
    assert 'href="/workflows/"' in crumbs.group(1)
