"""The sync's bulk UPDATE (console.engine.write.update_where): each value reaches the database as
its field prepares it; the plain fields' values go as they are."""

from __future__ import annotations

from datetime import UTC, datetime

from console.engine.write import update_where
from console.models import Cluster
from tests.conftest import KUBECONFIG


def test_it_writes_plain_values_and_datetimes_as_the_orm_would(cluster: Cluster) -> None:
    synced_at = datetime(2026, 5, 1, 10, 0, tzinfo=UTC)
    fields = ["reachable", "message", "last_synced_at"]
    written = update_where(Cluster, fields, ["pk"], [[True, "synced", synced_at, cluster.pk]])
    stored = Cluster.objects.values_list(*fields).get(pk=cluster.pk)
    assert (written, stored) == (1, (True, "synced", synced_at))


def test_it_prepares_a_subclass_of_a_plain_field_as_its_own(cluster: Cluster) -> None:
    """The kubeconfig's field is a TextField that encrypts: written by the bulk UPDATE, it is
    stored sealed, never in clear."""
    changed = KUBECONFIG.replace('token: "t"', 'token: "secret-token"')
    update_where(Cluster, ["kubeconfig"], ["pk"], [[changed, cluster.pk]])
    stored = Cluster.objects.values_list("kubeconfig", flat=True).get(pk=cluster.pk)
    assert "secret-token" not in str(stored)
    assert Cluster.objects.get(pk=cluster.pk).kubeconfig == changed
