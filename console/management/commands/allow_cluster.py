"""`manage.py allow_cluster PROJECT CLUSTER [CLUSTER ...]`: the project's Jobs may run on these
clusters too, as when an operator ticks them on the project's page (console.projects: audited
as a policy change). Clusters the project already uses change nothing, and it says so."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from console import projects
from console.management.names import cluster_named, project_named
from console.models import Cluster, Project


class Command(BaseCommand):
    help = "Let a project's Jobs run on clusters (nothing changes for those it already uses)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("project", help="the project's name")
        parser.add_argument("clusters", nargs="+", metavar="cluster", help="registered clusters")

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_named(options["project"])
        clusters = [cluster_named(name) for name in options["clusters"]]  # all, before any change
        for line in allow(project, clusters, "manage.py allow_cluster"):
            self.stdout.write(line)


def allow(project: Project, clusters: list[Cluster], via: str) -> list[str]:
    """What allowing the clusters changed, one line per cluster (add_cluster --project too)."""
    added = {cluster.pk for cluster in projects.allow_clusters(project, clusters, by=None, via=via)}
    return [
        f"Project {project} may now use cluster {cluster}."
        if cluster.pk in added
        else f"Project {project} already uses cluster {cluster}: nothing changed."
        for cluster in dict.fromkeys(clusters)
    ]
