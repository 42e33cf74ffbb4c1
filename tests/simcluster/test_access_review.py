"""SelfSubjectAccessReview (authorization.k8s.io/v1) answered from simcluster's configurable
rule set (issue 36, "simcluster grows what this needs")."""

from __future__ import annotations

from typing import Any

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
