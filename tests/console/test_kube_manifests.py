"""The objects the console creates for a Task (contract: names, labels, env, resources)."""

from __future__ import annotations

from dataclasses import replace

from console.kube.manifests import Target, batch_job, headless_service, statefulset, workload
from jobs.choices import TaskKind

TEMPLATE = {
    "role": "worker",
    "kind": "StatefulSet",
    "replicas": 3,
    "image": "ghcr.io/rlinf/rlinf:0.3",
    "command": ["python", "-m", "rlinf.train"],
    "args": ["--config", "ppo.yaml"],
    "env": {"RAY_ADDRESS": "train-head:6379", "TRAINYARD_RUN": "spoofed"},
    "resources": {"cpu": "4", "memory": "16Gi", "gpu": 1},
    "node_selector": {"gpu.nvidia.com/class": "a100"},
}
LABELS = {
    "app.kubernetes.io/managed-by": "trainyard",
    "trainyard.io/job": "7",
    "trainyard.io/task": "11",
    "trainyard.io/role": "worker",
    "trainyard.io/run": "2",
}


def target(kind: TaskKind = TaskKind.STATEFULSET, **template: object) -> Target:
    return Target(
        job_id=7, job_name="train", namespace="team-a", run=2, task_id=11, role="worker",
        kind=kind, replicas=3, template={**TEMPLATE, **template},
    )  # fmt: skip


def test_it_names_the_statefulset_after_job_and_role_and_labels_it_and_its_pods() -> None:
    sts = statefulset(target())
    assert sts["apiVersion"] == "apps/v1" and sts["kind"] == "StatefulSet"
    assert sts["metadata"] == {"name": "train-worker", "namespace": "team-a", "labels": LABELS}
    spec = sts["spec"]
    assert (spec["replicas"], spec["serviceName"], spec["podManagementPolicy"]) == (
        3, "train-worker", "OrderedReady",
    )  # fmt: skip
    assert spec["template"]["metadata"]["labels"] == LABELS
    assert spec["selector"]["matchLabels"] == {
        "trainyard.io/job": "7", "trainyard.io/task": "11", "trainyard.io/run": "2",
    }  # fmt: skip
    assert spec["template"]["spec"]["restartPolicy"] == "Always"


def test_it_gives_the_pods_the_console_env_which_the_template_cannot_shadow() -> None:
    container = statefulset(target())["spec"]["template"]["spec"]["containers"][0]
    env = {item["name"]: item.get("value", item.get("valueFrom")) for item in container["env"]}
    assert env == {
        "TRAINYARD_JOB_ID": "7",
        "TRAINYARD_TASK_ID": "11",
        "TRAINYARD_ROLE": "worker",
        "TRAINYARD_RUN": "2",
        "TRAINYARD_JOB": "train",
        "TRAINYARD_TASK": "worker",
        "RAY_ADDRESS": "train-head:6379",
        "TRAINYARD_POD": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
        "TRAINYARD_POD_UID": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.uid"}},
    }
    assert container["command"] == ["python", "-m", "rlinf.train"]
    assert container["args"] == ["--config", "ppo.yaml"]


def test_it_gives_every_container_of_every_kind_the_signal_url_and_token() -> None:
    """A template variable cannot replace the token either (a pod posts as its own Job)."""
    signalled = replace(
        target(env={"TRAINYARD_SIGNAL_TOKEN": "spoofed", "TRAINYARD_POD": "x"}),
        signal_url="https://console.example/api/v1/jobs/7/signals", signal_token="7.2.mac",
    )  # fmt: skip
    for kind in TaskKind:
        manifest = workload(replace(signalled, kind=kind))
        env = manifest["spec"]["template"]["spec"]["containers"][0]["env"]
        names = [item["name"] for item in env]
        assert len(names) == len(set(names))
        plain = {item["name"]: item.get("value") for item in env}
        assert plain["TRAINYARD_SIGNAL_URL"] == "https://console.example/api/v1/jobs/7/signals"
        assert plain["TRAINYARD_SIGNAL_TOKEN"] == "7.2.mac"
        assert plain["TRAINYARD_POD"] is None  # from the downward API, not the template


def test_it_requests_what_it_limits_including_gpus_and_selects_nodes() -> None:
    pod = statefulset(target())["spec"]["template"]["spec"]
    wanted = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}
    assert pod["containers"][0]["resources"] == {"requests": wanted, "limits": wanted}
    assert pod["nodeSelector"] == {"gpu.nvidia.com/class": "a100"}


def test_it_asks_for_no_gpu_when_the_template_has_none() -> None:
    pod = statefulset(target(resources={"cpu": "1", "memory": "1Gi", "gpu": 0}))["spec"]
    assert "nvidia.com/gpu" not in pod["template"]["spec"]["containers"][0]["resources"]["limits"]


def test_it_gives_a_statefulset_task_a_headless_service_of_the_same_name() -> None:
    service = headless_service(target())
    assert service["metadata"]["name"] == "train-worker"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"]["trainyard.io/run"] == "2"


def test_it_makes_a_batch_job_that_never_restarts_and_does_not_retry_by_default() -> None:
    job = batch_job(target(TaskKind.JOB))
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    assert (
        job["spec"]["parallelism"],
        job["spec"]["completions"],
        job["spec"]["backoffLimit"],
    ) == (3, 3, 0)
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert job["spec"]["template"]["metadata"]["labels"] == LABELS
    assert batch_job(target(TaskKind.JOB, backoff_limit=2))["spec"]["backoffLimit"] == 2


def test_it_is_pure() -> None:
    assert workload(target()) == workload(target())
    assert workload(target(TaskKind.JOB))["kind"] == "Job"


def test_the_pods_meet_pod_security_restricted_as_the_user_setting_says() -> None:
    def contexts(pod_user: str) -> tuple[object, object]:
        spec = statefulset(replace(target(), pod_user=pod_user))["spec"]["template"]["spec"]
        return spec.get("securityContext"), spec["containers"][0].get("securityContext")

    hardened = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    non_root = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    ids = {"runAsUser": 2000, "runAsGroup": 2000, "fsGroup": 2000}
    assert contexts("2000") == ({**non_root, **ids}, hardened)
    assert contexts("image") == (non_root, hardened)  # the image's user, refused if root
    assert contexts("any") == (None, None)  # root allowed: baseline only
