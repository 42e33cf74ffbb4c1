"""An operator's actions on clusters (issue 36, Build 1): register one with a server URL, its CA
and a token (or a kubeconfig, under the checks of `add_cluster`), test its connection, rotate
its credentials, retire it. The pages and the API call these; they reach the engine only
through here (`console.engine.connection`).

Before credentials are stored they are tested: TLS verified against the CA (insecure only when
the operator says so, shown on the cluster for ever after), `/version`, then one
SelfSubjectAccessReview per permission the console needs, kept as the cluster's checklist. The
server URL is checked like an outbound webhook (`console.outbound`). Operator-only, audited.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext as _

from console import audit
from console.engine.connection import ConnectionReport, needs_of, probe_connection
from console.kubeconfig import (
    KubeconfigRejected,
    check_plain_http,
    server_of,
    validate_kubeconfig,
)
from console.models import AuditEvent, Cluster, validate_http_url
from console.node_actions import ActionRefused, check_operator
from console.outbound import AddressRefused, check_server
from jobs.access import User
from jobs.choices import JobPhase

LIVE_PHASES = (JobPhase.PENDING, JobPhase.RUNNING)
Action = AuditEvent.Action


@dataclass(frozen=True)
class Credentials:
    kubeconfig: str
    context: str
    namespace: str
    insecure: bool


def _quoted(value: str) -> str:
    return orjson.dumps(value).decode()  # a JSON string is a YAML double-quoted scalar


def kubeconfig_for(server: str, ca: str, token: str, namespace: str, insecure: bool) -> str:
    """A kubeconfig of one ServiceAccount token: the CA inline (base64), never a file."""
    tls = "    insecure-skip-tls-verify: true\n" if insecure else ""
    if ca and not insecure:
        tls = f"    certificate-authority-data: {base64.b64encode(ca.encode()).decode()}\n"
    return (
        "apiVersion: v1\nkind: Config\nclusters:\n- name: cluster\n  cluster:\n"
        f"    server: {_quoted(server)}\n{tls}"
        "contexts:\n- name: console\n  context:\n    cluster: cluster\n    user: console\n"
        f"    namespace: {_quoted(namespace)}\ncurrent-context: console\n"
        f"users:\n- name: console\n  user:\n    token: {_quoted(token)}\n"
    )


def _text(body: Mapping[str, Any], name: str) -> str:
    value = body.get(name, "")
    if not isinstance(value, str):
        raise ActionRefused(422, _("%(field)s must be text.") % {"field": name},
                            errors={name: _("Must be text.")})  # fmt: skip
    return value.strip()


def _refused(field: str, message: str) -> ActionRefused:
    return ActionRefused(422, message, errors={field: message})


def prometheus_url_from(body: Mapping[str, Any]) -> str:
    """The optional Prometheus that scrapes the cluster's DCGM exporter (docs/usage.md)."""
    value = _text(body, "prometheus_url")
    if not value:
        return ""
    try:
        validate_http_url(value)
    except ValidationError:
        message = _("The Prometheus URL must be an http:// or https:// URL.")
        raise _refused("prometheus_url", message) from None
    return value.rstrip("/")


def credentials_from(body: Mapping[str, Any]) -> Credentials:
    """The credentials of a request, checked like `add_cluster`'s (no exec, auth-provider or
    file reference, TLS verified unless `insecure`) and their server's address checked."""
    insecure = body.get("insecure", False) is True
    namespace = _text(body, "namespace") or "default"
    if _text(body, "kubeconfig"):
        text, context, field = _text(body, "kubeconfig"), _text(body, "context"), "kubeconfig"
    else:
        server, ca, token = _text(body, "server"), _text(body, "ca"), _text(body, "token")
        if not server or not token:
            raise _refused("server", _("Give a server URL and a token, or a kubeconfig."))
        if server.startswith("https://") and not ca and not insecure:
            raise _refused("ca", _("Give the server's CA certificate, or mark it insecure."))
        text, context, field = kubeconfig_for(server, ca, token, namespace, insecure), "", "server"
    try:
        config = validate_kubeconfig(text, context, insecure=insecure)
        check_plain_http(text, context, insecure)
        check_server(server_of(text, context))
    except KubeconfigRejected as error:
        raise _refused(field, str(error)) from None
    except AddressRefused as error:
        raise _refused("server", str(error)) from None
    return Credentials(text, context or str(config["current-context"]), namespace, insecure)


