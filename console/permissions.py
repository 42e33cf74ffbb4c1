"""What the console's credentials on a cluster must be allowed, each with what its absence
breaks (issue 36, Build 1 and 4): the checklist of a connection test, one
SelfSubjectAccessReview per entry. Pure: no database, no cluster.

Every request the console sends to a cluster is covered by one entry (tests/console/
test_permission_checklist.py records them on simcluster and checks both deploy/ files).
`required` rights are those of deploy/rbac-data-plane.yaml (the sync, Jobs, logs); the others
are the opt-in rights of operators' actions (deploy/rbac-operator-actions.yaml): missing, they
hide the action and the page says which permission is missing.

An add-on's manifests are applied in the add-on's own namespace, where the opt-in Role is bound
(one RoleBinding per add-on namespace): its rights are asked there, for Deployments and
DaemonSets alike (`addon_needs`), in `kube-system` (the registry's default namespace, part of
every checklist) and in each namespace an add-on is registered in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _


@dataclass(frozen=True)
class Need:
    key: str  # how pages and the API name it: "verb group/resource[/subresource]"
    verb: str
    group: str
    resource: str
    subresource: str
    namespaced: bool  # asked in the cluster's default namespace, else cluster-wide
    required: bool
    breaks: str | Promise
    namespace: str = ""  # asked in this namespace, whatever the cluster's default one


def _need(
    verb: str, group: str, resource: str, breaks: str | Promise, *, subresource: str = "",
    namespaced: bool = False, required: bool = True,
) -> Need:  # fmt: skip
    path = "/".join(p for p in (group or "core", resource, subresource) if p)
    key = f"{verb} {path}" + (" (namespace)" if namespaced else "")
    return Need(key, verb, group, resource, subresource, namespaced, required, breaks)


ADDON_NAMESPACE = "kube-system"  # an add-on's namespace unless its operator names another
# The kinds an add-on's manifests may hold (console.addon_manifests), as RBAC names them.
ADDON_RESOURCES: Mapping[str, tuple[str, str]] = {
    "Deployment": ("apps", "deployments"),
    "DaemonSet": ("apps", "daemonsets"),
}


def addon_needs(namespace: str) -> tuple[Need, ...]:
    """Server-side apply of each add-on kind in `namespace` (an apply that creates is a
    `patch` too)."""
    breaks = _("add-ons in this namespace cannot be installed or upgraded")
    return tuple(
        Need(f"patch {group}/{resource} (namespace {namespace})", "patch", group, resource, "",
             namespaced=False, required=False, breaks=breaks, namespace=namespace)
        for group, resource in ADDON_RESOURCES.values()
    )  # fmt: skip


# The sync LISTs and WATCHes each of these across namespaces (console.engine.streams); a
# refused one stops the whole cycle, so each is named with what the operator then sees.
_SYNCED = (
    ("", "pods"), ("apps", "statefulsets"), ("batch", "jobs"), ("", "services"), ("", "nodes"),
    ("apps", "daemonsets"), ("apps", "deployments"),
)  # fmt: skip
_LIST_BREAKS = _("every relist fails: the cluster reads Unreachable and nothing on it is updated")
_WATCH_BREAKS = _("every sync that watches fails: the cluster flips to Unreachable between relists")

NEEDS: tuple[Need, ...] = (
    *(_need("list", group, resource, _LIST_BREAKS) for group, resource in _SYNCED),
    *(_need("watch", group, resource, _WATCH_BREAKS) for group, resource in _SYNCED),
    _need("get", "apps", "deployments", _("an add-on's rollout cannot be read once applied")),
    _need("get", "apps", "daemonsets", _("an add-on's rollout cannot be read once applied")),
    # A Job's writes, in the cluster's default namespace (console.engine.plan, console.kube.apply).
    _need("create", "apps", "statefulsets", _("Jobs cannot start in the default namespace"),
          namespaced=True),
    _need("get", "apps", "statefulsets", _("a Job's StatefulSet that exists already is not "
          "recognised: its start is retried as an error"), namespaced=True),
    _need("patch", "apps", "statefulsets", _("Jobs cannot be stopped or resumed"),
          namespaced=True),
    _need("delete", "apps", "statefulsets", _("a deleted Job's StatefulSets stay on the cluster, "
          "holding their GPUs"), namespaced=True),
    _need("create", "batch", "jobs", _("API Tasks (batch Jobs) cannot start"), namespaced=True),
    _need("get", "batch", "jobs", _("a batch Job that exists already is not recognised: its "
          "start is retried as an error"), namespaced=True),
    _need("patch", "batch", "jobs", _("API Tasks (batch Jobs) cannot be stopped or resumed"),
          namespaced=True),
    _need("delete", "batch", "jobs", _("a deleted Job's batch Jobs stay on the cluster, holding "
          "their GPUs"), namespaced=True),
    _need("create", "", "services", _("Ray workers cannot find their head"), namespaced=True),
    _need("get", "", "services", _("a Service that exists already is not recognised: its "
          "Job's start is retried as an error"), namespaced=True),
    _need("delete", "", "services", _("a deleted Job's Services stay on the cluster"),
          namespaced=True),
    _need("get", "", "pods", _("the Logs tab cannot read logs"), subresource="log",
          namespaced=True),
    _need("list", "", "events", _("the Logs tab shows no Kubernetes Events of a pod"),
          namespaced=True),
    # Operators' actions (deploy/rbac-operator-actions.yaml), opt-in.
    _need("patch", "", "nodes", _("cordon and uncordon are not offered"), required=False),
    _need("create", "", "pods", _("drains are not offered"), subresource="eviction",
          required=False),
    _need("list", "policy", "poddisruptionbudgets", _("drains are not offered"), required=False),
    *addon_needs(ADDON_NAMESPACE),
)  # fmt: skip
BY_KEY: Mapping[str, Need] = {need.key: need for need in NEEDS}
# The actions each operator's action needs, by the keys above.
ACTIONS: Mapping[str, tuple[str, ...]] = {
    "cordon": ("patch core/nodes",),
    "drain": ("patch core/nodes", "create core/pods/eviction", "list policy/poddisruptionbudgets"),
}


def attributes(need: Need, namespace: str) -> dict[str, str]:
    """The review's resourceAttributes."""
    found = {"verb": need.verb, "group": need.group, "resource": need.resource}
    if need.subresource:
        found["subresource"] = need.subresource
    if need.namespace or need.namespaced:
        found["namespace"] = need.namespace or namespace
    return found


def missing_for(action: str, allowed: Mapping[str, bool]) -> list[str]:
    """The permissions `action` needs that the last check did not find (all of them when no
    check was made: nothing is assumed)."""
    return [key for key in ACTIONS[action] if not allowed.get(key, False)]


def addon_missing(namespace: str, kinds: Iterable[str], allowed: Mapping[str, bool]) -> list[str]:
    """The permissions an add-on's apply needs in its namespace, for the kinds its manifests
    hold, that the last check did not find (unknown counts as missing)."""
    wanted = {ADDON_RESOURCES[kind] for kind in kinds if kind in ADDON_RESOURCES}
    return [
        need.key
        for need in addon_needs(namespace)
        if (need.group, need.resource) in wanted and not allowed.get(need.key, False)
    ]
