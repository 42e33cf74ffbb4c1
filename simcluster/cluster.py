"""The simulated cluster without its HTTP front: store, clock, nodes, kubelets, scheduler and
controllers, advanced together one tick at a time under the store lock."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Protocol

from simcluster.clock import Budget, SimClock
from simcluster.context import Context
from simcluster.controllers.daemonset import DaemonSetController
from simcluster.controllers.deployment import DeploymentController
from simcluster.controllers.disruption import DisruptionController
from simcluster.controllers.gc import GarbageCollector, NamespaceController
from simcluster.controllers.job import JobController
from simcluster.controllers.replicaset import ReplicaSetController
from simcluster.controllers.statefulset import StatefulSetController
from simcluster.kubelet import Kubelet
from simcluster.nodeinfo import NodeRegistry
from simcluster.nodes import NodeController, NodeShape
from simcluster.resources import RESOURCES
from simcluster.scheduling import Scheduler
from simcluster.signal_poster import SignalPoster
from simcluster.store import Store
from simcluster.writes import Writer

Obj = dict[str, Any]
SYSTEM_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")
MAX_ROUNDS = 6


class Loop(Protocol):
    def run(self, now: float, budget: Budget = ...) -> bool: ...


class Cluster:
    def __init__(
        self,
        *,
        nodes: int = 3,
        gpus_per_node: int = 8,
        cpu_per_node: str = "96",
        memory_per_node: str = "1024Gi",
        seed: int = 0,
        speed: float = 1.0,
        compaction_window: int = 10_000,
    ) -> None:
        self.store = Store(compaction_window)
        self.clock = SimClock(speed)
        self.ctx = Context(self.store, self.clock, random.Random(seed))
        self.writer = Writer(self.ctx)
        self.registry = NodeRegistry()
        self.signals = SignalPoster()
        self.kubelet = Kubelet(self.ctx, self.registry, self.signals)
        self.nodes = NodeController(self.ctx, self.registry, self.kubelet.resync_node)
        self.scheduler = Scheduler(self.ctx)
        self.gc = GarbageCollector(self.ctx)
        self.namespaces = NamespaceController(self.ctx)
        controllers = [
            cls(self.ctx, self.writer)
            for cls in (
                DeploymentController,
                ReplicaSetController,
                StatefulSetController,
                DaemonSetController,
                JobController,
                DisruptionController,
            )
        ]
        self.loops: list[Loop] = [
            self.nodes,
            self.gc,
            self.namespaces,
            *controllers,
            self.scheduler,
            self.kubelet,
        ]
        listeners: list[Callable[..., None]] = [loop.on_change for loop in self.loops]  # type: ignore[attr-defined]
        self.store.listeners.extend(listeners)
        with self.store.lock:
            self._bootstrap(nodes, NodeShape(gpus_per_node, cpu_per_node, memory_per_node))

    def _bootstrap(self, count: int, shape: NodeShape) -> None:
        for name in SYSTEM_NAMESPACES:
            self.ensure_namespace(name)
        kubernetes = {
            "metadata": {
                "name": "kubernetes",
                "labels": {"component": "apiserver", "provider": "kubernetes"},
            },
            "spec": {
                "clusterIP": "10.96.0.1",
                "ports": [{"name": "https", "port": 443, "targetPort": 6443}],
            },
        }
        self.writer.create(RESOURCES["services"], "default", kubernetes)
        self.nodes.add_nodes(count, shape)

    def ensure_namespace(self, name: str) -> None:
        with self.store.lock:
            if self.store.get_version("namespaces", ("", name)) is None:
                self.writer.create(RESOURCES["namespaces"], None, {"metadata": {"name": name}})

    def tick(self, budget_seconds: float | None = None) -> None:
        """Runs every loop until nothing reacts any more (a few rounds at most).

        With a budget, work left when it runs out waits for the next tick, so a burst of
        thousands of pods never holds the store lock away from API requests for long.
        """
        with self.store.lock:
            now = self.clock.now()
            budget = Budget(budget_seconds)
            for _ in range(MAX_ROUNDS):
                worked = [
                    loop.run(now, budget.share(len(self.loops) - i))
                    for i, loop in enumerate(self.loops)
                ]
                if not any(worked) or budget.exhausted():
                    break
            self.ctx.events.expire(now)

    def advance(self, seconds: float, step: float = 1.0) -> None:
        """Moves simulated time forward in steps, ticking after each, as if that time had passed."""
        remaining = seconds
        while remaining > 0:
            jump = min(step, remaining)
            self.clock.advance(jump)
            self.tick()
            remaining -= jump
