"""`manage.py simcluster`: a simulated cluster in the foreground for `make run` and demos."""

from __future__ import annotations

import signal
import threading
from argparse import ArgumentParser
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from simcluster.server import SimCluster


class Command(BaseCommand):
    help = "Run a simulated Kubernetes cluster and write a kubeconfig for it."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--port", type=int, default=0, help="TCP port on 127.0.0.1; 0 picks a free one"
        )
        parser.add_argument("--kubeconfig-out", required=True, help="where to write the kubeconfig")
        parser.add_argument("--nodes", type=int, default=3)
        parser.add_argument("--gpus-per-node", type=int, default=8)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--speed", type=float, default=1.0, help="simulated seconds per real second"
        )
        parser.add_argument(
            "--namespace", default="default", help="the kubeconfig's namespace (created)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["nodes"] < 1 or options["speed"] < 0 or options["gpus_per_node"] < 0:
            raise CommandError(
                "--nodes must be at least 1; --speed and --gpus-per-node not negative"
            )
        sim = SimCluster(
            nodes=options["nodes"],
            gpus_per_node=options["gpus_per_node"],
            seed=options["seed"],
            speed=options["speed"],
            port=options["port"],
        )
        stop = threading.Event()
        self._on_signals(stop)
        try:
            sim.start()
        except OSError as error:
            raise CommandError(f"cannot listen on port {options['port']}: {error}") from None
        try:
            path = sim.write_kubeconfig(options["kubeconfig_out"], options["namespace"])
            self.stdout.write(
                f"simcluster serving {sim.url} "
                f"({options['nodes']} nodes, speed {options['speed']:g})"
            )
            self.stdout.write(
                f"kubeconfig written to {path} "
                f"(context simcluster, namespace {options['namespace']})"
            )
            self.stdout.flush()
            stop.wait()
        finally:
            sim.stop()
            self.stdout.write("simcluster stopped")

    def _on_signals(self, stop: threading.Event) -> None:
        """SIGINT and SIGTERM end the wait; the server then stops cleanly."""

        def handler(signum: int, frame: FrameType | None) -> None:
            stop.set()

        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)