def _probe(credentials: Credentials, cluster: Cluster | None = None) -> ConnectionReport:
    """`cluster`: a stored one, whose add-ons' namespaces are asked too."""
    config = validate_kubeconfig(
        credentials.kubeconfig, credentials.context, insecure=credentials.insecure
    )
    needs = needs_of(cluster)
    return probe_connection(config, credentials.context, credentials.namespace, needs)


def _failed(report: ConnectionReport) -> ActionRefused:
    return ActionRefused(
        422, _("The connection test failed: %(error)s") % {"error": report.error},
        checklist=[], errors={"server": report.error},
    )  # fmt: skip


def _tested_fields(report: ConnectionReport) -> dict[str, Any]:
    return {"server_version": report.version[:64], "access": report.allowed,
            "access_checked_at": timezone.now()}  # fmt: skip


def register(
    user: User, name: str, body: Mapping[str, Any], request: HttpRequest | None = None
) -> tuple[Cluster, ConnectionReport]:
    check_operator(user)
    target = f"cluster {name}"
    try:
        validate_slug(name)
    except ValidationError:
        raise _refused("name", _("A cluster's name is letters, digits, - and _.")) from None
    if Cluster.objects.filter(name=name).exists():
        raise ActionRefused(409, _("A cluster named %(name)s exists already.") % {"name": name})
    try:
        prometheus_url = prometheus_url_from(body)
        credentials = credentials_from(body)
        report = _probe(credentials)
        if not report.reached:
            raise _failed(report)
    except ActionRefused as refused:
        _audit(request, user, Action.CLUSTER_CREATE, target, AuditEvent.Result.REFUSED,
               refused.message)  # fmt: skip
        raise
    cluster = Cluster.objects.create(
        name=name, kubeconfig=credentials.kubeconfig, context=credentials.context,
        namespace=credentials.namespace, insecure=credentials.insecure,
        prometheus_url=prometheus_url, **_tested_fields(report),
    )  # fmt: skip
    _audit(request, user, Action.CLUSTER_CREATE, target,
           detail=f"from the console{', insecure' if credentials.insecure else ''}")  # fmt: skip
    return cluster, report


def check_not_retired(cluster: Cluster) -> None:
    """Nothing new on a retired cluster (no credentials, never synced again): 409."""
    if cluster.retired_at is not None:
        raise ActionRefused(409, _("This cluster is retired."))


def check_connection(
    user: User, cluster: Cluster, request: HttpRequest | None = None
) -> ConnectionReport:
    """The stored credentials tested again; the checklist kept (the pages show actions by it)."""
    check_operator(user)
    check_not_retired(cluster)
    credentials = Credentials(cluster.kubeconfig, cluster.context, cluster.namespace,
                              cluster.insecure)  # fmt: skip
    try:
        report = _probe(credentials, cluster)
    except KubeconfigRejected as error:
        raise ActionRefused(422, str(error)) from None
    if report.reached:
        Cluster.objects.filter(pk=cluster.pk).update(**_tested_fields(report))
    result = AuditEvent.Result.SUCCEEDED if report.reached else AuditEvent.Result.FAILED
    _audit(request, user, Action.CLUSTER_TEST, f"cluster {cluster.name}", result, report.error)
    return report


