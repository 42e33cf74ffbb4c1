"""The three PATCH flavours kube-apiserver accepts for built-in types."""

from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]


class PatchError(ValueError):
    """A patch that cannot apply; the API answers 422 (json-patch test) or 400 (malformed)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# patchMergeKey of the list fields a console patches (k8s.io/api struct tags).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "addresses": "type",
    "taints": "key",
}
# Lists of scalars whose strategy is merge (union) rather than replace.
MERGE_SCALAR_LISTS = {"finalizers"}


def strategic_merge_patch(target: Any, patch: Any, field: str = "") -> Any:
    """Merge semantics plus list merging by the field's merge key and `$patch` directives."""
    if not isinstance(patch, dict):
        if isinstance(patch, list) and isinstance(target, list):
            return _merge_list(target, patch, field)
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if not k.startswith("$")}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        else:
            result[key] = strategic_merge_patch(result.get(key), value, key)
    return result


def _merge_list(target: list[Any], patch: list[Any], field: str) -> list[Any]:
    if field in MERGE_SCALAR_LISTS:
        return list(target) + [v for v in patch if v not in target]
    merge_key = MERGE_KEYS.get(field)
    if merge_key is None or not all(isinstance(item, dict) for item in patch):
        return [item for item in copy.deepcopy(patch) if not _is_directive(item)]
    result = [copy.deepcopy(item) for item in target]
    for item in patch:
        if item.get("$patch") == "replace":
            return [
                i for i in copy.deepcopy(patch) if isinstance(i, dict) and i.get("$patch") is None
            ]
        index = next(
            (i for i, old in enumerate(result) if old.get(merge_key) == item.get(merge_key)), None
        )
        if item.get("$patch") == "delete":
            if index is not None:
                result.pop(index)
        elif index is None:
            result.append(strategic_merge_patch({}, item))
        else:
            result[index] = strategic_merge_patch(result[index], item)
    return result


def _is_directive(item: Any) -> bool:
    return isinstance(item, dict) and "$patch" in item


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 add/remove/replace/move/copy/test over JSON pointers."""
    if not isinstance(operations, list):
        raise PatchError("json patch must be a list of operations")
    document = copy.deepcopy(target)
    for operation in operations:
        document = _apply_operation(document, operation)
    return document


def _apply_operation(document: Any, operation: Obj) -> Any:
    op, path = operation.get("op"), operation.get("path")
    if not isinstance(path, str):
        raise PatchError(f"missing path in json patch operation {operation}")
    if op == "add":
        return _add(document, path, copy.deepcopy(operation.get("value")))
    if op == "remove":
        return _remove(document, path)[0]
    if op == "replace":
        _get(document, path)
        return _add(_remove(document, path)[0], path, copy.deepcopy(operation.get("value")))
    if op in ("move", "copy"):
        source = operation.get("from", "")
        value = copy.deepcopy(_get(document, source))
        if op == "move":
            document = _remove(document, source)[0]
        return _add(document, path, value)
    if op == "test":
        if _get(document, path) != operation.get("value"):
            raise PatchError(f"testing value {path} failed")
        return document
    raise PatchError(f"unexpected kind of json patch operation: {op!r}")


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"json pointer {path!r} must start with '/'")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _parent(document: Any, path: str) -> tuple[Any, str]:
    tokens = _tokens(path)
    if not tokens:
        raise PatchError("the root of the document cannot be the target here")
    node = document
    for token in tokens[:-1]:
        node = _step(node, token, path)
    return node, tokens[-1]


def _step(node: Any, token: str, path: str) -> Any:
    try:
        if isinstance(node, list):
            return node[int(token)]
        return node[token]
    except (KeyError, IndexError, ValueError, TypeError):
        raise PatchError(f"doc is missing path: {path!r}") from None


def _get(document: Any, path: str) -> Any:
    node = document
    for token in _tokens(path):
        node = _step(node, token, path)
    return node


def _add(document: Any, path: str, value: Any) -> Any:
    if path == "":
        return value
    parent, last = _parent(document, path)
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if index > len(parent):
            raise PatchError(f"add operation index out of bounds: {path!r}")
        parent.insert(index, value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise PatchError(f"doc is missing path: {path!r}")
    return document


def _remove(document: Any, path: str) -> tuple[Any, Any]:
    parent, last = _parent(document, path)
    try:
        removed = parent.pop(int(last)) if isinstance(parent, list) else parent.pop(last)
    except (KeyError, IndexError, ValueError, AttributeError):
        raise PatchError(f"doc is missing path: {path!r}") from None
    return document, removed
