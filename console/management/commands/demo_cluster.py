"""`make run`'s data plane: simcluster in this process, registered as the cluster `demo`, with
the demo Jobs seeded once. It serves until interrupted."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandParser

from console import demo
from console.kubeconfig import speaks_plain_http, validate_kubeconfig
from console.models import Cluster, Project
from simcluster.server import SimCluster


class Command(BaseCommand):
    help = "Run a simulated cluster, register it as 'demo' and seed the demo jobs."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=6443)
        parser.add_argument("--nodes", type=int, default=4)
        parser.add_argument("--gpus-per-node", type=int, default=8)
        parser.add_argument("--speed", type=float, default=1.0)
        parser.add_argument("--no-seed", action="store_true", help="register, but seed no jobs")

    def handle(self, *args: Any, **options: Any) -> None:
        sim = SimCluster(
            nodes=options["nodes"],
            gpus_per_node=options["gpus_per_node"],
            speed=options["speed"],
            port=options["port"],
        ).start()
        self.stdout.write(f"simcluster serving the Kubernetes API at {sim.url}")
        self.register(sim, seed=not options["no_seed"])
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        stop.wait()
        sim.stop()

    def register(self, sim: SimCluster, seed: bool) -> None:
        """Each start has a new token, so the registration is refreshed every time; Jobs of an
        earlier run are re-created on the new (empty) data plane by reconcile. The project
        `demo` (made by `demo_user`) may use this cluster."""
        kubeconfig = sim.write_kubeconfig(settings.VAR_DIR / "simcluster.kubeconfig").read_text()
        validate_kubeconfig(kubeconfig)
        cluster, _ = Cluster.objects.update_or_create(
            name="demo",
            defaults={"kubeconfig": kubeconfig, "insecure": speaks_plain_http(kubeconfig)},
        )
        user = User.objects.filter(username="demo").first()
        project = Project.objects.filter(name="demo").first()
        if project:
            project.clusters.add(cluster)  # the demo project's jobs run here
        if seed and user and project:
            created = demo.seed(user, project, "demo")
            self.stdout.write(f"seeded {created} demo jobs and workflows")
