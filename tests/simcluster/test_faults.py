"""Injected failures on the Kubernetes paths (never on /_sim/), set over HTTP or in Python, and
their reset.

Spec: the brief's control surface section (faults).
"""

from __future__ import annotations

import time

import orjson
import pytest
from kubernetes.client.exceptions import ApiException

from simcluster.server import SimCluster
from tests.simcluster.conftest import Kube, connect, error_body, raw_call


def test_it_answers_an_injected_500_until_reset(own_kube: Kube) -> None:
    kube = own_kube
    code, answer = raw_call(kube, "POST", "/_sim/faults", {"status": 500, "seconds": 30})
    assert code == 201 and answer["fault"]["status"] == 500
    with pytest.raises(ApiException) as caught:
        kube.core.list_namespace()
    body = error_body(caught.value)
    assert (caught.value.status, body["kind"], body["reason"], body["code"]) == (
        500,
        "Status",
        "InternalError",
        500,
    )
    assert raw_call(kube, "GET", "/_sim/state")[0] == 200
    assert raw_call(kube, "DELETE", "/_sim/faults") == (200, {"cleared": 1})
    assert kube.core.list_namespace().items


def test_it_answers_429_with_retry_after_and_expires(
    own_kube: Kube, own_sim: SimCluster, tmp_path
) -> None:
    no_retries = connect(own_sim, tmp_path, retries=False)
    try:
        own_sim.set_fault(status=429, seconds=0.5)
        with pytest.raises(ApiException) as caught:
            no_retries.core.list_node()
        assert caught.value.status == 429 and caught.value.headers is not None
        assert caught.value.headers["Retry-After"] == "1"
        assert error_body(caught.value)["reason"] == "TooManyRequests"
    finally:
        no_retries.api.close()
    # urllib3 honours Retry-After by default: the client waits a second and the fault is over.
    assert len(own_kube.core.list_node().items) == 3
    own_sim.set_fault(status=503, seconds=0.5)
    with pytest.raises(ApiException) as unavailable:
        own_kube.core.list_namespace()
    assert unavailable.value.status == 503


def test_it_truncates_bodies(own_kube: Kube, own_sim: SimCluster) -> None:
    own_sim.set_fault(truncate=True, seconds=30)
    response = own_kube.core.list_node(_preload_content=False)
    assert response.status == 200
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(response.data)
    with pytest.raises(ValueError):
        own_kube.core.list_node()
    assert own_sim.clear_faults() == 1
    assert orjson.loads(own_kube.core.list_node(_preload_content=False).data)["kind"] == "NodeList"


def test_it_adds_latency(own_kube: Kube, own_sim: SimCluster) -> None:
    own_sim.set_fault(latency_ms=300, seconds=30)
    started = time.monotonic()
    own_kube.core.list_namespace()
    assert time.monotonic() - started >= 0.3
    own_sim.clear_faults()
    started = time.monotonic()
    own_kube.core.list_namespace()
    assert time.monotonic() - started < 0.3


def test_it_holds_a_request_without_answering(
    own_kube: Kube, own_sim: SimCluster, tmp_path
) -> None:
    no_retries = connect(own_sim, tmp_path, retries=False)
    own_sim.set_fault(timeout=True, seconds=1)
    started = time.monotonic()
    try:
        with pytest.raises(Exception) as caught:
            no_retries.core.list_namespace(_request_timeout=0.3)
    finally:
        no_retries.api.close()
    assert "timed out" in str(caught.value).lower()
    assert 0.3 <= time.monotonic() - started < 1.0
    assert raw_call(own_kube, "GET", "/_sim/state")[0] == 200
    own_sim.clear_faults()
    assert own_kube.core.list_namespace(_request_timeout=5).items


def test_it_refuses_a_fault_it_does_not_know(own_kube: Kube) -> None:
    code, body = raw_call(own_kube, "POST", "/_sim/faults", {"status": 418, "seconds": 1})
    assert code == 400 and body["reason"] == "BadRequest"
    code, body = raw_call(own_kube, "POST", "/_sim/faults", {"seconds": 1})
    assert code == 400
