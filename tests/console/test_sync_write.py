"""The sync's bulk writes (console.bulk): each value reaches the database as its field
prepares it (the plain fields' and datetimes as they are, on PostgreSQL in one JSON parameter),
conditions compare what they should, and an upsert replaces what it inserted."""

from __future__ import annotations

from datetime import UTC, datetime

from console.bulk import update_where, upsert
from console.models import Cluster, Node, ObservedObject
from tests.conftest import KUBECONFIG

AT = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
ODD = [
    'quote"d',
    "apos'trophe",
    "back\\slash",
    '\\"',
    "new\nline",
    "tab\t",
    "",
    "ünï€ 🚀",
    "{a,b}",
    "NULL",
]


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


def test_a_conditional_update_changes_only_the_rows_still_as_seen(cluster: Cluster) -> None:
    """A key compared may be a field set (a Job's phase moves only from the phase it was
    derived from): a row that moved on in between keeps its values and is not counted."""
    nodes = [
        Node.objects.create(cluster=cluster, name=f"n{n}", phase="Online", observed_at=AT)
        for n in range(3)
    ]
    Node.objects.filter(pk=nodes[1].pk).update(phase="Offline")  # moved on meanwhile
    values = [["Offline", "gone", node.pk, "Online"] for node in nodes]
    written = update_where(Node, ["phase", "message"], ["pk", "phase"], values)
    stored = {name: (phase, message) for name, phase, message in
              Node.objects.values_list("name", "phase", "message")}  # fmt: skip
    expected = {"n0": ("Offline", "gone"), "n1": ("Offline", ""), "n2": ("Offline", "gone")}
    assert (written, stored) == (2, expected)


def test_it_writes_every_value_as_it_is(cluster: Cluster) -> None:
    nodes = [Node.objects.create(cluster=cluster, name=name, observed_at=AT) for name in ODD]
    at = datetime(2026, 5, 1, 10, 0, 0, 123456, tzinfo=UTC)
    rows = [[text, True, at, node.pk] for text, node in zip(reversed(ODD), nodes, strict=True)]
    assert update_where(Node, ["message", "unschedulable", "observed_at"], ["pk"], rows) == len(ODD)
    stored = Node.objects.order_by("pk").values_list("message", "unschedulable", "observed_at")
    assert list(stored) == [(text, True, at) for text in reversed(ODD)]


def test_an_upsert_inserts_then_replaces(cluster: Cluster) -> None:
    key, stored = ("cluster_id", "stream", "uid"), ("resource_version", "job_id", "node_name",
                                                  "gpus", "data")  # fmt: skip
    upsert(ObservedObject, key, stored, [(cluster.pk, "pods", u, "1", None, "", 0, u) for u in ODD])
    upsert(ObservedObject, key, stored, [(cluster.pk, "pods", ODD[0], "2", 7, "n", 1, '{"a":1}')])
    rows = ObservedObject.objects.order_by("pk").values_list("uid", "resource_version", "job_id",
                                                            "gpus", "data")  # fmt: skip
    assert list(rows) == [(ODD[0], "2", 7, 1, '{"a":1}')] + [(u, "1", None, 0, u) for u in ODD[1:]]
