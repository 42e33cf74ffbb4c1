"""SelfSubjectAccessReview answered from a configurable rule set (authorization.k8s.io/v1).

simcluster has one identity (its bearer token). By default it may do everything, as a
cluster-admin; `SimCluster.set_access_rules([...])` narrows what reviews answer to RBAC-style
rules: `{"verbs": [...], "apiGroups": [...], "resources": [...], "namespaces": [...]}` with `*`
for any, `resource/subresource` for subresources, `namespaces` omitted for every namespace.
`rules_from_rbac` turns RBAC objects (deploy/rbac-*.yaml: Roles, ClusterRoles and their
bindings) into such rules, as the RBAC authorizer reads them for the identity they bind.
Only the reviews follow the rules; other requests are not refused by them.
"""

from __future__ import annotations

from typing import Any

from simcluster import errors

Obj = dict[str, Any]
ALLOWED_REASON = 'RBAC: allowed by ClusterRoleBinding "simcluster" of ClusterRole "simcluster"'


def _holds(values: list[str] | None, value: str) -> bool:
    return values is None or "*" in values or value in values


def _rule_allows(rule: Obj, attributes: Obj) -> bool:
    resource = attributes.get("resource", "")
    if attributes.get("subresource"):
        resource = f"{resource}/{attributes['subresource']}"
    namespace = attributes.get("namespace", "")
    return (
        _holds(rule.get("verbs"), attributes.get("verb", ""))
        and _holds(rule.get("apiGroups"), attributes.get("group", ""))
        and _holds(rule.get("resources"), resource)
        and (not namespace or _holds(rule.get("namespaces"), namespace))
        and (namespace or rule.get("namespaces") is None)
    )


def review(rules: list[Obj] | None, body: Obj) -> Obj:
    """The review with its `status`: allowed by a rule (or by no rule set at all), or not."""
    if body.get("kind") not in (None, "SelfSubjectAccessReview"):
        raise errors.bad_request(f"not a SelfSubjectAccessReview: {body.get('kind')}")
    spec = body.get("spec") or {}
    attributes = spec.get("resourceAttributes")
    if not isinstance(attributes, dict) and not spec.get("nonResourceAttributes"):
        raise errors.invalid(
            "SelfSubjectAccessReview", "authorization.k8s.io", "",
            [("spec.resourceAttributes", "Invalid value: \"null\": exactly one of "
              "nonResourceAttributes or resourceAttributes must be specified")],
        )  # fmt: skip
    allowed = rules is None or any(_rule_allows(r, attributes or {}) for r in rules)
    status: Obj = {"allowed": allowed}
    if allowed:
        status["reason"] = ALLOWED_REASON
    return {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": spec,
        "status": status,
    }


def _role_rules(roles: dict[tuple[str, str, str], Obj], binding: Obj) -> list[Obj]:
    ref = binding.get("roleRef") or {}
    namespace = binding["metadata"].get("namespace", "") if ref.get("kind") == "Role" else ""
    role = roles.get((ref.get("kind", ""), namespace, ref.get("name", "")))
    return [r for r in (role or {}).get("rules") or [] if r.get("resources")]


def rules_from_rbac(objects: list[Obj]) -> list[Obj]:
    """The rules every binding among `objects` grants (simcluster has one identity: each
    binding's subjects are taken to be it). A ClusterRoleBinding grants its ClusterRole in
    every namespace and cluster-wide; a RoleBinding grants its Role or ClusterRole in its own
    namespace only. Non-resource rules are left out (reviews here ask about resources)."""
    roles = {
        (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]): obj
        for obj in objects
        if obj.get("kind") in ("Role", "ClusterRole")
    }
    found: list[Obj] = []
    for binding in objects:
        if binding.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        where = {}
        if binding["kind"] == "RoleBinding":
            where = {"namespaces": [binding["metadata"]["namespace"]]}
        for rule in _role_rules(roles, binding):
            found.append({"verbs": rule.get("verbs", []), "apiGroups": rule.get("apiGroups", []),
                          "resources": rule["resources"], **where})  # fmt: skip
    return found
