"""deploy/: the console's RBAC on a data-plane cluster grants what the gateway uses and nothing
that reads secrets, runs commands in pods or raises its own privileges (issue 12, item 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from console.kube import gateway

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
FORBIDDEN_RESOURCES = {
    "secrets", "pods/exec", "pods/attach", "pods/portforward", "pods/proxy", "nodes/proxy",
    "services/proxy", "serviceaccounts/token", "*",
}  # fmt: skip
FORBIDDEN_VERBS = {"escalate", "bind", "impersonate", "*"}
READ = {"get", "list", "watch"}


OPT_IN = "rbac-operator-actions.yaml"


def documents(name: str) -> list[dict[str, Any]]:
    with (DEPLOY / name).open() as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc]


def rules(role: str, file: str = "rbac-data-plane.yaml") -> list[dict[str, Any]]:
    (found,) = [
        doc for doc in documents(file)
        if doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == role
    ]  # fmt: skip
    return list(found["rules"])


def granted(role: str, group: str, resource: str, file: str = "rbac-data-plane.yaml") -> set[str]:
    return {
        verb
        for rule in rules(role, file)
        if group in rule["apiGroups"] and resource in rule["resources"]
        for verb in rule["verbs"]
    }


@pytest.mark.parametrize("file", ["rbac-data-plane.yaml", OPT_IN])
def test_it_grants_no_secret_exec_or_privilege_raising_verb(file: str) -> None:
    for doc in documents(file):
        for rule in doc.get("rules", []):
            assert not FORBIDDEN_RESOURCES & set(rule["resources"]), rule
            assert not FORBIDDEN_VERBS & set(rule["verbs"]), rule
            assert "*" not in rule["apiGroups"], rule


def test_it_lets_the_sync_read_every_resource_the_gateway_lists_across_namespaces() -> None:
    resources = [
        value
        for value in vars(gateway).values()
        if isinstance(value, gateway.Resource) and value not in gateway.OPERATOR_ONLY
    ]
    assert resources
    for resource in resources:
        group = resource.api_version.rpartition("/")[0]
        assert READ <= granted("trainyard-console-read", group, resource.plural), resource


def test_it_writes_workloads_only_through_the_per_namespace_role() -> None:
    assert granted("trainyard-console-read", "apps", "statefulsets") == READ
    writes = {"create", "patch", "delete"}
    assert writes <= granted("trainyard-console-jobs", "apps", "statefulsets")
    assert {"patch", "update"} <= granted("trainyard-console-jobs", "apps", "statefulsets/scale")
    assert writes <= granted("trainyard-console-jobs", "batch", "jobs")
    assert {"create", "delete"} <= granted("trainyard-console-jobs", "", "services")
    assert granted("trainyard-console-jobs", "", "pods/log") == {"get"}
    assert granted("trainyard-console-jobs", "", "pods") == READ
    bindings = [doc for doc in documents("rbac-data-plane.yaml") if doc["kind"] == "RoleBinding"]
    assert [b["roleRef"]["name"] for b in bindings] == ["trainyard-console-jobs"]
    assert all(b["metadata"]["namespace"] for b in bindings)


def test_it_labels_job_namespaces_for_pod_security() -> None:
    (namespace,) = documents("namespace-restricted.yaml")
    labels = namespace["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    assert labels["pod-security.kubernetes.io/audit"] == "restricted"
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    # that the console's pods meet it is shown on simcluster: tests/engine/test_pod_security.py


def test_it_keeps_operators_rights_in_the_opt_in_role_only() -> None:
    """Issue 36, Build 4: nodes patch, pods/eviction create, poddisruptionbudgets list,
    selfsubjectaccessreviews create and apply in the add-on namespaces, never by default."""
    nodes = "trainyard-console-nodes"
    assert "patch" in granted(nodes, "", "nodes", OPT_IN)
    assert granted(nodes, "", "pods/eviction", OPT_IN) == {"create"}
    assert "delete" not in granted(nodes, "", "pods", OPT_IN)
    assert "list" in granted(nodes, "policy", "poddisruptionbudgets", OPT_IN)
    assert granted(nodes, "authorization.k8s.io", "selfsubjectaccessreviews", OPT_IN) == {"create"}
    for kind in ("deployments", "daemonsets"):
        assert {"create", "patch"} <= granted("trainyard-console-addons", "apps", kind, OPT_IN)
    default = "trainyard-console-read"
    assert "patch" not in granted(default, "", "nodes")
    assert not granted(default, "", "pods/eviction")
    assert not granted(default, "policy", "poddisruptionbudgets")
    for resource in gateway.OPERATOR_ONLY:
        group = resource.api_version.rpartition("/")[0]
        assert "list" in granted(nodes, group, resource.plural, OPT_IN)
