"""A pod's log tail and its Events, read through the API server when a reader asks, never stored
(issue 10: logs on the job page). The caps are the caller's; the API server applies them, so a
run that printed gigabytes costs one bounded answer."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime

from console import kubeconfig
from console.engine.apply import unreachable_reason
from console.engine.one_job import gateway_for
from console.kube.gateway import ClusterUnreachable
from console.kube.manifests import CONTAINER
from console.models import Cluster
from jobs.messages import Message

# The containers of every pod the console creates (console.kube.manifests.pod_template).
CONTAINERS = (CONTAINER,)
# The most Events shown for one pod.
EVENT_LIMIT = 50


@dataclass(frozen=True)
class LogTail:
    """What the API server answered: `cut` when the answer filled `limit_bytes` (its first
    line may then be partial)."""

    text: str
    cut: bool

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()


@dataclass(frozen=True)
class PodEvent:
    type: str
    reason: str
    message: str
    count: int
    last_seen: datetime | None


class LogUnavailable(Exception):
    """Why no log could be read. `gone`: the API server has no such pod (404); `refused`: it
    answered the request with a refusal it words itself (`detail`, 400: no previous container,
    a container still waiting); otherwise the cluster could not be reached (`reason`)."""

    def __init__(self, gone: bool = False, detail: str = "", reason: Message | None = None):
        super().__init__(detail or str(reason))
        self.gone, self.detail, self.reason = gone, detail, reason

    @property
    def refused(self) -> bool:
        return bool(self.detail)


def pod_log(
    cluster: Cluster, namespace: str, pod: str, container: str, tail_lines: int,
    limit_bytes: int, previous: bool = False, timestamps: bool = False,
) -> LogTail:  # fmt: skip
    """Raises LogUnavailable."""
    try:
        text = gateway_for(cluster).log(
            namespace, pod, container, tail_lines, limit_bytes, previous, timestamps
        )
    except (ClusterUnreachable, kubeconfig.KubeconfigRejected) as error:
        raise _unavailable(error) from None
    return LogTail(text, len(text.encode()) >= limit_bytes)


def pod_events(cluster: Cluster, namespace: str, pod: str) -> list[PodEvent]:
    """The pod's Events, most recent first. Raises LogUnavailable."""
    try:
        items = gateway_for(cluster).pod_events(namespace, pod, EVENT_LIMIT)
    except (ClusterUnreachable, kubeconfig.KubeconfigRejected) as error:
        raise _unavailable(error) from None
    events = [_event(item) for item in items if isinstance(item, dict)]
    return sorted(events, key=lambda e: e.last_seen.timestamp() if e.last_seen else 0, reverse=True)


def _event(item: dict[str, Any]) -> PodEvent:
    when = item.get("lastTimestamp") or item.get("eventTime") or ""
    return PodEvent(
        str(item.get("type") or ""), str(item.get("reason") or ""),
        str(item.get("message") or ""), int(item.get("count") or 1),
        parse_datetime(when) if isinstance(when, str) and when else None,
    )  # fmt: skip


def _unavailable(error: ClusterUnreachable | kubeconfig.KubeconfigRejected) -> LogUnavailable:
    if isinstance(error, ClusterUnreachable) and error.code == "status":
        if error.params.get("status") == 404:
            return LogUnavailable(gone=True)
        if error.params.get("status") == 400 and error.api_message:
            return LogUnavailable(detail=error.api_message)
    return LogUnavailable(reason=unreachable_reason(error))
