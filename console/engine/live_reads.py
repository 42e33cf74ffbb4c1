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
from console.engine.gateways import gateway_for
from console.kube.gateway import PODS, ApplyError, ClusterUnreachable, Gateway
from console.kube.manifests import CONTAINER
from console.models import Cluster
from jobs.messages import Message

# The containers of every pod the console creates (console.kube.manifests.pod_template).
CONTAINERS = (CONTAINER,)
# The most Events shown for one pod.
EVENT_LIMIT = 50


@dataclass(frozen=True)
class LogTail:
    """The newest lines of a log, whole: `cut` when older lines were left out to stay within
    the byte cap (the text then starts at a line boundary, never mid-line)."""

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
        said = detail or (str(reason) if reason else "")
        super().__init__(said or ("the API server has no such pod" if gone else "unreadable"))
        self.gone, self.detail, self.reason = gone, detail, reason

    @property
    def refused(self) -> bool:
        return bool(self.detail)


# How many times a read asks again (with fewer lines, or with more to fill the cap) before it
# keeps what it has.
MAX_ASKS = 6


def pod_log(
    cluster: Cluster, namespace: str, pod: str, container: str, tail_lines: int,
    limit_bytes: int, previous: bool = False, timestamps: bool = False, fill: bool = False,
) -> LogTail:  # fmt: skip
    """The last `tail_lines` lines of a container's log that fit in `limit_bytes`, the newest
    always kept. `cut` when older lines were left out to stay within `limit_bytes`. With
    `fill` (a log kept: its last `limit_bytes`, however short its lines), `tail_lines` is only
    the first ask, and `cut` whenever older lines may have been left out: the answer has as
    many lines as asked, or its start was cut. Raises LogUnavailable.

    The API server counts `limitBytes` from where `tailLines` starts and stops there, so an
    answer that fills it has lost its *newest* lines (and may end mid-line; KUBERNETES-FACTS.md,
    Pod logs). So the cap asked for is twice ours, an answer that fills it is asked again with
    as many lines as fitted, scaled down, and the start of a whole answer is cut here to
    `limit_bytes` at a line boundary. With `fill`, an answer that has every line asked for and
    room left under `limit_bytes` is asked again with more, scaled up to the room."""
    gateway, lines = _gateway(cluster), tail_lines
    for ask in range(MAX_ASKS):
        text = _read(gateway, namespace, pod, container, lines, 2 * limit_bytes, previous,
                     timestamps)  # fmt: skip
        again = _again(text, lines, limit_bytes, fill) if ask < MAX_ASKS - 1 else None
        if again is None:
            break
        lines = again
    full = len(text.splitlines()) >= lines if fill else lines < tail_lines
    return _newest(text, limit_bytes, cut=full)


def _again(text: str, lines: int, limit_bytes: int, fill: bool) -> int | None:
    """The lines to ask for next, or None to keep this answer."""
    size = len(text.encode())
    if size >= 2 * limit_bytes and lines > 1:  # the newest lines were dropped: fewer
        return max(1, min(lines - 1, text.count("\n") // 2))
    if fill and len(text.splitlines()) >= lines and size < limit_bytes:  # room: more
        return max(lines + 1, lines * limit_bytes * 5 // (size * 4))
    return None


def _gateway(cluster: Cluster) -> Gateway:
    try:
        return gateway_for(cluster)
    except kubeconfig.KubeconfigRejected as error:
        raise _unavailable(error) from None


def _read(
    gateway: Gateway, namespace: str, pod: str, container: str, lines: int, limit: int,
    previous: bool, timestamps: bool,
) -> str:  # fmt: skip
    try:
        return gateway.log(namespace, pod, container, lines, limit, previous, timestamps)
    except ClusterUnreachable as error:
        raise _unavailable(error) from None


def _newest(text: str, limit_bytes: int, cut: bool) -> LogTail:
    """The end of `text` within `limit_bytes`, from the first whole line that fits."""
    data = text.encode()
    if len(data) <= limit_bytes:
        return LogTail(text, cut)
    start = data.find(b"\n", len(data) - limit_bytes - 1) + 1
    return LogTail(data[start or len(data) - limit_bytes :].decode(errors="replace"), True)


def restart_count(
    cluster: Cluster, namespace: str, pod: str, uid: str, container: str
) -> int | None:
    """The container's restart count as the API server has it now; None when it cannot say
    (the pod is gone, another pod took its name, the cluster did not answer)."""
    try:
        found = _gateway(cluster).get(PODS, namespace, pod)
    except (ApplyError, ClusterUnreachable, LogUnavailable):
        return None
    if not found or (found.get("metadata") or {}).get("uid") != uid:
        return None
    for status in (found.get("status") or {}).get("containerStatuses") or ():
        if status.get("name") == container:
            return int(status.get("restartCount") or 0)
    return None


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
