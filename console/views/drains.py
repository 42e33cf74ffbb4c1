"""A node's actions page and a drain's page (issue 36), the operators' alone: anyone else gets
403, for the pages, their fragments and their forms alike.

The node page reads the cluster live for the drain preview (what each pod would undergo, and
the Trainyard Jobs that would lose workers); the drain page follows the drain's stored rows,
polled while it runs and no more once it ended.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from console import node_actions, permissions
from console.models import DrainRun, Node, NodeCordon
from console.web import HtmxHttpRequest, not_modified, poll_version
from jobs.choices import DRAIN_TERMINAL, DrainAction, DrainReason

RECENT_DRAINS = 10


def _operated_node(request: HttpRequest, cluster_name: str, node_name: str) -> Node:
    """403 for anyone but an operator, before any lookup; then 404 for an unknown node."""
    node_actions.check_operator(request.user)
    node = (
        Node.objects.select_related("cluster")
        .filter(cluster__name=cluster_name, name=node_name)
        .first()
    )
    if node is None:
        raise Http404("No such node.")
    return node


def _preview(request: HttpRequest, node: Node, emptydir: bool) -> dict[str, Any]:
    try:
        found = node_actions.preview(request.user, node.cluster, node.name, emptydir)
    except node_actions.ActionRefused as refused:
        return {"preview_error": refused.message}
    counts = {action: 0 for action in DrainAction}
    for plan in found.plans:
        counts[DrainAction(plan.action)] += 1
    return {"preview": found, "counts": counts, "refused": found.refused}


@login_required
def node_page(request: HttpRequest, cluster: str, node: str) -> HttpResponse:
    found = _operated_node(request, cluster, node)
    emptydir = request.GET.get("delete_emptydir_data") == "on"
    context = {
        "node": found,
        "cordon": NodeCordon.objects.filter(cluster=found.cluster, node_name=found.name).first(),
        "drains": DrainRun.objects.filter(cluster=found.cluster, node_name=found.name)[
            :RECENT_DRAINS
        ],
        "emptydir": emptydir,
        "default_timeout_minutes": node_actions.DEFAULT_TIMEOUT_SECONDS // 60,
        "reasons": dict(DrainReason.choices),
        "now": timezone.now(),
        # Actions offered only when the console's credentials hold what they need (the last
        # SelfSubjectAccessReviews, console.permissions); otherwise the page names what lacks.
        "cordon_missing": permissions.missing_for("cordon", found.cluster.access),
        "drain_missing": permissions.missing_for("drain", found.cluster.access),
        **_preview(request, found, emptydir),
    }
    return render(request, "console/node.html", context)


def _refused(request: HttpRequest, refused: node_actions.ActionRefused) -> None:
    messages.error(request, refused.message)


@login_required
@require_POST
def node_cordon(request: HttpRequest, cluster: str, node: str) -> HttpResponse:
    found = _operated_node(request, cluster, node)
    try:
        node_actions.cordon(request.user, found.cluster, found.name,
                            request.POST.get("reason", ""), request)  # fmt: skip
        messages.success(request, _("Node %(node)s is cordoned.") % {"node": found.name})
    except node_actions.ActionRefused as refused:
        _refused(request, refused)
    return redirect("node", cluster, node)


@login_required
@require_POST
def node_uncordon(request: HttpRequest, cluster: str, node: str) -> HttpResponse:
    found = _operated_node(request, cluster, node)
    try:
        node_actions.uncordon(request.user, found.cluster, found.name, request)
        messages.success(request, _("Node %(node)s is schedulable again.") % {"node": found.name})
    except node_actions.ActionRefused as refused:
        _refused(request, refused)
    return redirect("node", cluster, node)


def _timeout_seconds(text: str) -> int:
    try:
        minutes = float(text)
    except ValueError:
        return 0
    return int(minutes * 60)


@login_required
@require_POST
def node_drain(request: HttpRequest, cluster: str, node: str) -> HttpResponse:
    found = _operated_node(request, cluster, node)
    try:
        run = node_actions.start_drain(
            request.user, found.cluster, found.name,
            timeout_seconds=_timeout_seconds(request.POST.get("timeout_minutes", "15")),
            delete_emptydir_data=request.POST.get("delete_emptydir_data") == "on",
            skip_blocked=request.POST.get("skip_blocked") == "on", request=request,
        )  # fmt: skip
    except node_actions.ActionRefused as refused:
        _refused(request, refused)
        return redirect("node", cluster, node)
    return redirect("drain", run.pk)


def _operated_drain(request: HttpRequest, pk: int) -> DrainRun:
    node_actions.check_operator(request.user)
    run = DrainRun.objects.select_related("cluster").filter(pk=pk).first()
    if run is None:
        raise Http404("No such drain.")
    return run


@login_required
def drain_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    run = _operated_drain(request, pk)
    rows = list(run.pods.all())
    now = timezone.now()
    facts = (run.state, run.message, [(r.status, r.reason, r.detail, r.attempts) for r in rows])
    version = poll_version(request, facts, now=now)
    context = {
        "run": run,
        "rows": rows,
        "poll": run.state not in DRAIN_TERMINAL,
        "version": version,
        "reasons": dict(DrainReason.choices),
        "deadline": run.started_at + timedelta(seconds=run.timeout_seconds),
        "now": now,
    }
    template = "console/drain.html#progress" if request.htmx else "console/drain.html"
    return not_modified(request, version) or render(request, template, context)


@login_required
@require_POST
def drain_stop(request: HttpRequest, pk: int) -> HttpResponse:
    run = _operated_drain(request, pk)
    try:
        node_actions.stop_drain(request.user, run, request)
        messages.success(request, _("The drain is stopped; the node stays cordoned."))
    except node_actions.ActionRefused as refused:
        _refused(request, refused)
    return redirect("drain", pk)
