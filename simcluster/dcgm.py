"""A DCGM-shaped exporter for the simulated GPUs: what NVIDIA's dcgm-exporter serves on
`/metrics` with its Kubernetes pod mapping on. One series per GPU and metric, labelled as
dcgm-exporter labels them (`gpu`, `UUID`, `pci_bus_id`, `device`, `modelName`, `Hostname`,
`DCGM_FI_DRIVER_VERSION`); a GPU that a running pod holds also carries that pod's `pod`,
`namespace` and `container`, as the exporter reads them from the kubelet's pod-resources API.

Each node's GPUs are handed out in order to the running pods that request `nvidia.com/gpu`
(oldest first), as a device plugin would. A pod's GPUs report the utilisation set for it
(`SimCluster.set_gpu_utilisation`), else DEFAULT_PERCENT; a free GPU reports 0.
`DCGM_FI_PROF_GR_ENGINE_ACTIVE` (a ratio, 0 to 1) is served only when profiling is on, as the
real exporter serves profiling metrics only where DCGM can collect them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from simcluster.facts import pod_requests

Obj = dict[str, Any]
Key = tuple[str, str]
DEFAULT_PERCENT = 75.0
DRIVER_VERSION = "570.124.06"
GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class Gpu:
    """One GPU of a node and the pod holding it (None: free)."""

    node: str
    index: int
    model: str
    holder: Obj | None


def gpus(nodes: Iterable[Obj], pods: Iterable[Obj]) -> list[Gpu]:
    """Every node's GPUs, each running GPU pod given the next free ones, oldest pod first."""
    by_node: dict[str, list[Obj]] = {}
    for pod in pods:
        if pod.get("status", {}).get("phase") == "Running" and pod_requests(pod["spec"]).get(GPU):
            by_node.setdefault(pod["spec"].get("nodeName", ""), []).append(pod)
    found: list[Gpu] = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        name = node["metadata"]["name"]
        count = int(node.get("status", {}).get("allocatable", {}).get(GPU, 0))
        model = node["metadata"].get("labels", {}).get("nvidia.com/gpu.product", "NVIDIA GPU")
        holders: list[Obj | None] = []
        for pod in sorted(by_node.get(name, ()), key=_age):
            holders += [pod] * pod_requests(pod["spec"])[GPU]
        holders += [None] * max(0, count - len(holders))
        found += [Gpu(name, index, model, holder) for index, holder in enumerate(holders[:count])]
    return found


def _age(pod: Obj) -> tuple[str, str]:
    return pod["metadata"].get("creationTimestamp", ""), pod["metadata"]["name"]


def _labels(gpu: Gpu) -> str:
    labels = {
        "gpu": str(gpu.index),
        "UUID": f"GPU-{uuid.uuid5(uuid.NAMESPACE_OID, f'{gpu.node}/{gpu.index}')}",
        "pci_bus_id": f"00000000:{0x18 + gpu.index:02X}:00.0",
        "device": f"nvidia{gpu.index}",
        "modelName": gpu.model,
        "Hostname": gpu.node,
        "DCGM_FI_DRIVER_VERSION": DRIVER_VERSION,
    }
    if gpu.holder is not None:
        meta = gpu.holder["metadata"]
        labels["container"] = gpu.holder["spec"]["containers"][0]["name"]
        labels["namespace"] = meta.get("namespace", "")
        labels["pod"] = meta["name"]
    return ",".join(f'{name}="{value}"' for name, value in labels.items())


def _percent(gpu: Gpu, utilisation: Mapping[Key, float]) -> float:
    if gpu.holder is None:
        return 0.0
    meta = gpu.holder["metadata"]
    return utilisation.get((meta.get("namespace", ""), meta["name"]), DEFAULT_PERCENT)


def exposition(found: list[Gpu], utilisation: Mapping[Key, float], profiling: bool) -> bytes:
    """The Prometheus text exposition dcgm-exporter would serve for these GPUs."""
    lines = [
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).",
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
        *(f"DCGM_FI_DEV_GPU_UTIL{{{_labels(g)}}} {round(_percent(g, utilisation))}" for g in found),
    ]
    if profiling:
        lines += [
            "# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.",
            "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge",
        ]
        for g in found:
            ratio = _percent(g, utilisation) / 100
            lines.append(f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{_labels(g)}}} {ratio:.6f}")
    return ("\n".join(lines) + "\n").encode()
