"""Fixtures for simcluster tests: a running SimCluster and the official kubernetes client on it.

Every test talks to simcluster the way the console does, through a kubeconfig and the typed
client (or its raw `_preload_content=False` path). Tests that change nodes or inject faults get a
cluster of their own; the others share one and keep to a namespace of their own.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from simcluster.server import SimCluster

SPEED = 50.0
_names = itertools.count()


@dataclass
class Kube:
    """One kubeconfig's clients, as the console builds them.

    Typed as Any on purpose: the generated models make every field Optional, and these tests
    assert on the values themselves rather than narrow each one first.
    """

    api: Any
    core: Any
    apps: Any
    batch: Any
    namespace: str


def connect(
    sim: SimCluster, directory: Path, namespace: str = "default", retries: bool | None = None
) -> Kube:
    kubeconfig = sim.write_kubeconfig(directory / f"kubeconfig-{namespace}.yaml", namespace)
    configuration = client.Configuration()
    if retries is not None:
        configuration.retries = retries
    api = config.new_client_from_config(
        config_file=str(kubeconfig), client_configuration=configuration
    )
    return Kube(
        api, client.CoreV1Api(api), client.AppsV1Api(api), client.BatchV1Api(api), namespace
    )


def wait_for[T](check: Callable[[], T | None], timeout: float = 15.0, interval: float = 0.02) -> T:
    """Polls until `check` returns something truthy; fails with the last value seen."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s; last value: {last!r}")


@pytest.fixture(scope="session")
def shared_sim() -> Iterator[SimCluster]:
    with SimCluster(nodes=3, gpus_per_node=8, seed=1, speed=SPEED) as sim:
        yield sim
        assert not sim.tick_errors, sim.tick_errors[0]


@pytest.fixture
def own_sim() -> Iterator[SimCluster]:
    """A private cluster for tests that take nodes offline, cordon them or inject faults."""
    with SimCluster(nodes=3, gpus_per_node=8, seed=2, speed=SPEED) as sim:
        yield sim
        assert not sim.tick_errors, sim.tick_errors[0]


@pytest.fixture
def kube(shared_sim: SimCluster, tmp_path: Path) -> Iterator[Kube]:
    """Clients on the shared cluster, defaulting to a fresh namespace of this test's own."""
    namespace = f"t{next(_names)}"
    shared_sim.cluster.ensure_namespace(namespace)
    kube = connect(shared_sim, tmp_path, namespace)
    yield kube
    kube.api.close()


@pytest.fixture
def own_kube(own_sim: SimCluster, tmp_path: Path) -> Iterator[Kube]:
    kube = connect(own_sim, tmp_path)
    yield kube
    kube.api.close()


def container(
    name: str = "main", image: str = "python:3.12", command: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": name, "image": image}
    if command is not None:
        spec["command"] = command
    spec.update(extra)
    return spec


def pod_manifest(
    name: str, *containers: dict[str, Any], restart: str = "Always", **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"containers": list(containers) or [container()], "restartPolicy": restart, **spec},
    }


def statefulset_manifest(
    name: str, replicas: int, command: list[str] | None = None, image: str = "python:3.12"
) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        container(image=image, command=command or ["python", "-m", "rlinf.train"])
                    ]
                },
            },
        },
    }


def job_manifest(name: str, command: list[str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {"containers": [container(command=command)], "restartPolicy": "Never"}
            },
            **spec,
        },
    }


def deployment_manifest(name: str, replicas: int, image: str, **spec: Any) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [container(image=image)]},
            },
            **spec,
        },
    }


def condition(conditions: list[Any] | None, type_: str) -> Any:
    return next((c for c in conditions or [] if c.type == type_), None)


def raw_call(kube: Kube, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """A request through the client's own transport and auth, for paths it has no method for."""
    _, url, headers, serialized, _ = kube.api.param_serialize(
        method,
        path,
        header_params={"Content-Type": "application/json", "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
    )
    response = kube.api.call_api(method, url, header_params=headers, body=serialized)
    response.read()
    data = response.data or b""
    return response.status, orjson.loads(data) if data.startswith(b"{") else data.decode()


def error_body(error: ApiException) -> dict[str, Any]:
    """The Status object an ApiException carries."""
    assert error.body is not None
    body: dict[str, Any] = orjson.loads(error.body)
    return body
