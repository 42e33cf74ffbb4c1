"""The downward API: a container's environment as the kubelet gives it, `value` entries as
written and `valueFrom.fieldRef` entries resolved from the pod itself, plus the API server's
check of the field paths it supports (the pod object keeps `valueFrom`; only the container's
environment sees the values, as on a real node)."""

from __future__ import annotations

import re
from typing import Any

Obj = dict[str, Any]

PLAIN_PATHS = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
    "metadata.uid": ("metadata", "uid"),
    "spec.nodeName": ("spec", "nodeName"),
    "spec.serviceAccountName": ("spec", "serviceAccountName"),
    "status.hostIP": ("status", "hostIP"),
    "status.podIP": ("status", "podIP"),
}
KEYED = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")
SUPPORTED = (*PLAIN_PATHS, "metadata.labels", "metadata.annotations")


def supported(path: str) -> bool:
    return path in SUPPORTED or KEYED.fullmatch(path) is not None


def field_value(pod: Obj, path: str) -> str:
    """What the kubelet puts in the variable: "" for a field not (yet) set."""
    if path in PLAIN_PATHS:
        section, key = PLAIN_PATHS[path]
        return str((pod.get(section) or {}).get(key) or "")
    if keyed := KEYED.fullmatch(path):
        return str((pod["metadata"].get(keyed[1]) or {}).get(keyed[2], ""))
    items = sorted((pod["metadata"].get(path.split(".")[1]) or {}).items())
    return "\n".join(f'{key}="{value}"' for key, value in items)


def environment(pod: Obj, container: Obj) -> dict[str, str]:
    """The environment the container's process starts with (later entries win, as on a node)."""
    resolved: dict[str, str] = {}
    for item in container.get("env") or []:
        ref = (item.get("valueFrom") or {}).get("fieldRef")
        value = field_value(pod, ref["fieldPath"]) if ref else item.get("value", "")
        resolved[item["name"]] = value
    return resolved


def check_env(env: Any, field: str) -> list[tuple[str, str]]:
    """The API server's rules for `env`: a name each, `value` or `valueFrom` (not both), and a
    fieldRef to a supported path of v1."""
    causes: list[tuple[str, str]] = []
    for index, item in enumerate(env or []):
        where = f"{field}.env[{index}]"
        if not item.get("name"):
            causes.append((f"{where}.name", "Required value"))
        if item.get("valueFrom") is not None:
            causes += _check_source(item, where)
    return causes


def _check_source(item: Obj, where: str) -> list[tuple[str, str]]:
    causes: list[tuple[str, str]] = []
    if item.get("value"):
        message = 'Invalid value: "": may not be specified when `value` is not empty'
        causes.append((f"{where}.valueFrom", message))
    ref = item["valueFrom"].get("fieldRef")
    if ref is None:
        return causes
    if not supported(path := str(ref.get("fieldPath", ""))):
        causes.append((f"{where}.valueFrom.fieldRef.fieldPath", f'Unsupported value: "{path}"'))
    if (version := ref.get("apiVersion", "v1")) != "v1":
        causes.append((f"{where}.valueFrom.fieldRef.apiVersion", f'Unsupported value: "{version}"'))
    return causes


def default_env(env: Any) -> None:
    """The API server fills in a fieldRef's apiVersion."""
    for item in env or []:
        ref = (item.get("valueFrom") or {}).get("fieldRef")
        if ref is not None:
            ref.setdefault("apiVersion", "v1")
