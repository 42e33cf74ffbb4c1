"""The streams a cycle reads from a cluster: one resource under one label selector each, read by
a LIST (relist) or a bounded WATCH from the stream's cursor, and how each object is parsed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from console.kube import ADDON_LABEL, MANAGED_SELECTOR
from console.kube.gateway import (
    BATCH_JOBS,
    DAEMONSETS,
    DEPLOYMENTS,
    NODES,
    PODS,
    SERVICES,
    STATEFULSETS,
    Resource,
)
from console.kube.observations import (
    AddonObs,
    BatchJobObs,
    NodeObs,
    PodObs,
    ServiceObs,
    StatefulSetObs,
    parse_addon,
    parse_batch_job,
    parse_node,
    parse_pod,
    parse_service,
    parse_statefulset,
)


@dataclass(frozen=True)
class Stream:
    name: str
    resource: Resource
    selector: str
    parse: Callable[[Any], Any]
    observation: type  # what `parse` returns


def _addon(kind: str) -> Callable[[Any], Any]:
    return lambda item: parse_addon(item, kind)


STREAMS = (
    Stream("statefulsets", STATEFULSETS, MANAGED_SELECTOR, parse_statefulset, StatefulSetObs),
    Stream("jobs", BATCH_JOBS, MANAGED_SELECTOR, parse_batch_job, BatchJobObs),
    Stream("services", SERVICES, MANAGED_SELECTOR, parse_service, ServiceObs),
    Stream("pods", PODS, MANAGED_SELECTOR, parse_pod, PodObs),
    Stream("nodes", NODES, "", parse_node, NodeObs),
    Stream("daemonsets", DAEMONSETS, ADDON_LABEL, _addon("DaemonSet"), AddonObs),
    Stream("deployments", DEPLOYMENTS, ADDON_LABEL, _addon("Deployment"), AddonObs),
    Stream("addon_pods", PODS, ADDON_LABEL, parse_pod, PodObs),
)
BY_NAME = {stream.name: stream for stream in STREAMS}
# The streams whose objects carry the console's Job label, and those of the add-ons.
JOB_STREAMS = ("statefulsets", "jobs", "services", "pods")
ADDON_STREAMS = ("daemonsets", "deployments", "addon_pods")
POD_STREAMS = ("pods", "addon_pods")
