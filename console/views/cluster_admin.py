"""The operators' cluster pages (issue 36, Build 1): register a cluster (server URL, CA and a
ServiceAccount token, with the least-privilege RBAC to apply first; or a kubeconfig), and a
cluster's page with its connection checklist, a new test, rotation and retirement. Anyone but
an operator gets 403.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from console import cluster_actions, node_actions, permissions
from console.models import Cluster

FIELDS = ("server", "ca", "token", "kubeconfig", "context", "namespace", "prometheus_url")


def rbac_yaml() -> str:
    """The least-privilege RBAC an operator applies before registering (the shipped file)."""
    path = Path(settings.BASE_DIR) / "deploy" / "rbac-data-plane.yaml"
    try:
        return path.read_text()
    except OSError:
        return ""


def _body(request: HttpRequest) -> dict[str, Any]:
    found: dict[str, Any] = {name: request.POST.get(name, "") for name in FIELDS}
    found["insecure"] = request.POST.get("insecure") == "on"
    return found


@login_required
def cluster_new(request: HttpRequest) -> HttpResponse:
    node_actions.check_operator(request.user)
    context: dict[str, Any] = {"rbac": rbac_yaml(), "values": {}, "errors": {}}
    if request.method == "POST":
        values = _body(request)
        name = request.POST.get("name", "").strip()
        try:
            cluster, _report = cluster_actions.register(request.user, name, values, request)
        except node_actions.ActionRefused as refused:
            values.pop("token"), values.pop("kubeconfig")  # never sent back to the page
            context |= {"values": {**values, "name": name}, "error": refused.message,
                        "errors": refused.extra.get("errors", {})}  # fmt: skip
            return render(request, "console/cluster_new.html", context, status=422)
        messages.success(request, _("Cluster %(name)s is registered.") % {"name": cluster.name})
        return redirect("cluster", cluster.name)
    return render(request, "console/cluster_new.html", context)


def _operated_cluster(request: HttpRequest, name: str) -> Cluster:
    node_actions.check_operator(request.user)
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise Http404("No such cluster.")
    return cluster


def checklist(cluster: Cluster) -> list[dict[str, Any]]:
    """The last check's answer per permission (nothing assumed where none was made)."""
    return [{"need": need, "allowed": cluster.access.get(need.key)} for need in permissions.NEEDS]


@login_required
def cluster_page(request: HttpRequest, name: str) -> HttpResponse:
    cluster = _operated_cluster(request, name)
    context = {
        "cluster": cluster,
        "checklist": checklist(cluster),
        "live_jobs": cluster_actions.live_jobs(cluster),
        "now": timezone.now(),
    }
    return render(request, "console/cluster.html", context)


@login_required
@require_POST
def cluster_test(request: HttpRequest, name: str) -> HttpResponse:
    cluster = _operated_cluster(request, name)
    try:
        report = cluster_actions.check_connection(request.user, cluster, request)
    except node_actions.ActionRefused as refused:
        messages.error(request, refused.message)
        return redirect("cluster", name)
    if report.reached:
        messages.success(request, _("The cluster answered; its checklist is updated."))
    else:
        messages.error(
            request, _("The connection test failed: %(error)s") % {"error": report.error}
        )
    return redirect("cluster", name)


@login_required
@require_POST
def cluster_rotate(request: HttpRequest, name: str) -> HttpResponse:
    cluster = _operated_cluster(request, name)
    try:
        cluster_actions.rotate(request.user, cluster, _body(request), request)
        messages.success(request, _("The new credentials work and are in use."))
    except node_actions.ActionRefused as refused:
        messages.error(request, refused.message)
    return redirect("cluster", name)


@login_required
@require_POST
def cluster_retire(request: HttpRequest, name: str) -> HttpResponse:
    cluster = _operated_cluster(request, name)
    try:
        cluster_actions.retire(request.user, cluster, request)
        messages.success(request, _("Cluster %(name)s is retired.") % {"name": name})
    except node_actions.ActionRefused as refused:
        messages.error(request, refused.message)
    return redirect("cluster", name)
