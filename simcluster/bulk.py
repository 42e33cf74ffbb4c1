"""Fast loading of many running StatefulSet pods for benchmarks.

The objects are the ones the controllers and kubelet would have written after every pod started:
same names, labels, owner references, revision hashes and status shapes; only the simulated
seconds in between are skipped.
"""

from __future__ import annotations

import hashlib
from typing import Any

from simcluster.clock import rfc3339
from simcluster.cluster import Cluster
from simcluster.controllers.statefulset import revision_name
from simcluster.defaults import admit_pod
from simcluster.images import image_id, normalize
from simcluster.nodeinfo import SimNode
from simcluster.objects import controller_ref, pod_from_template
from simcluster.resources import RESOURCES

Obj = dict[str, Any]
TRAINER_IMAGE = "ghcr.io/trainyard/rlinf-trainer:0.4.2"


def statefulset_manifest(name: str, replicas: int, image: str = TRAINER_IMAGE) -> Obj:
    labels = {"app.kubernetes.io/name": "trainer", "trainyard.io/job": name}
    container = {
        "name": "main",
        "image": image,
        "command": ["python", "-m", "rlinf.train"],
        "args": ["--config", "/etc/trainyard/job.yaml"],
        "env": [{"name": "TRAINYARD_JOB", "value": name}],
        "resources": {
            "requests": {"cpu": "4", "memory": "16Gi"},
            "limits": {"cpu": "4", "memory": "16Gi"},
        },
    }
    return {
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"trainyard.io/job": name}},
            "template": {"metadata": {"labels": dict(labels)}, "spec": {"containers": [container]}},
        },
    }


def running_status(pod: Obj, node: SimNode, started: str) -> Obj:
    condition_types = (
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    )
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": started}
        for t in condition_types
    ]
    ip = node.allocate_ip()
    statuses = [
        {
            "name": c["name"],
            "state": {"running": {"startedAt": started}},
            "lastState": {},
            "ready": True,
            "restartCount": 0,
            "image": normalize(c["image"]),
            "imageID": image_id(c["image"]),
            "containerID": "containerd://"
            + hashlib.sha256(f"{pod['metadata']['name']}/{c['name']}".encode()).hexdigest(),
            "started": True,
        }
        for c in pod["spec"]["containers"]
    ]
    return {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": node.internal_ip,
        "hostIPs": [{"ip": node.internal_ip}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": started,
        "containerStatuses": statuses,
        "qosClass": pod["status"]["qosClass"],
    }


def bulk_load(cluster: Cluster, pods: int, namespace: str = "bench", per_set: int = 10) -> int:
    """Creates ceil(pods / per_set) StatefulSets with all their pods Running and Ready."""
    cluster.ensure_namespace(namespace)
    nodes = list(cluster.registry.nodes.values())
    store, writer = cluster.store, cluster.writer
    created = 0
    with store.lock, cluster.kubelet.ignoring_changes():
        started = rfc3339(cluster.clock.now())
        for index in range(-(-pods // per_set)):
            replicas = min(per_set, pods - created)
            sts = writer.create(
                RESOURCES["statefulsets"],
                namespace,
                statefulset_manifest(f"bench-{index:05d}", replicas),
            )
            revision = revision_name(sts)
            for ordinal in range(replicas):
                node = nodes[created % len(nodes)]
                _create_pod(cluster, sts, ordinal, revision, node, started)
                created += 1
            sts["status"] = _ready_status(replicas, revision)
            store.update("statefulsets", sts)
    return created


def _create_pod(
    cluster: Cluster, sts: Obj, ordinal: int, revision: str, node: SimNode, started: str
) -> None:
    meta = sts["metadata"]
    name = f"{meta['name']}-{ordinal}"
    labels = {
        "apps.kubernetes.io/pod-index": str(ordinal),
        "controller-revision-hash": revision,
        "statefulset.kubernetes.io/pod-name": name,
    }
    pod = pod_from_template(
        sts["spec"]["template"],
        meta["namespace"],
        name,
        controller_ref("statefulsets", sts),
        labels,
    )
    pod["spec"].update(
        {"hostname": name, "subdomain": sts["spec"]["serviceName"], "nodeName": node.name}
    )
    admit_pod(pod)
    pod["metadata"]["uid"] = cluster.ctx.uid()
    pod["status"] = running_status(pod, node, started)
    cluster.store.create("pods", pod, started)


def _ready_status(replicas: int, revision: str) -> Obj:
    return {
        "observedGeneration": 1,
        "replicas": replicas,
        "readyReplicas": replicas,
        "currentReplicas": replicas,
        "updatedReplicas": replicas,
        "currentRevision": revision,
        "updateRevision": revision,
        "collisionCount": 0,
        "availableReplicas": replicas,
    }
