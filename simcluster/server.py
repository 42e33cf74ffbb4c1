"""SimCluster: the simulated cluster behind a real HTTP endpoint speaking the Kubernetes API.

    with SimCluster(nodes=3, gpus_per_node=8, speed=20) as sim:
        sim.write_kubeconfig("kubeconfig.yaml")
        ...  # any Kubernetes client, then sim.node_offline("sim-node-1"), sim.advance(300), ...

The HTTP side is a ThreadingHTTPServer; a background thread ticks the controllers on the
simulated clock. Every entry point takes the store lock, so the two never see half a change.
"""

from __future__ import annotations

import base64
import logging
import secrets
import threading
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from simcluster import addons as addon_manifests
from simcluster import dcgm, errors
from simcluster.api import Api, Request, Response
from simcluster.bulk import bulk_load
from simcluster.cluster import Cluster
from simcluster.control import ControlSurface
from simcluster.faults import Fault, Faults
from simcluster.httpserver import SimHTTPServer
from simcluster.resources import RESOURCES
from simcluster.tls import CertificateAuthority

Obj = dict[str, Any]
logger = logging.getLogger("simcluster")
# Real seconds a background tick may hold the store lock before leaving work to the next tick.
TICK_BUDGET_SECONDS = 0.05


class SimCluster:
    """A cluster of `nodes` simulated machines, served over HTTP once started, or HTTPS with
    `tls=True`: a certificate for `host` signed by a CA of its own (`ca_pem`), as a real API
    server's, made afresh for each SimCluster and kept across `stop()`/`start()`."""

    def __init__(
        self,
        nodes: int = 3,
        gpus_per_node: int = 8,
        seed: int = 0,
        speed: float = 1.0,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        addons: bool = True,
        compaction_window: int = 10_000,
        cpu_per_node: str = "96",
        memory_per_node: str = "1024Gi",
        tick_seconds: float = 0.02,
        bookmark_seconds: float = 60.0,
        tls: bool = False,
    ) -> None:
        self.cluster = Cluster(
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            cpu_per_node=cpu_per_node,
            memory_per_node=memory_per_node,
            seed=seed,
            speed=speed,
            compaction_window=compaction_window,
        )
        self.host = host
        self.token = token or secrets.token_urlsafe(32)
        self.faults = Faults()
        self.tick_seconds = tick_seconds
        self.bookmark_seconds = bookmark_seconds
        self.tick_errors: list[str] = []
        self.control = ControlSurface(self)
        self._requested_port = port
        self._httpd: SimHTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self.api: Api | None = None
        self.access_rules: list[Obj] | None = None
        self.authority = CertificateAuthority(f"simcluster-ca {host}") if tls else None
        self._tls = self.authority.server_context(host) if self.authority else None
        # The DCGM-shaped exporter (simcluster/dcgm.py): each pod's GPU utilisation in percent.
        self.gpu_utilisation: dict[tuple[str, str], float] = {}
        self.gpu_profiling = True
        if addons:
            self.seed_addons()

    # Lifecycle -------------------------------------------------------------------------------

    def start(self) -> SimCluster:
        """Binds the port (0: any free one) and starts serving and ticking in daemon threads.
        After `stop()` it starts again on the same port with the same objects, as an API server
        restarted behind its address."""
        self._stop.clear()
        self.faults.stopping.clear()
        httpd = SimHTTPServer(
            (self.host, self._requested_port),
            token=self.token, faults=self.faults, control=self.control.handle,
            exporter=self.dcgm_metrics,
            # Looked up per request: a test may wrap `handle` of a running cluster.
            api=lambda request: self.handle(request), tls=self._tls,
        )  # fmt: skip
        self._httpd = httpd
        self.api = Api(
            self.cluster.ctx, self.cluster.kubelet.read_log, f"{self.host}:{self.port}",
            stopping=self.faults.stopping, bookmark_seconds=self.bookmark_seconds,
        )  # fmt: skip
        self.api.access_rules = self.access_rules
        self.cluster.tick()
        serve = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="simcluster-http",
            daemon=True,
        )
        loop = threading.Thread(
            target=self._controller_loop, name="simcluster-controllers", daemon=True
        )
        self._threads = [serve, loop]
        for thread in self._threads:
            thread.start()
        self.cluster.signals.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.faults.stopping.set()
        self.faults.clear()
        if self._httpd is not None:
            self._requested_port = self.port
            self._httpd.shutdown()
            self._httpd.close_connections()
            self._httpd.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self.cluster.signals.stop()
        self._httpd = None

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def _controller_loop(self) -> None:
        while not self._stop.wait(self.tick_seconds):
            try:
                self.cluster.tick(TICK_BUDGET_SECONDS)
            except Exception:
                # A controller bug must not take the API down with it; tests read tick_errors.
                self.tick_errors.append(traceback.format_exc())
                logger.exception("simcluster tick failed")

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("SimCluster is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        scheme = "https" if self._tls else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def ca_pem(self) -> str:
        """The PEM of the CA that signed the serving certificate ("" when serving HTTP)."""
        return self.authority.pem if self.authority else ""

    def write_kubeconfig(self, path: str | Path, namespace: str = "default") -> Path:
        """A kubeconfig with context `simcluster`; the namespace is created if it is missing."""
        self.cluster.ensure_namespace(namespace)
        target = Path(path)
        ca = base64.b64encode(self.ca_pem.encode()).decode()
        authority = f"    certificate-authority-data: {ca}\n" if ca else ""
        target.write_text(
            "apiVersion: v1\n"
            "kind: Config\n"
            "clusters:\n"
            "- name: simcluster\n"
            "  cluster:\n"
            f"    server: {_quoted(self.url)}\n"
            f"{authority}"
            "contexts:\n"
            "- name: simcluster\n"
            "  context:\n"
            "    cluster: simcluster\n"
            "    user: simcluster\n"
            f"    namespace: {_quoted(namespace)}\n"
            "current-context: simcluster\n"
            "users:\n"
            "- name: simcluster\n"
            "  user:\n"
            f"    token: {_quoted(self.token)}\n"
            "preferences: {}\n"
        )
        return target

    # Serving ---------------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        """The Kubernetes API proper (faults are applied by the HTTP layer around this)."""
        assert self.api is not None
        return self.api.handle(request)

    # Scenarios and faults --------------------------------------------------------------------

    def node_offline(self, name: str) -> None:
        """The node's kubelet stops posting status; after 40 s the node controller notices."""
        with self.cluster.store.lock:
            self.cluster.nodes.set_online(name, False)

    def node_online(self, name: str) -> None:
        with self.cluster.store.lock:
            self.cluster.nodes.set_online(name, True)
        self.cluster.tick()

    def set_access_rules(self, rules: list[Obj] | None) -> None:
        """What SelfSubjectAccessReviews answer from now on (simcluster.access): RBAC-style
        rules, or None to allow everything (the default)."""
        self.access_rules = rules
        if self.api is not None:
            self.api.access_rules = rules

    def cordon(self, name: str) -> None:
        self._set_unschedulable(name, True)

    def uncordon(self, name: str) -> None:
        self._set_unschedulable(name, False)

    def _set_unschedulable(self, name: str, value: bool) -> None:
        with self.cluster.store.lock:
            node = self.cluster.store.get("nodes", ("", name))
            if node is None:
                raise errors.not_found("nodes", "", name)
            if value:
                node["spec"]["unschedulable"] = True
            else:
                node["spec"].pop("unschedulable", None)
            self.cluster.store.update("nodes", node)
        self.cluster.tick()

    def mirror_pod(self, node: str, name: str, namespace: str = "kube-system") -> str:
        """A static pod of `node`'s kubelet as the API shows it: a mirror pod named
        `<name>-<node>`, annotated `kubernetes.io/config.mirror`, owned by its Node. Drains
        skip it (deleting it would only make the kubelet post it again). Returns its name."""
        with self.cluster.store.lock:
            owner = self.cluster.store.get("nodes", ("", node))
            if owner is None:
                raise errors.not_found("nodes", "", node)
            pod = {
                "metadata": {
                    "name": f"{name}-{node}",
                    "labels": {"component": name, "tier": "control-plane"},
                    "annotations": {
                        "kubernetes.io/config.hash": owner["metadata"]["uid"][:32],
                        "kubernetes.io/config.mirror": owner["metadata"]["uid"][:32],
                        "kubernetes.io/config.source": "file",
                    },
                    "ownerReferences": [
                        {"apiVersion": "v1", "kind": "Node", "name": node,
                         "uid": owner["metadata"]["uid"], "controller": True},
                    ],
                },
                "spec": {
                    "nodeName": node,
                    "containers": [{"name": name, "image": f"registry.k8s.io/{name}:v1.33.0"}],
                },
            }  # fmt: skip
            created = self.cluster.writer.create(RESOURCES["pods"], namespace, pod)
        self.cluster.tick()
        return str(created["metadata"]["name"])

    def kill_pod(self, namespace: str, name: str, container: str | None = None) -> list[str]:
        """Kills the pod's running containers (exit 137, reason Error); returns their names."""
        with self.cluster.store.lock:
            killed = self.cluster.kubelet.kill(
                (namespace, name), container, self.cluster.clock.now()
            )
        self.cluster.tick()
        return killed

    def evict_pod(self, namespace: str, name: str) -> bool:
        """The pod's node evicts it for memory pressure (the kubelet's eviction manager)."""
        with self.cluster.store.lock:
            evicted = self.cluster.kubelet.evict((namespace, name), self.cluster.clock.now())
        self.cluster.tick()
        return evicted

    def container_env(self, uid: str, container: str) -> dict[str, str]:
        """The environment a pod's container was started with, downward API resolved (what the
        process would read; the pod object itself keeps `valueFrom`)."""
        with self.cluster.store.lock:
            runtime = self.cluster.kubelet.pods[uid]
            return dict(next(c for c in runtime.containers if c.name == container).env)

    def set_fault(
        self,
        *,
        status: int | None = None,
        timeout: bool = False,
        truncate: bool = False,
        garbage: bool = False,
        latency_ms: int | None = None,
        seconds: float = 5.0,
    ) -> Fault:
        spec: Obj = {"seconds": seconds}
        if status is not None:
            spec["status"] = status
        if timeout:
            spec["timeout"] = True
        if truncate:
            spec["truncate"] = True
        if garbage:
            spec["garbage"] = True
        if latency_ms is not None:
            spec["latency_ms"] = latency_ms
        return self.faults.add(spec)

    def clear_faults(self) -> int:
        return self.faults.clear()

    def compact(self) -> int:
        """Compacts history at the current revision: every outstanding continue token expires."""
        return self.cluster.store.compact_now()

    def state(self) -> Obj:
        with self.cluster.store.lock:
            store = self.cluster.store
            return {
                "revision": store.revision,
                "compactedRevision": store.compacted,
                "simulatedTime": self.cluster.ctx.stamp(),
                "speed": self.cluster.clock.speed,
                "counts": {name: store.count(name) for name in RESOURCES},
                "nodes": {
                    name: ("online" if sim.online else "offline")
                    for name, sim in self.cluster.registry.nodes.items()
                },
                "faults": [f.describe() for f in self.faults.active()],
            }

    def advance(self, seconds: float, step: float = 1.0) -> None:
        """Jumps simulated time forward deterministically, ticking every `step` seconds."""
        self.cluster.advance(seconds, step)

    def tick(self) -> None:
        self.cluster.tick()

    def set_gpu_utilisation(self, namespace: str, name: str, percent: float) -> None:
        """What the pod's GPUs report on `/dcgm/metrics` from now on (0 to 100)."""
        self.gpu_utilisation[(namespace, name)] = max(0.0, min(100.0, percent))

    def dcgm_metrics(self) -> bytes:
        """The DCGM exporter's exposition for the GPUs of every node now (simcluster/dcgm.py)."""
        with self.cluster.store.lock:
            nodes = self.cluster.store.objects("nodes")
            pods = self.cluster.store.objects("pods")
        found = dcgm.gpus(nodes, pods)
        return dcgm.exposition(found, dict(self.gpu_utilisation), self.gpu_profiling)

    def bulk_load(self, pods: int, namespace: str = "bench", pods_per_set: int = 10) -> int:
        return bulk_load(self.cluster, pods, namespace, pods_per_set)

    def seed_addons(self) -> None:
        """The device plugin DaemonSet and the KubeRay operator Deployment, once each."""
        manifests = {
            "daemonsets": addon_manifests.device_plugin(),
            "deployments": addon_manifests.kuberay_operator(),
        }
        with self.cluster.store.lock:
            for plural, manifest in manifests.items():
                key = ("kube-system", manifest["metadata"]["name"])
                if self.cluster.store.get_version(plural, key) is None:
                    self.cluster.writer.create(RESOURCES[plural], "kube-system", manifest)


def _quoted(value: str) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML), whatever the value looks like."""
    return orjson.dumps(value).decode()
