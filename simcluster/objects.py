"""Small helpers for building and reading the objects controllers create."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from simcluster.context import ALPHANUMS
from simcluster.resources import RESOURCES

Obj = dict[str, Any]


def deep_copy(obj: Any) -> Any:
    return orjson.loads(orjson.dumps(obj))


def controller_ref(resource: str, owner: Obj) -> Obj:
    """The ownerReference every built-in controller stamps on what it creates."""
    rt = RESOURCES[resource]
    meta = owner["metadata"]
    return {
        "apiVersion": rt.api_version,
        "kind": rt.kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def fnv32a(data: bytes) -> int:
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def safe_encode(text: str) -> str:
    """apimachinery's rand.SafeEncodeString: digits mapped onto a vowel-free alphabet."""
    return "".join(ALPHANUMS[ord(char) % len(ALPHANUMS)] for char in text)


def template_hash(template: Obj, collision_count: int = 0) -> str:
    """A stable short hash of a pod template, like ComputeHash / controller-revision-hash."""
    digest = hashlib.sha256(orjson.dumps(template, option=orjson.OPT_SORT_KEYS)).digest()
    value = fnv32a(digest + collision_count.to_bytes(4, "little"))
    return safe_encode(str(value))


def condition(conditions: list[Obj], type_: str) -> Obj | None:
    return next((c for c in conditions if c.get("type") == type_), None)


def pod_from_template(
    template: Obj, namespace: str, name: str, owner: Obj, extra_labels: dict[str, str]
) -> Obj:
    """A pod stamped from a controller's template, owned by that controller."""
    template_meta = template.get("metadata") or {}
    metadata: Obj = {"name": name, "namespace": namespace}
    labels = dict(template_meta.get("labels") or {})
    labels.update(extra_labels)
    metadata["labels"] = labels
    if template_meta.get("annotations"):
        metadata["annotations"] = dict(template_meta["annotations"])
    metadata["ownerReferences"] = [owner]
    return {"metadata": metadata, "spec": deep_copy(template.get("spec") or {})}


def percent_or_int(value: Any, total: int, round_up: bool) -> int:
    """intstr values such as maxSurge "25%" resolved against a replica count."""
    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%"):
        return int(text)
    scaled = int(text[:-1]) * total
    return -(-scaled // 100) if round_up else scaled // 100
