"""Clusters, Nodes and Add-ons pages (spec §Node and Addon status): platform objects every logged-in
user sees, each fact with its age, stale data marked, the kubeconfig never shown."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import time_machine
from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.staticfiles import finders
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from console.models import Addon, Cluster, Node, Project
from console.views.clusters import memory_words
from jobs.choices import JobPhase
from jobs.models import Job
from tests.conftest import open_cluster

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
PAGES = ["/clusters/", "/nodes/", "/addons/"]


@pytest.fixture(autouse=True)
def frozen_clock() -> object:
    with time_machine.travel(NOW, tick=False) as traveller:
        yield traveller


@pytest.fixture
def reachable(cluster: Cluster) -> Cluster:
    cluster.reachable = True
    cluster.last_synced_at = cluster.last_attempt_at = NOW - timedelta(seconds=4)
    cluster.save()
    return cluster


@pytest.fixture
def broken(project: Project) -> Cluster:
    """A cluster whose last successful sync is long past and whose last attempt failed (the
    project may use it)."""
    return open_cluster(
        "gpu-b",
        kubeconfig="apiVersion: v1\n# token: very-secret-token\n",
        reachable=False,
        message="HTTPConnectionPool: connection refused",
        last_synced_at=NOW - timedelta(seconds=settings.TRAINYARD_STALE_AFTER + 120),
        last_attempt_at=NOW - timedelta(seconds=3),
    )


def make_node(cluster: Cluster, name: str, **fields: object) -> Node:
    fields.setdefault("phase", Node.Phase.ONLINE)
    fields.setdefault("observed_at", NOW - timedelta(minutes=3))
    return Node.objects.create(cluster=cluster, name=name, **fields)


def make_addon(cluster: Cluster, name: str, **fields: object) -> Addon:
    fields.setdefault("observed_at", NOW - timedelta(minutes=3))
    return Addon.objects.create(cluster=cluster, name=name, **fields)


def get(client: Client, user: User, url: str, **headers: str) -> str:
    client.force_login(user)
    response = client.get(url, headers=headers)
    assert response.status_code == 200
    return response.content.decode()


def row(html: str, attribute: str, name: str) -> str:
    match = re.search(rf'<tr[^>]*data-{attribute}="{name}">(.*?)</tr>', html, re.S)
    assert match, f"no row for {name}"
    return match.group(1)


@pytest.mark.parametrize("url", PAGES)
@pytest.mark.parametrize("htmx", [False, True])
def test_it_sends_an_anonymous_visitor_to_the_login_page(
    client: Client, url: str, htmx: bool
) -> None:
    response = client.get(url, headers={"HX-Request": "true"} if htmx else {})
    if htmx:  # the whole page goes to the login form (console/sessions.py)
        assert response.status_code == 200
        assert response["HX-Redirect"] == f"/accounts/login/?next={url}"
    else:
        assert response.status_code == 302
        assert response["Location"] == f"/accounts/login/?next={url}"


@pytest.mark.parametrize("url", PAGES)
@pytest.mark.parametrize("user", ["alice", "charlie", "olga"])
def test_it_shows_the_platform_pages_to_every_logged_in_user(
    client: Client, url: str, user: str, request: pytest.FixtureRequest, reachable: Cluster
) -> None:
    """Members, outsiders of every project and users with no membership at all."""
    make_node(reachable, "node-1")
    make_addon(reachable, "gpu-device-plugin")
    for fragment in (False, True):
        html = get(
            client,
            request.getfixturevalue(user),
            url,
            **({"HX-Request": "true"} if fragment else {}),
        )
        assert ("<!doctype html>" in html) is not fragment
        assert 'hx-trigger="every 5s, refresh"' in html and "data-poll" in html


def test_it_shows_reachability_sync_times_the_error_and_counts(
    client: Client, alice: User, reachable: Cluster, broken: Cluster, project: Project
) -> None:
    make_node(reachable, "n1")
    make_node(reachable, "n2")
    make_node(reachable, "n3", phase=Node.Phase.OFFLINE)
    Job.objects.create(
        project=project,
        cluster=reachable,
        name="j1",
        namespace="default",
        spec={},
        phase=JobPhase.RUNNING,
    )
    Job.objects.create(project=project, cluster=reachable, name="j2", namespace="default", spec={})
    Job.objects.create(
        project=project,
        cluster=reachable,
        name="gone",
        namespace="default",
        spec={},
        delete_requested_at=NOW,
    )
    html = get(client, alice, "/clusters/")
    good, bad = row(html, "cluster", "gpu-a"), row(html, "cluster", "gpu-b")
    assert re.findall(r'<td class="num">(?:<a [^>]*>)?(\d+)', good) == ["2", "1", "2", "1"]
    assert 'data-status="Reachable"' in good and "reachable" in good and "stale" not in good
    assert 'data-status="Unreachable"' in bad and "unreachable" in bad
    assert 'class="stale"' in bad and "connection refused" in bad
    assert "2026-03-02 11:59:57" in bad  # the last attempt, in the user's zone (UTC here)


def test_it_never_shows_a_kubeconfig(client: Client, alice: User, broken: Cluster) -> None:
    for url in PAGES:
        html = get(client, alice, url)
        assert "very-secret-token" not in html and "apiVersion" not in html


def test_it_shows_online_and_schedulable_as_separate_columns(
    client: Client, alice: User, reachable: Cluster
) -> None:
    """Spec §Node and Addon status: an Online node may still accept no new tasks."""
    make_node(
        reachable,
        "cordoned",
        unschedulable=True,
        gpu_capacity=8,
        gpu_allocated=6,
        cpu_capacity="64",
        memory_capacity="512Gi",
        last_heartbeat_at=NOW - timedelta(seconds=30),
    )
    make_node(
        reachable, "lost", phase=Node.Phase.OFFLINE, message="Kubelet stopped posting node status."
    )
    html = get(client, alice, "/nodes/")
    cordoned, lost = row(html, "node", "cordoned"), row(html, "node", "lost")
    assert 'data-status="Online"' in cordoned and 'data-schedulable="no"' in cordoned
    assert "No (cordoned)" in cordoned
    assert re.findall(r'<td class="num"[^>]*>([^<]+)</td>', cordoned) == ["8", "6", "64", "512 GiB"]
    assert 'data-status="Offline"' in lost and 'data-schedulable="yes"' in lost
    assert "Kubelet stopped posting node status." in lost
    assert "an Online node may still accept no new tasks" in html


@pytest.mark.parametrize(
    ("quantity", "words"),
    [("1056583136Ki", "1007.6 GiB"), ("16Gi", "16 GiB"), ("2Ti", "2 TiB"), ("512Mi", "512 MiB"),
     ("1000", "1000 B"), ("", ""), ("lots", "lots")],
)  # fmt: skip
def test_it_shows_memory_as_people_read_it(quantity: str, words: str) -> None:
    assert memory_words(quantity) == words


def test_it_filters_nodes_by_cluster(
    client: Client, alice: User, reachable: Cluster, broken: Cluster
) -> None:
    make_node(reachable, "a-node")
    make_node(broken, "b-node")
    html = get(client, alice, "/nodes/?cluster=gpu-b")
    assert 'data-node="b-node"' in html and 'data-node="a-node"' not in html
    assert '<option value="gpu-b" selected>' in html


def test_it_marks_the_rows_of_an_unreachable_or_stale_cluster(
    client: Client, alice: User, reachable: Cluster, broken: Cluster
) -> None:
    make_node(reachable, "fresh")
    make_node(broken, "frozen")
    make_addon(broken, "ray-operator")
    nodes = get(client, alice, "/nodes/")
    fresh, frozen = row(nodes, "node", "fresh"), row(nodes, "node", "frozen")
    assert 'class="stale"' not in fresh and "unreachable" not in fresh
    assert "2026-03-02 11:59:56" in fresh  # unchanged since 11:57, confirmed by the last sync
    assert 'class="stale"' in frozen and "unreachable" in frozen
    assert "2026-03-02 11:57:30" in frozen  # the last successful sync, long ago
    addon = row(get(client, alice, "/addons/"), "addon", "ray-operator")
    assert 'class="stale"' in addon and "unreachable" in addon


def test_it_shows_addon_phase_versions_and_what_ready_means(
    client: Client, alice: User, reachable: Cluster
) -> None:
    make_addon(
        reachable,
        "gpu-device-plugin",
        phase=Addon.Phase.READY,
        desired_version="v0.17.0",
        current_version="v0.17.0",
    )
    make_addon(
        reachable,
        "ray-operator",
        phase=Addon.Phase.UPGRADING,
        desired_version="1.3.0",
        current_version="1.2.2",
        message="rolling out 1 of 2 replicas",
    )
    html = get(client, alice, "/addons/")
    ready, upgrading = row(html, "addon", "gpu-device-plugin"), row(html, "addon", "ray-operator")
    assert 'data-status="Ready"' in ready and "not the desired version" not in ready
    assert 'data-status="Upgrading"' in upgrading and "not the desired version" in upgrading
    assert "<code>1.3.0</code>" in upgrading and "<code>1.2.2</code>" in upgrading
    assert "rolling out 1 of 2 replicas" in upgrading
    assert (
        "Ready means the add-on has reached its desired version; verify the features that use "
        "it separately."
    ) in html


def test_it_flags_no_version_difference_when_no_desired_version_is_set(
    client: Client, alice: User, reachable: Cluster
) -> None:
    """An empty desired version means the version the workload asks for (jobs.status.observed)."""
    make_addon(reachable, "ray-operator", phase=Addon.Phase.READY, current_version="v1.3.0")
    html = row(get(client, alice, "/addons/"), "addon", "ray-operator")
    assert "not set: the version the workload asks for" in html
    assert "not the desired version" not in html and "<code>v1.3.0</code>" in html


def test_it_says_what_ready_claims_when_no_desired_version_is_set(
    client: Client, alice: User, reachable: Cluster
) -> None:
    """Spec §Node and Addon status: Ready means the Addon reached its desired version; without
    one, the page says that Ready claims only that the workload is available."""
    make_addon(reachable, "ray-operator", phase=Addon.Phase.READY, current_version="v1.3.0")
    make_addon(
        reachable,
        "gpu-device-plugin",
        phase=Addon.Phase.READY,
        desired_version="v0.17.0",
        current_version="v0.17.0",
    )
    make_addon(reachable, "volcano", phase=Addon.Phase.INSTALLING)
    html = get(client, alice, "/addons/")
    claim = "no desired version is set: Ready only means the workload is available"
    assert claim in row(html, "addon", "ray-operator")
    assert claim not in row(html, "addon", "gpu-device-plugin")
    assert claim not in row(html, "addon", "volcano")


def poll_url(html: str) -> str:
    match = re.search(r'hx-get="([^"]+)"', html)
    assert match
    return match.group(1).replace("&amp;", "&")


@pytest.mark.parametrize("url", PAGES)
def test_it_answers_204_while_nothing_shown_changes_and_a_fragment_after(
    client: Client,
    alice: User,
    reachable: Cluster,
    url: str,
    frozen_clock: time_machine.Traveller,
) -> None:
    make_node(reachable, "n1")
    make_addon(reachable, "ray-operator")
    poll = poll_url(get(client, alice, url))
    assert client.get(poll, headers={"HX-Request": "true"}).status_code == 204
    Node.objects.filter(name="n1").update(phase=Node.Phase.OFFLINE, observed_at=NOW)
    Addon.objects.update(phase=Addon.Phase.FAILED, observed_at=NOW)
    response = client.get(poll, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert response.content.lstrip().startswith(b'<div id="')
    assert poll_url(response.content.decode()) != poll


def test_it_re_renders_a_fragment_once_the_ages_shown_may_have_moved(
    client: Client, alice: User, reachable: Cluster, frozen_clock: time_machine.Traveller
) -> None:
    make_node(reachable, "n1")
    poll = poll_url(get(client, alice, "/nodes/"))
    frozen_clock.shift(timedelta(seconds=31))
    assert client.get(poll, headers={"HX-Request": "true"}).status_code == 200


def test_it_pages_the_nodes_and_keeps_the_filter(
    client: Client, alice: User, reachable: Cluster
) -> None:
    Node.objects.bulk_create(
        Node(cluster=reachable, name=f"node-{i:03d}", phase=Node.Phase.ONLINE, observed_at=NOW)
        for i in range(105)
    )
    first = get(client, alice, "/nodes/?cluster=gpu-a")
    assert first.count("<tr data-node=") == 100 and "Page 1 of 2 (105 rows)" in first
    assert 'href="/nodes/?cluster=gpu-a&amp;page=2"' in first
    second = get(client, alice, "/nodes/?cluster=gpu-a&page=2")
    assert second.count("<tr data-node=") == 5 and 'data-node="node-104"' in second


def _queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


@pytest.mark.parametrize("url", PAGES)
def test_it_uses_the_same_number_of_queries_for_3_and_40_rows(
    client: Client, alice: User, project: Project, url: str
) -> None:
    client.force_login(alice)

    def add(first: int, count: int) -> None:
        for index in range(first, first + count):
            cluster = Cluster.objects.create(
                name=f"c{index}", kubeconfig="x", reachable=True, last_synced_at=NOW
            )
            project.clusters.add(cluster)
            make_node(cluster, f"n{index}")
            make_addon(cluster, f"a{index}")
            Job.objects.create(
                project=project, cluster=cluster, name=f"j{index}", namespace="default", spec={}
            )

    add(0, 3)
    small = _queries(client, url)
    add(3, 37)
    assert _queries(client, url) == small
    assert get(client, alice, url).count("<tr ") == 40


@pytest.mark.parametrize("url", ["/accounts/login/", "/", *PAGES])
def test_it_links_a_favicon_that_is_shipped_so_no_page_asks_for_a_missing_one(
    client: Client, alice: User, url: str
) -> None:
    """Without a linked icon every browser asks for /favicon.ico, a 404 on every page."""
    if url != "/accounts/login/":
        client.force_login(alice)
    html = client.get(url).content.decode()
    link = re.search(r'<link rel="icon" href="/static/([^"]+)" type="image/svg\+xml">', html)
    assert link, f"{url} links no favicon"
    shipped = finders.find(link.group(1))
    assert isinstance(shipped, str) and Path(shipped).read_text().startswith("<svg ")
