"""SelfSubjectAccessReview (authorization.k8s.io/v1) answered from simcluster's configurable
rule set (issue 36, "simcluster grows what this needs")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from simcluster.access import rules_from_rbac
from simcluster.server import SimCluster
from tests.simcluster.conftest import Kube, raw_call

PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def review(kube: Kube, **attributes: str) -> tuple[int, Any]:
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    return raw_call(kube, "POST", PATH, body)


def test_it_allows_everything_without_rules(own_kube: Kube) -> None:
    status, answer = review(own_kube, verb="patch", resource="nodes")
    assert (status, answer["kind"], answer["status"]["allowed"]) == (
        201, "SelfSubjectAccessReview", True,
    )  # fmt: skip
    assert answer["spec"]["resourceAttributes"] == {"verb": "patch", "resource": "nodes"}


def test_it_answers_from_the_configured_rules(own_sim: SimCluster, own_kube: Kube) -> None:
    own_sim.set_access_rules([
        {"verbs": ["list"], "apiGroups": [""], "resources": ["pods", "nodes"]},
        {"verbs": ["create"], "apiGroups": [""], "resources": ["pods/eviction"],
         "namespaces": ["default"]},
    ])  # fmt: skip
    allowed = lambda **a: review(own_kube, **a)[1]["status"]["allowed"]  # noqa: E731
    assert allowed(verb="list", group="", resource="pods") is True
    assert allowed(verb="patch", group="", resource="nodes") is False
    evict = {"verb": "create", "group": "", "resource": "pods", "subresource": "eviction"}
    assert allowed(**evict, namespace="default") is True
    assert allowed(**evict, namespace="other") is False
    assert allowed(**evict) is False  # cluster-wide, but the rule binds one namespace
    groups = raw_call(own_kube, "GET", "/apis")[1]["groups"]
    assert "authorization.k8s.io" in {g["name"] for g in groups}
    status, _ = raw_call(own_kube, "GET", PATH)
    assert status == 405


DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_it_reads_the_shipped_rbac_as_the_rbac_authorizer_would(
    own_sim: SimCluster, own_kube: Kube
) -> None:
    """deploy/rbac-data-plane.yaml and the opt-in deploy/rbac-operator-actions.yaml: cluster
    roles grant everywhere, a RoleBinding only in its namespace."""
    texts = [(DEPLOY / name).read_text() for name in ("rbac-data-plane.yaml",
                                                      "rbac-operator-actions.yaml")]  # fmt: skip
    own_sim.set_access_rules(
        rules_from_rbac([doc for text in texts for doc in yaml.safe_load_all(text) if doc])
    )
    allowed = lambda **a: review(own_kube, **a)[1]["status"]["allowed"]  # noqa: E731
    assert allowed(verb="list", group="", resource="pods") is True
    assert allowed(verb="patch", group="", resource="nodes") is True
    assert allowed(verb="create", group="apps", resource="statefulsets", namespace="training")
    assert not allowed(verb="create", group="apps", resource="statefulsets", namespace="default")
    for resource in ("deployments", "daemonsets"):
        assert allowed(verb="patch", group="apps", resource=resource, namespace="kube-system")
        assert not allowed(verb="patch", group="apps", resource=resource, namespace="default")
    assert not allowed(verb="get", group="", resource="secrets", namespace="kube-system")


def test_its_rules_are_set_over_http_from_rules_or_rbac_yaml(
    own_sim: SimCluster, own_kube: Kube
) -> None:
    """PUT /_sim/access, for `make run` and outside tools: a missing permission shown."""
    only_nodes = [{"verbs": ["patch"], "apiGroups": [""], "resources": ["nodes"]}]
    assert raw_call(own_kube, "PUT", "/_sim/access", {"rules": only_nodes}) == (
        200, {"rules": only_nodes},
    )  # fmt: skip
    assert review(own_kube, verb="patch", group="", resource="nodes")[1]["status"]["allowed"]
    assert not review(own_kube, verb="list", group="", resource="pods")[1]["status"]["allowed"]
    rbac = (DEPLOY / "rbac-operator-actions.yaml").read_text()
    status, answer = raw_call(own_kube, "PUT", "/_sim/access", {"rbac": rbac})
    assert status == 200 and answer["rules"] == own_sim.access_rules
    addons = {"verb": "patch", "group": "apps", "resource": "daemonsets"}
    assert review(own_kube, **addons, namespace="kube-system")[1]["status"]["allowed"]
    assert not review(own_kube, **addons, namespace="monitoring")[1]["status"]["allowed"]
    assert raw_call(own_kube, "PUT", "/_sim/access", {"rules": None})[1] == {"rules": None}
    assert review(own_kube, verb="list", group="", resource="pods")[1]["status"]["allowed"]
    assert raw_call(own_kube, "PUT", "/_sim/access", {"rules": "all"})[0] == 400
    assert raw_call(own_kube, "PUT", "/_sim/access", {"rbac": "a: [b"})[0] == 400
    assert raw_call(own_kube, "GET", "/_sim/access") == (200, {"rules": None})