def rotate(
    user: User, cluster: Cluster, body: Mapping[str, Any], request: HttpRequest | None = None
) -> ConnectionReport:
    """The new credentials are tested first; only then swapped in, in one UPDATE (a sync
    reads either the old ones or the new ones, never a mix), and the time recorded."""
    check_operator(user)
    target = f"cluster {cluster.name}"
    try:
        credentials = credentials_from({"namespace": cluster.namespace, **body})
        report = _probe(credentials, cluster)
        if not report.reached:
            raise _failed(report)
    except ActionRefused as refused:
        _audit(request, user, Action.CLUSTER_ROTATE, target, AuditEvent.Result.REFUSED,
               refused.message)  # fmt: skip
        raise
    now = timezone.now()
    # A cluster that was ever insecure keeps when it first was (issue 36: "for ever after").
    since = (
        Coalesce(F("insecure_since"), Value(now)) if credentials.insecure else F("insecure_since")
    )
    swapped = Cluster.objects.filter(pk=cluster.pk, retired_at__isnull=True).update(
        kubeconfig=credentials.kubeconfig, kubeconfig_path="", context=credentials.context,
        insecure=credentials.insecure, insecure_since=since, credentials_rotated_at=now,
        **_tested_fields(report),
    )  # fmt: skip
    if not swapped:
        raise ActionRefused(409, _("This cluster is retired."))
    _audit(request, user, Action.CLUSTER_ROTATE, target,
           detail="insecure" if credentials.insecure else "")  # fmt: skip
    return report


def retire(user: User, cluster: Cluster, request: HttpRequest | None = None) -> Cluster:
    """Refused while a Job on it is Pending or Running, and when it is retired already (the
    first `retired_at` is kept); its credentials deleted, its Jobs' history kept, never synced
    again. The cluster's row is locked while its Jobs are counted: creating or resuming a Job
    locks it too (jobs.operations), so no Job becomes live on a cluster being retired."""
    check_operator(user)
    target = f"cluster {cluster.name}"
    with transaction.atomic():
        locked = Cluster.objects.select_for_update(no_key=True).get(pk=cluster.pk)
        live = 0 if locked.retired_at else live_jobs(locked)
        if locked.retired_at is None and not live:
            locked.retired_at = timezone.now()
            Cluster.objects.filter(pk=cluster.pk).update(
                kubeconfig="", kubeconfig_path="", retired_at=locked.retired_at,
                reachable=False, access={}, watch_cursors={},
            )  # fmt: skip
            _audit(request, user, Action.CLUSTER_RETIRE, target)
            return locked
    if live:
        _audit(request, user, Action.CLUSTER_RETIRE, target, AuditEvent.Result.REFUSED,
               f"{live} live jobs")  # fmt: skip
        raise ActionRefused(409, _("%(count)s Jobs on this cluster are Pending or Running: stop "
                                   "them first.") % {"count": live})  # fmt: skip
    _audit(request, user, Action.CLUSTER_RETIRE, target, AuditEvent.Result.REFUSED,
           "retired already")  # fmt: skip
    raise ActionRefused(409, _("This cluster is retired already."))


def live_jobs(cluster: Cluster) -> int:
    """Its Jobs that hold or will hold resources: Pending or Running, not being deleted."""
    return cluster.jobs.filter(phase__in=LIVE_PHASES, delete_requested_at__isnull=True).count()


def _audit(
    request: HttpRequest | None, user: User, action: AuditEvent.Action, target: str,
    result: AuditEvent.Result = AuditEvent.Result.SUCCEEDED, detail: str = "",
) -> None:  # fmt: skip
    audit.record(action, user=user, request=request, target=target, result=result, detail=detail)


def report_json(report: ConnectionReport) -> dict[str, Any]:
    return {
        "reached": report.reached, "version": report.version, "error": report.error,
        "checklist": [
            {"permission": c.need.key, "allowed": c.allowed, "required": c.need.required,
             "breaks": "" if c.allowed else str(c.need.breaks)}
            for c in report.checks
        ],
    }  # fmt: skip
