"""The console's own Kubernetes manifests (deploy/console/) validate offline against the
Kubernetes 1.32 OpenAPI schemas in strict mode (kubernetes-validate: unknown fields are errors),
and say what docs/operations.md, "Deploying", says: probes on the web, every queue consumed, a
single beat, non-root and read-only containers with resources."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from django.conf import settings

DEPLOY = Path(settings.BASE_DIR, "deploy", "console")
KUBERNETES = "1.32.0"


def documents() -> list[dict[str, Any]]:
    found = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        found += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return found


def by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in documents() if doc["kind"] == kind}


def pod_specs() -> dict[str, dict[str, Any]]:
    workloads = {**by_kind("Deployment"), **by_kind("Job")}
    return {name: doc["spec"]["template"]["spec"] for name, doc in workloads.items()}


def test_it_validates_every_manifest_against_the_kubernetes_schema_in_strict_mode() -> None:
    kinds = []
    for doc in documents():
        if doc["kind"] == "Kustomization":
            continue
        assert doc["apiVersion"] and doc["metadata"]["name"]
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)
        kinds.append(doc["kind"])
    assert sorted(set(kinds)) == [
        "ConfigMap", "Deployment", "Ingress", "Job", "NetworkPolicy", "Secret", "Service",
    ]  # fmt: skip


def test_it_refuses_a_manifest_with_a_field_kubernetes_does_not_know() -> None:
    web = by_kind("Deployment")["trainyard-web"]
    web["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(web, KUBERNETES, strict=True)


def test_it_lists_every_manifest_in_the_kustomization() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    files = {path.name for path in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(kustomization["resources"]) == sorted(files)


@pytest.mark.parametrize(
    "name", ["trainyard-web", "trainyard-worker", "trainyard-beat", "trainyard-migrate"]
)
def test_it_runs_every_container_unprivileged_read_only_and_with_resources(name: str) -> None:
    pod = pod_specs()[name]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001  # the image's user (Dockerfile)
    assert pod["automountServiceAccountToken"] is False
    for container in pod["containers"]:
        assert container["image"].startswith("trainyard/console")
        context = container["securityContext"]
        assert context["runAsNonRoot"] and context["readOnlyRootFilesystem"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert {"cpu", "memory"} <= set(container["resources"]["requests"])
        assert "memory" in container["resources"]["limits"]
        mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
        assert {"/tmp", "/var/lib/trainyard"} <= mounts  # the writable places


def test_it_probes_the_web_for_liveness_without_the_database_and_for_readiness_with_it() -> None:
    web = pod_specs()["trainyard-web"]["containers"][0]
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    # /readyz may wait 5 s for PostgreSQL and 3 s for the broker (console/health.py).
    assert web["readinessProbe"]["timeoutSeconds"] >= 8
    service = by_kind("Service")["trainyard-web"]
    labels = by_kind("Deployment")["trainyard-web"]["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()


def test_it_runs_one_beat_never_two_and_workers_that_take_every_queue() -> None:
    beat = by_kind("Deployment")["trainyard-beat"]
    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"] == {"type": "Recreate"}
    worker = pod_specs()["trainyard-worker"]
    command = worker["containers"][0]["command"]
    queues = command[command.index("-Q") + 1].split(",")
    assert queues == [queue.name for queue in settings.CELERY_TASK_QUEUES]
    # A warm stop lets the tasks under way end within their hard time limit (defaults: 135 s).
    assert worker["terminationGracePeriodSeconds"] > 135


def test_it_migrates_in_a_job_and_keeps_metrics_off_the_public_entrance() -> None:
    migrate = pod_specs()["trainyard-migrate"]["containers"][0]
    assert migrate["command"] == ["python", "manage.py", "migrate", "--noinput"]
    services = by_kind("Service")
    deployments = by_kind("Deployment").values()
    paths = by_kind("Ingress")["trainyard-web"]["spec"]["rules"][0]["http"]["paths"]
    routes = {path["path"]: path["backend"]["service"]["name"] for path in paths}
    assert routes.keys() == {"/", "/metrics"} and routes["/"] == "trainyard-web"
    closed = services[routes["/metrics"]]["spec"]["selector"]
    assert not any(
        closed.items() <= d["spec"]["template"]["metadata"]["labels"].items() for d in deployments
    )  # no pod behind it
