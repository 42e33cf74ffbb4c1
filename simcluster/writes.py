"""Create, update, patch and scale as the registry does them: validation, defaulting, generation,
optimistic concurrency, and status kept apart from spec."""

from __future__ import annotations

from typing import Any

import orjson

from simcluster import errors, podsecurity
from simcluster.claims import admit_claim, check_claim, provisioning_failure
from simcluster.context import Context, object_reference
from simcluster.defaults import (
    admit_pod,
    default_daemonset,
    default_deployment,
    default_job,
    default_namespace,
    default_pod_spec,
    default_replicaset,
    default_service,
    default_statefulset,
)
from simcluster.patch import PatchError, json_patch, merge_patch, strategic_merge_patch
from simcluster.resources import ResourceType
from simcluster.store import Key
from simcluster.validation import check_metadata, check_pod_spec, check_update, check_workload

Obj = dict[str, Any]

PATCH_TYPES = (
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
)
NAMESPACE_MISMATCH = (
    "the namespace of the provided object does not match the namespace sent on the request"
)
# Metadata the server owns: a client's copy of these is ignored on update.
SYSTEM_METADATA = (
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "namespace",
    "name",
)
# The status every new object starts with: the fields the Go types never omit.
INITIAL_STATUS: dict[str, Obj] = {
    "statefulsets": {"replicas": 0, "availableReplicas": 0},
    "replicasets": {"replicas": 0},
    "daemonsets": {
        "currentNumberScheduled": 0,
        "numberMisscheduled": 0,
        "desiredNumberScheduled": 0,
        "numberReady": 0,
    },
    "deployments": {},
    "jobs": {},
}
WORKLOAD_DEFAULTS = {
    "statefulsets": default_statefulset,
    "deployments": default_deployment,
    "replicasets": default_replicaset,
    "daemonsets": default_daemonset,
}


