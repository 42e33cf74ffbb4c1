"""`manage.py sync_clusters [--cluster NAME]`: one full reconcile-and-poll cycle per cluster in the
foreground — exactly what the beat runs. Exit code 1 when a cluster was unreachable."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from console.engine.cycle import sync_cluster
from console.models import Cluster


class Command(BaseCommand):
    help = "Sync every registered cluster (or one) once, in the foreground."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--cluster", default="", help="only this cluster")

    def handle(self, *args: Any, **options: Any) -> None:
        clusters = Cluster.objects.order_by("name")
        if options["cluster"]:
            clusters = clusters.filter(name=options["cluster"])
            if not clusters.exists():
                raise CommandError(f"No cluster named {options['cluster']!r}.")
        unreachable = []
        for cluster_id, name in clusters.values_list("pk", "name"):
            result = sync_cluster(cluster_id)
            self.stdout.write(f"{name}: {result.summary()}")
            if not result.skipped and not result.reachable:
                unreachable.append(name)
        if unreachable:
            raise CommandError(f"Unreachable: {', '.join(unreachable)}.", returncode=1)
