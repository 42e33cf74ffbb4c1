"""A cluster's connection test (issue 36, Build 1): the API server answers `/version` over TLS
verified against the CA the credentials give (unless the cluster is marked insecure), then one
SelfSubjectAccessReview per permission the console needs (`console.permissions`).

It runs for credentials not stored yet (a registration, a rotation) as well as stored ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from console import outbound
from console.engine.gateways import gateway_for
from console.kube.client import ClientConfigError, one_off_client, timeouts
from console.kube.gateway import ClusterUnreachable, Gateway
from console.kubeconfig import KubeconfigRejected
from console.models import Cluster
from console.permissions import ADDON_NAMESPACE, NEEDS, Need, addon_needs, attributes

ACCESS_SECONDS = 600  # how long a permission check is trusted before the beat repeats it


@dataclass(frozen=True)
class Check:
    need: Need
    allowed: bool
    reason: str


@dataclass(frozen=True)
class ConnectionReport:
    reached: bool
    version: str = ""
    error: str = ""
    checks: list[Check] = field(default_factory=list)

    @property
    def allowed(self) -> dict[str, bool]:
        return {check.need.key: check.allowed for check in self.checks}


def needs_of(cluster: Cluster | None) -> tuple[Need, ...]:
    """Every need, with the add-on rights asked in each namespace the cluster's add-ons are
    registered in (kube-system's are among NEEDS)."""
    if cluster is None:
        return NEEDS
    namespaces = cluster.addons.filter(managed=True).exclude(namespace=ADDON_NAMESPACE)
    names = sorted(set(namespaces.values_list("namespace", flat=True)))
    return NEEDS + tuple(need for name in names for need in addon_needs(name))


def probe_connection(
    config: dict[str, Any], context: str, namespace: str, needs: tuple[Need, ...] = NEEDS
) -> ConnectionReport:
    try:
        client = one_off_client(config, context, outbound.peer_refusal)
    except ClientConfigError as error:
        return ConnectionReport(False, error=str(error))
    try:
        gateway = Gateway(client, timeouts())
        version = str(gateway.version().get("gitVersion", ""))
        checks = [_check(gateway, need, namespace) for need in needs]
    except ClusterUnreachable as error:
        return ConnectionReport(False, error=str(error))
    finally:
        client.close()
    return ConnectionReport(True, version, "", checks)


def refresh_access(cluster_id: int) -> bool:
    """The stored credentials' permissions checked again (one review per need) and kept with
    the time: what the pages show actions by. False when the cluster could not answer (the
    last answer is kept, with its time, and nothing is assumed beyond it)."""
    cluster = Cluster.objects.filter(pk=cluster_id, retired_at__isnull=True).first()
    if cluster is None:
        return False
    try:
        gateway = gateway_for(cluster)
        checks = [_check(gateway, need, cluster.namespace) for need in needs_of(cluster)]
    except (ClusterUnreachable, KubeconfigRejected):
        return False
    allowed = {check.need.key: check.allowed for check in checks}
    Cluster.objects.filter(pk=cluster_id).update(access=allowed, access_checked_at=timezone.now())
    return True


def access_due(now: datetime) -> list[int]:
    """The clusters whose permissions were last asked for more than ACCESS_SECONDS ago (or
    never), claimed as asked now: a check that is slow (a review per need against a slow API
    server) or cannot reach its cluster is queued again a period later, never at every beat
    tick, where the queued checks would fill every worker and starve the syncs."""
    stale = Q(access_asked_at__isnull=True) | Q(
        access_asked_at__lt=now - timedelta(seconds=ACCESS_SECONDS)
    )
    live = Cluster.objects.filter(stale, retired_at__isnull=True)
    due = list(live.values_list("pk", flat=True))
    if due:
        live.filter(pk__in=due).update(access_asked_at=now)
    return due


def _check(gateway: Gateway, need: Need, namespace: str) -> Check:
    allowed, reason = gateway.access_review(attributes(need, namespace))
    return Check(need, allowed, reason)