class Writer:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._next_service_ip = 10

    def existing(self, resource: ResourceType, key: Key) -> Obj:
        obj = self.ctx.store.get(resource.plural, key)
        if obj is None:
            raise errors.not_found(resource.plural, resource.group, key[1])
        return obj

    # Create ----------------------------------------------------------------------------------

    def create(
        self, resource: ResourceType, namespace: str | None, obj: Obj, dry_run: bool = False
    ) -> Obj:
        _check_kind(resource, obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if resource.namespaced:
            self._place_in_namespace(resource, namespace or "", meta)
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{self.ctx.suffix()}"
        for server_owned in (
            "uid",
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            meta.pop(server_owned, None)
        self._validate_create(resource, obj)
        meta["uid"] = self.ctx.uid()
        self._prepare_create(resource, obj)
        if resource.plural == "pods":
            self._admit_pod_security(namespace or "", obj)
        if dry_run:
            meta["creationTimestamp"] = self.ctx.stamp()
            return obj
        created = self.ctx.store.create(resource.plural, obj, self.ctx.stamp())
        if resource.plural == "persistentvolumeclaims" and (why := provisioning_failure(created)):
            self.ctx.events.record(
                object_reference(resource.plural, created), "Warning", "ProvisioningFailed", why,
                "persistentvolume-controller",
            )  # fmt: skip
        return created

    def _place_in_namespace(self, resource: ResourceType, namespace: str, meta: Obj) -> None:
        if meta.get("namespace") not in (None, "", namespace):
            raise errors.bad_request(NAMESPACE_MISMATCH)
        meta["namespace"] = namespace
        ns = self.ctx.store.get_version("namespaces", ("", namespace))
        if ns is None:
            raise errors.not_found("namespaces", "", namespace)
        if ns.facts["_deleting"]:
            name = meta.get("name") or meta.get("generateName", "")
            message = (
                f'{resource.plural} "{name}" is forbidden: unable to create new content in '
                f"namespace {namespace} because it is being terminated"
            )
            raise errors.forbidden(
                message,
                {
                    "name": meta.get("name", ""),
                    "kind": resource.plural,
                    "causes": [
                        {
                            "reason": "NamespaceTerminating",
                            "message": f"namespace {namespace} is being terminated",
                            "field": "metadata.namespace",
                        }
                    ],
                },
            )

    def _admit_pod_security(self, namespace: str, pod: Obj) -> None:
        """Validating admission after the defaults, as Pod Security admission runs."""
        ns = self.ctx.store.get("namespaces", ("", namespace)) or {}
        message = podsecurity.violation(ns.get("metadata", {}).get("labels") or {}, pod)
        if message:
            raise errors.forbidden(message, {"name": pod["metadata"]["name"], "kind": "pods"})

    def _validate_create(self, resource: ResourceType, obj: Obj) -> None:
        causes = check_metadata(resource.plural, obj)
        if resource.plural == "pods":
            causes += check_pod_spec(obj.get("spec"), "spec", ("Always", "OnFailure", "Never"))
        elif resource.plural in INITIAL_STATUS:
            causes += check_workload(resource.plural, obj)
        elif resource.plural == "persistentvolumeclaims":
            causes += check_claim(obj)
        if causes:
            name = obj["metadata"].get("name") or obj["metadata"].get("generateName", "")
            raise errors.invalid(resource.kind, resource.group, name, causes)

    def _prepare_create(self, resource: ResourceType, obj: Obj) -> None:
        plural = resource.plural
        if plural == "pods":
            admit_pod(obj)
        elif plural in WORKLOAD_DEFAULTS:
            WORKLOAD_DEFAULTS[plural](obj)
        elif plural == "jobs":
            default_job(obj, obj["metadata"]["uid"])
        elif plural == "services":
            default_service(obj, self._service_ip())
        elif plural == "namespaces":
            default_namespace(obj)
        elif plural == "persistentvolumeclaims":
            admit_claim(obj)
        if plural in INITIAL_STATUS:
            obj["status"] = dict(INITIAL_STATUS[plural])

    def _service_ip(self) -> str:
        self._next_service_ip += 1
        number = self._next_service_ip
        return f"10.96.{number // 250}.{number % 250 + 1}"

    # Update ----------------------------------------------------------------------------------

    def replace(
        self, resource: ResourceType, key: Key, new: Obj, status_only: bool, dry_run: bool = False
    ) -> Obj:
        """PUT: the body replaces spec and metadata (or only status through /status)."""
        _check_kind(resource, new)
        meta = new.get("metadata") or {}
        if meta.get("name") != key[1]:
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) "
                f"does not match the name on the URL ({key[1]})"
            )
        if resource.namespaced and meta.get("namespace") not in (None, "", key[0]):
            raise errors.bad_request(NAMESPACE_MISMATCH)
        old = self.existing(resource, key)
        expected = meta.get("resourceVersion") or None
        if expected is not None and expected != old["metadata"]["resourceVersion"]:
            raise errors.conflict(resource.plural, resource.group, key[1])
        if meta.get("uid") and meta["uid"] != old["metadata"]["uid"]:
            why = (
                f"Precondition failed: UID in precondition: {meta['uid']}, "
                f"UID in object meta: {old['metadata']['uid']}"
            )
            raise errors.conflict(resource.plural, resource.group, key[1], why)
        merged = _status_update(old, new) if status_only else self._spec_update(resource, old, new)
        if dry_run:
            return merged
        return self.ctx.store.update(resource.plural, merged, old["metadata"]["resourceVersion"])

    def _spec_update(self, resource: ResourceType, old: Obj, new: Obj) -> Obj:
        merged: Obj = {k: v for k, v in new.items() if k not in ("kind", "apiVersion", "status")}
        merged_meta = dict(new.get("metadata") or {})
        for name in SYSTEM_METADATA:
            merged_meta.pop(name, None)
            if name in old["metadata"]:
                merged_meta[name] = old["metadata"][name]
        merged["metadata"] = merged_meta
        if "status" in old:
            merged["status"] = old["status"]
        self._default_spec(resource.plural, merged)
        causes = check_metadata(resource.plural, merged)
        if resource.plural in INITIAL_STATUS:
            causes += check_workload(resource.plural, merged)
        causes += check_update(resource.plural, old, merged)
        if causes:
            raise errors.invalid(resource.kind, resource.group, old["metadata"]["name"], causes)
        if resource.has_generation and old.get("spec") != merged.get("spec"):
            merged_meta["generation"] = old["metadata"].get("generation", 1) + 1
        return merged

    def _default_spec(self, plural: str, obj: Obj) -> None:
        if plural == "nodes":
            # NodeSpec's omitempty: a false unschedulable and an empty taint list vanish.
            spec = obj.setdefault("spec", {})
            for field in ("unschedulable", "taints"):
                if field in spec and not spec[field]:
                    del spec[field]
        elif plural == "pods":
            default_pod_spec(obj.setdefault("spec", {}))
        elif plural in WORKLOAD_DEFAULTS:
            WORKLOAD_DEFAULTS[plural](obj)

    # Patch -----------------------------------------------------------------------------------

    def patch(
        self,
        resource: ResourceType,
        key: Key,
        content_type: str,
        body: bytes,
        status_only: bool,
        dry_run: bool = False,
    ) -> Obj:
        if content_type.split(";")[0].strip().lower() not in PATCH_TYPES:
            raise errors.unsupported_media_type(content_type)
        old = self.existing(resource, key)
        current = {"kind": resource.kind, "apiVersion": resource.api_version, **old}
        patched = self.apply_patch(content_type, body, current)
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch produced something that is not an object")
        meta = patched.setdefault("metadata", {})
        if meta.get("resourceVersion") not in (None, old["metadata"]["resourceVersion"]):
            raise errors.conflict(resource.plural, resource.group, key[1])
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        if meta.get("name") != key[1]:
            raise errors.bad_request("the name of the object cannot be changed by a patch")
        return self.replace(resource, key, patched, status_only, dry_run)

    def apply_patch(self, content_type: str, body: bytes, current: Obj) -> Any:
        media = content_type.split(";")[0].strip().lower()
        try:
            document = orjson.loads(body or b"null")
        except orjson.JSONDecodeError as error:
            raise errors.bad_request(f"error decoding patch: {error}") from None
        try:
            if media == "application/merge-patch+json":
                return merge_patch(current, document)
            if media == "application/strategic-merge-patch+json":
                return strategic_merge_patch(current, document)
            if media == "application/json-patch+json":
                return json_patch(current, document)
        except PatchError as error:
            if "testing value" in str(error):
                raise errors.ApiError(
                    422,
                    "Invalid",
                    f"the server rejected our request due to an error in our request: {error}",
                ) from None
            raise errors.bad_request(str(error)) from None
        raise errors.unsupported_media_type(content_type)

    # Scale -----------------------------------------------------------------------------------

    def scale(self, resource: ResourceType, key: Key, scale: Obj, dry_run: bool = False) -> Obj:
        old = self.existing(resource, key)
        meta = scale.get("metadata") or {}
        expected = meta.get("resourceVersion")
        if expected and expected != old["metadata"]["resourceVersion"]:
            raise errors.conflict(resource.plural, resource.group, key[1])
        replicas = (scale.get("spec") or {}).get("replicas", 0)
        if not isinstance(replicas, int) or replicas < 0:
            shown = orjson.dumps(replicas).decode()
            raise errors.invalid(
                "Scale",
                "autoscaling",
                key[1],
                [("spec.replicas", f"Invalid value: {shown}: must be greater than or equal to 0")],
            )
        updated = orjson.loads(orjson.dumps(old))
        updated["spec"]["replicas"] = replicas
        return self.replace(resource, key, updated, False, dry_run)


def _status_update(old: Obj, new: Obj) -> Obj:
    merged = orjson.loads(orjson.dumps(old))
    merged["status"] = new.get("status") or {}
    return merged


def _check_kind(resource: ResourceType, obj: Obj) -> None:
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if api_version and api_version != resource.api_version:
        raise errors.bad_request(
            f"the API version in the data ({api_version}) "
            f"does not match the expected API version ({resource.api_version})"
        )
    if kind and kind != resource.kind:
        raise errors.bad_request(
            f"the kind in the data ({kind}) does not match the expected kind ({resource.kind})"
        )
