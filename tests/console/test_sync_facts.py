"""The facts a sync compares and writes are named (issue 31, item 7): a stored row and the one
derived now are compared field by field by name, whatever the order of their classes' fields,
and every fact is a column of its model."""

from __future__ import annotations

from datetime import UTC, datetime

from console.engine.rows import (
    ADDON_FACTS,
    INSTANCE_FACTS,
    NODE_FACTS,
    WORKER_FACTS,
    InstanceRow,
    WorkerRow,
)
from console.engine.write import InstanceWrite, WorkerWrite
from console.models import Addon, Node
from workers.models import PodInstance, Worker

NOW = datetime(2026, 1, 1, tzinfo=UTC)
STORED = WorkerRow(
    pk=4, task_id=2, pod_name="w-0", pod_uid="uid-0", node_name="node-1", ip="10.0.0.5",
    phase="Running", ready=True, reason="", message="", restart_count=0, present=True,
)  # fmt: skip


def _now(**changed: object) -> WorkerWrite:
    fields = {**STORED._asdict(), "last_reported_at": NOW, **changed}
    fields.pop("present")
    return WorkerWrite(**fields)  # type: ignore[arg-type]


def test_it_names_only_columns_of_each_model() -> None:
    for model, facts in (
        (Worker, WORKER_FACTS),
        (PodInstance, INSTANCE_FACTS),
        (Node, NODE_FACTS),
        (Addon, ADDON_FACTS),
    ):
        columns = {field.name for field in model._meta.concrete_fields}
        columns |= {f"{name}_id" for name in columns}
        assert set(facts) <= columns, model


def test_it_compares_a_stored_worker_with_the_pod_now_by_name() -> None:
    assert STORED.facts() == _now(pk=None, last_reported_at=NOW).facts()
    other: dict[str, object] = {"ready": False, "restart_count": 3}
    for name in WORKER_FACTS:
        assert STORED.facts() != _now(**{name: other.get(name, "other")}).facts(), name


def test_it_compares_a_stored_instance_with_the_pod_now_by_name() -> None:
    stored = InstanceRow(
        pk=9, uid="uid-0", task_id=2, pod_name="w-0", node_name="node-1", ip="10.0.0.5",
        phase="Running", restart_count=1, last_exit_code=137, termination_reason="OOMKilled",
    )  # fmt: skip
    now = InstanceWrite(**{**stored._asdict(), "pk": None, "last_seen_at": NOW})
    assert stored.facts() == now.facts()
    assert stored.facts() != now._replace(last_exit_code=1).facts()
    assert set(stored.facts()._fields) == set(INSTANCE_FACTS)
