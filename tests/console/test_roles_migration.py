"""Migration console/0003: the group "operators" holds the operator permission, and every project
that existed before the per-project cluster list may use every cluster that existed, so nothing
that worked before stops working."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("console", "0003_project_clusters_operator")]
AFTER = [("console", "0004_operators_and_project_clusters")]


@pytest.fixture
def latest_schema_after() -> Iterator[None]:
    """Whatever the test migrated to, the next tests find every migration applied."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_it_gives_existing_projects_every_existing_cluster_and_makes_the_group(
    latest_schema_after: None,
) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps = executor.loader.project_state(BEFORE).apps
    project_model = apps.get_model("console", "Project")
    cluster_model = apps.get_model("console", "Cluster")
    vision = project_model.objects.create(name="vision")
    speech = project_model.objects.create(name="speech")
    for name in ("gpu-a", "gpu-b"):
        cluster_model.objects.create(name=name, kubeconfig="x")
    apps.get_model("auth", "Group").objects.filter(name="operators").delete()

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    apps = executor.loader.project_state(AFTER).apps
    projects = apps.get_model("console", "Project").objects
    for project in (vision, speech):
        names = projects.get(pk=project.pk).clusters.values_list("name", flat=True)
        assert sorted(names) == ["gpu-a", "gpu-b"]
    group = apps.get_model("auth", "Group").objects.get(name="operators")
    assert list(group.permissions.values_list("codename", flat=True)) == ["operate_platform"]
