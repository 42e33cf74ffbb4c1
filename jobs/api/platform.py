"""The clusters, nodes and add-ons a reader may see."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import HttpRequest

from console.models import Addon, Cluster, Node
from jobs.access import clusters_for
from jobs.api.core import api, user_of
from jobs.schemas import READ, AddonOut, ClusterOut, NodeOut


@api.get("/clusters", response={200: list[ClusterOut], **READ}, tags=["clusters"])
def list_clusters(request: HttpRequest) -> QuerySet[Cluster]:
    """The clusters you may see (operators: every one; others: those their projects may use),
    their reachability and when each was last synced."""
    return clusters_for(user_of(request))


@api.get("/nodes", response={200: list[NodeOut], **READ}, tags=["clusters"])
def list_nodes(request: HttpRequest, cluster: str | None = None) -> QuerySet[Node]:
    """The nodes of the clusters you may see."""
    nodes = Node.objects.filter(cluster__in=clusters_for(user_of(request))).select_related(
        "cluster"
    )
    return nodes.filter(cluster__name=cluster) if cluster else nodes


@api.get("/addons", response={200: list[AddonOut], **READ}, tags=["clusters"])
def list_addons(request: HttpRequest, cluster: str | None = None) -> QuerySet[Addon]:
    """The add-ons of the clusters you may see."""
    addons = Addon.objects.filter(cluster__in=clusters_for(user_of(request)))
    addons = addons.select_related("cluster")
    return addons.filter(cluster__name=cluster) if cluster else addons
