"""Platform pages: Clusters, Nodes and Add-ons. Operators see every cluster; anyone else the
clusters their projects may use, and those clusters' nodes and add-ons (jobs.access).

They show what the last sync observed and how old it is (spec §Node and Addon status): a Node's
phase and its schedulability are separate facts, and an Add-on's Ready only means its desired
version is reached. A cluster's kubeconfig is never read here, let alone shown.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone

from console.models import Addon, Cluster, Node, NodeCordon
from console.web import HtmxHttpRequest, not_modified, poll_version
from jobs.access import User, clusters_for, is_operator, jobs_for
from jobs.choices import JobPhase
from jobs.spec import quantity_value
from jobs.status.freshness import is_stale, observed_at

PAGE_SIZE = 100
CLUSTER_FIELDS = (
    "pk", "name", "reachable", "insecure", "insecure_since", "message", "last_synced_at",
    "last_attempt_at", "retired_at",
)  # fmt: skip


def _count(rows: QuerySet[Any]) -> Coalesce:
    """A per-cluster count as a correlated subquery: two joined counts would multiply rows."""
    counted = rows.filter(cluster=OuterRef("pk")).order_by().values("cluster")
    return Coalesce(
        Subquery(counted.annotate(n=Count("pk")).values("n"), output_field=IntegerField()),
        Value(0),
    )


def cluster_rows(now: datetime, visible: QuerySet[Cluster], user: User) -> list[dict[str, Any]]:
    """The `visible` clusters with reachability, sync times, staleness and node counts, and the
    counts of the Jobs `user` may see (others' Jobs are not theirs to count)."""
    live_jobs = jobs_for(user)
    clusters = visible.values(*CLUSTER_FIELDS).annotate(
        nodes_online=_count(Node.objects.filter(phase=Node.Phase.ONLINE)),
        nodes_offline=_count(Node.objects.filter(phase=Node.Phase.OFFLINE)),
        jobs_total=_count(live_jobs),
        jobs_running=_count(live_jobs.filter(phase=JobPhase.RUNNING)),
    )
    return [{**cluster, "stale": is_stale(cluster["last_synced_at"], now)} for cluster in clusters]


def memory_words(quantity: str) -> str:
    """A memory quantity as people read it: the kubelet reports "1056583136Ki"; this is
    "1007.6 GiB". Anything that is not a quantity is shown as it came."""
    try:
        size = quantity_value(quantity)
    except ValueError:
        return quantity
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor:
            return f"{size / factor:.1f}".removesuffix(".0") + f" {unit}"
    return f"{size} B"


def _with_freshness(
    row: dict[str, Any], cluster: tuple[bool, datetime | None], now: datetime
) -> dict[str, Any]:
    """A Node or Add-on row with when its cluster last reported on it and whether that is stale.

    The sync writes a row only when it changed; an unchanged row is confirmed by every later
    successful sync of its cluster (`jobs.status.freshness.observed_at`).
    """
    reachable, synced_at = cluster
    seen = observed_at(row["observed_at"], synced_at)
    return {**row, "seen_at": seen, "stale": is_stale(seen, now), "unreachable": not reachable}


def _respond(
    request: HtmxHttpRequest, template: str, context: dict[str, Any], *facts: object
) -> HttpResponse:
    """The whole page, the refreshed fragment, or 204 when the fragment would not change."""
    version = context["version"] = poll_version(request, *facts, now=context["now"])
    template = f"{template}#rows" if request.htmx else template
    return not_modified(request, version) or render(request, template, context)


@login_required
def cluster_list(request: HtmxHttpRequest) -> HttpResponse:
    now = timezone.now()
    clusters = cluster_rows(now, clusters_for(request.user), request.user)
    context = {"clusters": clusters, "now": now}
    return _respond(request, "console/clusters.html", context, clusters)


def _with_memory(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "memory": memory_words(row["memory_capacity"])}


def _with_versions(row: dict[str, Any]) -> dict[str, Any]:
    """An empty desired version means "whatever the workload asks for" (jobs.status.observed):
    only a desired version that is set can differ from the current one, and Ready without one
    claims less than spec §Node and Addon status says Ready means (the page says so)."""
    desired, current = row["desired_version"], row["current_version"]
    if row["managed"]:  # a registry add-on: the version the console applied
        current = row["current_version"] = row["applied_version"]
    return {
        **row,
        "off_version": bool(desired) and desired != current,
        "ready_without_desired": row["phase"] == Addon.Phase.READY and not desired,
    }


def _cluster_objects(
    request: HtmxHttpRequest,
    rows: QuerySet[Any],
    template: str,
    name: str,
    describe: Callable[[dict[str, Any]], dict[str, Any]],
) -> HttpResponse:
    """A cluster-filtered, paginated table of Nodes or Add-ons, each row marked stale or not."""
    now = timezone.now()
    visible = clusters_for(request.user)
    rows = rows.filter(cluster__in=visible)
    selected = request.GET.get("cluster", "").strip()
    if selected:
        rows = rows.filter(cluster__name=selected)
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    clusters = list(visible.values_list("pk", "name", "reachable", "last_synced_at"))
    facts = {pk: (reachable, synced) for pk, _, reachable, synced in clusters}
    shown = [
        describe(_with_freshness(row, facts.get(row["cluster_id"], (False, None)), now))
        for row in page.object_list
    ]
    context = {
        name: shown,
        "page": page,
        "cluster_names": [cluster[1] for cluster in clusters],
        "selected": selected,
        "now": now,
    }
    return _respond(request, template, context, shown, page.number, page.paginator.count)


NODE_FIELDS = (
    "pk",
    "cluster_id",
    "cluster__name",
    "name",
    "phase",
    "unschedulable",
    "gpu_capacity",
    "gpu_allocated",
    "cpu_capacity",
    "memory_capacity",
    "last_heartbeat_at",
    "message",
    "observed_at",
)
ADDON_FIELDS = (
    "pk",
    "cluster_id",
    "cluster__name",
    "managed",
    "applied_version",
    "name",
    "namespace",
    "phase",
    "desired_version",
    "current_version",
    "message",
    "observed_at",
)


def _node_describer(user: User) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Rows with their memory in words and, while cordoned, the console's word on why, who
    and when (NodeCordon); operators get the link to the node's actions."""
    cordons = {
        (cordon["cluster_id"], cordon["node_name"]): cordon
        for cordon in NodeCordon.objects.filter(cluster__in=clusters_for(user)).values(
            "cluster_id", "node_name", "reason", "by_name", "at"
        )
    }
    operator = is_operator(user)

    def describe(row: dict[str, Any]) -> dict[str, Any]:
        cordon = cordons.get((row["cluster_id"], row["name"])) if row["unschedulable"] else None
        return {**_with_memory(row), "cordon": cordon, "operator": operator}

    return describe


@login_required
def node_list(request: HtmxHttpRequest) -> HttpResponse:
    nodes = Node.objects.values(*NODE_FIELDS).order_by("cluster__name", "name")
    describe = _node_describer(request.user)
    return _cluster_objects(request, nodes, "console/nodes.html", "nodes", describe)


@login_required
def addon_list(request: HtmxHttpRequest) -> HttpResponse:
    addons = Addon.objects.values(*ADDON_FIELDS).order_by("cluster__name", "name")
    return _cluster_objects(request, addons, "console/addons.html", "addons", _with_versions)
