"""Server-side apply of Deployments and DaemonSets (issue 36, "simcluster grows what this
needs"): create on first apply (201), update after (200), the field manager recorded, and a
fieldManager required as the API server requires it."""

from __future__ import annotations

from typing import Any

import orjson

from tests.simcluster.conftest import Kube, deployment_manifest


def apply(kube: Kube, body: dict[str, Any], manager: str = "trainyard") -> tuple[int, Any]:
    """A PATCH with `application/apply-patch+yaml` through the client's transport and auth."""
    name = body["metadata"]["name"]
    path = f"/apis/apps/v1/namespaces/{kube.namespace}/deployments/{name}"
    query = [("fieldManager", manager), ("force", "true")] if manager else []
    _, url, headers, serialized, _ = kube.api.param_serialize(
        "PATCH", path, query_params=query, body=orjson.dumps(body).decode(),
        header_params={"Content-Type": "application/apply-patch+yaml"},
        auth_settings=["BearerToken"],
    )  # fmt: skip
    response = kube.api.call_api("PATCH", url, header_params=headers, body=serialized)
    response.read()
    return response.status, orjson.loads(response.data)


def test_it_creates_then_updates_by_apply_and_records_the_manager(kube: Kube) -> None:
    body = deployment_manifest("agent", 1, "nginx:1.27")
    status, created = apply(kube, body)
    assert (status, created["metadata"]["generation"]) == (201, 1)
    assert created["metadata"]["managedFields"][0]["manager"] == "trainyard"
    body["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.28"
    status, updated = apply(kube, body)
    assert (status, updated["metadata"]["generation"]) == (200, 2)
    assert updated["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"
    status, refused = apply(kube, body, manager="")
    assert status == 400 and "fieldManager" in refused["message"]
