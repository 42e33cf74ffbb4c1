"""What the store remembers about each object besides its bytes: labels, selectable fields, and a
few facts controllers look up often (owner, node, readiness) without parsing the object again."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import orjson

from simcluster.quantity import QuantityError, scaled_amount
from simcluster.resources import ResourceType

Obj = dict[str, Any]


@lru_cache(maxsize=256)
def _parts(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


def field_value(obj: Obj, path: str) -> str:
    """A dotted path as the field-selector string the API server compares (bools in lower case)."""
    if path == "source":
        value: Any = (obj.get("source") or {}).get("component", "")
    else:
        value = obj
        for part in _parts(path):
            value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def facts_of(resource: ResourceType, obj: Obj) -> dict[str, Any]:
    """Selectable fields under their own names; internal facts start with an underscore."""
    facts: dict[str, Any] = {path: field_value(obj, path) for path in resource.field_selectors}
    if resource.plural == "namespaces" and not facts["status.phase"]:
        facts["status.phase"] = "Active"
    meta = obj["metadata"]
    facts["_uid"] = meta.get("uid", "")
    facts["_owners"] = tuple(ref["uid"] for ref in meta.get("ownerReferences") or ())
    facts["_controller"] = next(
        (ref["uid"] for ref in meta.get("ownerReferences") or () if ref.get("controller")), ""
    )
    facts["_deleting"] = "deletionTimestamp" in meta
    if resource.plural == "pods":
        facts.update(_pod_facts(obj))
    elif resource.plural == "nodes":
        # What scheduling depends on; heartbeats leave it unchanged.
        status = obj.get("status") or {}
        facts["_shape"] = orjson.dumps(
            [meta.get("labels"), obj.get("spec"), status.get("allocatable")]
        )
    return facts


def _pod_facts(pod: Obj) -> dict[str, Any]:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or ()}
    ready = conditions.get("Ready", {})
    return {
        "_ready": ready.get("status") == "True",
        "_ready_since": ready.get("lastTransitionTime", ""),
        "_hostname": spec.get("hostname", ""),
        "_subdomain": spec.get("subdomain", ""),
        "_requests": pod_requests(spec),
        "_created": pod["metadata"].get("creationTimestamp", ""),
    }


def pod_requests(spec: Obj) -> dict[str, int]:
    """Summed container requests (limits stand in for missing requests, as defaulting does)."""
    total: dict[str, int] = {}
    for container in spec.get("containers") or ():
        resources = container.get("resources") or {}
        wanted = dict(resources.get("limits") or {})
        wanted.update(resources.get("requests") or {})
        for name, value in wanted.items():
            try:
                total[name] = total.get(name, 0) + scaled_amount(name, value)
            except QuantityError:
                continue
    return total


def is_terminal_phase(phase: str) -> bool:
    return phase in ("Succeeded", "Failed")
