"""Create, scale and delete with the semantics reconcile relies on.

- create: 409 AlreadyExists means read the object and compare: the same Job, Task and run is
  success (another reconcile got there first); anything else is an error to report.
- scale: StatefulSet `spec.replicas`, batch Job `spec.parallelism`.
- create and scale return the object as the API server answered the write: the cycle that
  writes it derives from that answer rather than from the LIST taken before the write.
- delete: Background propagation; 404 is success, and so is 409 on the UID precondition (the
  object observed is already gone; a newer one of that name is judged on the next cycle).
"""

from __future__ import annotations

from typing import Any

from console.kube import MANAGED_BY, MANAGER
from console.kube.gateway import BATCH_JOBS, ApplyError, Gateway, Resource
from console.kube.observations import owner_of


def _labels(manifest: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = (manifest.get("metadata") or {}).get("labels") or {}
    return labels


def create(gateway: Gateway, resource: Resource, manifest: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server answered: created now, or the very same object that
    already existed."""
    meta = manifest["metadata"]
    try:
        return gateway.create(resource, meta["namespace"], manifest)
    except ApplyError as error:
        if error.status != 409:
            raise
    existing = gateway.get(resource, meta["namespace"], meta["name"])
    if existing is None:
        raise ApplyError(409, f"{resource.kind} {meta['name']} is being deleted; retrying")
    theirs, ours = _labels(existing), _labels(manifest)
    if theirs.get(MANAGED_BY) != MANAGER or owner_of(theirs) != owner_of(ours):
        raise ApplyError(
            409,
            f"A {resource.kind} named {meta['name']} already exists in {meta['namespace']} "
            "and does not belong to this run of this job.",
        )
    return existing


def scale(
    gateway: Gateway, resource: Resource, namespace: str, name: str, replicas: int
) -> dict[str, Any]:
    """The scaled object as the API server answered the patch."""
    field = "parallelism" if resource == BATCH_JOBS else "replicas"
    return gateway.patch(resource, namespace, name, {"spec": {field: replicas}})


def delete(gateway: Gateway, resource: Resource, namespace: str, name: str, uid: str = "") -> bool:
    """True when deleted now, False when it was already gone."""
    try:
        gateway.delete(resource, namespace, name, uid)
        return True
    except ApplyError as error:
        if error.status == 404 or (error.status == 409 and uid):
            return False
        raise
