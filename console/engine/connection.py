"""A cluster's connection test (issue 36, Build 1): the API server answers `/version` over TLS
verified against the CA the credentials give (unless the cluster is marked insecure), then one
SelfSubjectAccessReview per permission the console needs (`console.permissions`).

It runs for credentials not stored yet (a registration, a rotation) as well as stored ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from console.kube.client import ClientConfigError, one_off_client, timeouts
from console.kube.gateway import ClusterUnreachable, Gateway
from console.permissions import NEEDS, Need, attributes


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


def probe_connection(config: dict[str, Any], context: str, namespace: str) -> ConnectionReport:
    try:
        client = one_off_client(config, context)
    except ClientConfigError as error:
        return ConnectionReport(False, error=str(error))
    try:
        gateway = Gateway(client, timeouts())
        version = str(gateway.version().get("gitVersion", ""))
        checks = [_check(gateway, need, namespace) for need in NEEDS]
    except ClusterUnreachable as error:
        return ConnectionReport(False, error=str(error))
    finally:
        client.close()
    return ConnectionReport(True, version, "", checks)


def _check(gateway: Gateway, need: Need, namespace: str) -> Check:
    allowed, reason = gateway.access_review(attributes(need, namespace))
    return Check(need, allowed, reason)
