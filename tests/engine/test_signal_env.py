"""End to end on simcluster: every container of every Task gets the signal env, the pod's own
name and UID arrive through the downward API, and the token in it is accepted by the signal
endpoint for that Job (and refused for another)."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.models import User
from django.test import Client

from console.engine.cycle import sync_cluster
from console.kube.gateway import PODS
from console.models import Cluster
from jobs import operations
from jobs.spec import parse_job_spec
from simcluster.server import SimCluster
from tests.engine.conftest import gateway, phase_of, submit, sync_until, task

FIELD_REFS = {
    "TRAINYARD_POD": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
    "TRAINYARD_POD_UID": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.uid"}},
}


def path(job_id: int) -> str:
    return f"/api/v1/jobs/{job_id}/signals"


def post(job_id: int, token: str, body: Any) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    return Client().post(path(job_id), json.dumps(body), "application/json", headers=headers)


def test_every_pod_gets_the_signal_env_with_its_own_name_and_uid(
    alice: User, cluster: Cluster, sim: SimCluster, settings: Any
) -> None:
    settings.TRAINYARD_PUBLIC_URL = "http://console.test:8000"
    job = submit(
        alice, cluster, "train", task("head"), task("worker", replicas=2),
        task("eval", kind="Job", command=["sim", "hang"]),
    )  # fmt: skip
    sync_until(cluster, lambda: phase_of(job) == "Running")
    pods = gateway(cluster).list(PODS, f"trainyard.io/job={job.pk}", "default")
    assert len(pods) == 4
    tokens = set()
    for pod in pods:
        container = pod["spec"]["containers"][0]
        declared = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
        assert {name: declared[name] for name in FIELD_REFS} == FIELD_REFS  # kept as declared
        env = sim.container_env(pod["metadata"]["uid"], container["name"])
        assert env["TRAINYARD_POD"] == pod["metadata"]["name"]
        assert env["TRAINYARD_POD_UID"] == pod["metadata"]["uid"]
        assert env["TRAINYARD_SIGNAL_URL"] == f"{settings.TRAINYARD_PUBLIC_URL}{path(job.pk)}"
        assert (env["TRAINYARD_JOB"], env["TRAINYARD_RUN"]) == ("train", "1")
        assert env["TRAINYARD_TASK"] == pod["metadata"]["labels"]["trainyard.io/role"]
        tokens.add(env["TRAINYARD_SIGNAL_TOKEN"])
        heartbeat = {"kind": "heartbeat", "seq": 1}
        heartbeat |= {"pod": env["TRAINYARD_POD"], "uid": env["TRAINYARD_POD_UID"]}
        assert post(job.pk, env["TRAINYARD_SIGNAL_TOKEN"], heartbeat).json() == {
            "accepted": 1, "duplicates": 0,
        }  # fmt: skip
    assert len(tokens) == 1  # one per Job run, the same on every reconcile
    assert [sync_cluster(cluster.pk).api_writes for _ in range(2)] == [0, 0]
    other = submit(alice, cluster, "other", task("head"))
    stray = {"kind": "heartbeat", "pod": "p", "uid": "u", "seq": 1}
    assert post(other.pk, tokens.pop(), stray).status_code == 403


def test_the_heartbeat_policy_reaches_the_pods(
    alice: User, cluster: Cluster, sim: SimCluster
) -> None:
    """The driver wrapper and the signal client beat as often as the Job's policy wants: a
    policy of 10 s judged against their default 30 s would read Unresponsive between beats."""
    body = {"name": "beats", "cluster": cluster.name, "tasks": [task("head")]}
    spec = parse_job_spec(body | {"policies": {"heartbeat_seconds": 10}}, alice)
    job = operations.create_job(alice, spec)
    sync_until(cluster, lambda: phase_of(job) == "Running")
    (pod,) = gateway(cluster).list(PODS, f"trainyard.io/job={job.pk}", "default")
    env = sim.container_env(pod["metadata"]["uid"], pod["spec"]["containers"][0]["name"])
    assert env["TRAINYARD_HEARTBEAT_SECONDS"] == "10"
