"""The resource types simcluster serves, and the discovery documents that describe them."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

Obj = dict[str, Any]

_META_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
_CRUD = ("create", "delete", "deletecollection", "get", "list", "patch", "update")


@dataclass(frozen=True)
class ResourceType:
    plural: str
    kind: str
    group: str
    version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    selectable_fields: frozenset[str] = field(default_factory=frozenset)
    has_generation: bool = False
    # Objects answered as themselves (not a Status) by DELETE even when removed at once.
    returns_deleted_object: bool = False
    # What DELETE does to dependents when the client names no propagation policy.
    default_propagation: str = "Background"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @cached_property
    def field_selectors(self) -> frozenset[str]:
        return _META_FIELDS | self.selectable_fields


_POD_FIELDS = frozenset(
    {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    }
)
_EVENT_FIELDS = frozenset(
    {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    }
)

RESOURCES: dict[str, ResourceType] = {
    rt.plural: rt
    for rt in (
        ResourceType(
            "namespaces",
            "Namespace",
            "",
            "v1",
            False,
            ("ns",),
            ("status",),
            frozenset({"status.phase"}),
            returns_deleted_object=True,
        ),
        ResourceType(
            "nodes",
            "Node",
            "",
            "v1",
            False,
            ("no",),
            ("status",),
            frozenset({"spec.unschedulable"}),
        ),
        ResourceType(
            "pods",
            "Pod",
            "",
            "v1",
            True,
            ("po",),
            ("status", "log", "eviction"),
            _POD_FIELDS,
            has_generation=True,
            returns_deleted_object=True,
        ),
        ResourceType(
            "services",
            "Service",
            "",
            "v1",
            True,
            ("svc",),
            ("status",),
            returns_deleted_object=True,
        ),
        ResourceType(
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            "",
            "v1",
            True,
            ("pvc",),
            ("status",),
            returns_deleted_object=True,
        ),
        ResourceType("events", "Event", "", "v1", True, ("ev",), (), _EVENT_FIELDS),
        ResourceType(
            "statefulsets",
            "StatefulSet",
            "apps",
            "v1",
            True,
            ("sts",),
            ("status", "scale"),
            has_generation=True,
        ),
        ResourceType(
            "deployments",
            "Deployment",
            "apps",
            "v1",
            True,
            ("deploy",),
            ("status", "scale"),
            has_generation=True,
        ),
        ResourceType(
            "replicasets",
            "ReplicaSet",
            "apps",
            "v1",
            True,
            ("rs",),
            ("status", "scale"),
            frozenset({"status.replicas"}),
            has_generation=True,
        ),
        ResourceType(
            "daemonsets", "DaemonSet", "apps", "v1", True, ("ds",), ("status",), has_generation=True
        ),
        ResourceType(
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            "policy",
            "v1",
            True,
            ("pdb",),
            ("status",),
            has_generation=True,
        ),
        ResourceType(
            "selfsubjectaccessreviews",
            "SelfSubjectAccessReview",
            "authorization.k8s.io",
            "v1",
            False,
        ),
        ResourceType(
            "jobs",
            "Job",
            "batch",
            "v1",
            True,
            (),
            ("status",),
            frozenset({"status.successful"}),
            has_generation=True,
            default_propagation="Orphan",
        ),
    )
}

GROUPS: dict[str, str] = {
    "apps": "v1",
    "batch": "v1",
    "policy": "v1",
    "authorization.k8s.io": "v1",
}
# Resources that are only ever created, answered and not stored (a review).
CREATE_ONLY = frozenset({"selfsubjectaccessreviews"})


def resource_for(group: str, version: str, plural: str) -> ResourceType | None:
    resource = RESOURCES.get(plural)
    if resource is None or resource.group != group or resource.version != version:
        return None
    return resource


def kind_lookup(api_version: str, kind: str) -> ResourceType | None:
    for resource in RESOURCES.values():
        if resource.kind == kind and resource.api_version == api_version:
            return resource
    return None


def api_resource_list(group: str, version: str) -> Obj:
    """`/api/v1` or `/apis/<group>/<version>`: every resource and subresource with its verbs."""
    entries: list[Obj] = []
    for resource in RESOURCES.values():
        if resource.group != group or resource.version != version:
            continue
        verbs = ("create",) if resource.plural in CREATE_ONLY else _CRUD
        entries.append(_api_resource(resource, resource.plural, resource.kind, verbs))
        for sub in resource.subresources:
            entries.append(_subresource(resource, sub))
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries,
    }


def _api_resource(resource: ResourceType, name: str, kind: str, verbs: tuple[str, ...]) -> Obj:
    entry: Obj = {
        "name": name,
        "singularName": resource.singular if name == resource.plural else "",
        "namespaced": resource.namespaced,
        "kind": kind,
        "verbs": list(verbs),
    }
    if name == resource.plural and resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if name == resource.plural and resource.plural in (
        "pods",
        "statefulsets",
        "deployments",
        "daemonsets",
        "jobs",
    ):
        entry["categories"] = ["all"]
    return entry


def _subresource(resource: ResourceType, sub: str) -> Obj:
    name = f"{resource.plural}/{sub}"
    if sub == "log":
        return _api_resource(resource, name, "Pod", ("get",))
    if sub == "eviction":
        entry = _api_resource(resource, name, "Eviction", ("create",))
        entry.update({"group": "policy", "version": "v1"})
        return entry
    if sub == "scale":
        entry = _api_resource(resource, name, "Scale", ("get", "patch", "update"))
        entry.update({"group": "autoscaling", "version": "v1"})
        return entry
    return _api_resource(resource, name, resource.kind, ("get", "patch", "update"))


def api_versions(server_address: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def api_group(name: str) -> Obj:
    version = {"groupVersion": f"{name}/{GROUPS[name]}", "version": GROUPS[name]}
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": name,
        "versions": [version],
        "preferredVersion": version,
    }


def api_group_list() -> Obj:
    groups = [
        {k: v for k, v in api_group(name).items() if k not in ("kind", "apiVersion")}
        for name in GROUPS
    ]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def version_info() -> Obj:
    return {
        "major": "1",
        "minor": "33",
        "emulationMajor": "1",
        "emulationMinor": "33",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "32",
        "gitVersion": "v1.33.0-simcluster",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T00:00:00Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": "linux/amd64",
    }
