"""DELETE semantics shared by the API and the controllers: graceful pod deletion, finalizers and
the propagation policies that decide what the garbage collector does with dependents."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simcluster import errors
from simcluster.context import Context
from simcluster.facts import is_terminal_phase
from simcluster.resources import RESOURCES
from simcluster.store import Key

Obj = dict[str, Any]

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"


@dataclass
class DeleteOptions:
    grace_seconds: int | None = None
    propagation: str | None = None
    uid: str | None = None
    resource_version: str | None = None


def delete_object(
    ctx: Context, resource: str, key: Key, options: DeleteOptions
) -> tuple[Obj, bool]:
    """Marks or removes the object; returns it and whether it is gone from the store already."""
    rt = RESOURCES[resource]
    obj = ctx.store.get(resource, key)
    if obj is None:
        raise errors.not_found(resource, rt.group, key[1])
    check_preconditions(resource, obj, options)
    if resource == "pods":
        return _delete_pod(ctx, obj, options.grace_seconds)
    if resource == "namespaces":
        return _delete_namespace(ctx, obj), False
    policy = options.propagation or rt.default_propagation
    if policy not in ("Background", "Foreground", "Orphan"):
        raise errors.bad_request(f"propagationPolicy {policy!r} is not supported")
    return _delete_with_policy(ctx, resource, obj, policy)


def check_preconditions(resource: str, obj: Obj, options: DeleteOptions) -> None:
    rt, meta = RESOURCES[resource], obj["metadata"]
    if options.uid and options.uid != meta["uid"]:
        why = (
            f"Precondition failed: UID in precondition: {options.uid}, "
            f"UID in object meta: {meta['uid']}"
        )
        raise errors.conflict(resource, rt.group, meta["name"], why)
    if options.resource_version and options.resource_version != meta["resourceVersion"]:
        why = (
            "Precondition failed: ResourceVersion in precondition: "
            f"{options.resource_version}, ResourceVersion in object meta: {meta['resourceVersion']}"
        )
        raise errors.conflict(resource, rt.group, meta["name"], why)


def _delete_with_policy(ctx: Context, resource: str, obj: Obj, policy: str) -> tuple[Obj, bool]:
    meta = obj["metadata"]
    finalizers = list(meta.get("finalizers") or [])
    wanted = {"Foreground": FOREGROUND, "Orphan": ORPHAN}.get(policy)
    if wanted and wanted not in finalizers:
        finalizers.append(wanted)
    if not finalizers:
        key = (meta.get("namespace", ""), meta["name"])
        removed = ctx.store.remove(resource, key)
        return removed or obj, True
    meta["finalizers"] = finalizers
    meta.setdefault("deletionTimestamp", ctx.stamp())
    meta["deletionGracePeriodSeconds"] = 0
    return ctx.store.update(resource, obj), False


def _delete_pod(ctx: Context, pod: Obj, grace: int | None) -> tuple[Obj, bool]:
    """Graceful deletion: a bound, running pod gets a deletionTimestamp and its kubelet stops it.

    Unbound and finished pods have nothing to stop and go at once, as in the pod registry.
    """
    meta, spec = pod["metadata"], pod.get("spec") or {}
    phase = (pod.get("status") or {}).get("phase", "")
    seconds = spec.get("terminationGracePeriodSeconds", 30) if grace is None else grace
    if not spec.get("nodeName") or is_terminal_phase(phase):
        seconds = 0
    now = ctx.now()
    current = meta.get("deletionGracePeriodSeconds")
    if current is not None and current <= seconds:
        return pod, False
    meta["deletionTimestamp"] = ctx.stamp(now + seconds)
    meta["deletionGracePeriodSeconds"] = max(0, seconds)
    updated = ctx.store.update("pods", pod)
    gone = ctx.store.get_version("pods", (meta["namespace"], meta["name"])) is None
    return updated, gone


def _delete_namespace(ctx: Context, namespace: Obj) -> Obj:
    meta = namespace["metadata"]
    if "deletionTimestamp" not in meta:
        meta["deletionTimestamp"] = ctx.stamp()
        meta["deletionGracePeriodSeconds"] = 0
        namespace["status"] = {"phase": "Terminating"}
        namespace = ctx.store.update("namespaces", namespace)
    return namespace


def delete_pod(ctx: Context, key: Key, grace: int | None = None) -> None:
    """A controller's pod deletion; a pod someone else removed first is not an error."""
    try:
        delete_object(ctx, "pods", key, DeleteOptions(grace_seconds=grace))
    except errors.ApiError as error:
        if error.code != 404:
            raise
