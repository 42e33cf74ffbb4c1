"""The operators' add-on registry pages (issue 36, Build 3): register an add-on with a first
version, a registry add-on's page (its derived phase and reason, versions, the desired version
to install or upgrade to, roll back, the last attempts and transitions, followed live while an
attempt runs). Anyone but an operator gets 403.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from console import addon_actions, node_actions
from console.models import Addon, Cluster
from console.permissions import ADDON_NAMESPACE
from console.web import HtmxHttpRequest, not_modified, poll_version

MOVING = (Addon.Phase.INSTALLING, Addon.Phase.UPGRADING)


def _cluster(request: HttpRequest, name: str) -> Cluster:
    node_actions.check_operator(request.user)
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise Http404("No such cluster.")
    return cluster


def _addon(request: HttpRequest, cluster: str, name: str) -> Addon:
    found = _cluster(request, cluster)
    try:
        return addon_actions.addon_of(request.user, found, name)
    except node_actions.ActionRefused:
        raise Http404("No such add-on.") from None


@login_required
def addon_new(request: HttpRequest, cluster: str) -> HttpResponse:
    """ "Install now" is offered only where the last permission check allows an apply in the
    namespace given (kube-system until the operator names another)."""
    found = _cluster(request, cluster)
    values: dict[str, str] = {}
    context: dict[str, Any] = {"cluster": found, "errors": {}}
    if request.method == "POST":
        values = {k: request.POST.get(k, "").strip() for k in ("name", "namespace", "version")}
        body = {
            "name": values["name"], "namespace": values["namespace"] or ADDON_NAMESPACE,
            "versions": {values["version"]: request.POST.get("manifest", "")},
            "desired_version": values["version"] if request.POST.get("install") else "",
        }  # fmt: skip
        try:
            addon = addon_actions.create_addon(request.user, found, body, request)
        except node_actions.ActionRefused as refused:
            context |= {"error": refused.message, "errors": refused.extra.get("errors", {})}
            return _new_form(request, context, values, refused.status)
        return redirect("addon", found.name, addon.name)
    return _new_form(request, context, values)


def _new_form(
    request: HttpRequest, context: dict[str, Any], values: dict[str, str], status: int = 200
) -> HttpResponse:
    namespace = values.get("namespace") or ADDON_NAMESPACE
    missing = addon_actions.missing_to_install(context["cluster"], namespace)
    context |= {"values": values, "namespace": namespace, "missing": missing}
    return render(request, "console/addon_new.html", context, status=status)


@login_required
def addon_page(request: HtmxHttpRequest, cluster: str, name: str) -> HttpResponse:
    addon = _addon(request, cluster, name)
    shown = addon_actions.addon_json(addon)
    now = timezone.now()
    version = poll_version(request, shown, now=now)
    context = {
        "addon": addon, "shown": shown, "now": now, "version": version,
        "poll": shown["phase"] in MOVING,
        "missing": addon_actions.missing(addon),
    }  # fmt: skip
    template = "console/addon.html#status" if request.htmx else "console/addon.html"
    return not_modified(request, version) or render(request, template, context)


@login_required
@require_POST
def addon_change(request: HttpRequest, cluster: str, name: str) -> HttpResponse:
    addon = _addon(request, cluster, name)
    body: dict[str, Any] = {}
    if request.POST.get("version"):
        body["versions"] = {request.POST["version"].strip(): request.POST.get("manifest", "")}
    if request.POST.get("desired_version"):
        body["desired_version"] = request.POST["desired_version"]
    try:
        addon_actions.change_addon(request.user, addon, body, request)
        messages.success(request, _("The add-on is changed."))
    except node_actions.ActionRefused as refused:
        messages.error(request, refused.message)
    return redirect("addon", cluster, name)


@login_required
@require_POST
def addon_rollback(request: HttpRequest, cluster: str, name: str) -> HttpResponse:
    addon = _addon(request, cluster, name)
    try:
        addon_actions.rollback(request.user, addon, request)
        messages.success(request, _("Rolling back to the previous version."))
    except node_actions.ActionRefused as refused:
        messages.error(request, refused.message)
    return redirect("addon", cluster, name)
