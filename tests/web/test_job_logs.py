"""Logs on the job page (issue 10, item 1) against simcluster: members read the current tail of
their Job's pods, through the API server, capped; the previous container's logs and the pod's
Events only for operators (spec §Pod and Worker: "previous logs and live Kubernetes events are
checked by authorised operators")."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from console.models import ApiToken, Cluster, Membership
from jobs.models import Job
from tests.engine.conftest import (  # noqa: F401 (fixtures)
    _fast_passwords,
    cluster,
    sim,
    submit,
    sync_until,
    task,
)
from workers.models import Worker

POD = "trainer-worker-0"


@pytest.fixture
def running(alice: User, cluster: Cluster) -> Job:  # noqa: F811
    """A Job whose pod has run long enough to print a few steps (simcluster runs 100x)."""
    job = submit(alice, cluster, "trainer", task("worker", command=["sim", "run", "3600"]))
    sync_until(cluster, lambda: Worker.objects.filter(pod_name=POD, phase="Running").exists())
    return job


def _page(user: User, job: Job, query: str = "", htmx: bool = False) -> Any:
    client = Client()
    client.force_login(user)
    headers = {"HX-Request": "true"} if htmx else {}
    return client.get(reverse("job_logs", args=[job.pk]) + query, headers=headers)


def _api(user: User, job: Job, pod: str = POD, query: str = "") -> Any:
    token = ApiToken.issue(user, name="logs")[1]
    url = f"/api/v1/jobs/{job.pk}/workers/{pod}/logs{query}"
    return Client().get(url, headers={"Authorization": f"Bearer {token}"})


def test_it_shows_a_member_the_tail_of_the_pod(alice: User, running: Job) -> None:
    response = _page(alice, running)
    assert response.status_code == 200
    text = response.content.decode()
    assert "[sim] sim run 3600" in text and "loss=" in text
    assert "data-log" in text and "data-poll" in text


def test_it_links_the_logs_from_the_job_page_for_members_only(
    alice: User, bob: User, running: Job
) -> None:
    Membership.objects.filter(user=bob).update(role=Membership.Role.VIEWER)
    url = reverse("job_logs", args=[running.pk])
    assert url in _get(alice, reverse("job", args=[running.pk]))
    assert url not in _get(bob, reverse("job", args=[running.pk]))


def _get(user: User, url: str) -> str:
    client = Client()
    client.force_login(user)
    return client.get(url).content.decode()


def test_it_refuses_viewers_and_hides_the_job_from_outsiders(
    bob: User, charlie: User, running: Job
) -> None:
    Membership.objects.filter(user=bob).update(role=Membership.Role.VIEWER)
    assert _page(bob, running).status_code == 403
    assert _page(charlie, running).status_code == 404
    assert _api(bob, running).status_code == 403
    assert _api(charlie, running).status_code == 404


def test_it_filters_the_shown_lines_by_the_search_without_javascript(
    alice: User, running: Job
) -> None:
    text = _page(alice, running, "?q=WORKING+for").content.decode()
    # Each line numbered (issue 34: an anchor #L<n> and the number drawn beside it).
    assert re.search(
        r'<span class="log-line" id="L\d+" data-n="\d+">\[sim\] working for 3600s', text
    )
    assert re.search(r'<span class="log-line" id="L1" data-n="1" hidden>\[sim\] sim run 3600', text)
    assert "<output data-log-matches>1</output>" in text


def test_it_caps_the_tail_and_refuses_a_bad_one(alice: User, running: Job) -> None:
    answer = _api(alice, running, query="?tail=2").json()
    assert answer["lines"] == 2 and answer["tail"] == 2 and answer["container"] == "main"
    assert len(answer["text"].splitlines()) == 2 and not answer["cut"]
    assert _api(alice, running, query="?tail=5001").status_code == 400
    assert _api(alice, running, query="?tail=x").status_code == 400
    assert "from 1 to 5000" in _page(alice, running, f"?pod={POD}&tail=0").content.decode()


def test_it_answers_404_for_a_pod_that_is_not_of_this_job(alice: User, running: Job) -> None:
    assert _api(alice, running, pod="someone-else-0").status_code == 404
    assert _page(alice, running, "?pod=someone-else-0").status_code == 404


def test_it_keeps_the_previous_container_and_events_for_operators(
    alice: User, olga: User, running: Job
) -> None:
    assert _api(alice, running, query="?previous=true").status_code == 403
    refused = _page(alice, running, f"?pod={POD}&previous=1").content.decode()
    assert "shown to operators only" in refused
    assert "Kubernetes events" not in _page(alice, running).content.decode()
    answer = _api(olga, running, query="?previous=true")
    assert answer.status_code == 409
    assert (
        f'previous terminated container "main" in pod "{POD}" not found' in answer.json()["message"]
    )
    page = _page(olga, running).content.decode()
    assert "Kubernetes events of the pod" in page and "Scheduled" in page


def test_it_downloads_the_tail_as_text(alice: User, running: Job) -> None:
    client = Client()
    client.force_login(alice)
    url = reverse("job_logs_download", args=[running.pk]) + f"?pod={POD}&tail=3"
    response = client.get(url)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="{POD}-main.log"'
    assert len(response.content.decode().splitlines()) == 3


def test_it_answers_an_unchanged_follow_with_204(alice: User, cluster: Cluster) -> None:  # noqa: F811
    """STYLE: polling that idles. A hanging workload prints nothing new: nothing is swapped."""
    job = submit(alice, cluster, "idle", task("worker", command=["sim", "hang"]))
    running = Worker.objects.filter(pod_name="idle-worker-0", phase="Running")
    sync_until(cluster, running.exists)
    first = _page(alice, job, "?pod=idle-worker-0&part=log", htmx=True)
    assert first.status_code == 200 and "waiting forever" in first.content.decode()
    version = first.context["version"]
    again = _page(alice, job, f"?pod=idle-worker-0&part=log&v={version}", htmx=True)
    assert again.status_code == 204


def test_it_says_when_the_cluster_has_no_such_pod_now(alice: User, running: Job) -> None:
    """A Worker row outlives its pod (spec §Pod and Worker: rows are the last report)."""
    worker = Worker.objects.get(pod_name=POD)
    Worker.objects.create(
        task=worker.task, pod_name="trainer-worker-7", phase="Running",
        last_reported_at=worker.last_reported_at,
    )  # fmt: skip
    answer = _api(alice, running, pod="trainer-worker-7")
    assert answer.status_code == 404
    assert "no pod trainer-worker-7 now" in answer.json()["message"]
    page = _page(alice, running, "?pod=trainer-worker-7").content.decode()
    assert "The cluster has no pod trainer-worker-7 now" in page


def test_it_says_why_a_log_cannot_be_read_from_an_offline_node(
    alice: User,
    running: Job,
    sim: Any,  # noqa: F811 (the fixture)
) -> None:
    """The API server cannot reach the kubelet: its 500 is worded, not a 500 of the console."""
    sim.node_offline(Worker.objects.get(pod_name=POD).node_name)
    answer = _api(alice, running)
    assert answer.status_code == 503
    assert "no route to host" in answer.json()["message"]
    assert "The cluster could not be read" in _page(alice, running).content.decode()


def test_it_names_who_reads_the_previous_container_by_the_setting(
    alice: User, olga: User, running: Job, settings: Any
) -> None:
    """The badge follows TRAINYARD_DIAGNOSTICS (jobs.diagnostics.readers)."""
    assert "Previous container (operators)" in _page(olga, running).content.decode()
    settings.TRAINYARD_DIAGNOSTICS = "members"
    page = _page(alice, running).content.decode()
    assert "Previous container (operators and project members)" in page
