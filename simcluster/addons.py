"""Cluster add-ons seeded into kube-system, labelled so the console can find them and read their
version from the image tag."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"
KUBERAY_IMAGE = "quay.io/kuberay/operator:v1.3.0"


def device_plugin() -> Obj:
    labels = {
        "app.kubernetes.io/name": "nvidia-device-plugin",
        "trainyard.io/addon": "nvidia-device-plugin",
    }
    container = {
        "name": "nvidia-device-plugin-ctr",
        "image": DEVICE_PLUGIN_IMAGE,
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
    }
    template_spec = {
        "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [container],
    }
    return {
        "metadata": {
            "name": "nvidia-device-plugin",
            "namespace": "kube-system",
            "labels": dict(labels),
        },
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": "nvidia-device-plugin"}},
            "template": {"metadata": {"labels": dict(labels)}, "spec": template_spec},
        },
    }


def kuberay_operator() -> Obj:
    labels = {
        "app.kubernetes.io/name": "kuberay-operator",
        "trainyard.io/addon": "kuberay-operator",
    }
    container = {
        "name": "kuberay-operator",
        "image": KUBERAY_IMAGE,
        "command": ["/manager"],
        "args": ["--feature-gates=RayClusterStatusConditions=true"],
        "resources": {
            "requests": {"cpu": "100m", "memory": "512Mi"},
            "limits": {"cpu": "100m", "memory": "512Mi"},
        },
    }
    return {
        "metadata": {
            "name": "kuberay-operator",
            "namespace": "kube-system",
            "labels": dict(labels),
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "kuberay-operator"}},
            "template": {"metadata": {"labels": dict(labels)}, "spec": {"containers": [container]}},
        },
    }
